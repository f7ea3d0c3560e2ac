package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// testAddDeliveries: a bulk delivery to a destination the route passed
// over gives every selected event one delivery there, across more than one
// batch; an event that already has one there, or whose body was dropped,
// is counted apart and left as it is; a dry run counts the same and writes
// nothing; calls at once on every replica add each delivery once between
// them, each with its audit entry; a second call adds nothing; a selection
// by ids takes those alone, and one that names a single event answers as
// AddDelivery does.
func testAddDeliveries(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	s := stores[0]
	const n = 1030 // more than a batch of either backend (1000 by default)
	kept := func(e store.NewEvent) store.NewEvent {
		e.ExpiresAt = base.Add(72 * time.Hour)
		return e
	}
	var evs []store.NewEvent
	var keys []string
	for i := range n {
		e := kept(event(fmt.Sprintf("k%04d", i), "d"))
		e.Filtered = []string{"x"}
		evs, keys = append(evs, e), append(keys, e.Key)
	}
	gone := kept(event("gone")) // no delivery keeps its body
	gone.Filtered, gone.BodyExpiresAt = []string{"x"}, base.Add(time.Hour)
	other := kept(event("other", "d"))
	other.Source, other.Filtered = "elsewhere", []string{"x"}
	evs = append(evs, kept(event("both1", "d", "x")), kept(event("both2", "x")), gone, other)
	mustClaim(t, s, evs...)
	if _, err := s.SweepExpired(ctx, base.Add(25*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Event(ctx, list0(t, s, "gone").ID); err != nil || e.BodyDroppedAt.IsZero() {
		t.Fatalf("the body of gone was not dropped: %v %v", e.BodyDroppedAt, err)
	}
	at := base.Add(26 * time.Hour)
	deliver := func(st store.Store, q store.EventQuery, dry bool) (store.DeliverCount, error) {
		return st.AddDeliveries(ctx, store.Deliver{Events: q, Destination: "x", Now: at, DryRun: dry,
			Audit: store.AuditEntry{Actor: "ops", Target: "source=src to x"}})
	}
	src := store.EventQuery{Source: "src"}
	want := store.DeliverCount{Added: n, Already: 2, Gone: 1}
	pending := stats(t, s).Pending
	audits := func() []store.AuditEntry {
		t.Helper()
		list, err := s.ListAudit(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}

	// The dry run counts, and writes nothing.
	if got, err := deliver(s, src, true); err != nil || got != want {
		t.Fatalf("dry run: %+v, %v; want %+v", got, err, want)
	}
	if p := stats(t, s).Pending; p != pending || len(audits()) != 0 {
		t.Fatalf("the dry run wrote: pending %d (was %d), audit %+v", p, pending, audits())
	}

	// At once on every replica: each event gets one delivery between them.
	var mu sync.Mutex
	var sum store.DeliverCount
	var wg sync.WaitGroup
	for _, st := range stores {
		wg.Go(func() {
			got, err := deliver(st, src, false)
			if err != nil || got.Added+got.Already != n+2 || got.Gone != 1 {
				t.Errorf("deliver: %+v, %v; want %d added or already there, 1 gone", got, err, n+2)
			}
			mu.Lock()
			sum.Added += got.Added
			mu.Unlock()
		})
	}
	wg.Wait()
	if sum.Added != n {
		t.Fatalf("the replicas added %d deliveries between them, want %d", sum.Added, n)
	}
	if p := stats(t, s).Pending; p != pending+n {
		t.Fatalf("pending %d, want %d", p, pending+n)
	}
	entries, counted := audits(), 0
	for _, e := range entries {
		if e.Action != "deliver" || e.Actor != "ops" || e.Target != "source=src to x" {
			t.Errorf("audit entry %+v, want the deliver's", e)
		}
		counted += e.Count
	}
	if len(entries) != len(stores) || counted != n {
		t.Fatalf("%d audit entries counting %d, want %d counting %d", len(entries), counted, len(stores), n)
	}
	if e, err := s.Event(ctx, list0(t, s, "k0000").ID); err != nil || len(e.Filtered) != 0 || len(e.Deliveries) != 2 {
		t.Fatalf("k0000 after the delivery: filtered %q, deliveries %+v, %v; want x no longer filtered", e.Filtered, e.Deliveries, err)
	}

	// Each is due at once, whole, to x once; nothing else went to x.
	var toX []string
	for {
		leased := lease(t, s, at, time.Minute, 500)
		if len(leased) == 0 {
			break
		}
		var outs []store.Outcome
		for _, d := range leased {
			if d.Destination == "x" {
				toX = append(toX, d.Key)
				if !whole(d) {
					t.Errorf("%s delivered with body %q", d.Key, d.Body)
				}
			}
			outs = append(outs, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: d.Attempt, StatusCode: 200, StartedAt: at})
		}
		complete(t, s, outs...)
	}
	slices.Sort(toX)
	if wantX := append(slices.Clone(keys), "both1", "both2"); !slices.Equal(toX, slices.Sorted(slices.Values(wantX))) {
		t.Fatalf("leased %d deliveries to x, want each of the %d events once", len(toX), len(wantX))
	}

	// Asked again, it adds nothing: each is already there.
	if got, err := deliver(s, src, false); err != nil || got != (store.DeliverCount{Already: n + 2, Gone: 1}) {
		t.Fatalf("a second deliver: %+v, %v; want nothing added", got, err)
	}
	// By ids: those alone, another source's too.
	ids := []int64{mustList(t, s, store.EventQuery{Source: "elsewhere"})[0].ID, list0(t, s, "k0001").ID, list0(t, s, "gone").ID}
	if got, err := deliver(s, store.EventQuery{IDs: ids}, true); err != nil || got != (store.DeliverCount{Added: 1, Already: 1, Gone: 1}) {
		t.Fatalf("dry run by ids: %+v, %v", got, err)
	}
	if got, err := deliver(s, store.EventQuery{IDs: ids}, false); err != nil || got != (store.DeliverCount{Added: 1, Already: 1, Gone: 1}) {
		t.Fatalf("deliver by ids: %+v, %v", got, err)
	}
	if got, err := deliver(s, store.EventQuery{IDs: []int64{}}, false); err != nil || got != (store.DeliverCount{}) {
		t.Fatalf("deliver of no ids: %+v, %v; want nothing", got, err)
	}
	// One event named: as AddDelivery answers it.
	for q, want := range map[*store.EventQuery]error{
		{Source: "src", Key: "gone"}: store.ErrBodyGone,
		{Source: "src", Key: "nope"}: store.ErrNotFound,
		{ID: 1 << 40}:                store.ErrNotFound,
	} {
		for _, dry := range []bool{true, false} {
			if _, err := deliver(s, *q, dry); !errors.Is(err, want) {
				t.Errorf("deliver %+v (dry run %v): %v, want %v", *q, dry, err, want)
			}
		}
	}
}

func mustList(t *testing.T, s store.Store, q store.EventQuery) []store.EventSummary {
	t.Helper()
	list, err := s.ListEvents(context.Background(), q)
	if err != nil || len(list) == 0 {
		t.Fatalf("list %+v: %+v %v", q, list, err)
	}
	return list
}

// testDeliverVersusSweep: a bulk delivery and the window's sweep on other
// replicas at once, past every event's window: each delivery the bulk
// delivery counted stays, its event and body with it (a sweep never
// deletes an event under the batch that gives it a delivery), and each
// event the sweep took first is simply not among them.
func testDeliverVersusSweep(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const groups, per = 30, 10
	var evs []store.NewEvent
	for g := range groups {
		for i := range per {
			e := event(fmt.Sprintf("v%02d-%02d", g, i))
			e.Filtered = []string{"x"}
			evs = append(evs, e)
		}
	}
	mustClaim(t, stores[0], evs...)
	past := base.Add(2 * time.Hour) // every window is over: all may be swept
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 2 {
		wg.Go(func() {
			for {
				swept, err := stores[1+g].SweepExpired(ctx, past, 3)
				if err != nil {
					errs <- err
					return
				}
				if swept == 0 {
					return
				}
			}
		})
	}
	added := 0
	wg.Go(func() {
		for g := range groups {
			c, err := stores[0].AddDeliveries(ctx, store.Deliver{Events: store.EventQuery{Source: "src", KeyPrefix: fmt.Sprintf("v%02d-", g)},
				Destination: "x", Now: past, Audit: store.AuditEntry{Actor: "ops"}})
			if err != nil {
				errs <- err
				return
			}
			added += c.Added
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := stats(t, stores[0]); st.Pending != int64(added) {
		t.Fatalf("the bulk delivery added %d deliveries, %d are pending: the sweep took some from under it", added, st.Pending)
	}
	leased := 0
	for {
		ds := lease(t, stores[0], past, time.Minute, 100)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if !whole(d) {
				t.Fatalf("%s delivered with body %q", d.Key, d.Body)
			}
			leased++
			complete(t, stores[0], store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: d.Attempt})
		}
	}
	if leased != added {
		t.Fatalf("leased %d of the %d deliveries added", leased, added)
	}
	t.Logf("the bulk delivery added %d of %d events' deliveries; the sweep took the others first", added, len(evs))
}
