package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// Tx is one transaction the caller opened on a store's database (the
// outbox's), through the backend's own client (pgx, database/sql).
type Tx[TTx any] struct {
	Tx       TTx
	Commit   func() error
	Rollback func() error
}

// Begin opens a transaction on s's database, as the user's code would on
// its own connection.
type Begin[TTx any] func(t *testing.T, s store.Store) Tx[TTx]

// RunTx runs the contract of the backend's TxDriver: the outbox's claims,
// inside a transaction the caller opened, are intake's claims, and exist
// exactly when that transaction commits (invariant 20).
func RunTx[TTx any](t *testing.T, open Open, driver store.TxDriver[TTx], begin Begin[TTx]) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store, store.TxDriver[TTx], Begin[TTx])
	}{
		{"TxClaimCommitsWithTheCallersTransaction", testTxCommit[TTx]},
		{"TxClaimRolledBackLeavesNothing", testTxRollback[TTx]},
		{"TxClaimOfAKeyTwiceIsADuplicate", testTxDuplicate[TTx]},
		{"TxCountsCommitWithTheClaims", testTxCounts[TTx]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s, driver, begin)
		})
	}
}

// txEvent is event(key, dests...) received now, as a publish is.
func txEvent(key string, dests ...string) store.NewEvent {
	e := event(key, dests...)
	e.ReceivedAt, e.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	return e
}

func txClaim[TTx any](t *testing.T, d store.TxDriver[TTx], tx Tx[TTx], events ...store.NewEvent) []store.Claim {
	t.Helper()
	claims, err := d.ClaimEvents(context.Background(), tx.Tx, events)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != len(events) {
		t.Fatalf("%d claims for %d events", len(claims), len(events))
	}
	return claims
}

func testTxCommit[TTx any](t *testing.T, s store.Store, d store.TxDriver[TTx], begin Begin[TTx]) {
	tx := begin(t, s)
	c := txClaim(t, d, tx, txEvent("o1", "d1", "d2"))
	if c[0].Duplicate || c[0].EventID == 0 {
		t.Fatalf("claim in tx %+v: want a new event", c[0])
	}
	if st := stats(t, s); st.Events != 0 {
		t.Fatalf("before the caller's commit the store shows %d events, want none", st.Events)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s); st.Events != 1 || st.Pending != 2 {
		t.Fatalf("after commit: %+v, want 1 event with 2 pending deliveries", st)
	}
	ds := lease(t, s, time.Now(), time.Minute, 10)
	if len(ds) != 2 {
		t.Fatalf("the worker leased %d deliveries, want 2 (due at once, leased to nobody)", len(ds))
	}
	for _, l := range ds {
		if l.Key != "o1" || !whole(l) || l.Attempt != 1 || l.EventID != c[0].EventID {
			t.Fatalf("leased %+v", l)
		}
	}
	// The same key through intake's own commit is a duplicate of it.
	if c := mustClaim(t, s, txEvent("o1", "d1")); !c[0].Duplicate {
		t.Fatal("intake's claim of a key the outbox committed was not a duplicate")
	}
}

func testTxRollback[TTx any](t *testing.T, s store.Store, d store.TxDriver[TTx], begin Begin[TTx]) {
	tx := begin(t, s)
	txClaim(t, d, tx, txEvent("o1", "d1"))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s); st.Events != 0 || st.Pending != 0 {
		t.Fatalf("after rollback: %+v, want nothing", st)
	}
	if ds := lease(t, s, time.Now().Add(time.Hour), time.Minute, 10); len(ds) != 0 {
		t.Fatalf("leased %d deliveries of a rolled-back publish", len(ds))
	}
	// The key is free: a publish that commits later is new.
	tx = begin(t, s)
	if c := txClaim(t, d, tx, txEvent("o1", "d1")); c[0].Duplicate {
		t.Fatal("a key whose publish rolled back was a duplicate")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s); st.Events != 1 || st.Pending != 1 {
		t.Fatalf("after the second publish: %+v", st)
	}
}

func testTxDuplicate[TTx any](t *testing.T, s store.Store, d store.TxDriver[TTx], begin Begin[TTx]) {
	tx := begin(t, s)
	first := txClaim(t, d, tx, txEvent("o1", "d1"))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// A retried transaction, a reconciliation pass: the same key again.
	tx = begin(t, s)
	again := txClaim(t, d, tx, txEvent("o1", "d1"), txEvent("o2", "d1"), txEvent("o2", "d1"))
	if !again[0].Duplicate || again[1].Duplicate || !again[2].Duplicate {
		t.Fatalf("claims %+v: want duplicate, new, duplicate (a key twice in one call)", again)
	}
	if want := first[0]; !again[0].ExpiresAt.IsZero() && !again[0].ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("duplicate's expiry %v, want the stored %v", again[0].ExpiresAt, want.ExpiresAt)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s); st.Events != 2 || st.Pending != 2 {
		t.Fatalf("after a duplicate: %+v, want 2 events and 2 deliveries (no second for o1)", st)
	}
}

func testTxCounts[TTx any](t *testing.T, s store.Store, d store.TxDriver[TTx], begin Begin[TTx]) {
	ctx := context.Background()
	hour := time.Now().Truncate(time.Hour)
	dup := store.StatDelta{Hour: hour, Scope: store.ScopeSource, Name: "src", Metric: "events.duplicate", Value: 1}
	tx := begin(t, s)
	claims := txClaim(t, d, tx, txEvent("o1", "d1"))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true, true} {
		tx := begin(t, s)
		txClaim(t, d, tx, txEvent("o1", "d1"))
		if err := d.AddCounts(ctx, tx.Tx, []store.StatDelta{dup}, []store.Copy{{Source: "src", Key: "o1", N: 1, Last: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
	}
	// A reconciliation pass's copy (receive's Verdicts under Reconcile)
	// is counted as events.republished and adds no copy to the event: a
	// row of its own, which the alerts and stats read apart from the
	// duplicates (invariant 27).
	tx = begin(t, s)
	txClaim(t, d, tx, txEvent("o1", "d1"))
	republished := store.StatDelta{Hour: hour, Scope: store.ScopeSource, Name: "src", Metric: "events.republished", Value: 1}
	if err := d.AddCounts(ctx, tx.Tx, []store.StatDelta{republished}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Rollups(ctx, store.RollupQuery{Scope: store.ScopeSource, Name: "src", From: hour, To: hour.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, r := range got {
		counts[r.Metric] += r.Value
	}
	if len(counts) != 2 || counts["events.duplicate"] != 2 || counts["events.republished"] != 1 {
		t.Fatalf("rollups %+v: want events.duplicate=2 (two committed, one rolled back) and events.republished=1", got)
	}
	if e, err := s.Event(ctx, claims[0].EventID); err != nil || e.Copies != 2 {
		t.Fatalf("event %+v %v: want 2 copies counted", e.Copies, err)
	}
}
