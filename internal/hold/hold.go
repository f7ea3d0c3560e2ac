// Package hold owns one decision: which destinations' deliveries wait now.
// A held delivery is neither handed off nor leased, and stays pending:
// held, never dropped. Today a destination is held while an operator has
// it paused (stored, so it survives restarts and applies to every replica);
// a rate limit or an open circuit breaker would be more reasons here, and
// the writer, the worker and the store would not change.
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
	log   *slog.Logger
	held  atomic.Pointer[[]string]

	mu      sync.Mutex
	release []func()
}

// New returns the holds of s's destinations. It reads them once before it
// returns: a pause survives restarts, so not one delivery may slip out
// while a gateway starts. A store without operator queries holds nothing.
func New(ctx context.Context, s store.Store, log *slog.Logger) (*Holds, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Holds{log: log}
	h.held.Store(&[]string{})
	if a, ok := store.AdminOf(s); ok {
		h.admin = a
		if err := h.Refresh(ctx); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Held returns the destinations whose deliveries wait now, in order.
func (h *Holds) Held() []string { return *h.held.Load() }

// OnRelease calls fn whenever a destination stops being held: its waiting
// deliveries are due, and a worker should look at once.
func (h *Holds) OnRelease(fn func()) {
	h.mu.Lock()
	h.release = append(h.release, fn)
	h.mu.Unlock()
}

// Refresh reads the stored pauses now.
func (h *Holds) Refresh(ctx context.Context) error {
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
