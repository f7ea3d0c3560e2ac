// Package hold owns one decision: which destinations' deliveries wait now.
// A held delivery is neither handed off nor leased, and stays pending:
// held, never dropped. A destination is held while an operator has it
// paused, while its rate limit's window is spent, for a 429's Retry-After,
// and while its circuit breaker is open; pauses, rate windows and breakers
// live in the store, so every replica obeys them and they survive a
// restart. The writer asks Held before each lease; the worker asks Admit
// before each attempt (a delivery leased just before a hold began is given
// back, no attempt spent) and Reports how each ended.
package hold

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncehook/oncehook/store"
)

// Refresh is how often the stored pauses are read: how long a pause or a
// resume made on another replica (or by the CLI on the store) takes to
// apply here. One made through this process applies at once (Changed).
const Refresh = 2 * time.Second

// Holds knows the held destinations. Held is called on every commit and
// every idle wait, so it reads memory; Refresh reads the store.
type Holds struct {
	admin store.Admin
	flow  store.Flow
	log   *slog.Logger
	now   func() time.Time
	held  atomic.Pointer[[]string] // the paused ones
	flows map[string]*flow         // the destinations with flow control

	mu      sync.Mutex
	release []func()
}

// Options configure Holds.
type Options struct {
	// Policies are the destinations' flow control (a rate, a breaker);
	// a destination without one is held only when paused.
	Policies map[string]Policy
	Logger   *slog.Logger
	Now      func() time.Time
}

// New returns the holds of s's destinations. It reads them once before it
// returns: a pause survives restarts, so not one delivery may slip out
// while a gateway starts. A store without operator queries holds nothing.
func New(ctx context.Context, s store.Store, opts Options) (*Holds, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Holds{log: opts.Logger, now: opts.Now, flows: map[string]*flow{}}
	h.held.Store(&[]string{})
	h.admin, _ = store.AdminOf(s)
	if f, ok := store.FlowOf(s); ok {
		h.flow = f
		for dest, p := range opts.Policies {
			if p.Rate > 0 && p.Per <= 0 {
				p.Per = time.Second
			}
			p.Breaker.defaults()
			h.flows[dest] = &flow{policy: p}
		}
	}
	if err := h.Refresh(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// Held returns the destinations whose deliveries wait now, in order.
func (h *Holds) Held() []string {
	paused := *h.held.Load()
	if len(h.flows) == 0 {
		return paused
	}
	now := h.now()
	var out []string
	for dest, f := range h.flows {
		if f.heldNow(now) && !slices.Contains(paused, dest) {
			out = append(out, dest)
		}
	}
	if out == nil {
		return paused
	}
	out = append(out, paused...)
	slices.Sort(out)
	return out
}

// changed says the holds changed: a worker should look again now (a
// release lets deliveries out; a new hold gives back what is leased).
func (h *Holds) changed() {
	h.mu.Lock()
	fns := slices.Clone(h.release)
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// changedAt calls changed when a hold that ends at t is over.
func (h *Holds) changedAt(t time.Time) {
	time.AfterFunc(time.Until(t)+time.Millisecond, h.changed)
}

// OnRelease calls fn whenever a destination stops being held: its waiting
// deliveries are due, and a worker should look at once.
func (h *Holds) OnRelease(fn func()) {
	h.mu.Lock()
	h.release = append(h.release, fn)
	h.mu.Unlock()
}

// Refresh reads the stored pauses and breakers now.
func (h *Holds) Refresh(ctx context.Context) error {
	if err := h.refreshBreakers(ctx); err != nil {
		return err
	}
	if h.admin == nil {
		return nil
	}
	paused, err := h.admin.Paused(ctx)
	if err != nil {
		return fmt.Errorf("read paused destinations: %w", err)
	}
	now := make([]string, 0, len(paused))
	for d := range paused {
		now = append(now, d)
	}
	slices.Sort(now)
	old := h.held.Swap(&now)
	for _, d := range *old {
		if !slices.Contains(now, d) {
			h.mu.Lock()
			fns := slices.Clone(h.release)
			h.mu.Unlock()
			for _, fn := range fns {
				fn()
			}
			break
		}
	}
	return nil
}

// Changed applies an operator's change made through this process at once
// (a pause holds from the next commit; a resume releases).
func (h *Holds) Changed(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := h.Refresh(ctx); err != nil {
		h.log.Warn("refresh held destinations", "err", err)
	}
}

// Run refreshes every Refresh until ctx ends.
func (h *Holds) Run(ctx context.Context) {
	t := time.NewTicker(Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.Refresh(ctx); err != nil && ctx.Err() == nil {
				h.log.Warn("refresh held destinations", "err", err)
			}
		}
	}
}
