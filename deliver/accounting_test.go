package deliver_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
)

// Invariant 6's bound: every delivery reaches the dead letters after
// max_attempts attempts, however its attempts end. Before leases counted
// attempts, a lease shorter than the attempt redelivered one event 11 times
// in 10 s, up to 3 at once, with 0 attempts on record; and a delivery that
// killed its worker every time was retried forever.

// A lease shorter than the destination takes to answer: each attempt is
// cut before its lease expires, so no two ever overlap, and each counts.
func TestLeaseShorterThanTheAttemptStillDeadLetters(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	var mu sync.Mutex
	inflight, most := 0, 0
	sink.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		mu.Unlock()
		defer func() { mu.Lock(); inflight--; mu.Unlock() }()
		select {
		case <-time.After(2500 * time.Millisecond):
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
		}
	}
	claim(t, s, "evt_slow", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL, Timeout: 10 * time.Second,
		Retry: deliver.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}, time.Second)
	st := waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
	if st.Attempts != 3 || st.Delivered != 0 {
		t.Fatalf("stats %+v: want 3 attempts on record, then a dead letter", st)
	}
	ds := sink.Deliveries()
	if len(ds) != 3 {
		t.Fatalf("the destination saw %d attempts, want 3", len(ds))
	}
	for i, d := range ds {
		if d.Attempt != fmt.Sprint(i+1) || d.Key != "src:evt_slow" {
			t.Errorf("attempt %d arrived as X-Oncehook-Attempt %s, key %s", i+1, d.Attempt, d.Key)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 1 {
		t.Fatalf("%d attempts of one event ran at once", most)
	}
}

// A delivery whose attempts kill their worker (simulated: leased, then
// never heard of again) is counted on each lease, and the worker that leases
// it past max_attempts dead-letters it without another attempt.
func TestDeliveryThatKillsItsWorkerEveryTimeIsDeadLettered(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	claim(t, s, "evt_poison", "app")
	for i := range 3 {
		ds, err := store.LeaseDeliveries(context.Background(), s, time.Now(), 50*time.Millisecond, 10)
		if err != nil || len(ds) != 1 || ds[0].Attempt != i+1 {
			t.Fatalf("crash %d: leased %+v (%v)", i+1, ds, err)
		}
		time.Sleep(60 * time.Millisecond) // the worker is gone; its lease expires
	}
	runWorker(t, s, deliver.Destination{URL: sink.URL,
		Retry: deliver.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}, time.Minute)
	waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
	if n := len(sink.Deliveries()); n != 0 {
		t.Fatalf("a fourth attempt was made (%d requests) past max_attempts 3", n)
	}
}

// A destination that accepts the connection and never answers: each
// attempt times out, counts, and the delivery is dead after max_attempts.
func TestDestinationThatNeverAnswersIsDeadLettered(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	sink.Respond = func(_ http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }
	claim(t, s, "evt_void", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL, Timeout: 200 * time.Millisecond,
		Retry: deliver.RetryPolicy{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}, time.Minute)
	st := waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
	if st.Attempts != 4 || len(sink.Deliveries()) != 4 {
		t.Fatalf("stats %+v, %d requests: want 4 attempts, then a dead letter", st, len(sink.Deliveries()))
	}
}
