package store

import (
	"context"
	"time"
)

// Flow is what flow control keeps in the store, so that every replica
// obeys one limit and one breaker per destination: a rate limit's next
// send time, and each destination's circuit breaker. The store decides
// (an atomic update), as it decides claims. It is part of Store.
type Flow interface {
	// NextSlot takes destination's next send slot, the later of now and
	// the slot after the last one taken (by any replica), interval apart,
	// when it starts within horizon of now; it returns the slot's time and
	// true. Sends made at their slots are evenly spaced: any span of a
	// second holds at most one second's worth, however many replicas send.
	//
	// A slot further off is not taken: NextSlot returns when it starts and
	// false, and the caller comes back nearer then. A taken slot is one its
	// taker waits for and uses, so none is lost while deliveries wait
	// (taking slots a caller then gave up ran the slots far ahead of the
	// deliveries, and a backlog stopped). A cursor more than
	// MaxSlotAhead+interval ahead of now is one nobody waits for (left by
	// a version that took slots it gave up, or a clock set back): it
	// starts again from now.
	NextSlot(ctx context.Context, destination string, now time.Time, interval, horizon time.Duration) (time.Time, bool, error)

	// Breakers returns the breakers that are not closed, by destination.
	Breakers(ctx context.Context) (map[string]Breaker, error)
	// OpenBreaker opens destination's breaker until b.Until, unless it is
	// open already (another replica saw the failures first): it returns
	// the breaker as stored, and whether this call opened it. A breaker
	// half-open (its probe failed) opens again. audit, when its Action is
	// set (an operator opened it), is written with it.
	OpenBreaker(ctx context.Context, b Breaker, audit AuditEntry) (Breaker, bool, error)
	// ProbeBreaker moves a breaker whose Until passed at now (an open one
	// at the end of its cool-down, or a half-open one whose prober went
	// quiet) to half-open until deadline, for the one caller it returns
	// true to: that caller sends one probe delivery, and reports it with
	// CloseBreaker or OpenBreaker.
	ProbeBreaker(ctx context.Context, destination string, now, deadline time.Time) (bool, error)
	// CloseBreaker closes destination's breaker: when a probe succeeded
	// only a half-open one (an operator's open since stays open), and when
	// an operator says so (audit's Action set, written with it) any.
	CloseBreaker(ctx context.Context, destination string, now time.Time, audit AuditEntry) error
}

// MaxSlotAhead is the longest horizon a NextSlot caller may take a slot
// within: no one waits longer for a send slot.
const MaxSlotAhead = time.Minute

// Breaker states. A closed breaker is no row at all.
const (
	BreakerOpen     = "open"      // held until Until
	BreakerHalfOpen = "half_open" // one probe is out
)

// Breaker is one destination's circuit breaker, as stored.
type Breaker struct {
	Destination string
	State       string
	OpenedAt    time.Time
	Until       time.Time // when an open breaker lets a probe through
	Opens       int       // how many times in a row it opened: the cool-down grows with it
	Reason      string    // what opened it: the last failure, for the operator
}

// ManualBreaker is how long a breaker an operator opened by hand holds:
// until the operator closes it.
const ManualBreaker = 100 * 365 * 24 * time.Hour

// Manual reports whether an operator opened b by hand (it holds until
// closed by hand), rather than failures.
func (b Breaker) Manual() bool {
	return b.State != "" && b.Until.Sub(b.OpenedAt) >= ManualBreaker/2
}
