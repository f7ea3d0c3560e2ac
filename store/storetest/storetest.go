// Package storetest is the store contract written as one test suite. Every
// backend runs it from its own tests; a backend that does not pass it does
// not ship.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// Open returns a fresh, empty store for one test. The suite closes it.
type Open func(t *testing.T) store.Store

// Attach returns another store on s's database, as another replica would
// open it; the suite closes it. A backend with one writer per database
// (SQLite) passes nil, and the suite shares s among goroutine groups.
type Attach func(t *testing.T, s store.Store) store.Store

// Run runs the whole contract against the backend that open returns.
func Run(t *testing.T, open Open, attach Attach) {
	if attach == nil {
		attach = func(_ *testing.T, s store.Store) store.Store { return s }
	}
	replicas := func(fn func(*testing.T, []store.Store)) func(*testing.T, store.Store) {
		return func(t *testing.T, s store.Store) {
			all := []store.Store{s}
			for range 2 {
				r := attach(t, s)
				if r != s {
					t.Cleanup(func() { r.Close() })
				}
				all = append(all, r)
			}
			fn(t, all)
		}
	}
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"ClaimStoresOnceAndCreatesDeliveries", testClaim},
		{"DuplicateInsideOneBatch", testDuplicateInBatch},
		{"ConcurrentClaimsOfTheSameKeys", testConcurrentClaims},
		{"LeaseIsExclusiveUntilItExpires", testLease},
		{"CompleteWithALostLeaseIsIgnored", testLostLease},
		{"RetryIsScheduled", testRetrySchedule},
		{"DeadLetterAndRelease", testDeadAndRelease},
		{"SweepKeepsPendingAndDead", testSweep},
		{"ConcurrentLeasesNeverShareADelivery", testConcurrentLeases},
		{"HasAnIdentity", testID},
		{"ListenerIsAskedForAndAbsentIsNotSupported", testListener},
		{"ReplayRequeuesDeliveredAndDead", testReplay},
		{"DuplicateReportsTheStoredExpiry", testStoredExpiry},
		{"LeaseCountsTheAttempt", testLeaseCountsAttempt},
		{"ReplayRequeuesADeliveryInBackoff", testReplayBackoff},
		{"ReplayIsNeverUndoneBySweep", replicas(testReplayVersusSweep)},
		{"StormOfOverlappingBatchesOnThreeReplicas", replicas(testStorm)},
		{"BadEventIsRejectedNotUnavailable", testRejected},
		{"RejectedCommitWritesNothing", testRejectedWritesNothing},
		{"CommitHandsOffTheDeliveriesItCreates", testHandOff},
		{"OneCommitCarriesClaimsOutcomesAndLeases", testOneCommit},
		{"EffectClaimCompleteAlreadyDone", testEffectLifecycle},
		{"EffectReleaseFailResetAndTakeOver", testEffectTakeOver},
		{"EffectFingerprintAndDeadline", testEffectGuards},
		{"EffectTextIsKeptAsWritten", testEffectText},
		{"EffectResetIsAuditedInItsTransaction", testEffectResetAudit},
		{"SessionsEndAtLogoutAndExpiry", replicas(testSessions)},
		{"AlertIssueOpensOnceAndLivesItsLife", replicas(testAlertIssues)},
		{"CopiesAreCountedOnTheirEvents", testCopies},
		{"EffectOneOwnerAmongManyClaimers", replicas(testEffectRace)},
		{"EffectReconciliationListAndSweep", testEffectList},
		{"RollupsAddUpOverShardsAndCommits", testRollups},
		{"AdminListsEventsWithTheirDeliveries", testAdminEvents},
		{"AdminReadsEventsWithTheirContent", testAdminEventContents},
		{"EventTypeIsStoredAndSelects", testEventType},
		{"RateLimitHoldsAcrossReplicas", replicas(testRateAcrossReplicas)},
		{"RateSlotsBeyondTheHorizonAreNotTaken", replicas(testRateSlotsBeyondTheHorizon)},
		{"BreakerOpensOnceAndProbesOnce", replicas(testBreaker)},
		{"AdminReplaysDeadLettersAndAudits", testAdminDead},
		{"AdminPausedDestinationIsHeldNotDropped", testAdminPause},
		{"AdminRecordsAnAuditEntryAlone", testRecordAudit},
		{"ObjectsAreVersionedAndAudited", testObjects},
		{"ObjectChangesRaceToOneWinner", replicas(testObjectRace)},
		{"ObjectsMarkMovesWithEveryChange", testObjectsMark},
		{"BodyRetentionDropsTheBodyAndKeepsTheKey", testBodyRetention},
		{"DaysPassingKeepWhatADeliveryNeeds", testDaysPass},
		{"OrderStaleIsNotDeliveredAsNew", testOrderStale},
		{"OrderDeliversStaleMarkedWhenAsked", testOrderDeliverStale},
		{"OrderFIFOHeadHoldsItsEntityOnly", testOrderFIFO},
		{"OrderEntityHeldUntilAnAbandonedLeaseExpires", testOrderLeaseExpiry},
		{"OrderStaleWaitsForAnAttemptTheDestinationMayHave", testOrderStaleWaitsForAnAttempt},
		{"OrderOperatorSkipsAHead", testOrderSkipHead},
		{"OrderOperatorResetsAnEntity", testOrderReset},
		{"OrderHandOffOnlyAFreeEntity", testOrderHandOff},
		{"EventTraceTravelsToItsDeliveries", testEventTrace},
		{"EventTypeAndEntityTravelToEveryLease", testTypeAndEntityTravel},
		{"OrderOneInFlightPerEntityAcrossReplicas", replicas(testOrderAcrossReplicas)},
		{"SkippedByTransformationIsDoneWithItsDigests", testSkippedByTransformation},
		{"HistoryReadsTheSameWhereverAnAttemptIsKept", testHistoryInOrder},
		{"ACommitWhoseContextEndedStoresNothing", testCommitContextEnded},
		{"HandedOutLeaseHoldsOnEveryReplica", replicas(testHandOut)},
		{"BulkDeliveryAddsEachOnceAndCountsTheRest", replicas(testAddDeliveries)},
		{"BulkDeliveryIsNeverUndoneBySweep", replicas(testDeliverVersusSweep)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func event(key string, dests ...string) store.NewEvent {
	return store.NewEvent{
		Source: "src", Key: key, ContentType: "application/json", Body: []byte(`{"id":"` + key + `"}`),
		Header:     http.Header{"X-Github-Event": {"push"}},
		ReceivedAt: base, ExpiresAt: base.Add(time.Hour), Destinations: dests,
	}
}

// whole is true when d carries its event's body as event stored it.
func whole(d store.LeasedDelivery) bool { return string(d.Body) == `{"id":"`+d.Key+`"}` }

func mustClaim(t *testing.T, s store.Store, events ...store.NewEvent) []store.Claim {
	t.Helper()
	claims, err := store.ClaimEvents(context.Background(), s, events)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != len(events) {
		t.Fatalf("%d claims for %d events", len(claims), len(events))
	}
	return claims
}

func stats(t *testing.T, s store.Store) store.Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func lease(t *testing.T, s store.Store, now time.Time, d time.Duration, limit int) []store.LeasedDelivery {
	t.Helper()
	ds, err := store.LeaseDeliveries(context.Background(), s, now, d, limit)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func complete(t *testing.T, s store.Store, outs ...store.Outcome) {
	t.Helper()
	if err := store.CompleteDeliveries(context.Background(), s, outs); err != nil {
		t.Fatal(err)
	}
}

func testClaim(t *testing.T, s store.Store) {
	c := mustClaim(t, s, event("a", "d1", "d2"))
	if c[0].Duplicate || c[0].EventID == 0 {
		t.Fatalf("first claim %+v", c[0])
	}
	c = mustClaim(t, s, event("a", "d1", "d2"))
	if !c[0].Duplicate {
		t.Fatal("second claim of the same key was not a duplicate")
	}
	other := event("a", "d1")
	other.Source = "other"
	if c = mustClaim(t, s, other); c[0].Duplicate {
		t.Fatal("the same key under another source is another event")
	}
	st := stats(t, s)
	if st.Events != 2 || st.Pending != 3 {
		t.Fatalf("stats %+v: want 2 events, 3 pending deliveries", st)
	}
	ds := lease(t, s, base, time.Minute, 10)
	if len(ds) != 3 {
		t.Fatalf("leased %d, want 3", len(ds))
	}
	for _, d := range ds {
		if d.Key != "a" || string(d.Body) != `{"id":"a"}` || d.ContentType != "application/json" || d.Attempt != 1 || d.Header.Get("X-GitHub-Event") != "push" {
			t.Fatalf("leased %+v", d)
		}
	}
}

func testDuplicateInBatch(t *testing.T, s store.Store) {
	c := mustClaim(t, s, event("x", "d"), event("y", "d"), event("x", "d"))
	if c[0].Duplicate || c[1].Duplicate || !c[2].Duplicate {
		t.Fatalf("claims %+v: want new, new, duplicate", c)
	}
	if st := stats(t, s); st.Events != 2 || st.Pending != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func testConcurrentClaims(t *testing.T, s store.Store) {
	const keys, racers = 50, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[string]int{}
	errs := make(chan error, racers)
	for r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				key := fmt.Sprintf("k%d", (k+r)%keys)
				c, err := store.ClaimEvents(context.Background(), s, []store.NewEvent{event(key, "d")})
				if err != nil {
					errs <- err
					return
				}
				if !c[0].Duplicate {
					mu.Lock()
					wins[key]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		if n := wins[fmt.Sprintf("k%d", k)]; n != 1 {
			t.Errorf("key k%d claimed by %d racers", k, n)
		}
	}
	if st := stats(t, s); st.Events != keys || st.Pending != keys {
		t.Fatalf("stats %+v", st)
	}
}

func testLease(t *testing.T, s store.Store) {
	mustClaim(t, s, event("a", "d"))
	first := lease(t, s, base, time.Minute, 10)
	if len(first) != 1 {
		t.Fatalf("leased %d", len(first))
	}
	if again := lease(t, s, base.Add(59*time.Second), time.Minute, 10); len(again) != 0 {
		t.Fatal("a live lease was leased again")
	}
	next, ok, err := s.NextDue(context.Background(), nil)
	if err != nil || !ok || !next.Equal(base.Add(time.Minute)) {
		t.Fatalf("NextDue = %v %v %v, want the lease's expiry", next, ok, err)
	}
	taken := lease(t, s, base.Add(61*time.Second), time.Minute, 10)
	if len(taken) != 1 || taken[0].LeaseToken == first[0].LeaseToken {
		t.Fatalf("expired lease not taken over: %+v", taken)
	}
	if first[0].Attempt != 1 || taken[0].Attempt != 2 {
		t.Fatalf("attempts %d then %d: an attempt that never reported still counts (want 1 then 2)", first[0].Attempt, taken[0].Attempt)
	}
}

func testLostLease(t *testing.T, s store.Store) {
	mustClaim(t, s, event("a", "d"))
	old := lease(t, s, base, time.Second, 10)[0]
	cur := lease(t, s, base.Add(2*time.Second), time.Minute, 10)[0]
	complete(t, s, store.Outcome{DeliveryID: old.ID, LeaseToken: old.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1, StartedAt: base})
	if st := stats(t, s); st.Delivered != 0 || st.Attempts != 0 {
		t.Fatalf("a lost lease's outcome was recorded: %+v", st)
	}
	complete(t, s, store.Outcome{DeliveryID: cur.ID, LeaseToken: cur.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1, StartedAt: base})
	if st := stats(t, s); st.Delivered != 1 || st.Attempts != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func testRetrySchedule(t *testing.T, s store.Store) {
	mustClaim(t, s, event("a", "d"))
	d := lease(t, s, base, time.Minute, 10)[0]
	at := base.Add(30 * time.Second)
	complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeRetry, Attempt: 1,
		StartedAt: base, StatusCode: 500, Error: "HTTP 500", NextAttemptAt: at})
	next, ok, err := s.NextDue(context.Background(), nil)
	if err != nil || !ok || !next.Equal(at) {
		t.Fatalf("NextDue = %v %v %v, want %v", next, ok, err, at)
	}
	if ds := lease(t, s, at.Add(-time.Millisecond), time.Minute, 10); len(ds) != 0 {
		t.Fatal("leased before its next attempt was due")
	}
	ds := lease(t, s, at, time.Minute, 10)
	if len(ds) != 1 || ds[0].Attempt != 2 {
		t.Fatalf("leased %+v, want attempt 2", ds)
	}
}

func testDeadAndRelease(t *testing.T, s store.Store) {
	mustClaim(t, s, event("a", "d"), event("b", "d"))
	ds := lease(t, s, base, time.Minute, 10)
	if len(ds) != 2 {
		t.Fatalf("leased %d", len(ds))
	}
	complete(t, s,
		store.Outcome{DeliveryID: ds[0].ID, LeaseToken: ds[0].LeaseToken, Kind: store.OutcomeDead, Attempt: 1, StatusCode: 422, Error: "permanent"},
		store.Outcome{DeliveryID: ds[1].ID, LeaseToken: ds[1].LeaseToken, Kind: store.OutcomeReleased, NextAttemptAt: base},
	)
	st := stats(t, s)
	if st.Dead != 1 || st.Pending != 1 || st.Attempts != 1 {
		t.Fatalf("stats %+v", st)
	}
	again := lease(t, s, base, time.Minute, 10)
	if len(again) != 1 || again[0].ID != ds[1].ID || again[0].Attempt != 1 {
		t.Fatalf("a released lease is due at once, and gives its attempt back: %+v", again)
	}
}

func testSweep(t *testing.T, s store.Store) {
	mustClaim(t, s, event("done", "d"), event("pending", "d"), event("dead", "d"), event("none"))
	for _, d := range lease(t, s, base, time.Minute, 10) {
		kind := map[string]store.OutcomeKind{"done": store.OutcomeDelivered, "dead": store.OutcomeDead, "pending": store.OutcomeRetry}[d.Key]
		complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: kind, Attempt: 1, NextAttemptAt: base.Add(time.Hour)})
	}
	n, err := s.SweepExpired(context.Background(), base.Add(30*time.Minute), 100)
	if err != nil || n != 0 {
		t.Fatalf("swept %d inside the window (%v)", n, err)
	}
	n, err = s.SweepExpired(context.Background(), base.Add(2*time.Hour), 1)
	if err != nil || n != 1 {
		t.Fatalf("swept %d with limit 1 (%v)", n, err)
	}
	n, err = s.SweepExpired(context.Background(), base.Add(2*time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("swept %d more, want 1 (%v)", n, err)
	}
	if st := stats(t, s); st.Events != 2 || st.Pending != 1 || st.Dead != 1 {
		t.Fatalf("after sweep %+v: the pending and the dead-lettered events must stay", st)
	}
	// The swept event's delivery and its attempt went with it.
	if st := stats(t, s); st.Delivered != 0 || st.Attempts != 2 {
		t.Fatalf("after sweep %+v: want no delivered delivery left, and the 2 attempts of the events kept", st)
	}
	// A swept key can be claimed anew: the window is over.
	if c := mustClaim(t, s, event("done", "d")); c[0].Duplicate {
		t.Fatal("a swept key is still a duplicate")
	}
	if c := mustClaim(t, s, event("pending", "d")); !c[0].Duplicate {
		t.Fatal("a kept key is not a duplicate")
	}
}

func testReplay(t *testing.T, s store.Store) {
	mustClaim(t, s, event("ok", "d1", "d2"), event("bad", "d1"))
	for _, d := range lease(t, s, base, time.Minute, 10) {
		kind := store.OutcomeDelivered
		if d.Key == "bad" {
			kind = store.OutcomeDead
		}
		complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: kind, Attempt: 1})
	}
	later := base.Add(time.Hour)
	n, err := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src", Key: "ok"}, Now: later})
	if err != nil || n != 2 {
		t.Fatalf("Replay = %d, %v; want both deliveries of the event", n, err)
	}
	if _, err := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src", Key: "never"}, Now: later}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Replay of an unknown event: %v, want ErrNotFound", err)
	}
	if ds := lease(t, s, later.Add(-time.Second), time.Minute, 10); len(ds) != 0 {
		t.Fatal("a replay was due before the time it was made")
	}
	ds := lease(t, s, later, time.Minute, 10)
	if len(ds) != 2 || ds[0].Key != "ok" || ds[0].Attempt != 1 {
		t.Fatalf("after replay leased %+v: want the two deliveries of ok, as attempt 1", ds)
	}
	// A leased delivery is its worker's: replaying now leaves it alone.
	if n, _ := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src", Key: "ok"}, Now: later}); n != 0 {
		t.Fatalf("replay took %d deliveries away from their worker", n)
	}
	n, err = replay(t, s, store.Replay{Destination: "other", Dead: true, Now: later})
	if err != nil || n != 0 {
		t.Fatalf("replay of other's dead letters = %d, %v", n, err)
	}
	n, err = replay(t, s, store.Replay{Destination: "", Dead: true, Now: later})
	if err != nil || n != 1 {
		t.Fatalf("replay of the dead letters = %d, %v; want the one dead letter", n, err)
	}
	if st := stats(t, s); st.Dead != 0 || st.Pending != 3 || st.Attempts != 3 {
		t.Fatalf("stats %+v: want nothing dead, 3 pending, the 3 earlier attempts kept", st)
	}
	// Every replay is audited, with what it did; the one of an unknown
	// event did nothing, and wrote nothing.
	audit, err := s.ListAudit(context.Background(), 0, 10)
	var got []string
	for _, a := range audit {
		got = append(got, fmt.Sprintf("%s %d", a.Action, a.Count))
	}
	if want := []string{"retry 1", "retry 0", "replay 0", "replay 2"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("audit %q %v, want %q (newest first)", got, err, want)
	}
}

// testBodyRetention: past its body_retention, an event's body is dropped
// once no delivery needs it (delivered, or no delivery at all), by the
// window sweep's rule: a pending or dead-lettered one keeps it. The key
// stays a barrier until its window ends; a replay of the event, or a new
// delivery of it, is ErrBodyGone, and a bulk replay passes it by.
func testBodyRetention(t *testing.T, s store.Store) {
	ctx := context.Background()
	retained := func(key string, dests ...string) store.NewEvent {
		e := event(key, dests...)
		e.ExpiresAt, e.BodyExpiresAt = base.Add(72*time.Hour), base.Add(time.Hour)
		return e
	}
	kept := event("kept", "d") // no body_retention: its body goes with it
	kept.ExpiresAt = base.Add(72 * time.Hour)
	mustClaim(t, s, retained("done", "d"), retained("pending", "d"), retained("dead", "d"), retained("none"), kept)
	leased := lease(t, s, base, time.Minute, 10)
	if len(leased) != 4 {
		t.Fatalf("leased %d deliveries, want 4", len(leased))
	}
	for _, d := range leased {
		if !whole(d) {
			t.Errorf("%s leased with body %q: a body kept for its body_retention must be delivered whole", d.Key, d.Body)
		}
		kind := map[string]store.OutcomeKind{"done": store.OutcomeDelivered, "kept": store.OutcomeDelivered, "dead": store.OutcomeDead, "pending": store.OutcomeRetry}[d.Key]
		complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: kind, Attempt: 1, NextAttemptAt: base.Add(100 * time.Hour)})
	}
	if n, err := s.SweepExpired(ctx, base.Add(30*time.Minute), 100); err != nil || n != 0 {
		t.Fatalf("dropped %d bodies inside body_retention (%v)", n, err)
	}
	// A backend may drop bodies by the day (PostgreSQL drops a day's
	// partition once the day is over): a day after, each has gone.
	sweptAt := base.Add(25 * time.Hour)
	if _, err := s.SweepExpired(ctx, sweptAt, 100); err != nil {
		t.Fatal(err)
	}
	a := s
	for key, gone := range map[string]bool{"done": true, "none": true, "pending": false, "dead": false, "kept": false} {
		e, err := a.Event(ctx, list0(t, a, key).ID)
		if err != nil {
			t.Fatal(err)
		}
		at := e.BodyDroppedAt
		if dropped := !at.IsZero(); dropped != gone || (gone && (len(e.Body) != 0 || e.Size != 0 || at.Before(base.Add(time.Hour)) || at.After(sweptAt))) ||
			(!gone && string(e.Body) != `{"id":"`+key+`"}`) {
			t.Errorf("%s: body %q (size %d), dropped at %v; want dropped: %v (between the retention's end and the sweep)", key, e.Body, e.Size, at, gone)
		}
	}
	// The key is still a barrier: a copy is a duplicate.
	if c := mustClaim(t, s, retained("done", "d")); !c[0].Duplicate {
		t.Fatal("an event whose body was dropped let its key be claimed again")
	}
	// Nothing to deliver: a replay of it, or a new delivery of it, says so.
	later := sweptAt.Add(time.Hour)
	if _, err := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src", Key: "done"}, Now: later}); !errors.Is(err, store.ErrBodyGone) {
		t.Errorf("replay of an event without its body: %v, want ErrBodyGone", err)
	}
	if _, err := a.AddDelivery(ctx, list0(t, a, "none").ID, "d", later, store.AuditEntry{Actor: "cli", Action: "deliver"}); !errors.Is(err, store.ErrBodyGone) {
		t.Errorf("a new delivery of an event without its body: %v, want ErrBodyGone", err)
	}
	// A replay of the whole source requeues the ones that kept their body,
	// and delivers them whole.
	if n, err := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src"}, Now: later}); err != nil || n != 3 {
		t.Errorf("replay of the source requeued %d (%v), want pending, dead and kept", n, err)
	}
	for _, d := range lease(t, s, later, time.Minute, 10) {
		if !whole(d) {
			t.Errorf("%s replayed with body %q, want it whole", d.Key, d.Body)
		}
	}
	// The window's end deletes the event as it would any: the key goes.
	if _, err := s.SweepExpired(ctx, base.Add(73*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, s, retained("done", "d")); c[0].Duplicate {
		t.Fatal("past its window the key is still a duplicate")
	}
}

// testDaysPass: whatever a backend does as days pass (PostgreSQL drops a
// day of bodies and attempts as one partition), it keeps what the window
// sweep keeps: an event inside its window, and one that a delivery still
// needs, pending or dead (the operator's to replay), with its body whole
// and its attempts; the rest goes with its window.
func testDaysPass(t *testing.T, s store.Store) {
	ctx := context.Background()
	// A sweep before the events: a backend that makes a day's storage
	// ahead of time has made it.
	if _, err := s.SweepExpired(ctx, base, 100); err != nil {
		t.Fatal(err)
	}
	inside := event("inside", "d")
	inside.ExpiresAt = base.Add(72 * time.Hour)
	mustClaim(t, s, event("done", "d"), event("retrying", "d"), event("dead", "d"), event("none"), inside)
	retryAt := base.Add(50 * time.Hour)
	for _, d := range lease(t, s, base, time.Minute, 10) {
		kind := map[string]store.OutcomeKind{"done": store.OutcomeDelivered, "inside": store.OutcomeDelivered,
			"dead": store.OutcomeDead, "retrying": store.OutcomeRetry}[d.Key]
		complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: kind, Attempt: 1, StatusCode: 503,
			StartedAt: base, NextAttemptAt: retryAt})
	}
	for _, now := range []time.Time{base.Add(25 * time.Hour), base.Add(49 * time.Hour)} {
		if _, err := s.SweepExpired(ctx, now, 100); err != nil {
			t.Fatal(err)
		}
	}
	a := s
	for _, key := range []string{"done", "none"} {
		if got, err := a.ListEvents(ctx, store.EventQuery{Source: "src", Key: key}); err != nil || len(got) != 0 {
			t.Errorf("%s, past its window and needed by no delivery, is still listed (%v)", key, err)
		}
	}
	for _, key := range []string{"inside", "retrying", "dead"} {
		e, err := a.Event(ctx, list0(t, a, key).ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Body) != `{"id":"`+key+`"}` || e.Size != len(e.Body) || !e.BodyDroppedAt.IsZero() {
			t.Errorf("%s two days on: body %q (size %d, dropped at %v), want it whole", key, e.Body, e.Size, e.BodyDroppedAt)
		}
		if len(e.Deliveries) != 1 || len(e.Deliveries[0].History) != 1 || e.Deliveries[0].History[0].StatusCode != 503 {
			t.Errorf("%s two days on: deliveries %+v, want its one attempt", key, e.Deliveries)
		}
	}
	// The retrying one is delivered whole at its retry; the dead one,
	// replayed, too.
	if n, err := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src", Key: "dead"}, Now: retryAt}); err != nil || n != 1 {
		t.Fatalf("replay of the dead letter two days on = %d, %v", n, err)
	}
	got := lease(t, s, retryAt, time.Minute, 10)
	if len(got) != 2 {
		t.Fatalf("at the retry leased %q, want retrying and dead", keys(got))
	}
	for _, d := range got {
		if !whole(d) {
			t.Errorf("%s leased two days on with body %q, want it whole", d.Key, d.Body)
		}
		complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: d.Attempt, StartedAt: retryAt})
	}
	// Delivered at last, they go with the next sweep: nothing keeps them.
	if _, err := s.SweepExpired(ctx, retryAt.Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"retrying", "dead"} {
		if got, err := a.ListEvents(ctx, store.EventQuery{Source: "src", Key: key}); err != nil || len(got) != 0 {
			t.Errorf("%s, delivered and past its window, is still listed (%v)", key, err)
		}
	}
}

// testRecordAudit: a change made outside the store (a config reload) is
// audited on its own, with who, what and when, and listed newest first
// among the store's own entries.
func testRecordAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := s
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := a.SetPaused(ctx, "slow", true, at, store.AuditEntry{Actor: "cli", Action: "pause", Target: "slow"}); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordAudit(ctx, store.AuditEntry{At: at.Add(time.Second), Actor: "token:ops", Action: "reload", Target: "oncehook.yaml", Count: 3}); err != nil {
		t.Fatal(err)
	}
	log, err := a.ListAudit(ctx, 0, 10)
	if err != nil || len(log) != 2 {
		t.Fatalf("audit %+v %v: want the pause and the reload", log, err)
	}
	if r := log[0]; r.Action != "reload" || r.Actor != "token:ops" || r.Target != "oncehook.yaml" || r.Count != 3 || !r.At.Equal(at.Add(time.Second)) {
		t.Fatalf("newest entry %+v: want the reload as recorded", r)
	}
}

// replay replays through s's Admin, as every operator's replay does.
func replay(t *testing.T, s store.Store, r store.Replay) (int, error) {
	t.Helper()
	return s.Replay(context.Background(), r)
}

// The one optional capability is asked for: a store that supports it
// wakes its listener once connected and returns when the context ends; one
// that does not answers ErrNotSupported at once, never blocks.
func testListener(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	woke := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	if !s.SupportsListener() {
		select {
		case err := <-done:
			if !errors.Is(err, store.ErrNotSupported) {
				t.Fatalf("Listen on a store without it: %v, want ErrNotSupported", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Listen on a store without it blocked")
		}
		return
	}
	select {
	case <-woke:
	case err := <-done:
		t.Fatalf("Listen returned %v before its context ended", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Listen never woke its caller once connected")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Listen ended with %v, want nil when its context ends", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return when its context ended")
	}
}

func testID(t *testing.T, s store.Store) {
	if len(s.ID()) < 16 {
		t.Fatalf("store id %q: want a random identity", s.ID())
	}
}

func testConcurrentLeases(t *testing.T, s store.Store) {
	const n = 200
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = event(fmt.Sprintf("e%d", i), "d")
	}
	mustClaim(t, s, evs...)
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := store.LeaseDeliveries(context.Background(), s, base, time.Minute, 7)
				if err != nil {
					errMu.Lock()
					firstErr = errors.Join(firstErr, err)
					errMu.Unlock()
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if len(seen) != n {
		t.Fatalf("leased %d distinct deliveries, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("delivery %d leased %d times", id, c)
		}
	}
}

// Invariant 10 for caches: a duplicate reports the stored key's expiry, not
// the copy's own now+window, so that nothing remembers a key longer than the
// store keeps it.
func testStoredExpiry(t *testing.T, s store.Store) {
	first := event("a", "d")
	c := mustClaim(t, s, first)
	if !c[0].ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("new event: ExpiresAt %v, want %v", c[0].ExpiresAt, first.ExpiresAt)
	}
	later := event("a", "d")
	later.ReceivedAt, later.ExpiresAt = base.Add(30*time.Minute), base.Add(90*time.Minute)
	in := event("b", "d")
	c = mustClaim(t, s, later, in, later)
	if !c[0].Duplicate || !c[0].ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("duplicate: %+v, want the stored expiry %v", c[0], first.ExpiresAt)
	}
	if c[1].Duplicate || !c[2].Duplicate || !c[2].ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("claims %+v", c)
	}
}

// A lease counts its attempt at once, so a delivery whose worker dies on
// every attempt (or whose attempt outlives its lease) still reaches
// max_attempts; a released lease gives the count back.
func testLeaseCountsAttempt(t *testing.T, s store.Store) {
	mustClaim(t, s, event("a", "d"))
	now := base
	for want := 1; want <= 3; want++ {
		ds := lease(t, s, now, time.Second, 10)
		if len(ds) != 1 || ds[0].Attempt != want {
			t.Fatalf("lease %d: %+v, want attempt %d", want, ds, want)
		}
		now = now.Add(2 * time.Second) // the worker died: the lease expires
	}
	ds := lease(t, s, now, time.Minute, 10)
	complete(t, s, store.Outcome{DeliveryID: ds[0].ID, LeaseToken: ds[0].LeaseToken, Kind: store.OutcomeReleased, NextAttemptAt: now})
	again := lease(t, s, now, time.Minute, 10)
	if len(again) != 1 || again[0].Attempt != 4 {
		t.Fatalf("after a release: %+v, want attempt 4 again", again)
	}
}

// One meaning of replay on every backend: a delivery waiting in backoff
// (even one parked for a day by Retry-After) is requeued now.
func testReplayBackoff(t *testing.T, s store.Store) {
	mustClaim(t, s, event("a", "d"))
	d := lease(t, s, base, time.Minute, 10)[0]
	complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeRetry, Attempt: d.Attempt,
		StatusCode: 503, NextAttemptAt: base.Add(24 * time.Hour)})
	now := base.Add(time.Minute)
	n, err := replay(t, s, store.Replay{Events: store.EventQuery{Source: "src", Key: "a"}, Now: now})
	if err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want the delivery in backoff requeued", n, err)
	}
	ds := lease(t, s, now, time.Minute, 10)
	if len(ds) != 1 || ds[0].Attempt != 1 {
		t.Fatalf("after replay: %+v, want it due now as attempt 1", ds)
	}
}

// A replay that returned a count is never undone by a sweep running at the
// same time on another replica: the event and its requeued delivery stay.
// Three rounds: before the sweep judged on a fresh snapshot, PostgreSQL lost
// a replayed event in 7 of 10 rounds.
//
// A fourth round sweeps a day later, where a backend that drops a day of
// bodies at once (PostgreSQL) does so while the replays run: every replayed
// event is then delivered with its body whole.
func testReplayVersusSweep(t *testing.T, stores []store.Store) {
	pending := 0
	for round := range 4 {
		pending += replayWhileSweeping(t, stores, round)
		if st := stats(t, stores[0]); st.Pending != int64(pending) {
			t.Fatalf("round %d: %d replays returned a count, %d deliveries pending", round, pending, st.Pending)
		}
	}
	for {
		ds := lease(t, stores[0], base.Add(26*time.Hour), time.Minute, 100)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if !whole(d) {
				t.Fatalf("%s replayed, then leased with body %q", d.Key, d.Body)
			}
			pending--
			complete(t, stores[0], store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: d.Attempt})
		}
	}
	if pending != 0 {
		t.Fatalf("%d replayed deliveries were never leased", pending)
	}
}

func replayWhileSweeping(t *testing.T, stores []store.Store, round int) (replays int) {
	ctx := context.Background()
	a := stores[0]
	const n = 200
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = event(fmt.Sprintf("r%d-e%03d", round, i), "d")
	}
	if round == 3 {
		// A day ahead is made before the events, as a running gateway has.
		if _, err := stores[0].SweepExpired(ctx, base, 1); err != nil {
			t.Fatal(err)
		}
	}
	mustClaim(t, stores[0], evs...)
	for {
		ds := lease(t, stores[0], base, time.Minute, 100)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			complete(t, stores[0], store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: d.Attempt})
		}
	}
	past := base.Add(2 * time.Hour) // every window is over: all may be swept
	if round == 3 {
		past = base.Add(25 * time.Hour) // and their day too
	}
	replayed := make([]bool, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range evs {
			k := n - 1 - i // from the other end, so the two meet in the middle
			c, err := a.Replay(ctx, store.Replay{Events: store.EventQuery{Source: "src", Key: evs[k].Key}, Now: past, Audit: store.AuditEntry{Actor: "ops"}})
			// Too late is not found, or, where a day's bodies went before
			// the event did, its body gone.
			if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrBodyGone) {
				errs <- err
				return
			}
			replayed[k] = err == nil && c > 0
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, ok := range replayed {
		if !ok {
			continue
		}
		replays++
		if _, err := replay(t, stores[0], store.Replay{Events: store.EventQuery{Source: "src", Key: evs[k].Key}, Now: past}); err != nil {
			t.Errorf("%s was replayed, then swept away: %v", evs[k].Key, err)
		}
	}
	return replays
}

// Invariants 2 and 13 together: three replicas claim 1,000 keys, 5 copies
// each, shuffled into batches of 16 that overlap, 256 batches in flight.
// Every claim succeeds (no deadlock surfaces as an error), and exactly 1,000
// are new. Three rounds: before claims took keys in one order, PostgreSQL
// deadlocked in most rounds.
func testStorm(t *testing.T, stores []store.Store) {
	for round := range 3 {
		storm(t, stores, round)
	}
}

func storm(t *testing.T, stores []store.Store, round int) {
	const keys, copies, batch, inflight = 1000, 5, 16, 256
	all := make([]store.NewEvent, 0, keys*copies)
	for k := range keys {
		for range copies {
			all = append(all, event(fmt.Sprintf("storm-%d-%04d", round, k), "d1", "d2"))
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[string]int{}
	var errs []error
	sem := make(chan struct{}, inflight)
	for i := 0; i < len(all); i += batch {
		part := all[i:min(i+batch, len(all))]
		s := stores[(i/batch)%len(stores)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := store.ClaimEvents(context.Background(), s, part)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for j, cl := range c {
				if !cl.Duplicate {
					wins[part[j].Key]++
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("round %d: %d of %d claims failed; the first: %v", round, len(errs), (len(all)+batch-1)/batch, errs[0])
	}
	if len(wins) != keys {
		t.Fatalf("%d keys were new, want %d", len(wins), keys)
	}
	for k, n := range wins {
		if n != 1 {
			t.Errorf("%s new %d times", k, n)
		}
	}
	if st := stats(t, stores[0]); st.Events != int64(keys*(round+1)) || st.Pending != int64(2*keys*(round+1)) {
		t.Fatalf("stats %+v after round %d: want %d events and %d deliveries", st, round, keys*(round+1), 2*keys*(round+1))
	}
}

// Invariant 13 at the store: data the store cannot hold is ErrRejected (the
// group committer then commits the batch's other requests without it), not
// ErrUnavailable, and it leaves nothing behind.
func testRejected(t *testing.T, s store.Store) {
	bad := event("twice", "d", "d") // one delivery per event and destination
	_, err := store.ClaimEvents(context.Background(), s, []store.NewEvent{event("fine", "d"), bad})
	if !errors.Is(err, store.ErrRejected) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("claim with a broken event: %v, want ErrRejected", err)
	}
	if st := stats(t, s); st.Events != 0 {
		t.Fatalf("a rejected batch left %d events", st.Events)
	}
	if c := mustClaim(t, s, event("fine", "d")); c[0].Duplicate {
		t.Fatal("the good event of a rejected batch was stored")
	}
}

// What must be atomic (store.Store's Commit): a commit that fails writes
// none of its parts. A batch carrying outcomes, counters, copies, an
// effect's claim and events, one of which the store refuses, leaves the
// outcome's delivery leased as it was, no counter, no copy, no effect and
// no event; the same batch without the bad event then writes them all.
func testRejectedWritesNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := mustClaim(t, s, event("old", "d"))
	held := lease(t, s, base, time.Minute, 1)[0]
	hour := base.Truncate(time.Hour)
	batch := func(events ...store.NewEvent) store.Batch {
		return store.Batch{
			Events:   events,
			Outcomes: []store.Outcome{{DeliveryID: held.ID, LeaseToken: held.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1}},
			Effects:  []store.EffectOp{{Kind: store.EffectClaim, Key: "atomic:1", Lease: time.Minute, Now: base, Retention: time.Hour}},
			Stats:    []store.StatDelta{{Hour: hour, Scope: "source", Name: "src", Metric: "requests.accepted", Value: 7}},
			Shard:    "w1",
			Copies:   []store.Copy{{Source: "src", Key: "old", N: 2, Last: base}},
		}
	}
	_, err := s.Commit(ctx, batch(event("fine", "d"), event("twice", "d", "d")))
	if !errors.Is(err, store.ErrRejected) {
		t.Fatalf("a batch with a broken event: %v, want ErrRejected", err)
	}
	if st := stats(t, s); st.Events != 1 || st.Delivered != 0 || st.Attempts != 0 {
		t.Fatalf("after a rejected commit: %+v; want the one old event, nothing delivered", st)
	}
	if _, err := s.Effect(ctx, "atomic:1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a rejected commit's effect claim: %v, want ErrNotFound", err)
	}
	if r, err := s.Rollups(ctx, store.RollupQuery{From: hour, To: hour.Add(time.Hour)}); err != nil || len(r) != 0 {
		t.Fatalf("a rejected commit's counters: %+v, %v", r, err)
	}
	if e, err := s.Event(ctx, old[0].EventID); err != nil || e.Copies != 0 {
		t.Fatalf("a rejected commit's copies: %d, %v", e.Copies, err)
	}
	c, err := s.Commit(ctx, batch(event("fine", "d")))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Claims) != 1 || c.Claims[0].Duplicate || len(c.Effects) != 1 || c.Effects[0].Status != store.EffectAcquired {
		t.Fatalf("the batch without the broken event: %+v", c)
	}
	if st := stats(t, s); st.Events != 2 || st.Delivered != 1 {
		t.Fatalf("after the good commit: %+v", st)
	}
	if r, err := s.Rollups(ctx, store.RollupQuery{From: hour, To: hour.Add(time.Hour)}); err != nil || len(r) != 1 || r[0].Value != 7 {
		t.Fatalf("counters %+v, %v", r, err)
	}
	if e, err := s.Event(ctx, old[0].EventID); err != nil || e.Copies != 2 {
		t.Fatalf("copies %d, %v", e.Copies, err)
	}
}

// The hand-off: a commit that creates deliveries leases up to Lease.Max of
// them to the caller in the same transaction, as attempt 1, with the bodies
// the batch carried; the rest are stored unleased and due now.
func testHandOff(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := event("a", "d1", "d2"), event("b", "d1", "d2")
	c, err := s.Commit(ctx, store.Batch{Events: []store.NewEvent{a, b, event("a", "d1")}, Lease: store.Lease{Max: 3, Now: base, For: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Claims) != 3 || c.Claims[0].Duplicate || c.Claims[1].Duplicate || !c.Claims[2].Duplicate {
		t.Fatalf("claims %+v", c.Claims)
	}
	if len(c.Leased) != 3 {
		t.Fatalf("handed off %d deliveries, want 3 (Max)", len(c.Leased))
	}
	seen := map[int64]bool{}
	for _, d := range c.Leased {
		want := a
		if d.Key == "b" {
			want = b
		}
		if d.Attempt != 1 || d.ID == 0 || seen[d.ID] || string(d.Body) != string(want.Body) || d.ContentType != want.ContentType ||
			d.Header.Get("X-GitHub-Event") != "push" || !d.LeaseExpiresAt.Equal(base.Add(time.Minute)) || d.LeaseToken == "" || !d.ReceivedAt.Equal(base) {
			t.Fatalf("handed off %+v", d)
		}
		seen[d.ID] = true
	}
	// The fourth is due now, for anyone; the handed-off ones are leased.
	rest := lease(t, s, base, time.Minute, 10)
	if len(rest) != 1 || seen[rest[0].ID] || rest[0].Attempt != 1 {
		t.Fatalf("after the hand-off, due: %+v; want the one delivery not handed off", rest)
	}
	complete(t, s, store.Outcome{DeliveryID: c.Leased[0].ID, LeaseToken: c.Leased[0].LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1})
	if st := stats(t, s); st.Delivered != 1 || st.Pending != 3 || st.Attempts != 1 {
		t.Fatalf("stats %+v", st)
	}
	// An expired hand-off is taken over like any lease, as attempt 2.
	again := lease(t, s, base.Add(2*time.Minute), time.Minute, 10)
	if len(again) != 3 {
		t.Fatalf("after the leases expired: %+v", again)
	}
}

// One commit records outcomes, claims new events (handing their deliveries
// off) and leases what is due, up to Max in all, in one transaction.
func testOneCommit(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustClaim(t, s, event("old1", "d"), event("old2", "d"), event("old3", "d"))
	held := lease(t, s, base, time.Minute, 1)
	c, err := s.Commit(ctx, store.Batch{
		Events:   []store.NewEvent{event("new", "d")},
		Outcomes: []store.Outcome{{DeliveryID: held[0].ID, LeaseToken: held[0].LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1}},
		Lease:    store.Lease{Max: 2, Due: true, Now: base, For: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Claims) != 1 || c.Claims[0].Duplicate || len(c.Leased) != 2 {
		t.Fatalf("committed %+v", c)
	}
	if c.Leased[0].Key != "new" || c.Leased[1].Key == "new" || c.Leased[1].ID == held[0].ID || string(c.Leased[1].Body) == "" {
		t.Fatalf("leased %+v: want the new event's delivery handed off first, then one due", c.Leased)
	}
	if st := stats(t, s); st.Delivered != 1 || st.Events != 4 {
		t.Fatalf("stats %+v", st)
	}
	if rest := lease(t, s, base, time.Minute, 10); len(rest) != 1 {
		t.Fatalf("%d left due, want 1", len(rest))
	}

	// An outcome that waited past its lease (the store was down) is
	// recorded before the same commit leases what is due: the delivery is
	// not attempted a second time.
	mustClaim(t, s, event("late", "d"))
	late := lease(t, s, base, time.Second, 1)[0]
	c, err = s.Commit(ctx, store.Batch{
		Outcomes: []store.Outcome{{DeliveryID: late.ID, LeaseToken: late.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1}},
		Lease:    store.Lease{Max: 10, Due: true, Now: base.Add(time.Hour), For: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Leased {
		if d.ID == late.ID {
			t.Fatal("a delivery whose outcome was in the same commit was leased again")
		}
	}
}

func effectOp(t *testing.T, s store.Store, op store.EffectOp) store.EffectResult {
	t.Helper()
	if op.Now.IsZero() {
		op.Now = base
	}
	if op.Retention == 0 {
		op.Retention = time.Hour
	}
	c, err := s.Commit(context.Background(), store.Batch{Effects: []store.EffectOp{op}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Effects) != 1 {
		t.Fatalf("%d effect results for 1 op", len(c.Effects))
	}
	return c.Effects[0]
}

func testEffectLifecycle(t *testing.T, s store.Store) {
	claim := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "pix:HP1:24h", Lease: time.Minute})
	if claim.Status != store.EffectAcquired || claim.Record.Token == "" || claim.Record.Attempt != 1 || claim.Reclaimed ||
		!claim.Record.LeaseExpiresAt.Equal(base.Add(time.Minute)) {
		t.Fatalf("first claim %+v", claim)
	}
	busy := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "pix:HP1:24h", Lease: time.Minute, Now: base.Add(time.Second)})
	if busy.Status != store.EffectBusy || !busy.Record.LeaseExpiresAt.Equal(base.Add(time.Minute)) {
		t.Fatalf("second claim %+v, want busy until the lease expires", busy)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectComplete, Key: "pix:HP1:24h", Token: "not-the-owner", Result: []byte(`{}`)}); r.Status != store.EffectStale {
		t.Fatalf("complete with another token: %+v", r)
	}
	result := []byte(`{"message_id": "wamid.1",  "sent":true}`) // byte for byte, spaces included
	done := effectOp(t, s, store.EffectOp{Kind: store.EffectComplete, Key: "pix:HP1:24h", Token: claim.Record.Token, Result: result, Now: base.Add(2 * time.Second)})
	if done.Status != store.EffectOK || done.Record.State != store.EffectDone {
		t.Fatalf("complete %+v", done)
	}
	again := effectOp(t, s, store.EffectOp{Kind: store.EffectComplete, Key: "pix:HP1:24h", Token: claim.Record.Token, Result: []byte(`{"other":1}`)})
	if again.Status != store.EffectOK || string(again.Record.Result) != string(result) {
		t.Fatalf("completing twice: %+v, want OK with the stored result", again)
	}
	replay := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "pix:HP1:24h", Lease: time.Minute, Now: base.Add(time.Hour)})
	if replay.Status != store.EffectAlreadyDone || string(replay.Record.Result) != string(result) {
		t.Fatalf("claim after done: %+v, want the stored result, byte for byte", replay)
	}
	rec, err := s.Effect(context.Background(), "pix:HP1:24h")
	if err != nil || rec.State != store.EffectDone || len(rec.Attempts) != 1 || rec.Attempts[0].Outcome != store.EffectDone ||
		!rec.Attempts[0].ClaimedAt.Equal(base) || string(rec.Result) != string(result) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if _, err := s.Effect(context.Background(), "never"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
}

func testEffectTakeOver(t *testing.T, s store.Store) {
	first := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "k", Lease: time.Minute})
	rel := effectOp(t, s, store.EffectOp{Kind: store.EffectRelease, Key: "k", Token: first.Record.Token, Error: "timeout", Now: base.Add(time.Second)})
	if rel.Status != store.EffectOK {
		t.Fatalf("release %+v", rel)
	}
	second := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "k", Lease: time.Minute, Now: base.Add(2 * time.Second)})
	if second.Status != store.EffectAcquired || second.Record.Attempt != 2 || second.Reclaimed {
		t.Fatalf("claim after release: %+v, want attempt 2, not a reclaim", second)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectComplete, Key: "k", Token: first.Record.Token, Result: []byte(`1`)}); r.Status != store.EffectStale {
		t.Fatalf("the released owner completed: %+v", r)
	}
	// The owner dies: its lease expires and the next claim takes over.
	later := base.Add(2*time.Second + time.Minute)
	third := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "k", Lease: time.Minute, Now: later})
	if third.Status != store.EffectAcquired || third.Record.Attempt != 3 || !third.Reclaimed {
		t.Fatalf("claim after an expired lease: %+v, want a reclaim as attempt 3", third)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectComplete, Key: "k", Token: second.Record.Token, Result: []byte(`1`), Now: later}); r.Status != store.EffectStale {
		t.Fatalf("the dead owner's late complete: %+v, want stale", r)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectRenew, Key: "k", Token: third.Record.Token, Lease: 5 * time.Minute, Now: later}); r.Status != store.EffectOK ||
		!r.Record.LeaseExpiresAt.Equal(later.Add(5*time.Minute)) {
		t.Fatalf("renew %+v", r)
	}
	fail := effectOp(t, s, store.EffectOp{Kind: store.EffectFail, Key: "k", Token: third.Record.Token, Error: "invalid phone", Now: later})
	if fail.Status != store.EffectOK || fail.Record.State != store.EffectFailed {
		t.Fatalf("fail %+v", fail)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "k", Lease: time.Minute, Now: later.Add(time.Hour)}); r.Status != store.EffectIsFailed || r.Record.Error != "invalid phone" {
		t.Fatalf("claim after fail: %+v", r)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectReset, Key: "k", Now: later}); r.Status != store.EffectOK {
		t.Fatalf("reset %+v", r)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "k", Lease: time.Minute, Now: later}); r.Status != store.EffectAcquired || r.Record.Attempt != 4 {
		t.Fatalf("claim after an operator's reset: %+v", r)
	}
	rec, _ := s.Effect(context.Background(), "k")
	outcomes := []string{}
	for _, a := range rec.Attempts {
		outcomes = append(outcomes, a.Outcome)
	}
	if fmt.Sprint(outcomes) != "[released lease_expired failed ]" {
		t.Fatalf("attempts %v", outcomes)
	}
}

// An effect's error and fingerprint are kept byte for byte, whatever they
// hold but NUL: the ledger (package effect) refuses a NUL before any store
// sees it (PostgreSQL's text cannot hold one, SQLite's can), so every
// backend keeps exactly the same texts.
func testEffectText(t *testing.T, s store.Store) {
	text := "line 1\r\n\tline 2 \x01\x1f\x7f \u0085 \u202e \u200b 😀 ' \" \\ %00"
	claim := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "text", Lease: time.Minute, Fingerprint: text})
	if claim.Status != store.EffectAcquired {
		t.Fatalf("claim %+v", claim)
	}
	fail := effectOp(t, s, store.EffectOp{Kind: store.EffectFail, Key: "text", Token: claim.Record.Token, Error: text})
	if fail.Status != store.EffectOK {
		t.Fatalf("fail %+v", fail)
	}
	rec, err := s.Effect(context.Background(), "text")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Fingerprint != text || rec.Error != text || len(rec.Attempts) != 1 || rec.Attempts[0].Error != text {
		t.Fatalf("kept fingerprint %q, error %q, attempts %+v; want %q each", rec.Fingerprint, rec.Error, rec.Attempts, text)
	}
}

// An operator's reset writes its audit entry in the reset's transaction,
// counting the one record it reopened; a reset that changes nothing (the
// record is not failed) writes none. Before, the entry came after, in a
// transaction of its own, with count 0.
func testEffectResetAudit(t *testing.T, s store.Store) {
	claim := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "audited", Lease: time.Minute})
	effectOp(t, s, store.EffectOp{Kind: store.EffectFail, Key: "audited", Token: claim.Record.Token, Error: "no"})
	entry := store.AuditEntry{Actor: "token:ops", Action: "effect_reset", Target: "effect audited"}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectReset, Key: "audited", Audit: entry}); r.Status != store.EffectOK {
		t.Fatalf("reset %+v", r)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectReset, Key: "audited", Audit: entry}); r.Status != store.EffectConflict {
		t.Fatalf("a second reset %+v, want a conflict", r)
	}
	log, err := s.ListAudit(context.Background(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != "effect_reset" || log[0].Count != 1 || log[0].Actor != "token:ops" || log[0].Target != "effect audited" {
		t.Fatalf("audit log %+v, want one effect_reset of count 1", log)
	}
}

// A session made on one replica is accepted on every other, until it
// expires or is deleted (a logout) on any of them.
func testSessions(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	a, b := stores[0], stores[len(stores)-1]
	ss := store.Session{IDHash: "h1", Token: "ops", CSRF: "c1", CreatedAt: base, ExpiresAt: base.Add(time.Hour)}
	if err := a.CreateSession(ctx, ss); err != nil {
		t.Fatal(err)
	}
	a.CreateSession(ctx, store.Session{IDHash: "h2", Token: "viewer", CSRF: "c2", CreatedAt: base, ExpiresAt: base.Add(time.Hour)})
	got, err := b.Session(ctx, "h1", base.Add(time.Minute))
	if err != nil || got.Token != "ops" || got.CSRF != "c1" || !got.ExpiresAt.Equal(base.Add(time.Hour)) {
		t.Fatalf("the session on another replica: %+v %v", got, err)
	}
	if _, err := b.Session(ctx, "h1", base.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired session: %v", err)
	}
	if err := b.DeleteSession(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Session(ctx, "h1", base.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a session after logout: %v", err)
	}
	if got, err := a.Session(ctx, "h2", base.Add(time.Minute)); err != nil || got.Token != "viewer" {
		t.Fatalf("a logout ended another session: %+v %v", got, err)
	}
	if _, err := a.Session(ctx, "nope", base); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown session: %v", err)
	}
}

// A commit's copies add up on their events, the latest time kept; a copy
// of an event no longer stored changes nothing and fails nothing.
func testCopies(t *testing.T, s store.Store) {
	ctx := context.Background()
	claims := mustClaim(t, s, event("c1", "app"), event("c2", "app"))
	commit := func(copies ...store.Copy) {
		t.Helper()
		if _, err := s.Commit(ctx, store.Batch{Copies: copies}); err != nil {
			t.Fatal(err)
		}
	}
	commit(store.Copy{Source: "src", Key: "c1", N: 2, Last: base.Add(2 * time.Second)}, store.Copy{Source: "src", Key: "gone", N: 1, Last: base})
	commit(store.Copy{Source: "src", Key: "c1", N: 3, Last: base.Add(time.Second)}) // an older copy, committed later
	e, err := s.Event(ctx, claims[0].EventID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Copies != 5 || !e.LastCopyAt.Equal(base.Add(2*time.Second)) {
		t.Fatalf("c1: %d copies, last %v; want 5, %v", e.Copies, e.LastCopyAt, base.Add(2*time.Second))
	}
	if e, _ := s.Event(ctx, claims[1].EventID); e.Copies != 0 || !e.LastCopyAt.IsZero() {
		t.Fatalf("c2: %d copies, last %v; want none", e.Copies, e.LastCopyAt)
	}
}

func testEffectGuards(t *testing.T, s store.Store) {
	first := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "capi:Purchase:order-1", Lease: time.Minute, Fingerprint: "sha256:aaa"})
	mismatch := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "capi:Purchase:order-1", Lease: time.Minute, Fingerprint: "sha256:bbb", Now: base.Add(2 * time.Minute)})
	if mismatch.Status != store.EffectMismatch || mismatch.Record.Fingerprint != "sha256:aaa" || mismatch.Record.Token != first.Record.Token {
		t.Fatalf("another fingerprint: %+v", mismatch)
	}
	if rec, _ := s.Effect(context.Background(), "capi:Purchase:order-1"); rec.Attempt != 1 || rec.State != store.EffectPending {
		t.Fatalf("a mismatch changed the record: %+v", rec)
	}
	deadline := base.Add(48 * time.Hour)
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "late", Lease: time.Minute, Deadline: deadline, Now: deadline}); r.Status != store.EffectIsExpired {
		t.Fatalf("claim at its deadline: %+v", r)
	}
	held := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "half", Lease: time.Minute, Deadline: deadline})
	if held.Status != store.EffectAcquired {
		t.Fatal(held)
	}
	if r := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "half", Lease: time.Minute, Now: deadline.Add(time.Second)}); r.Status != store.EffectIsExpired {
		t.Fatalf("reclaim after the deadline: %+v", r)
	}
	if rec, _ := s.Effect(context.Background(), "half"); rec.State != store.EffectExpired {
		t.Fatalf("record %+v, want expired", rec)
	}
}

// Invariant 9: one owner at a time. 100 claimers of one key on three
// replicas of the database: exactly one takes the lease; the rest are told
// it is busy, and once it is done, get its result.
func testEffectRace(t *testing.T, stores []store.Store) {
	const claimers = 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[store.EffectStatus]int{}
	var owner store.EffectResult
	var errs []error
	start := make(chan struct{})
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, err := stores[i%len(stores)].Commit(context.Background(), store.Batch{Effects: []store.EffectOp{
				{Kind: store.EffectClaim, Key: "llm-summary:evt_1", Lease: time.Minute, Now: base, Retention: time.Hour}}})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			statuses[c.Effects[0].Status]++
			if c.Effects[0].Status == store.EffectAcquired {
				owner = c.Effects[0]
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d claims failed: %v", len(errs), errs[0])
	}
	if statuses[store.EffectAcquired] != 1 || statuses[store.EffectBusy] != claimers-1 {
		t.Fatalf("statuses %v: want exactly one owner", statuses)
	}
	result := []byte(`{"summary":"ok"}`)
	effectOp(t, stores[0], store.EffectOp{Kind: store.EffectComplete, Key: "llm-summary:evt_1", Token: owner.Record.Token, Result: result})
	for _, s := range stores {
		r := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "llm-summary:evt_1", Lease: time.Minute})
		if r.Status != store.EffectAlreadyDone || string(r.Record.Result) != string(result) {
			t.Fatalf("after done: %+v", r)
		}
	}
}

func testEffectList(t *testing.T, s store.Store) {
	for i := range 5 {
		effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: fmt.Sprintf("stale-%d", i), Lease: time.Minute})
	}
	fresh := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "fresh", Lease: time.Hour})
	failed := effectOp(t, s, store.EffectOp{Kind: store.EffectClaim, Key: "failed", Lease: time.Minute})
	effectOp(t, s, store.EffectOp{Kind: store.EffectFail, Key: "failed", Token: failed.Record.Token, Error: "no", Retention: time.Hour})
	now := base.Add(2 * time.Minute)
	var keys []string
	after := ""
	for {
		page, err := s.ListEffects(context.Background(), store.EffectQuery{State: store.EffectPending, LeaseExpired: true, Now: now, After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			keys = append(keys, r.Key)
			if !r.LeaseExpired(now) {
				t.Errorf("%s listed as stale: %+v", r.Key, r)
			}
		}
		after = page[len(page)-1].Key
	}
	if fmt.Sprint(keys) != "[stale-0 stale-1 stale-2 stale-3 stale-4]" {
		t.Fatalf("stale list %v", keys)
	}
	// A prefix (a tenant's namespace) keeps its keys, after the cursor.
	for _, c := range []struct {
		q    store.EffectQuery
		want string
	}{
		{store.EffectQuery{Prefix: "stale-"}, "[stale-0 stale-1 stale-2 stale-3 stale-4]"},
		{store.EffectQuery{Prefix: "stale-", After: "stale-2", Limit: 1}, "[stale-3]"},
		{store.EffectQuery{Prefix: "f", State: store.EffectPending}, "[fresh]"},
		{store.EffectQuery{Prefix: "stale-9"}, "[]"},
		{store.EffectQuery{Prefix: "stale-", After: "stale-4"}, "[]"},
	} {
		list, err := s.ListEffects(context.Background(), c.q)
		var got []string
		for _, r := range list {
			got = append(got, r.Key)
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("list %+v: %v %v, want %s", c.q, got, err, c.want)
		}
	}
	if f, _ := s.ListEffects(context.Background(), store.EffectQuery{State: store.EffectFailed}); len(f) != 1 || f[0].Key != "failed" {
		t.Fatalf("failed list %+v", f)
	}
	// The counts the metrics export: by state, and the stale among pending.
	counts, err := s.EffectCounts(context.Background(), now)
	if err != nil || counts[store.EffectPending] != 6 || counts[store.EffectLeaseExpired] != 5 || counts[store.EffectFailed] != 1 || counts[store.EffectDone] != 0 {
		t.Fatalf("effect counts %v %v", counts, err)
	}
	// Final records are swept after their retention; pending ones never.
	if _, err := s.SweepExpired(context.Background(), base.Add(2*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Effect(context.Background(), "failed"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a failed record past its retention was kept: %v", err)
	}
	if _, err := s.Effect(context.Background(), fresh.Record.Key); err != nil {
		t.Fatalf("a pending record was swept: %v", err)
	}
	if st := stats(t, s); st.Effects[store.EffectPending] != 6 {
		t.Fatalf("stats %+v", st.Effects)
	}
}

// Hourly counters ride commits (even a commit of nothing else), add up per
// hour, and read back summed over every writer's shard.
func testRollups(t *testing.T, s store.Store) {
	ctx := context.Background()
	h1 := base.Truncate(time.Hour)
	h2 := h1.Add(time.Hour)
	commit := func(shard string, events []store.NewEvent, deltas ...store.StatDelta) {
		if _, err := s.Commit(ctx, store.Batch{Events: events, Stats: deltas, Shard: shard}); err != nil {
			t.Fatal(err)
		}
	}
	commit("a", []store.NewEvent{event("x", "d")},
		store.StatDelta{Hour: h1, Scope: store.ScopeSource, Name: "src", Metric: "events.accepted", Value: 1},
		store.StatDelta{Hour: h1, Scope: store.ScopeSource, Name: "src", Metric: "requests.accepted", Value: 1})
	commit("a", nil, store.StatDelta{Hour: h1, Scope: store.ScopeSource, Name: "src", Metric: "events.accepted", Value: 2})
	commit("b", nil,
		store.StatDelta{Hour: h1, Scope: store.ScopeSource, Name: "src", Metric: "events.accepted", Value: 4},
		store.StatDelta{Hour: h2, Scope: store.ScopeSource, Name: "src", Metric: "events.duplicate", Value: 3},
		store.StatDelta{Hour: h2, Scope: store.ScopeDestination, Name: "d", Metric: "attempts.delivered", Value: 5})
	got, err := s.Rollups(ctx, store.RollupQuery{From: h1, To: h2.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range got {
		lines = append(lines, fmt.Sprintf("%s %s %s %s=%d", r.Hour.UTC().Format("15h"), r.Scope, r.Name, r.Metric, r.Value))
	}
	want := "[03h source src events.accepted=7 03h source src requests.accepted=1 04h destination d attempts.delivered=5 04h source src events.duplicate=3]"
	if fmt.Sprint(lines) != want {
		t.Fatalf("rollups %v\nwant %s", lines, want)
	}
	if got, _ := s.Rollups(ctx, store.RollupQuery{Scope: store.ScopeSource, Name: "src", From: h2, To: h2.Add(time.Hour)}); len(got) != 1 || got[0].Value != 3 {
		t.Fatalf("filtered %+v", got)
	}
	if n, err := s.SweepRollups(ctx, h2); err != nil || n == 0 {
		t.Fatalf("sweep %d %v", n, err)
	}
	if got, _ := s.Rollups(ctx, store.RollupQuery{From: h1, To: h2.Add(time.Hour)}); len(got) != 2 {
		t.Fatalf("after the sweep %+v", got)
	}
}

// What a search by content reads: the events ListEvents would list, newest
// first and paged alike, each with its forwarded headers and its body byte
// for byte (hostile bytes included); IDs selects exactly those events,
// and an empty IDs none.
func testAdminEventContents(t *testing.T, s store.Store) {
	ctx := context.Background()
	bodies := [][]byte{
		[]byte(`{"customer":"cus_1","n":1}`),
		{0xff, 0xfe, 0, '\r', '\n', 0xed, 0xa0, 0x80},
		bytes.Repeat([]byte("x"), 1<<20),
	}
	index := map[int64]int{} // event id: its body's index
	for i, b := range bodies {
		e := event(fmt.Sprintf("evt_%d", i), "d1")
		e.Body = b
		e.Header = http.Header{"X-Shop": {fmt.Sprintf("shop-%d é", i)}}
		e.ReceivedAt = base.Add(time.Duration(i) * time.Minute)
		index[mustClaim(t, s, e)[0].EventID] = i
	}
	other := event("other_1")
	other.Source = "other"
	mustClaim(t, s, other)
	order := func(es []store.EventContent) []int {
		var out []int
		for _, e := range es {
			out = append(out, index[e.ID])
		}
		return out
	}

	page, err := s.EventContents(ctx, store.EventQuery{Source: "src", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := order(page); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("first page: events %v, want [2 1] (newest first)", got)
	}
	rest, err := s.EventContents(ctx, store.EventQuery{Source: "src", Limit: 2, Before: page[1].ID})
	if got := order(rest); err != nil || !slices.Equal(got, []int{0}) {
		t.Fatalf("second page: events %v, %v", got, err)
	}
	for _, e := range append(page, rest...) {
		i := index[e.ID]
		if !bytes.Equal(e.Body, bodies[i]) {
			t.Errorf("event %d: body of %d bytes, want %d byte for byte", i, len(e.Body), len(bodies[i]))
		}
		if got, want := e.Header.Get("X-Shop"), fmt.Sprintf("shop-%d é", i); got != want {
			t.Errorf("event %d: header %q, want %q", i, got, want)
		}
		if e.Source != "src" || !e.ReceivedAt.Equal(base.Add(time.Duration(i)*time.Minute)) {
			t.Errorf("event %d: source %q, received %s", i, e.Source, e.ReceivedAt)
		}
	}
	some, err := s.EventContents(ctx, store.EventQuery{IDs: []int64{page[0].ID, rest[0].ID}, Limit: 10})
	if got := order(some); err != nil || !slices.Equal(got, []int{2, 0}) {
		t.Fatalf("by ids: events %v, %v", got, err)
	}
	if none, err := s.EventContents(ctx, store.EventQuery{IDs: []int64{}, Limit: 10}); err != nil || len(none) != 0 {
		t.Fatalf("no ids selected %d events, %v", len(none), err)
	}
	if listed, err := s.ListEvents(ctx, store.EventQuery{IDs: []int64{rest[0].ID}}); err != nil || len(listed) != 1 || listed[0].Key != "evt_0" {
		t.Fatalf("ListEvents by ids: %+v, %v", listed, err)
	}
}

// The operator's view of events: newest first, filtered, paged by cursor,
// and one event whole, with each delivery's attempts and answers.
func testAdminEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := s
	for i := range 5 {
		e := event(fmt.Sprintf("evt_%d", i), "d1", "d2")
		e.ReceivedAt = base.Add(time.Duration(i) * time.Minute)
		mustClaim(t, s, e)
	}
	other := event("other_1")
	other.Source = "other"
	mustClaim(t, s, other)
	ds := lease(t, s, base.Add(time.Hour), time.Minute, 100)
	for _, d := range ds {
		switch {
		case d.Key == "evt_0" && d.Destination == "d1":
			complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDead, Attempt: 1, StatusCode: 422, Error: "permanent failure: HTTP 422",
				Response: `{"error":"unknown customer"}`, StartedAt: base, Duration: 40 * time.Millisecond})
		case d.Key == "evt_0" || d.Key == "evt_1":
			complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1, StatusCode: 200, StartedAt: base})
		default:
			complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeReleased, NextAttemptAt: base})
		}
	}
	keys := func(es []store.EventSummary) string {
		var k []string
		for _, e := range es {
			k = append(k, e.Key+"/"+e.State)
		}
		return fmt.Sprint(k)
	}
	page, err := a.ListEvents(ctx, store.EventQuery{Source: "src", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(page); got != "[evt_4/pending evt_3/pending]" {
		t.Fatalf("first page %s", got)
	}
	page2, _ := a.ListEvents(ctx, store.EventQuery{Source: "src", Limit: 2, Before: page[1].ID})
	if got := keys(page2); got != "[evt_2/pending evt_1/delivered]" {
		t.Fatalf("second page %s", got)
	}
	if got, _ := a.ListEvents(ctx, store.EventQuery{State: store.EventDead}); keys(got) != "[evt_0/dead]" {
		t.Fatalf("dead events %s", keys(got))
	}
	if got, _ := a.ListEvents(ctx, store.EventQuery{State: store.EventStored}); keys(got) != "[other_1/stored]" {
		t.Fatalf("stored events %s", keys(got))
	}
	if got, _ := a.ListEvents(ctx, store.EventQuery{KeyPrefix: "evt_1"}); keys(got) != "[evt_1/delivered]" {
		t.Fatalf("by key prefix %s", keys(got))
	}
	if got, _ := a.ListEvents(ctx, store.EventQuery{From: base.Add(2 * time.Minute), To: base.Add(4 * time.Minute)}); keys(got) != "[evt_3/pending evt_2/pending]" {
		t.Fatalf("by time %s", keys(got))
	}
	// A tenant's sources narrow a list (a name not stored is no match);
	// none selects nothing, never everything.
	if got, _ := a.ListEvents(ctx, store.EventQuery{Sources: []string{"other", "nosuch"}}); keys(got) != "[other_1/stored]" {
		t.Fatalf("by sources %s", keys(got))
	}
	if got, _ := a.ListEvents(ctx, store.EventQuery{Sources: []string{"src", "other"}, KeyPrefix: "evt_4"}); keys(got) != "[evt_4/pending]" {
		t.Fatalf("by sources and key prefix %s", keys(got))
	}
	if got, err := a.ListEvents(ctx, store.EventQuery{Sources: []string{}}); err != nil || len(got) != 0 {
		t.Fatalf("by no sources %s %v", keys(got), err)
	}
	if n, err := a.Replay(ctx, store.Replay{Events: store.EventQuery{Sources: []string{}}, Now: base, DryRun: true}); err != nil || n != 0 {
		t.Fatalf("a replay of no sources counts %d, %v", n, err)
	}
	dead, _ := a.ListEvents(ctx, store.EventQuery{State: store.EventDead})
	e, err := a.Event(ctx, dead[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Key != "evt_0" || string(e.Body) != `{"id":"evt_0"}` || e.Header.Get("X-GitHub-Event") != "push" || len(e.Deliveries) != 2 {
		t.Fatalf("event %+v", e)
	}
	d1 := e.Deliveries[0]
	if d1.Destination != "d1" || d1.State != store.Dead || len(d1.History) != 1 || d1.History[0].StatusCode != 422 ||
		d1.History[0].Response != `{"error":"unknown customer"}` || d1.History[0].Duration != 40*time.Millisecond {
		t.Fatalf("dead delivery %+v", d1)
	}
	if _, err := a.Event(ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown event: %v", err)
	}
	// A bulk replay selects by filter, not by page; a dry run counts.
	q := store.EventQuery{Source: "src", State: store.EventPending}
	n, err := a.Replay(ctx, store.Replay{Events: q, Now: base.Add(2 * time.Hour), DryRun: true, Audit: store.AuditEntry{Actor: "ops", Action: "replay", Target: "pending"}})
	if err != nil || n != 6 {
		t.Fatalf("dry run: %d %v, want the 6 deliveries of 3 pending events", n, err)
	}
	if got, _ := a.ListAudit(ctx, 0, 10); len(got) != 0 {
		t.Fatalf("a dry run was audited: %+v", got)
	}
	n, err = a.Replay(ctx, store.Replay{Events: store.EventQuery{KeyPrefix: "evt_1"}, Now: base.Add(2 * time.Hour), DryRun: false, Audit: store.AuditEntry{Actor: "ops", Action: "replay", Target: "key_prefix=evt_1"}})
	if err != nil || n != 2 {
		t.Fatalf("replay: %d %v", n, err)
	}
	if got, _ := a.ListAudit(ctx, 0, 10); len(got) != 1 || got[0].Actor != "ops" || got[0].Count != 2 || got[0].Action != "replay" {
		t.Fatalf("audit %+v", got)
	}
	if n, err := a.Replay(ctx, store.Replay{Events: store.EventQuery{ID: e.ID}, Now: base.Add(2 * time.Hour), DryRun: true, Audit: store.AuditEntry{}}); err != nil || n != 2 {
		t.Fatalf("one event's replay, dry run: %d %v", n, err)
	}
}

// The event type is stored as intake gave it, listed, and selects events
// exactly or by a prefix ending in *, on every backend.
func testEventType(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := s
	typed := func(key, typ string) store.NewEvent { e := event(key); e.Type = typ; return e }
	mustClaim(t, s, typed("a", "invoice.paid"), typed("b", "invoice.finalized"), typed("c", "charge.dispute.created"), typed("d", ""), typed("e", "invoicex"))
	for _, c := range []struct {
		q    string
		want []string
	}{{"invoice.paid", []string{"a"}}, {"invoice.*", []string{"b", "a"}}, {"charge.*", []string{"c"}}, {"*", []string{"e", "d", "c", "b", "a"}}, {"nope", nil}} {
		list, err := a.ListEvents(ctx, store.EventQuery{Type: c.q})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range list {
			got = append(got, e.Key)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("type %q: %q, want %q", c.q, got, c.want)
		}
	}
	list, _ := a.ListEvents(ctx, store.EventQuery{Key: "c", Source: "src"})
	if len(list) != 1 || list[0].Type != "charge.dispute.created" {
		t.Fatalf("listed %+v, want its type", list)
	}
	if e, err := a.Event(ctx, list[0].ID); err != nil || e.Type != "charge.dispute.created" {
		t.Fatalf("event %+v %v, want its type", e.EventSummary, err)
	}
	// The destinations that did not want an event stay with it; one that
	// no destination wanted is filtered, not merely stored.
	none, some := event("none"), event("some", "billing")
	none.Filtered, some.Filtered = []string{"billing", "fraud"}, []string{"fraud"}
	mustClaim(t, s, none, some, event("plain"))
	for key, want := range map[string]struct {
		state    string
		filtered []string
	}{"none": {store.EventFiltered, []string{"billing", "fraud"}}, "some": {store.EventPending, []string{"fraud"}}, "plain": {store.EventStored, nil}} {
		list, _ := a.ListEvents(ctx, store.EventQuery{Source: "src", Key: key})
		if len(list) != 1 || list[0].State != want.state {
			t.Fatalf("%s listed %+v, want state %s", key, list, want.state)
		}
		e, err := a.Event(ctx, list[0].ID)
		if err != nil || !slices.Equal(e.Filtered, want.filtered) {
			t.Fatalf("%s: filtered %q %v, want %q", key, e.Filtered, err, want.filtered)
		}
	}
	if list, _ := a.ListEvents(ctx, store.EventQuery{State: store.EventFiltered}); len(list) != 1 || list[0].Key != "none" {
		t.Fatalf("state=filtered selects %+v", list)
	}
	// An operator sends it where its filter did not: one new delivery,
	// due at once, audited; asking twice adds nothing.
	ev := list0(t, a, "none")
	n, err := a.AddDelivery(ctx, ev.ID, "fraud", base, store.AuditEntry{Actor: "ops", Action: "route", Target: "fraud"})
	if err != nil || n != 1 {
		t.Fatalf("AddDelivery = %d, %v", n, err)
	}
	if n, err := a.AddDelivery(ctx, ev.ID, "fraud", base, store.AuditEntry{Actor: "ops", Action: "route", Target: "fraud"}); err != nil || n != 0 {
		t.Fatalf("second AddDelivery = %d, %v; want 0", n, err)
	}
	if _, err := a.AddDelivery(ctx, 1<<40, "fraud", base, store.AuditEntry{Actor: "ops", Action: "route"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AddDelivery of no event: %v", err)
	}
	e, _ := a.Event(ctx, ev.ID)
	if e.State != store.EventPending || !slices.Equal(e.Filtered, []string{"billing"}) || len(e.Deliveries) != 1 || e.Deliveries[0].Destination != "fraud" {
		t.Fatalf("after AddDelivery: state %s, filtered %q, deliveries %+v", e.State, e.Filtered, e.Deliveries)
	}
	leased := lease(t, s, base, time.Minute, 10)
	found := false
	for _, d := range leased {
		found = found || (d.Key == "none" && d.Destination == "fraud")
	}
	if !found {
		t.Fatalf("the added delivery was never due: leased %+v", leased)
	}
}

func list0(t *testing.T, a store.Admin, key string) store.EventSummary {
	t.Helper()
	list, err := a.ListEvents(context.Background(), store.EventQuery{Source: "src", Key: key})
	if err != nil || len(list) != 1 {
		t.Fatalf("event %s: %+v %v", key, list, err)
	}
	return list[0]
}

func testAdminDead(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := s
	mustClaim(t, s, event("a", "d1", "d2"), event("b", "d1"), event("c", "d2"))
	for _, d := range lease(t, s, base, time.Minute, 10) {
		complete(t, s, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDead, Attempt: 1, StatusCode: 410, Error: "gone"})
	}
	all, err := a.ListDeadLetters(ctx, store.DeadQuery{Limit: 2})
	if err != nil || len(all) != 2 {
		t.Fatalf("dead letters %+v %v", all, err)
	}
	if none, err := a.ListDeadLetters(ctx, store.DeadQuery{Sources: []string{}}); err != nil || len(none) != 0 {
		t.Fatalf("dead letters of no sources %+v %v", none, err)
	}
	if n, err := a.PurgeDeadLetters(ctx, store.DeadQuery{Sources: []string{"other"}}, true, store.AuditEntry{}); err != nil || n != 0 {
		t.Fatalf("a dry purge of another source's dead letters counts %d, %v", n, err)
	}
	if src, err := a.ListDeadLetters(ctx, store.DeadQuery{Sources: []string{"other", "src"}, Limit: 10}); err != nil || len(src) != 4 {
		t.Fatalf("dead letters of src %+v %v", src, err)
	}
	more, _ := a.ListDeadLetters(ctx, store.DeadQuery{Limit: 10, Before: all[1].DeliveryID})
	if len(more) != 2 {
		t.Fatalf("second page %+v", more)
	}
	if q, err := a.Queues(ctx, base); err != nil || len(q) != 2 || q[0].Destination != "d1" || q[0].Dead != 2 || q[1].Dead != 2 || q[0].Pending != 0 {
		t.Fatalf("queues with dead letters %+v %v", q, err)
	}
	if n, _ := a.Replay(ctx, store.Replay{Destination: "d2", Dead: true, Now: base, DryRun: true, Audit: store.AuditEntry{}}); n != 2 {
		t.Fatalf("dry run %d", n)
	}
	n, err := a.Replay(ctx, store.Replay{Destination: "d2", Dead: true, Now: base.Add(time.Hour), DryRun: false, Audit: store.AuditEntry{Actor: "ops", Action: "retry", Target: "destination=d2"}})
	if err != nil || n != 2 {
		t.Fatalf("retry %d %v", n, err)
	}
	n, err = a.PurgeDeadLetters(ctx, store.DeadQuery{Destination: "d1"}, false, store.AuditEntry{Actor: "ops", Action: "purge", Target: "destination=d1"})
	if err != nil || n != 2 {
		t.Fatalf("purge %d %v", n, err)
	}
	if st := stats(t, s); st.Dead != 0 || st.Pending != 2 {
		t.Fatalf("stats %+v", st)
	}
	audit, _ := a.ListAudit(ctx, 0, 10)
	if len(audit) != 2 || audit[0].Action != "purge" || audit[1].Action != "retry" || audit[0].Count != 2 {
		t.Fatalf("audit %+v", audit)
	}
}

// A paused destination's deliveries are held, never dropped: no hand-off,
// no lease, no wake; intake keeps accepting; resuming makes them due.
func testAdminPause(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := s
	if err := a.SetPaused(ctx, "slow", true, base, store.AuditEntry{Actor: "ops", Action: "pause", Target: "slow"}); err != nil {
		t.Fatal(err)
	}
	p, err := a.Paused(ctx)
	if err != nil || len(p) != 1 || !p["slow"].Equal(base) {
		t.Fatalf("paused %v %v", p, err)
	}
	paused := []string{"slow"}
	c, err := s.Commit(ctx, store.Batch{Events: []store.NewEvent{event("a", "slow", "fast")}, Lease: store.Lease{Max: 10, Now: base, For: time.Minute, Held: paused}})
	if err != nil || len(c.Leased) != 1 || c.Leased[0].Destination != "fast" {
		t.Fatalf("hand-off with slow paused: %+v %v", c.Leased, err)
	}
	c, err = s.Commit(ctx, store.Batch{Lease: store.Lease{Max: 10, Due: true, Now: base.Add(30 * time.Second), For: time.Minute, Held: paused}})
	if err != nil || len(c.Leased) != 0 {
		t.Fatalf("due lease with slow paused: %+v %v", c.Leased, err)
	}
	if _, ok, _ := s.NextDue(ctx, paused); ok {
		// fast's delivery is leased until base+1m, which is due then: only
		// that may show.
		if next, _, _ := s.NextDue(ctx, paused); !next.Equal(base.Add(time.Minute)) {
			t.Fatalf("NextDue with slow paused: %v", next)
		}
	}
	q, err := a.Queues(ctx, base)
	if err != nil || len(q) != 2 || q[1].Destination != "slow" || q[1].Pending != 1 || q[0].Leased != 1 || !q[1].Oldest.Equal(base) {
		t.Fatalf("queues %+v %v", q, err)
	}
	if err := a.SetPaused(ctx, "slow", false, base, store.AuditEntry{Actor: "ops", Action: "resume", Target: "slow"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := a.Paused(ctx); len(p) != 0 {
		t.Fatalf("still paused %v", p)
	}
	c, err = s.Commit(ctx, store.Batch{Lease: store.Lease{Max: 10, Due: true, Now: base, For: time.Minute}})
	if err != nil || len(c.Leased) != 1 || c.Leased[0].Destination != "slow" {
		t.Fatalf("after resume: %+v %v", c.Leased, err)
	}
}

// A limit holds across replicas: three stores on one database, 30
// takers asking at once, get slots evenly spaced, never two alike.
func testRateAcrossReplicas(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const interval = 20 * time.Millisecond // 50/s
	var mu sync.Mutex
	var slots []time.Time
	var wg sync.WaitGroup
	for i := range 30 {
		f := stores[i%len(stores)]
		wg.Go(func() {
			for range 5 {
				at, taken, err := f.NextSlot(ctx, "crm", base, interval, time.Minute)
				if err != nil || !taken {
					t.Error(taken, err)
					return
				}
				mu.Lock()
				slots = append(slots, at)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
	for i, at := range slots {
		if want := base.Add(time.Duration(i) * interval); !at.Equal(want) {
			t.Fatalf("slot %d at %s, want %s: every slot once, %s apart from now", i, at.Sub(base), want.Sub(base), interval)
		}
	}
	// A destination idle for a while starts again from now, not from its
	// last slot; another destination has slots of its own.
	later := base.Add(time.Hour)
	if at, taken, _ := stores[1].NextSlot(ctx, "crm", later, interval, 0); !taken || !at.Equal(later) {
		t.Fatalf("after an idle hour the slot is %s (taken %v), want now", at.Sub(later), taken)
	}
	if at, taken, _ := stores[2].NextSlot(ctx, "other", base, interval, 0); !taken || !at.Equal(base) {
		t.Fatalf("another destination's first slot is %s (taken %v), want now", at.Sub(base), taken)
	}
}

// A slot beyond the caller's horizon is not taken, so not lost: however
// many replicas ask, the slots taken are exactly those within the
// horizon, and the next caller within reach gets the first one left. A
// cursor far ahead of now (a clock set back, or a version that took slots
// it then gave up) starts again from now.
func testRateSlotsBeyondTheHorizon(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const interval, horizon = 20 * time.Millisecond, 200 * time.Millisecond
	for _, rounds := range []int{1, 3} {
		dest := fmt.Sprintf("crm%d", rounds)
		var mu sync.Mutex
		var taken []time.Time
		var wg sync.WaitGroup
		for i := range 30 {
			f := stores[i%len(stores)]
			wg.Go(func() {
				for range rounds {
					at, ok, err := f.NextSlot(ctx, dest, base, interval, horizon)
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						if want := base.Add(horizon + interval); !at.Equal(want) {
							t.Errorf("a slot not taken is said to be free at %s, want %s", at.Sub(base), want.Sub(base))
						}
						continue
					}
					mu.Lock()
					taken = append(taken, at)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.SortFunc(taken, func(a, b time.Time) int { return a.Compare(b) })
		if len(taken) != int(horizon/interval)+1 {
			t.Fatalf("%d slots taken within a horizon of %s at %s apart, want %d", len(taken), horizon, interval, horizon/interval+1)
		}
		for i, at := range taken {
			if want := base.Add(time.Duration(i) * interval); !at.Equal(want) {
				t.Fatalf("slot %d at %s, want %s", i, at.Sub(base), want.Sub(base))
			}
		}
		// Later, the next caller gets the first slot nobody took.
		at, ok, err := stores[0].NextSlot(ctx, dest, base.Add(horizon), interval, horizon)
		if err != nil || !ok || !at.Equal(base.Add(horizon+interval)) {
			t.Fatalf("the first slot left: %s %v %v, want %s", at.Sub(base), ok, err, horizon+interval)
		}
	}
	f := stores[len(stores)-1]
	if _, ok, _ := f.NextSlot(ctx, "far", base.Add(time.Hour), interval, 0); !ok {
		t.Fatal("the first slot of a destination was not taken")
	}
	if at, ok, err := f.NextSlot(ctx, "far", base, interval, 0); err != nil || !ok || !at.Equal(base) {
		t.Fatalf("with the cursor an hour ahead of now the slot is %s (taken %v, %v), want now", at.Sub(base), ok, err)
	}
	if _, ok, _ := f.NextSlot(ctx, "far", base, interval, 0); ok {
		t.Fatal("a slot an interval ahead was taken with no horizon")
	}
}

// A breaker opens once however many replicas see the failures, lets one
// probe through after its cool-down, reopens if the probe fails, and
// closes (audited when an operator closes it).
func testBreaker(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	f := stores[0]
	b := store.Breaker{Destination: "crm", OpenedAt: base, Until: base.Add(time.Minute), Opens: 1, Reason: "HTTP 503"}
	var opened atomic.Int32
	var wg sync.WaitGroup
	for i := range 9 {
		ff := stores[i%len(stores)]
		wg.Go(func() {
			mine := b
			mine.Reason = fmt.Sprintf("HTTP 50%d", i)
			if _, ok, err := ff.OpenBreaker(ctx, mine, store.AuditEntry{}); err != nil {
				t.Error(err)
			} else if ok {
				opened.Add(1)
			}
		})
	}
	wg.Wait()
	if opened.Load() != 1 {
		t.Fatalf("opened %d times, want once", opened.Load())
	}
	all, err := f.Breakers(ctx)
	if err != nil || all["crm"].State != store.BreakerOpen || !all["crm"].Until.Equal(b.Until) {
		t.Fatalf("breakers %+v %v", all, err)
	}
	if ok, _ := f.ProbeBreaker(ctx, "crm", base.Add(30*time.Second), base.Add(40*time.Second)); ok {
		t.Fatal("a probe before the cool-down ended")
	}
	var probes atomic.Int32
	for i := range 9 {
		ff := stores[i%len(stores)]
		wg.Go(func() {
			if ok, err := ff.ProbeBreaker(ctx, "crm", base.Add(time.Minute), base.Add(2*time.Minute)); err != nil {
				t.Error(err)
			} else if ok {
				probes.Add(1)
			}
		})
	}
	wg.Wait()
	if probes.Load() != 1 {
		t.Fatalf("%d probes, want one", probes.Load())
	}
	again := store.Breaker{Destination: "crm", OpenedAt: base.Add(time.Minute), Until: base.Add(3 * time.Minute), Opens: 2, Reason: "timeout"}
	if stored, ok, err := f.OpenBreaker(ctx, again, store.AuditEntry{}); err != nil || !ok || stored.Opens != 2 || stored.State != store.BreakerOpen {
		t.Fatalf("a failed probe reopens: %+v %v %v", stored, ok, err)
	}
	// A prober that went quiet (killed mid-probe) does not hold it forever:
	// once its deadline passes, another replica may probe.
	if ok, _ := stores[1].ProbeBreaker(ctx, "crm", base.Add(3*time.Minute), base.Add(4*time.Minute)); !ok {
		t.Fatal("no probe after the reopened cool-down")
	}
	if ok, _ := stores[2].ProbeBreaker(ctx, "crm", base.Add(4*time.Minute), base.Add(5*time.Minute)); !ok {
		t.Fatal("a quiet prober holds the breaker forever")
	}
	// A probe's close (no audit) closes only a half-open breaker: one an
	// operator (or another replica) opened meanwhile stays open.
	manual := store.Breaker{Destination: "crm", OpenedAt: base, Until: base.Add(100 * time.Hour), Opens: 1, Reason: "opened by ops"}
	if _, ok, err := f.OpenBreaker(ctx, manual, store.AuditEntry{Actor: "ops", Action: "breaker_open", Target: "destination crm"}); err != nil || !ok {
		t.Fatalf("an operator's open over a half-open breaker: %v %v", ok, err)
	}
	if err := stores[2].CloseBreaker(ctx, "crm", base, store.AuditEntry{}); err != nil {
		t.Fatal(err)
	}
	if all, _ := f.Breakers(ctx); all["crm"].State != store.BreakerOpen || all["crm"].Reason != "opened by ops" {
		t.Fatalf("a late probe's close undid an operator's open: %+v", all)
	}
	if err := f.CloseBreaker(ctx, "crm", base, store.AuditEntry{Actor: "ops", Action: "breaker_close", Target: "destination crm"}); err != nil {
		t.Fatal(err)
	}
	if all, _ := f.Breakers(ctx); len(all) != 0 {
		t.Fatalf("closed, yet %+v", all)
	}
	if audit, _ := stores[0].ListAudit(ctx, 0, 5); len(audit) != 2 || audit[0].Action != "breaker_close" || audit[1].Action != "breaker_open" {
		t.Fatalf("audit %+v", audit)
	}
}

// testSkippedByTransformation: a delivery its destination's transformation
// skipped is done (never leased again, nothing pending, not a dead letter,
// swept with its window), recorded as one attempt with the outcome skipped,
// and an attempt's script and sent digests are kept as the worker gave them.
func testSkippedByTransformation(t *testing.T, s store.Store) {
	ctx := context.Background()
	claims := mustClaim(t, s, event("skip", "d"), event("sent", "d"))
	ds := lease(t, s, base, time.Minute, 10)
	if len(ds) != 2 {
		t.Fatalf("leased %d", len(ds))
	}
	for _, d := range ds {
		o := store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1, StatusCode: 200,
			StartedAt: base, ScriptDigest: "sha256:script", SentDigest: "sha256:sent-" + d.Key}
		if d.Key == "skip" {
			o.Kind, o.StatusCode, o.Error = store.OutcomeSkipped, 0, "skipped by the transformation"
		}
		complete(t, s, o)
	}
	if again := lease(t, s, base.Add(time.Hour), time.Minute, 10); len(again) != 0 {
		t.Fatalf("leased again after the outcomes: %+v", again)
	}
	if st := stats(t, s); st.Pending != 0 || st.Dead != 0 || st.Delivered != 1 || st.Attempts != 2 {
		t.Fatalf("stats %+v: want the skipped delivery neither pending, nor dead, nor delivered", st)
	}
	a := s
	for _, c := range claims {
		e, err := a.Event(ctx, c.EventID)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Deliveries) != 1 || len(e.Deliveries[0].History) != 1 {
			t.Fatalf("%s: %+v", e.Key, e.Deliveries)
		}
		d, h := e.Deliveries[0], e.Deliveries[0].History[0]
		wantState, wantOutcome := store.Delivered, "delivered"
		if e.Key == "skip" {
			wantState, wantOutcome = store.Skipped, "skipped"
		}
		if d.State != wantState || h.Outcome != wantOutcome || h.ScriptDigest != "sha256:script" || h.SentDigest != "sha256:sent-"+e.Key {
			t.Errorf("%s: state %s, attempt %+v; want %s, outcome %s, the digests kept", e.Key, d.State, h, wantState, wantOutcome)
		}
	}
	dead, err := a.ListDeadLetters(ctx, store.DeadQuery{Limit: 10})
	if err != nil || len(dead) != 0 {
		t.Errorf("dead letters %+v %v: a skipped delivery is not one", dead, err)
	}
	// Listed, the event the script skipped says so: "delivered" would say
	// it reached its destination. One that reached another destination as
	// well is delivered.
	mixed := mustClaim(t, s, event("mixed", "d", "e"))[0]
	for _, d := range lease(t, s, base, time.Minute, 10) {
		o := store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1, StatusCode: 200, StartedAt: base}
		if d.Destination == "d" {
			o.Kind, o.StatusCode = store.OutcomeSkipped, 0
		}
		complete(t, s, o)
	}
	listed, err := a.ListEvents(ctx, store.EventQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range listed {
		states[e.Key] = e.State
	}
	if want := map[string]string{"skip": store.EventSkipped, "sent": store.EventDelivered, "mixed": store.EventDelivered}; !maps.Equal(states, want) {
		t.Errorf("listed states %v, want %v", states, want)
	}
	if e, err := a.Event(ctx, mixed.EventID); err != nil || e.State != store.EventDelivered {
		t.Errorf("the event delivered to one destination and skipped by the other: %q %v", e.State, err)
	}
	if got, err := a.ListEvents(ctx, store.EventQuery{State: store.EventSkipped, Limit: 10}); err != nil || len(got) != 1 || got[0].Key != "skip" {
		t.Errorf("state skipped lists %+v %v, want the one event the script skipped", got, err)
	}
	if n, err := s.SweepExpired(ctx, base.Add(2*time.Hour), 100); err != nil || n != 3 {
		t.Errorf("swept %d (%v) after the window, want all three: a skipped delivery keeps nothing back", n, err)
	}
}

// testHistoryInOrder: an operator reads a delivery's attempts as they were
// made, all of them, whichever way the store keeps them (a first success
// on the delivery's row, every other attempt a row of its own, #30): a
// first success; a replay's success after it; a retry then a success; a
// dead letter, then its retry's success. Stats counts each attempt once.
func testHistoryInOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	claims := mustClaim(t, s, event("once", "d"), event("flaky", "d"), event("dead", "d"))
	ids := map[string]int64{}
	for i, k := range []string{"once", "flaky", "dead"} {
		ids[k] = claims[i].EventID
	}
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	outcome := func(d store.LeasedDelivery, kind store.OutcomeKind, status, min int, response string) store.Outcome {
		return store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: kind, Attempt: d.Attempt, StatusCode: status,
			StartedAt: at(min), Duration: time.Duration(10+min) * time.Millisecond, Response: response, NextAttemptAt: at(min + 1),
			SentDigest: fmt.Sprintf("sha256:%d", min)}
	}
	for _, d := range lease(t, s, base, time.Minute, 10) {
		switch d.Key {
		case "once":
			complete(t, s, outcome(d, store.OutcomeDelivered, 200, 0, "ok"))
		case "flaky":
			complete(t, s, outcome(d, store.OutcomeRetry, 503, 0, "busy"))
		case "dead":
			complete(t, s, outcome(d, store.OutcomeDead, 422, 0, "no such customer"))
		}
	}
	for _, d := range lease(t, s, at(1), time.Minute, 10) {
		if d.Key != "flaky" || d.Attempt != 2 {
			t.Fatalf("leased %s attempt %d at minute 1, want flaky's second attempt", d.Key, d.Attempt)
		}
		complete(t, s, outcome(d, store.OutcomeDelivered, 201, 1, "done"))
	}
	for _, k := range []string{"once", "dead"} {
		if n, err := replay(t, s, store.Replay{Events: store.EventQuery{ID: ids[k]}, Now: at(2)}); err != nil || n != 1 {
			t.Fatalf("replay %s = %d, %v", k, n, err)
		}
	}
	for _, d := range lease(t, s, at(2), time.Minute, 10) {
		if d.Attempt != 1 {
			t.Fatalf("replayed %s leased as attempt %d, want 1", d.Key, d.Attempt)
		}
		complete(t, s, outcome(d, store.OutcomeDelivered, 202, 2, "again"))
	}
	type step struct {
		attempt, status int
		outcome         string
		min             int
		response        string
	}
	want := map[string][]step{
		"once":  {{1, 200, "delivered", 0, "ok"}, {1, 202, "delivered", 2, "again"}},
		"flaky": {{1, 503, "retry", 0, "busy"}, {2, 201, "delivered", 1, "done"}},
		"dead":  {{1, 422, "dead", 0, "no such customer"}, {1, 202, "delivered", 2, "again"}},
	}
	for k, steps := range want {
		e, err := s.Event(ctx, ids[k])
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Deliveries) != 1 {
			t.Fatalf("%s: %d deliveries", k, len(e.Deliveries))
		}
		d := e.Deliveries[0]
		if d.State != store.Delivered {
			t.Errorf("%s: state %s, want delivered", k, d.State)
		}
		var got []step
		for _, h := range d.History {
			got = append(got, step{h.Attempt, h.StatusCode, h.Outcome, int(h.StartedAt.Sub(base) / time.Minute), h.Response})
			if min := int(h.StartedAt.Sub(base) / time.Minute); h.Duration != time.Duration(10+min)*time.Millisecond ||
				h.SentDigest != fmt.Sprintf("sha256:%d", min) || !h.StartedAt.Equal(at(min)) {
				t.Errorf("%s: attempt %+v: duration, digest or start not as recorded", k, h)
			}
		}
		if !reflect.DeepEqual(got, steps) {
			t.Errorf("%s: history %+v, want %+v", k, got, steps)
		}
	}
	if st := stats(t, s); st.Attempts != 6 || st.Delivered != 3 {
		t.Errorf("stats %+v: want 6 attempts, 3 delivered", st)
	}
}

// testCommitContextEnded: a commit whose context has ended (cancelled, or
// past its deadline, as the group committer's timeout ends one) stores
// nothing and says so, and the same events commit afterwards, new. SQLite
// watches the context on the transaction, not statement by statement.
func testCommitContextEnded(t *testing.T, s store.Store) {
	batch := store.Batch{Events: []store.NewEvent{event("evt_late", "d")}, Lease: store.Lease{Max: 1, Now: base, For: time.Minute}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Commit(ctx, batch); err == nil {
		t.Fatal("a commit whose context had ended succeeded")
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := s.Commit(ctx, batch); err == nil {
		t.Fatal("a commit past its deadline succeeded")
	}
	c, err := s.Commit(context.Background(), batch)
	if err != nil || len(c.Claims) != 1 || c.Claims[0].Duplicate || len(c.Leased) != 1 {
		t.Fatalf("the same event after the refused commits: %+v, %v; want it new, stored and handed off", c, err)
	}
}
