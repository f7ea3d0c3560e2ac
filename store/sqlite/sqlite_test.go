package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
	"github.com/oncehook/oncehook/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "test.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, nil)
}

func TestReopenKeepsEverythingAndSkipsApplied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reopen.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ClaimEvents(ctx, s, []store.NewEvent{{Source: "s", Key: "k", Destinations: []string{"d"}}}); err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	s.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	c, err := store.ClaimEvents(ctx, s, []store.NewEvent{{Source: "s", Key: "k"}})
	if err != nil || !c[0].Duplicate {
		t.Fatalf("after reopen: %+v %v, want a duplicate", c, err)
	}
	if s.ID() != id {
		t.Fatalf("store id changed on reopen: %s, then %s", id, s.ID())
	}
}

func TestSynchronousLevelIsValidated(t *testing.T) {
	_, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), sqlite.Options{Synchronous: "SOMETIMES"})
	if err == nil {
		t.Fatal("an unknown synchronous level was accepted")
	}
}

// The write-ahead log does not keep the size one large transaction gave it:
// one commit of 40 bodies of 5 MiB, then 3,000 small commits, and the -wal
// file is back under the limit (before journal_size_limit: 201 MiB for good).
func TestWALShrinksAfterALargeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("a 200 MiB commit")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "wal.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	big := make([]store.NewEvent, 40)
	for i := range big {
		big[i] = store.NewEvent{Source: "s", Key: fmt.Sprint("big-", i), Body: bytes.Repeat([]byte("x"), 5<<20), ReceivedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	if _, err := store.ClaimEvents(ctx, s, big); err != nil {
		t.Fatal(err)
	}
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	grown := walSize()
	for i := range 3000 {
		if _, err := store.ClaimEvents(ctx, s, []store.NewEvent{{Source: "s", Key: fmt.Sprint("small-", i), Body: []byte("{}"), ReceivedAt: now, ExpiresAt: now.Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("WAL %d MiB after the large commit, %d MiB after 3,000 small ones", grown>>20, walSize()>>20)
	if grown < 150<<20 {
		t.Fatalf("the large commit grew the WAL to %d MiB only: the test proves nothing", grown>>20)
	}
	if n := walSize(); n > 64<<20 {
		t.Fatalf("WAL is %d MiB after 3,000 more commits: it never shrank", n>>20)
	}
}

// Invariant 1: an empty or in-memory path would acknowledge events stored
// nowhere durable.
func TestNoDurableFileNoStore(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file::memory:?cache=shared", "file:x?mode=memory"} {
		if s, err := sqlite.Open(context.Background(), p, sqlite.Options{}); err == nil {
			s.Close()
			t.Errorf("path %q opened a store", p)
		}
	}
}

// An operator's bulk change runs in transactions of BulkBatch rows, so that
// intake's commits get the single writer in between, and still changes
// every row it selects, once, with one audit entry counting them all.
func TestBulkChangesRunInBatches(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "bulk.db"), sqlite.Options{BulkBatch: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	var evs []store.NewEvent
	for i := range 25 {
		evs = append(evs, store.NewEvent{Source: "src", Key: fmt.Sprintf("e%02d", i), ContentType: "application/json", Body: []byte("{}"),
			ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"d"}})
	}
	if _, err := store.ClaimEvents(ctx, s, evs); err != nil {
		t.Fatal(err)
	}
	leased, err := store.LeaseDeliveries(ctx, s, now, time.Minute, 100)
	if err != nil || len(leased) != 25 {
		t.Fatalf("leased %d %v", len(leased), err)
	}
	var outcomes []store.Outcome
	for _, d := range leased {
		outcomes = append(outcomes, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDead, Attempt: 1, StatusCode: 410})
	}
	if err := store.CompleteDeliveries(ctx, s, outcomes); err != nil {
		t.Fatal(err)
	}
	audit := func(action string) store.AuditEntry {
		return store.AuditEntry{Actor: "ops", Action: action, Target: "all"}
	}
	if n, err := s.Replay(ctx, store.Replay{Dead: true, Now: now, DryRun: true, Audit: audit("retry")}); err != nil || n != 25 {
		t.Fatalf("dry run %d %v", n, err)
	}
	if n, err := s.Replay(ctx, store.Replay{Dead: true, Now: now, Audit: audit("retry")}); err != nil || n != 25 {
		t.Fatalf("retry %d %v", n, err)
	}
	if n, err := s.Replay(ctx, store.Replay{Events: store.EventQuery{Source: "src"}, Now: now.Add(time.Second), Audit: audit("replay")}); err != nil || n != 25 {
		t.Fatalf("replay %d %v", n, err)
	}
	st, _ := s.Stats(ctx)
	if st.Pending != 25 || st.Dead != 0 {
		t.Fatalf("stats %+v", st)
	}
	entries, err := s.ListAudit(ctx, 0, 10)
	if err != nil || len(entries) != 2 || entries[0].Action != "replay" || entries[0].Count != 25 || entries[1].Count != 25 {
		t.Fatalf("audit %+v %v", entries, err)
	}
}

// The outbox's claims in the user's own transaction, on the user's own
// connection to the store's file (opened with _txlock=immediate, as the
// TxDriver asks).
func TestTxConformance(t *testing.T) {
	paths := map[store.Store]string{}
	storetest.RunTx(t, func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "test.db")
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		paths[s] = path
		return s
	}, sqlite.TxDriver{}, func(t *testing.T, s store.Store) storetest.Tx[*sql.Tx] {
		db, err := sql.Open("sqlite", "file:"+paths[s]+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Tx[*sql.Tx]{Tx: tx, Commit: tx.Commit, Rollback: tx.Rollback}
	})
}

// A caller's transaction opened without _txlock=immediate fails its first
// write once another writer committed since it read (SQLITE_BUSY_SNAPSHOT):
// the error says what to change, not only "database is locked (517)".
func TestTxBegunDeferredSaysToOpenWithTxlockImmediate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "test.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)") // no _txlock=immediate
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM effects`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	claim := func(key string) store.EffectOp {
		return store.EffectOp{Kind: store.EffectClaim, Key: key, Lease: time.Minute, Now: time.Now(), Retention: time.Hour}
	}
	if _, err := s.Commit(ctx, store.Batch{Effects: []store.EffectOp{claim("other")}}); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.TxDriver{}.ApplyEffect(ctx, tx, claim("mine"))
	if err == nil || !strings.Contains(err.Error(), "_txlock=immediate") {
		t.Fatalf("a write in a deferred transaction after another commit: %v; want the error to name _txlock=immediate", err)
	}
}
