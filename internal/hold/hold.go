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
	admin  store.Admin
	flow   store.Flow
	log    *slog.Logger
	now    func() time.Time
	paused atomic.Pointer[[]string]         // by an operator: one of the reasons a destination is held
	flows  atomic.Pointer[map[string]*flow] // the destinations with flow control

	// watched are the flows that may hold their destination now, by
	// destination: every change that can make a flow hold (a time to wait
	// until, its attempts in flight at its bound, a breaker not closed)
	// adds it, under the flow's lock; Held drops the ones that no longer
	// hold. Held is asked on every commit: it looks at these, not at every
	// destination's flow (10,000 destinations made each commit take
	// 10,000 locks). Lock order: a flow's mu, then watchMu.
	watchMu sync.Mutex
	watched map[*flow]string

	mu      sync.Mutex
	release []func()
	// removed are the destinations not configured that still have
	// deliveries (the worker found them: Unconfigured), held until a
	// config names them again (Configure).
	removed atomic.Pointer[[]string]
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
// while a gateway starts.
func New(ctx context.Context, s store.Store, opts Options) (*Holds, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Holds{log: opts.Logger, now: opts.Now, watched: map[*flow]string{}}
	h.paused.Store(&[]string{})
	h.removed.Store(&[]string{})
	h.admin, h.flow = s, s
	h.setPolicies(opts.Policies)
	if err := h.Refresh(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// Configure replaces the destinations' policies (a config reload): a
// destination that keeps flow control keeps its state (its breaker, its
// attempts in flight) under the new policy; one removed from the config
// with deliveries pending stays held (Unconfigured), and one configured
// again is released. The store's breakers are read again at once.
func (h *Holds) Configure(ctx context.Context, policies map[string]Policy) error {
	h.setPolicies(policies)
	h.mu.Lock()
	removed := slices.DeleteFunc(slices.Clone(*h.removed.Load()), func(d string) bool {
		_, ok := policies[d]
		return ok
	})
	back := len(removed) < len(*h.removed.Load())
	h.removed.Store(&removed)
	h.mu.Unlock()
	err := h.Refresh(ctx)
	if back {
		h.changed()
	}
	return err
}

// setPolicies makes the flows of policies, reusing the ones that exist.
func (h *Holds) setPolicies(policies map[string]Policy) {
	old := map[string]*flow{}
	if p := h.flows.Load(); p != nil {
		old = *p
	}
	next := map[string]*flow{}
	now := h.now()
	for dest, p := range policies {
		if p.Rate > 0 && p.Per <= 0 {
			p.Per = time.Second
		}
		p.Breaker.defaults()
		if f := old[dest]; f != nil {
			f.mu.Lock()
			f.policy = p
			if f.heldLocked(now) { // a bound lowered below its attempts in flight
				h.watch(dest, f)
			}
			f.mu.Unlock()
			next[dest] = f
			continue
		}
		next[dest] = &flow{policy: p}
	}
	h.flows.Store(&next)
}

// Unconfigured holds destination, which has deliveries and is in no
// config (the worker found one): from now on none is leased, until a
// config names it again (Configure). It says so once.
func (h *Holds) Unconfigured(destination string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	removed := *h.removed.Load()
	if slices.Contains(removed, destination) {
		return
	}
	next := append(slices.Clone(removed), destination)
	slices.Sort(next)
	h.removed.Store(&next)
	h.log.Warn("held: the destination is not in the config; its pending deliveries wait until it is configured again", "destination", destination)
}

// Paused returns the destinations an operator paused, in order (of the
// reasons Held gives, the one that stops what is already leased from
// going out: the others are flow control, which Admit applied to it).
func (h *Holds) Paused() []string { return *h.paused.Load() }

// watch says f, destination's flow, may hold it now (Held looks at it).
// f.mu is held.
func (h *Holds) watch(destination string, f *flow) {
	h.watchMu.Lock()
	h.watched[f] = destination
	h.watchMu.Unlock()
}

// watchedFlow is one of Holds.watched.
type watchedFlow struct {
	f    *flow
	dest string
}

// Held returns the destinations whose deliveries wait now, in order. It
// costs the flows that may hold (watched), not the destinations.
func (h *Holds) Held() []string {
	paused, removed := *h.paused.Load(), *h.removed.Load()
	h.watchMu.Lock()
	if len(h.watched) == 0 && len(removed) == 0 {
		h.watchMu.Unlock()
		return paused
	}
	watched := make([]watchedFlow, 0, len(h.watched))
	for f, dest := range h.watched {
		watched = append(watched, watchedFlow{f, dest})
	}
	h.watchMu.Unlock()
	flows := *h.flows.Load()
	now := h.now()
	var out []string
	for _, w := range watched {
		w.f.mu.Lock()
		held := w.f.heldLocked(now) && flows[w.dest] == w.f // a flow a reload removed holds nothing
		if !held {
			// Under the flow's lock, so that a change making it hold
			// again (watch) comes after this.
			h.watchMu.Lock()
			delete(h.watched, w.f)
			h.watchMu.Unlock()
		}
		w.f.mu.Unlock()
		if held && !slices.Contains(paused, w.dest) {
			out = append(out, w.dest)
		}
	}
	if out == nil && len(removed) == 0 {
		return paused
	}
	out = append(out, paused...)
	for _, d := range removed {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
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
	paused, err := h.admin.Paused(ctx)
	if err != nil {
		return fmt.Errorf("read paused destinations: %w", err)
	}
	now := make([]string, 0, len(paused))
	for d := range paused {
		now = append(now, d)
	}
	slices.Sort(now)
	old := h.paused.Swap(&now)
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
