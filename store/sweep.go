package store

import (
	"context"
	"time"
)

// SweepStep is one step of a sweep: it removes up to limit things whose
// time ended before now, and returns how many.
type SweepStep func(ctx context.Context, now time.Time, limit int) (int, error)

// Sweeper is a backend's steps of SweepExpired, each in its own SQL; Sweep
// runs them in the one order every backend keeps.
type Sweeper struct {
	// Events deletes events whose window ended and that no delivery keeps
	// back (pending, or dead-lettered for the operator).
	Events SweepStep
	// Effects deletes final effect records past their retention.
	Effects SweepStep
	// OrderHeads deletes what is kept of entities whose last delivered
	// event's window ended and that have nothing pending.
	OrderHeads SweepStep
	// Bodies drops the bodies of events past their BodyExpiresAt under
	// Events' rule (no delivery needs them); the events and keys stay.
	Bodies SweepStep
}

// Sweep runs w's steps in order: events first, so that the bodies step
// never empties an event the same sweep deletes; then effects and order
// heads; then bodies. It stops at the first step that fails, and returns
// the most any step removed (callers loop while it is limit).
func (w Sweeper) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	most := 0
	for _, step := range []SweepStep{w.Events, w.Effects, w.OrderHeads, w.Bodies} {
		n, err := step(ctx, now, limit)
		most = max(most, n)
		if err != nil {
			return most, err
		}
	}
	return most, nil
}
