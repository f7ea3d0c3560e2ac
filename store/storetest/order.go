package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// orderedEvent is an event of entity at version (0: arrival order).
func orderedEvent(key, entity string, version int64, mode store.OrderMode, dests ...string) store.NewEvent {
	e := event(key, dests...)
	e.Order = store.Order{Entity: entity, Mode: mode}
	if version != 0 {
		e.Order.Version, e.Order.Versioned, e.Order.VersionText = version, true, fmt.Sprint(version)
	}
	return e
}

func outcome(d store.LeasedDelivery, kind store.OutcomeKind, next time.Time) store.Outcome {
	return store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: kind, Attempt: d.Attempt, StartedAt: base,
		NextAttemptAt: next, Ordered: d.Ordered}
}

func keys(ds []store.LeasedDelivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Key)
	}
	return out
}

// Invariant 16: an event older than one delivered for its entity is stale,
// not delivered; an equal version is not stale; one delivery of an entity
// is in flight at a time, and the entity's next is due as soon as it ends.
func testOrderStale(t *testing.T, s store.Store) {
	mustClaim(t, s, orderedEvent("v2", "e", 2, store.OrderStale, "d"), orderedEvent("f1", "f", 1, store.OrderStale, "d"))
	ds := lease(t, s, base, time.Minute, 10)
	if len(ds) != 2 || !ds[0].Ordered {
		t.Fatalf("leased %q, want v2 and f1, ordered", keys(ds))
	}
	mustClaim(t, s, orderedEvent("v1", "e", 1, store.OrderStale, "d"), orderedEvent("v3", "e", 3, store.OrderStale, "d"))
	if got := lease(t, s, base, time.Minute, 10); len(got) != 0 {
		t.Fatalf("leased %q while e's v2 is in flight", keys(got))
	}
	for _, d := range ds {
		complete(t, s, outcome(d, store.OutcomeDelivered, time.Time{}))
	}
	// v1 (older than v2) is stale; v3 goes, at once.
	got := lease(t, s, base.Add(time.Second), time.Minute, 10)
	if len(got) != 1 || got[0].Key != "v3" {
		t.Fatalf("after v2 was delivered leased %q, want v3", keys(got))
	}
	if st := stats(t, s); st.Stale != 1 || st.Pending != 1 {
		t.Fatalf("stats %+v: want v1 stale and v3 pending", st)
	}
	complete(t, s, outcome(got[0], store.OutcomeDelivered, time.Time{}))
	mustClaim(t, s, orderedEvent("v3bis", "e", 3, store.OrderStale, "d"))
	if got := lease(t, s, base.Add(2*time.Second), time.Minute, 10); len(got) != 1 || got[0].Key != "v3bis" {
		t.Fatalf("leased %q: an equal version is not stale", keys(got))
	}
	// The stale one is counted, per source and hour, and says why.
	r, err := s.Rollups(context.Background(), store.RollupQuery{Scope: store.ScopeSource, From: base.Add(-time.Hour), To: base.Add(time.Hour)})
	var n int64
	for _, x := range r {
		if x.Metric == store.StaleMetric && x.Name == "src" {
			n += x.Value
		}
	}
	if err != nil || n != 1 {
		t.Fatalf("rollup %s = %d, %v; want 1", store.StaleMetric, n, err)
	}
	// A stale delivery is the operator's to replay: it is then delivered
	// as it is, outside the order.
	if n, err := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src", Key: "v1"}, Now: base.Add(3 * time.Second)}); err != nil || n != 1 {
		t.Fatalf("replay of the stale event = %d, %v", n, err)
	}
	if got := lease(t, s, base.Add(3*time.Second), time.Minute, 10); len(got) != 1 || got[0].Key != "v1" || got[0].Ordered {
		t.Fatalf("after replay leased %+v, want v1, unordered", got)
	}
}

// on_stale: deliver sends a stale event anyway, marked, with the current
// version.
func testOrderDeliverStale(t *testing.T, s store.Store) {
	e := orderedEvent("v5", "e", 5, store.OrderStale, "d")
	e.Order.DeliverStale = true
	mustClaim(t, s, e)
	complete(t, s, outcome(lease(t, s, base, time.Minute, 10)[0], store.OutcomeDelivered, time.Time{}))
	old := orderedEvent("v4", "e", 4, store.OrderStale, "d")
	old.Order.DeliverStale = true
	mustClaim(t, s, old)
	got := lease(t, s, base, time.Minute, 10)
	if len(got) != 1 || !got[0].Stale || got[0].CurrentVersion != "5" {
		t.Fatalf("leased %+v, want v4 marked stale with current version 5", got)
	}
}

// fifo: one entity's events in version order; a failing head holds its
// entity's later events and only them; a dead head releases the next.
func testOrderFIFO(t *testing.T, s store.Store) {
	mustClaim(t, s,
		orderedEvent("v3", "e", 3, store.OrderFIFO, "d"), orderedEvent("v1", "e", 1, store.OrderFIFO, "d"),
		orderedEvent("v2", "e", 2, store.OrderFIFO, "d"), orderedEvent("other", "f", 9, store.OrderFIFO, "d"))
	ds := lease(t, s, base, time.Minute, 10)
	if len(ds) != 2 || ds[0].Key != "v1" && ds[1].Key != "v1" {
		t.Fatalf("leased %q, want v1 (e's lowest) and other", keys(ds))
	}
	retryAt := base.Add(time.Minute)
	for _, d := range ds {
		kind := store.OutcomeDelivered
		if d.Key == "v1" {
			kind = store.OutcomeRetry
		}
		complete(t, s, outcome(d, kind, retryAt))
	}
	mustClaim(t, s, orderedEvent("other2", "f", 10, store.OrderFIFO, "d"))
	if got := lease(t, s, base.Add(time.Second), time.Minute, 10); len(got) != 1 || got[0].Key != "other2" {
		t.Fatalf("while e's head waits for its retry leased %q: want only f's next", keys(got))
	}
	next, ok, err := s.NextDue(context.Background(), nil)
	if err != nil || !ok || next.Before(base.Add(2*time.Second)) {
		t.Fatalf("NextDue = %v %v %v: e's held events must not be due now (the worker would spin)", next, ok, err)
	}
	head := lease(t, s, retryAt, time.Minute, 10)
	if len(head) != 1 || head[0].Key != "v1" || head[0].Attempt != 2 {
		t.Fatalf("at its retry leased %+v, want v1's attempt 2", head)
	}
	complete(t, s, outcome(head[0], store.OutcomeDead, time.Time{}))
	for _, want := range []string{"v2", "v3"} {
		got := lease(t, s, retryAt, time.Minute, 10)
		if len(got) != 1 || got[0].Key != want {
			t.Fatalf("leased %q, want %s: a dead head releases the next, in order", keys(got), want)
		}
		complete(t, s, outcome(got[0], store.OutcomeDelivered, time.Time{}))
	}
	// Without a version, arrival order.
	mustClaim(t, s, orderedEvent("a1", "g", 0, store.OrderFIFO, "d"))
	mustClaim(t, s, orderedEvent("a2", "g", 0, store.OrderFIFO, "d"))
	for _, want := range []string{"a1", "a2"} {
		got := lease(t, s, retryAt, time.Minute, 10)
		if len(got) != 1 || got[0].Key != want {
			t.Fatalf("leased %q, want %s (arrival order)", keys(got), want)
		}
		complete(t, s, outcome(got[0], store.OutcomeDelivered, time.Time{}))
	}
}

// A kill -9 mid-attempt: the entity is held until the lease expires, then
// its delivery is taken over, still one at a time.
func testOrderLeaseExpiry(t *testing.T, s store.Store) {
	mustClaim(t, s, orderedEvent("v1", "e", 5, store.OrderFIFO, "d"), orderedEvent("v2", "e", 6, store.OrderFIFO, "d"))
	first := lease(t, s, base, time.Minute, 10)
	if len(first) != 1 || first[0].Key != "v1" {
		t.Fatalf("leased %q", keys(first))
	}
	if got := lease(t, s, base.Add(59*time.Second), time.Minute, 10); len(got) != 0 {
		t.Fatalf("leased %q while v1's lease holds", keys(got))
	}
	// An older version arrives while v1's attempt is unreported: the
	// destination may have v1 already, so v1 stays the head.
	mustClaim(t, s, orderedEvent("v0", "e", 4, store.OrderFIFO, "d"))
	again := lease(t, s, base.Add(61*time.Second), time.Minute, 10)
	if len(again) != 1 || again[0].Key != "v1" || again[0].Attempt != 2 {
		t.Fatalf("after the lease expired leased %+v, want v1 again (not v0, which came after v1 was sent)", again)
	}
	complete(t, s, outcome(again[0], store.OutcomeDelivered, time.Time{}))
	got := lease(t, s, base.Add(62*time.Second), time.Minute, 10)
	if len(got) != 1 || got[0].Key != "v2" {
		t.Fatalf("after v1 was delivered leased %q, want v2", keys(got))
	}
	if st := stats(t, s); st.Stale != 1 {
		t.Fatalf("stats %+v: v0, older than the delivered v1, must be stale", st)
	}
}

// The same in stale mode, and for an attempt that failed: an older event
// that arrives after a newer one was sent waits for it, since the
// destination may have it (the replica died before it reported, or the
// attempt timed out), and is stale once it is delivered. A newer event
// does not wait for a failing older one.
func testOrderStaleWaitsForAnAttempt(t *testing.T, s store.Store) {
	mustClaim(t, s, orderedEvent("v5", "e", 5, store.OrderStale, "d"))
	first := lease(t, s, base, time.Minute, 10)
	if len(first) != 1 {
		t.Fatalf("leased %q", keys(first))
	}
	mustClaim(t, s, orderedEvent("v4", "e", 4, store.OrderStale, "d"))
	again := lease(t, s, base.Add(61*time.Second), time.Minute, 10)
	if len(again) != 1 || again[0].Key != "v5" || again[0].Attempt != 2 {
		t.Fatalf("after v5's lease expired leased %q, want v5 again, not v4 which came after v5 was sent", keys(again))
	}
	// v5 fails this time: v4 still waits for it.
	retryAt := base.Add(5 * time.Minute)
	complete(t, s, outcome(again[0], store.OutcomeRetry, retryAt))
	if got := lease(t, s, base.Add(2*time.Minute), time.Minute, 10); len(got) != 0 {
		t.Fatalf("while v5 waits for its retry leased %q", keys(got))
	}
	got := lease(t, s, retryAt, time.Minute, 10)
	if len(got) != 1 || got[0].Key != "v5" {
		t.Fatalf("at v5's retry leased %q, want v5", keys(got))
	}
	complete(t, s, outcome(got[0], store.OutcomeDelivered, time.Time{}))
	if got := lease(t, s, retryAt.Add(time.Second), time.Minute, 10); len(got) != 0 {
		t.Fatalf("after v5 was delivered leased %q: v4 is stale", keys(got))
	}
	if st := stats(t, s); st.Stale != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v: want v4 stale", st)
	}
	// A newer event goes while an older one's attempt waits for its retry.
	mustClaim(t, s, orderedEvent("w1", "f", 1, store.OrderStale, "d"))
	w1 := lease(t, s, retryAt, time.Minute, 10)
	complete(t, s, outcome(w1[0], store.OutcomeRetry, retryAt.Add(time.Hour)))
	mustClaim(t, s, orderedEvent("w2", "f", 2, store.OrderStale, "d"))
	if got := lease(t, s, retryAt.Add(time.Second), time.Minute, 10); len(got) != 1 || got[0].Key != "w2" {
		t.Fatalf("while w1 waits for its retry leased %q, want w2 (newer) at once", keys(got))
	}
}

// Across replicas: many workers lease and complete at once; each entity
// has at most one delivery in flight, and fifo delivers its versions in
// increasing order, each once.
func testOrderAcrossReplicas(t *testing.T, stores []store.Store) {
	const entities, versions = 40, 5
	var all []store.NewEvent
	for e := range entities {
		for v := range versions {
			all = append(all, orderedEvent(fmt.Sprintf("e%02d-v%d", e, v+1), fmt.Sprintf("e%02d", e), int64(v+1), store.OrderFIFO, "d"))
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	// All stored first: fifo orders what is pending (an event that arrives
	// after a later version was delivered is stale, as testOrderStale shows).
	for i := 0; i < len(all); i += 20 {
		mustClaim(t, stores[i/20%len(stores)], all[i:min(i+20, len(all))]...)
	}
	var mu sync.Mutex
	inflight := map[string]bool{}
	seen := map[string][]string{}
	var failures atomic.Int64
	var done atomic.Int64
	var wg sync.WaitGroup
	now := base
	for w := range 6 {
		s := stores[w%len(stores)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idle := 0; idle < 200 && done.Load() < entities*versions; {
				c, err := s.Commit(context.Background(), store.Batch{Lease: store.Lease{Max: 4, Due: true, Now: now, For: time.Hour}})
				if err != nil {
					t.Error(err)
					return
				}
				if len(c.Leased) == 0 {
					idle++
					time.Sleep(time.Millisecond)
					continue
				}
				var outs []store.Outcome
				mu.Lock()
				for _, d := range c.Leased {
					entity := d.Key[:3]
					if inflight[entity] {
						failures.Add(1)
						t.Errorf("%s leased while another delivery of %s is in flight", d.Key, entity)
					}
					inflight[entity] = true
					seen[entity] = append(seen[entity], d.Key)
				}
				mu.Unlock()
				for _, d := range c.Leased {
					mu.Lock()
					inflight[d.Key[:3]] = false
					mu.Unlock()
					outs = append(outs, outcome(d, store.OutcomeDelivered, time.Time{}))
				}
				if _, err := s.Commit(context.Background(), store.Batch{Outcomes: outs}); err != nil {
					t.Error(err)
					return
				}
				done.Add(int64(len(outs)))
			}
		}()
	}
	wg.Wait()
	if done.Load() != entities*versions {
		t.Fatalf("delivered %d of %d", done.Load(), entities*versions)
	}
	for e := range entities {
		entity := fmt.Sprintf("e%02d", e)
		got := seen[entity]
		if len(got) != versions {
			t.Fatalf("%s delivered %q", entity, got)
		}
		for v := range versions {
			if got[v] != fmt.Sprintf("%s-v%d", entity, v+1) {
				t.Fatalf("%s delivered in the order %q", entity, got)
			}
		}
	}
}

// An operator skips a fifo head that cannot succeed: it becomes a dead
// letter that says so, the entity's next event goes, and the skip is
// audited; a head in flight is not taken from its worker.
func testOrderSkipHead(t *testing.T, s store.Store) {
	mustClaim(t, s, orderedEvent("v1", "e", 1, store.OrderFIFO, "d"), orderedEvent("v2", "e", 2, store.OrderFIFO, "d"))
	a := s
	ctx := context.Background()
	head := lease(t, s, base, time.Minute, 10)
	if len(head) != 1 || head[0].Key != "v1" {
		t.Fatalf("leased %q", keys(head))
	}
	ev := list0(t, a, "v1")
	audit := store.AuditEntry{Actor: "ops", Action: "skip", Target: "event to d"}
	if _, err := a.SkipDelivery(ctx, ev.ID, "d", base, audit); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("skip of a head in flight: %v, want ErrInFlight", err)
	}
	complete(t, s, outcome(head[0], store.OutcomeRetry, base.Add(time.Hour)))
	if got := lease(t, s, base, time.Minute, 10); len(got) != 0 {
		t.Fatalf("leased %q behind a head in backoff", keys(got))
	}
	if n, err := a.SkipDelivery(ctx, ev.ID, "d", base, audit); err != nil || n != 1 {
		t.Fatalf("SkipDelivery = %d, %v", n, err)
	}
	got := lease(t, s, base, time.Minute, 10)
	if len(got) != 1 || got[0].Key != "v2" {
		t.Fatalf("after the skip leased %q, want v2 at once", keys(got))
	}
	dead, err := a.ListDeadLetters(ctx, store.DeadQuery{Limit: 10})
	if err != nil || len(dead) != 1 || dead[0].LastError != store.SkippedReason {
		t.Fatalf("dead letters %+v, %v: want v1, said skipped", dead, err)
	}
	if _, err := a.SkipDelivery(ctx, 1<<40, "d", base, audit); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("skip of no event: %v", err)
	}
	entries, err := a.ListAudit(ctx, 0, 10)
	if err != nil || len(entries) != 1 || entries[0].Action != "skip" || entries[0].Count != 1 {
		t.Fatalf("audit %+v, %v: want the one skip that happened", entries, err)
	}
}

// A version far ahead, once delivered, makes every later event of its
// entity stale; an operator's reset (audited) forgets it, for one
// destination or all, and the entity's next event is current again. What
// was marked stale stays so, and another entity keeps its version.
func testOrderReset(t *testing.T, s store.Store) {
	const far = 9_000_000_000_000_000_000
	mustClaim(t, s, orderedEvent("far", "e", far, store.OrderStale, "d", "d2"), orderedEvent("f5", "f", 5, store.OrderStale, "d"))
	for _, d := range lease(t, s, base, time.Minute, 10) {
		complete(t, s, outcome(d, store.OutcomeDelivered, time.Time{}))
	}
	mustClaim(t, s, orderedEvent("v1", "e", 1, store.OrderStale, "d", "d2"), orderedEvent("f4", "f", 4, store.OrderStale, "d"))
	if got := lease(t, s, base.Add(time.Second), time.Minute, 10); len(got) != 0 {
		t.Fatalf("leased %q: v1 and f4 are older than what was delivered", keys(got))
	}
	a := s
	ctx := context.Background()
	audit := store.AuditEntry{Actor: "ops", Action: "order.reset", Target: "src/e"}
	if n, err := a.ResetOrder(ctx, "src", "e", "d", base, audit); err != nil || n != 1 {
		t.Fatalf("ResetOrder(d) = %d, %v; want 1", n, err)
	}
	if n, err := a.ResetOrder(ctx, "src", "nothing", "", base, audit); err != nil || n != 0 {
		t.Fatalf("ResetOrder of an entity with no version = %d, %v; want 0", n, err)
	}
	mustClaim(t, s, orderedEvent("v2", "e", 2, store.OrderStale, "d", "d2"), orderedEvent("f3", "f", 3, store.OrderStale, "d"))
	got := lease(t, s, base.Add(2*time.Second), time.Minute, 10)
	if len(got) != 1 || got[0].Key != "v2" || got[0].Destination != "d" || got[0].Stale {
		t.Fatalf("after the reset for d leased %+v, want v2 to d only (d2 and f keep their versions)", got)
	}
	complete(t, s, outcome(got[0], store.OutcomeDelivered, time.Time{}))
	if n, err := a.ResetOrder(ctx, "src", "e", "", base, audit); err != nil || n != 2 {
		t.Fatalf("ResetOrder(every destination) = %d, %v; want 2 (d's v2 and d2's far)", n, err)
	}
	mustClaim(t, s, orderedEvent("v3", "e", 3, store.OrderStale, "d", "d2"))
	got = lease(t, s, base.Add(3*time.Second), time.Minute, 10)
	if len(got) != 2 || got[0].Key != "v3" || got[1].Key != "v3" {
		t.Fatalf("after the reset for every destination leased %+v, want v3 to d and d2", got)
	}
	if st := stats(t, s); st.Stale != 5 {
		t.Fatalf("stats %+v: v1 (to d and d2), v2 to d2, f4 and f3 stay stale", st)
	}
	entries, err := a.ListAudit(ctx, 0, 10)
	if err != nil || len(entries) != 3 || entries[0].Action != "order.reset" || entries[0].Count != 2 || entries[2].Count != 1 {
		t.Fatalf("audit %+v, %v: want the three resets with their counts", entries, err)
	}
}

// A commit that creates ordered deliveries may hand one off at once, but
// only one per entity, and only an entity that is free: the rest wait for
// it, whichever way the backend leases them.
func testOrderHandOff(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, err := s.Commit(ctx, store.Batch{
		Events: []store.NewEvent{orderedEvent("e1", "e", 1, store.OrderFIFO, "d"), orderedEvent("e2", "e", 2, store.OrderFIFO, "d"),
			orderedEvent("f1", "f", 1, store.OrderFIFO, "d")},
		Lease: store.Lease{Max: 10, Due: true, Now: base, For: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	leased := c.Leased
	leased = append(leased, lease(t, s, base, time.Minute, 10)...)
	got := map[string]store.LeasedDelivery{}
	for _, d := range leased {
		got[d.Key] = d
		if !d.Ordered {
			t.Fatalf("%s leased unordered", d.Key)
		}
	}
	if len(got) != 2 || got["e1"].ID == 0 || got["f1"].ID == 0 {
		t.Fatalf("leased %q, want e1 and f1: one per entity, e's lowest first", keys(leased))
	}
	// The outcome wakes e2: the commit says an ordered delivery is due,
	// so that the writer asks for it at once.
	done, err := s.Commit(ctx, store.Batch{Outcomes: []store.Outcome{outcome(got["e1"], store.OutcomeDelivered, time.Time{})}})
	if err != nil || !done.OrderedDue {
		t.Fatalf("the outcome that woke e2: OrderedDue %v, %v", done.OrderedDue, err)
	}
	if next := lease(t, s, base, time.Minute, 10); len(next) != 1 || next[0].Key != "e2" {
		t.Fatalf("after e1 leased %q, want e2", keys(next))
	}
}

// An event's trace context comes back with its deliveries, handed off or
// leased later, so that they continue the trace that brought it.
func testEventTrace(t *testing.T, s store.Store) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e := event("traced", "d1", "d2")
	e.Trace = tp
	c, err := s.Commit(context.Background(), store.Batch{Events: []store.NewEvent{e}, Lease: store.Lease{Max: 1, Now: base, For: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	ds := append(c.Leased, lease(t, s, base, time.Minute, 10)...)
	if len(ds) != 2 {
		t.Fatalf("leased %d", len(ds))
	}
	for _, d := range ds {
		if d.Trace != tp {
			t.Fatalf("delivery to %s carries trace %q, want %q", d.Destination, d.Trace, tp)
		}
	}
}

// A leased delivery carries its event's type and order entity (as the
// provider wrote it, not as the store keys it), however it was leased:
// handed off at its commit, leased later as due, taken over after its
// lease expired, ordered or not. A queue destination names the type in its
// subject, a transformation reads it, and Kafka keys its records by the
// entity, so that an entity's events stay in one partition.
func testTypeAndEntityTravel(t *testing.T, s store.Store) {
	ctx := context.Background()
	plain := event("plain", "d1", "d2")
	plain.Type = "invoice.paid"
	// The entity holds "/" itself: only the source's prefix is the store's.
	ord1 := orderedEvent("ord1", "gid://shopify/Order/1", 1, store.OrderFIFO, "d1")
	ord2 := orderedEvent("ord2", "gid://shopify/Order/1", 2, store.OrderFIFO, "d1")
	for _, e := range []*store.NewEvent{&ord1, &ord2} {
		e.Source, e.Type = "shop", "orders/updated"
	}
	events := map[string]store.NewEvent{"plain": plain, "ord1": ord1, "ord2": ord2}
	check := func(how string, ds []store.LeasedDelivery, want ...string) {
		t.Helper()
		got := keys(ds)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: leased %q, want %q", how, got, want)
		}
		for _, d := range ds {
			e := events[d.Key]
			if d.Type != e.Type || d.Entity != e.Order.Entity {
				t.Fatalf("%s: %s to %s carries type %q and entity %q, want %q and %q",
					how, d.Key, d.Destination, d.Type, d.Entity, e.Type, e.Order.Entity)
			}
		}
	}
	c, err := s.Commit(ctx, store.Batch{Events: []store.NewEvent{plain}, Lease: store.Lease{Max: 1, Now: base, For: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	check("handed off", c.Leased, "plain")
	check("beyond the hand-off's Max, leased as due", lease(t, s, base, time.Minute, 10), "plain")
	check("after the leases expired", lease(t, s, base.Add(2*time.Minute), time.Minute, 10), "plain", "plain")

	// Ordered: handed off at its commit where the backend does, else
	// leased by the ordered step just after; its entity's next is leased
	// as due once its outcome frees the entity, and again once its lease
	// expired.
	now := base.Add(2 * time.Minute)
	c, err = s.Commit(ctx, store.Batch{Events: []store.NewEvent{ord1}, Lease: store.Lease{Max: 10, Due: true, Now: now, For: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	first := append(c.Leased, lease(t, s, now, time.Minute, 10)...)
	check("ordered, at its commit", first, "ord1")
	mustClaim(t, s, ord2)
	complete(t, s, outcome(first[0], store.OutcomeDelivered, time.Time{}))
	check("ordered, leased as due", lease(t, s, now, time.Minute, 10), "ord2")
	check("ordered and not, after the leases expired", lease(t, s, now.Add(2*time.Minute), time.Minute, 10), "ord2", "plain", "plain")
}
