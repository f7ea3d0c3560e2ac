package hold_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/hold"
	"github.com/oncehook/oncehook/store"
)

// A pause stored before a gateway starts holds from its first commit; a
// resume releases, and says so once.
func TestHoldsFollowTheStoredPauses(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	now := time.Now()
	for _, d := range []string{"crm", "billing"} {
		if err := s.SetPaused(ctx, d, true, now, store.AuditEntry{Actor: "ops", Action: "pause", Target: d}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := hold.New(ctx, s, hold.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Held(); !slices.Equal(got, []string{"billing", "crm"}) {
		t.Fatalf("held at start %q, want both paused destinations", got)
	}
	var released atomic.Int32
	h.OnRelease(func() { released.Add(1) })
	if err := s.SetPaused(ctx, "crm", false, now, store.AuditEntry{Actor: "ops", Action: "resume", Target: "crm"}); err != nil {
		t.Fatal(err)
	}
	if got := h.Held(); len(got) != 2 || released.Load() != 0 {
		t.Fatalf("before a refresh: held %q, released %d; want the old set", got, released.Load())
	}
	h.Changed(ctx)
	h.Changed(ctx)
	if got := h.Held(); !slices.Equal(got, []string{"billing"}) || released.Load() != 1 {
		t.Fatalf("after the resume: held %q, released %d times; want billing alone, one release", got, released.Load())
	}
}

// A destination the config names no more is held once the worker finds
// one of its deliveries, alongside the paused ones, until a config names
// it again; then it is released, and says so.
func TestUnconfiguredDestinationIsHeldUntilConfiguredAgain(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	if err := s.SetPaused(ctx, "billing", true, time.Now(), store.AuditEntry{Actor: "ops", Action: "pause", Target: "billing"}); err != nil {
		t.Fatal(err)
	}
	h, err := hold.New(ctx, s, hold.Options{Policies: map[string]hold.Policy{"app": {}, "billing": {}}})
	if err != nil {
		t.Fatal(err)
	}
	var released atomic.Int32
	h.OnRelease(func() { released.Add(1) })
	h.Unconfigured("audit")
	h.Unconfigured("audit") // once is enough
	if got := h.Held(); !slices.Equal(got, []string{"audit", "billing"}) {
		t.Fatalf("held %q, want audit (unconfigured) and billing (paused)", got)
	}
	// A reload that still lacks audit keeps it held.
	if err := h.Configure(ctx, map[string]hold.Policy{"app": {Rate: 10}, "billing": {}}); err != nil {
		t.Fatal(err)
	}
	if got := h.Held(); !slices.Equal(got, []string{"audit", "billing"}) || released.Load() != 0 {
		t.Fatalf("after a reload without audit: held %q, released %d", got, released.Load())
	}
	if err := h.Configure(ctx, map[string]hold.Policy{"app": {}, "audit": {}, "billing": {}}); err != nil {
		t.Fatal(err)
	}
	if got := h.Held(); !slices.Equal(got, []string{"billing"}) || released.Load() == 0 {
		t.Fatalf("after audit came back: held %q, released %d; want billing alone, a release", got, released.Load())
	}
}

// Found from outside: a destination removed by a reload while deliveries wait in this process for their
// rate slots is held as a pause holds it: none of them is sent once it is out of the config (before, each
// went at its slot, up to 16 slots' worth after the reload). One configured again by the same reload's
// successor gets a flow of its own, and its waiting deliveries go back to be leased anew.
func TestARemovedDestinationSendsNothingThatWaitedForItsSlot(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	h, err := hold.New(ctx, s, hold.Options{Policies: map[string]hold.Policy{"crm": {Rate: 2, Per: time.Second}, "app": {}}})
	if err != nil {
		t.Fatal(err)
	}
	var admitted, refused atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if ok, _ := h.Admit(ctx, "crm", time.Time{}); ok {
				admitted.Add(1)
				h.Report(ctx, "crm", deliver.GateOutcome{Success: true})
			} else {
				refused.Add(1)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // the first slot is now; the others are 0.5, 1 and 1.5 s away
	if err := h.Configure(ctx, map[string]hold.Policy{"app": {}}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if admitted.Load() > 1 || refused.Load() < 3 {
		t.Fatalf("after crm left the config: %d admitted, %d refused; want at most the first slot's one", admitted.Load(), refused.Load())
	}
}
