package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
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
	// A bulk delivery, by the source and by a search's ids (in shares of
	// a batch each): every event once, one audit entry counting them all.
	var ids []int64
	for _, e := range mustEvents(t, s, store.EventQuery{Source: "src", Limit: 100}) {
		ids = append(ids, e.ID)
	}
	for dest, q := range map[string]store.EventQuery{"x": {Source: "src"}, "y": {IDs: ids}} {
		d := store.Deliver{Events: q, Destination: dest, Now: now, Audit: audit("deliver")}
		if got, err := s.AddDeliveries(ctx, d); err != nil || got != (store.DeliverCount{Added: 25}) {
			t.Fatalf("deliver to %s: %+v %v", dest, got, err)
		}
		if got, err := s.AddDeliveries(ctx, d); err != nil || got != (store.DeliverCount{Already: 25}) {
			t.Fatalf("deliver to %s again: %+v %v", dest, got, err)
		}
		entries, err := s.ListAudit(ctx, 0, 2)
		if err != nil || entries[1].Action != "deliver" || entries[1].Count != 25 || entries[0].Count != 0 {
			t.Fatalf("audit %+v %v", entries, err)
		}
	}
}

func mustEvents(t *testing.T, s *sqlite.Store, q store.EventQuery) []store.EventSummary {
	t.Helper()
	list, err := s.ListEvents(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return list
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
		tx := callerTx(t, paths[s], "_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
		return storetest.Tx[*sql.Tx]{Tx: tx, Commit: tx.Commit, Rollback: tx.Rollback}
	})
}

// A caller's transaction opened without _txlock=immediate fails its first
// write once another writer committed since it read (SQLITE_BUSY_SNAPSHOT):
// the error says what to change, not only "database is locked (517)".
func TestTxBegunDeferredSaysToOpenWithTxlockImmediate(t *testing.T) {
	ctx := context.Background()
	s, tx := storeAndCallerTx(t, "_pragma=busy_timeout(10000)") // no _txlock=immediate
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
	_, err := sqlite.TxDriver{}.ApplyEffect(ctx, tx, claim("mine"))
	if err == nil || !strings.Contains(err.Error(), "_txlock=immediate") {
		t.Fatalf("a write in a deferred transaction after another commit: %v; want the error to name _txlock=immediate", err)
	}
}

// A transaction another connection keeps open holds SQLite's one write
// lock (issue 41: a caller's outbox PublishTx). The writer's commit waits
// for it until its own context ends, not until SQLite's busy timeout
// (10 s) alone, is reported meanwhile (LockWait), and a commit (or a
// readiness probe) that gave up says the lock was the reason
// (store.ErrLocked, beside ErrUnavailable); the next commit after the
// holder ends goes through.
func TestTheWriterWaitsForALockAnotherConnectionHoldsAndSaysSo(t *testing.T) {
	ctx := context.Background()
	s, tx := storeAndCallerTx(t, "_pragma=busy_timeout(10000)&_txlock=immediate")
	base := s.LockWait()
	if base.For != 0 {
		t.Fatalf("before any wait: the writer is waiting %s", base.For)
	}

	// A commit given 400 ms, and what is reported while it waits.
	seen := make(chan store.LockWait, 1)
	go func() {
		time.Sleep(250 * time.Millisecond)
		seen <- s.LockWait()
	}()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	_, err := store.ClaimEvents(cctx, s, []store.NewEvent{{Source: "s", Key: "k1", Destinations: []string{"d"}}})
	cancel()
	waited := time.Since(start)
	if !errors.Is(err, store.ErrLocked) || !errors.Is(err, store.ErrUnavailable) || waited < 400*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("a commit behind the held lock: %v after %s, want ErrLocked and ErrUnavailable at its 400 ms deadline", err, waited)
	}
	if w := <-seen; w.For < 200*time.Millisecond || w.For > 400*time.Millisecond || w.Total-base.Total < 200*time.Millisecond {
		t.Errorf("LockWait 250 ms into the wait: waiting %s, %s in all", w.For, w.Total-base.Total)
	}
	// A probe next, within lockWaitJoin: the same holder, one wait.
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	go func() {
		time.Sleep(200 * time.Millisecond)
		seen <- s.LockWait()
	}()
	err = s.Ping(pctx)
	cancel()
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("a probe behind the held lock: %v, want ErrLocked", err)
	}
	if w := <-seen; w.For < 600*time.Millisecond {
		t.Errorf("LockWait during the probe that follows a commit that gave up: waiting %s, want the two waits joined (over 600 ms)", w.For)
	}
	// Both waits are in the total: more than the commit's 400 ms alone.
	// Not their full 700 ms: on a loaded machine each wait begins some
	// tens of ms after its context's clock started (607 ms seen at a load
	// of 12).
	if w := s.LockWait(); w.For != 0 || w.Total-base.Total < 450*time.Millisecond {
		t.Errorf("LockWait after both gave up: waiting %s, %s in all, want nothing waiting and both waits (up to 700 ms) counted", w.For, w.Total-base.Total)
	}

	// The holder ends during a wait: the commit takes the lock then.
	go func() {
		time.Sleep(200 * time.Millisecond)
		tx.Commit()
	}()
	start = time.Now()
	if _, err := store.ClaimEvents(ctx, s, []store.NewEvent{{Source: "s", Key: "k2", Destinations: []string{"d"}}}); err != nil {
		t.Fatalf("a commit once the holder ends: %v", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond || waited > 2*time.Second {
		t.Errorf("the commit took %s, want it to end with the holder's transaction (200 ms)", waited)
	}
	if w := s.LockWait(); w.For != 0 {
		t.Errorf("LockWait after the lock was taken: waiting %s", w.For)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("a probe with nobody holding the lock: %v", err)
	}
}

// storeAndCallerTx opens a store in a fresh folder and a caller's
// transaction on its file (callerTx). Both end with the test.
func storeAndCallerTx(t *testing.T, query string) (*sqlite.Store, *sql.Tx) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tx := callerTx(t, path, query)
	t.Cleanup(func() { tx.Rollback() })
	return s, tx
}

// callerTx begins a caller's transaction on the SQLite file at path,
// through a connection of its own opened with query (a DSN's parameters),
// as a user's code opens one. The connection is closed when the test ends.
func callerTx(t *testing.T, path, query string) *sql.Tx {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?"+query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}
