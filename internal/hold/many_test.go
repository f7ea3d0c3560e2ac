package hold_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/hold"
	"github.com/oncehook/oncehook/store"
)

// policies are n destinations with the gateway's defaults: a breaker each,
// and a bound on the attempts in flight.
func policies(n int) map[string]hold.Policy {
	out := make(map[string]hold.Policy, n)
	for i := range n {
		out[fmt.Sprintf("d%05d", i)] = hold.Policy{Concurrency: 2}
	}
	return out
}

// Among many destinations, Held names exactly the ones held: a 429's
// Retry-After until it passes, a destination at its bound of attempts in
// flight until one reports, a breaker opened by failures, and one an
// operator opened on the store (another replica's change) once refreshed;
// a reload that lowers a bound below the attempts in flight holds it.
func TestHeldNamesTheHeldAmongManyDestinations(t *testing.T) {
	for _, n := range []int{5, 100, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t)
			now := time.Now()
			clock := func() time.Time { return now }
			h, err := hold.New(ctx, s, hold.Options{Policies: policies(n), Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Held(); len(got) != 0 {
				t.Fatalf("nothing happened: held %q", got)
			}
			admit := func(d string) {
				t.Helper()
				if ok, _ := h.Admit(ctx, d, time.Time{}); !ok {
					t.Fatalf("%s not admitted", d)
				}
			}
			// A 429 with Retry-After: 30 s on d00000.
			admit("d00000")
			h.Report(ctx, "d00000", deliver.GateOutcome{Failure: true, RetryAfter: 30 * time.Second})
			// d00001 at its bound of 2.
			admit("d00001")
			admit("d00001")
			// d00002's breaker opened by 10 failures in a row.
			for range 10 {
				admit("d00002")
				h.Report(ctx, "d00002", deliver.GateOutcome{Failure: true, Reason: "503"})
			}
			if got, want := h.Held(), []string{"d00000", "d00001", "d00002"}; !slices.Equal(got, want) {
				t.Fatalf("held %q, want %q", got, want)
			}
			h.Report(ctx, "d00001", deliver.GateOutcome{Success: true})
			now = now.Add(31 * time.Second) // the Retry-After is over; the breaker's 30 s cool-down too
			if got, want := h.Held(), []string{"d00002"}; !slices.Equal(got, want) {
				t.Fatalf("after the Retry-After and a report: held %q, want %q", got, want)
			}
			last := fmt.Sprintf("d%05d", n-1)
			if _, _, err := s.OpenBreaker(ctx, store.Breaker{Destination: last, OpenedAt: now, Until: now.Add(time.Hour), Opens: 1, Reason: "manual"},
				store.AuditEntry{Actor: "ops", Action: "breaker_open", Target: last}); err != nil {
				t.Fatal(err)
			}
			if err := h.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			got := h.Held()
			if !slices.Contains(got, last) || slices.Contains(got, "d00000") || slices.Contains(got, "d00001") {
				t.Fatalf("after an operator opened %s's breaker on the store: held %q", last, got)
			}
			// d00003 with one attempt in flight; a reload lowers its bound to 1.
			admit("d00003")
			p := policies(n)
			p["d00003"] = hold.Policy{Concurrency: 1}
			if err := h.Configure(ctx, p); err != nil {
				t.Fatal(err)
			}
			if got := h.Held(); !slices.Contains(got, "d00003") {
				t.Fatalf("bound lowered to the attempts in flight: held %q, want d00003 among them", got)
			}
		})
	}
}

// Held is asked at every commit: what it costs must not grow with the
// destinations configured, only with the ones that may hold.
func BenchmarkHeld(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("destinations=%d", n), func(b *testing.B) {
			ctx := context.Background()
			h, err := hold.New(ctx, openStore(b), hold.Options{Policies: policies(n)})
			if err != nil {
				b.Fatal(err)
			}
			// One destination with an attempt in flight, as under traffic.
			h.Admit(ctx, "d00000", time.Time{})
			b.ResetTimer()
			for b.Loop() {
				h.Held()
			}
		})
	}
}
