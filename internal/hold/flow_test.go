package hold_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/hold"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

func openStore(t testing.TB) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Two holders on one store (two replicas) admit attempts to a 50/s
// destination at most 50 in any second, measured when Admit lets them go.
func TestRateSpacesSendsAcrossHolders(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	policies := map[string]hold.Policy{"crm": {Rate: 50, Per: time.Second}}
	var holders []*hold.Holds
	for range 2 {
		h, err := hold.New(ctx, s, hold.Options{Policies: policies})
		if err != nil {
			t.Fatal(err)
		}
		holders = append(holders, h)
	}
	var mu sync.Mutex
	var sent []time.Time
	var wg sync.WaitGroup
	for i := range 75 {
		wg.Go(func() {
			if ok, _ := holders[i%2].Admit(ctx, "crm", time.Time{}); ok {
				mu.Lock()
				sent = append(sent, time.Now())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(sent) != 75 {
		t.Fatalf("admitted %d of 75 (each waits for its slot, at most 1.5 s)", len(sent))
	}
	slices.SortFunc(sent, func(a, b time.Time) int { return a.Compare(b) })
	// The slots are 20 ms apart, 51 of them span a second; a time here is
	// taken when its sender woke, which a loaded machine (the race
	// detector, CI, two cores shared) delays by up to a few hundred ms,
	// bunching wake-ups that were due apart. Unlimited, 51 sends would
	// take a few ms, not half a second.
	for i := 0; i+50 < len(sent); i++ {
		if span := sent[i+50].Sub(sent[i]); span < 500*time.Millisecond {
			t.Fatalf("51 sends within %s: over 50/s", span)
		}
	}
}

// A breaker opens on consecutive failures, holds, lets exactly one probe
// through after its cool-down, and closes when the probe succeeds; a 4xx
// is no failure; a 429's Retry-After holds the destination.
func TestBreakerHoldsProbesAndCloses(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	var clock atomic.Int64
	start := time.Now()
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	h, err := hold.New(ctx, s, hold.Options{Now: now, Policies: map[string]hold.Policy{
		"crm": {Breaker: hold.BreakerPolicy{Failures: 3, Cooldown: 30 * time.Second}},
		"app": {},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var woken atomic.Int32
	h.OnRelease(func() { woken.Add(1) })
	fail := deliver.GateOutcome{Failure: true, Reason: "HTTP 503"}
	for range 2 {
		h.Report(ctx, "crm", fail)
	}
	h.Report(ctx, "crm", deliver.GateOutcome{}) // a 410: the event's problem, not a failure of the destination
	if slices.Contains(h.Held(), "crm") {
		t.Fatal("held after 2 failures and a 4xx, with a threshold of 3")
	}
	h.Report(ctx, "crm", fail)
	if !slices.Contains(h.Held(), "crm") || slices.Contains(h.Held(), "app") {
		t.Fatalf("after 3 failures held %q, want crm alone", h.Held())
	}
	if ok, at := h.Admit(ctx, "crm", time.Time{}); ok || at.Sub(start) < 29*time.Second {
		t.Fatalf("Admit while open: %v until %s", ok, at.Sub(start))
	}
	if b, _ := s.Breakers(ctx); b["crm"].State != store.BreakerOpen || b["crm"].Reason != "HTTP 503" {
		t.Fatalf("stored breaker %+v", b)
	}
	// The cool-down ends: the refresh wins the probe; one attempt goes.
	clock.Add(int64(31 * time.Second))
	if err := h.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(h.Held(), "crm") {
		t.Fatal("still held when its probe may go")
	}
	if ok, _ := h.Admit(ctx, "crm", time.Time{}); !ok {
		t.Fatal("the probe was not admitted")
	}
	if ok, _ := h.Admit(ctx, "crm", time.Time{}); ok || !slices.Contains(h.Held(), "crm") {
		t.Fatal("a second attempt went while the probe was out")
	}
	before := woken.Load()
	h.Report(ctx, "crm", deliver.GateOutcome{Success: true})
	if slices.Contains(h.Held(), "crm") || woken.Load() == before {
		t.Fatal("the probe succeeded, yet the breaker holds (or nobody was woken)")
	}
	if b, _ := s.Breakers(ctx); len(b) != 0 {
		t.Fatalf("stored breakers after closing: %+v", b)
	}
	// A 429 with Retry-After holds the whole destination that long.
	h.Report(ctx, "app", deliver.GateOutcome{Failure: true, RetryAfter: 10 * time.Second})
	if !slices.Contains(h.Held(), "app") {
		t.Fatal("a 429's Retry-After did not hold the destination")
	}
	clock.Add(int64(11 * time.Second))
	if slices.Contains(h.Held(), "app") {
		t.Fatal("still held after the Retry-After")
	}
}

// A destination's concurrency: at most N attempts admitted at once; the
// next is given back and the destination held until one reports.
func TestConcurrencyHoldsUntilAnAttemptReports(t *testing.T) {
	ctx := context.Background()
	h, err := hold.New(ctx, openStore(t), hold.Options{Policies: map[string]hold.Policy{"crm": {Concurrency: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if ok, _ := h.Admit(ctx, "crm", time.Time{}); !ok {
			t.Fatal("refused within the bound")
		}
	}
	if ok, _ := h.Admit(ctx, "crm", time.Time{}); ok || !slices.Contains(h.Held(), "crm") {
		t.Fatal("a third attempt went, or the full destination is not held")
	}
	h.Report(ctx, "crm", deliver.GateOutcome{Success: true})
	if slices.Contains(h.Held(), "crm") {
		t.Fatal("still held after an attempt reported")
	}
	if ok, _ := h.Admit(ctx, "crm", time.Time{}); !ok {
		t.Fatal("a freed slot was not given")
	}
}

// A probe that never reports (its attempt hung past the deadline) does not
// hold the breaker half-open forever: this process probes again. And an
// operator's open during a probe wins over the probe's late success.
func TestProbeDeadlineAndAnOperatorsOpen(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	h, err := hold.New(ctx, s, hold.Options{Now: now, Policies: map[string]hold.Policy{"crm": {Breaker: hold.BreakerPolicy{Failures: 1, Cooldown: time.Second}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.Report(ctx, "crm", deliver.GateOutcome{Failure: true, Reason: "HTTP 503"})
	clock.Add(int64(2 * time.Second))
	h.Refresh(ctx)
	if ok, _ := h.Admit(ctx, "crm", time.Time{}); !ok {
		t.Fatal("no probe after the cool-down")
	}
	// The probe hangs past its deadline (a minute): a new one is due.
	clock.Add(int64(2 * time.Minute))
	h.Refresh(ctx)
	if ok, _ := h.Admit(ctx, "crm", time.Time{}); !ok {
		t.Fatal("a quiet probe held the breaker half-open forever")
	}
	// An operator opens it by hand while this probe is out; the probe's
	// success comes late and must not close what the operator opened.
	if _, _, err := s.OpenBreaker(ctx, store.Breaker{Destination: "crm", OpenedAt: now(), Until: now().Add(time.Hour), Opens: 1, Reason: "opened by ops"},
		store.AuditEntry{Actor: "ops", Action: "breaker_open", Target: "destination crm"}); err != nil {
		t.Fatal(err)
	}
	h.Report(ctx, "crm", deliver.GateOutcome{Success: true})
	if b, _ := s.Breakers(ctx); b["crm"].State != store.BreakerOpen || !slices.Contains(h.Held(), "crm") {
		t.Fatalf("after the operator's open and a late probe success: %+v, held %q", b, h.Held())
	}
}

// A breaker that failures opened holds nothing once the destination's
// breaker is turned off, by a reload or across a restart: with the breaker
// off no outcome is counted, so no probe would ever close it, and the
// destination stayed held (one probe a minute) however healthy it was. One
// an operator opened by hand still holds.
func TestBreakerTurnedOffReleasesWhatItHeld(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	on := map[string]hold.Policy{"crm": {Breaker: hold.BreakerPolicy{Failures: 1}}}
	off := map[string]hold.Policy{"crm": {Breaker: hold.BreakerPolicy{Off: true}}}
	h, err := hold.New(ctx, s, hold.Options{Policies: on})
	if err != nil {
		t.Fatal(err)
	}
	h.Report(ctx, "crm", deliver.GateOutcome{Failure: true, Reason: "HTTP 500"})
	if !slices.Contains(h.Held(), "crm") {
		t.Fatal("the breaker did not open")
	}
	var woken atomic.Int32
	h.OnRelease(func() { woken.Add(1) })
	if err := h.Configure(ctx, off); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(h.Held(), "crm") || woken.Load() == 0 {
		t.Fatalf("breaker: {off: true} reloaded, yet crm is held (%q) or nobody was woken", h.Held())
	}
	if ok, _ := h.Admit(ctx, "crm", time.Time{}); !ok {
		t.Fatal("not admitted with the breaker off")
	}
	h.Report(ctx, "crm", deliver.GateOutcome{Success: true})
	if b, _ := s.Breakers(ctx); len(b) != 0 {
		t.Fatalf("stored breakers with the breaker off: %+v", b)
	}
	if entries, err := s.ListAudit(ctx, 0, 10); err != nil || len(entries) != 1 || entries[0].Action != "breaker_close" || entries[0].Actor != "config" {
		t.Fatalf("audit after the config closed the breaker: %+v, %v", entries, err)
	}

	// Across a restart: a breaker stored open, a gateway starting with it off.
	h2, err := hold.New(ctx, s, hold.Options{Policies: on})
	if err != nil {
		t.Fatal(err)
	}
	h2.Report(ctx, "crm", deliver.GateOutcome{Failure: true, Reason: "HTTP 500"})
	h3, err := hold.New(ctx, s, hold.Options{Policies: off})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(h3.Held(), "crm") {
		t.Fatal("started with breaker: {off: true}, yet held by a breaker opened before")
	}

	// Opened by hand: it holds, breaker off or not, until closed by hand.
	now := time.Now()
	if _, _, err := s.OpenBreaker(ctx, store.Breaker{Destination: "crm", OpenedAt: now, Until: now.Add(store.ManualBreaker), Opens: 1, Reason: "opened by ops"},
		store.AuditEntry{Actor: "ops", Action: "breaker_open", Target: "destination crm"}); err != nil {
		t.Fatal(err)
	}
	if err := h3.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(h3.Held(), "crm") {
		t.Fatal("a breaker opened by hand stopped holding because the policy is off")
	}
	if b, _ := s.Breakers(ctx); b["crm"].State != store.BreakerOpen {
		t.Fatalf("a breaker opened by hand was closed: %+v", b)
	}
}
