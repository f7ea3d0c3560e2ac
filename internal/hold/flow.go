package hold

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/store"
)

// Policy is one destination's flow control: a rate shared by every
// replica, and a circuit breaker. Both hold the destination's deliveries
// (no attempt spent, nothing dead-lettered) rather than drop them.
type Policy struct {
	// Rate sends per Per at most, across every replica; 0: no limit.
	Rate int
	Per  time.Duration
	// Concurrency bounds the attempts in flight to the destination from
	// this process (per replica); 0: only delivery.concurrency bounds them.
	Concurrency int
	// Breaker opens on Failures consecutive failed attempts, or on a
	// failure ratio of at least FailureRatio over Window once MinAttempts
	// were made in it; then it holds for Cooldown, doubling on each reopen
	// up to MaxCooldown. Off turns it off.
	Breaker BreakerPolicy
}

// BreakerPolicy configures a destination's breaker.
type BreakerPolicy struct {
	Off          bool
	Failures     int           // default 10
	FailureRatio float64       // default 0.5
	Window       time.Duration // default 1 minute
	MinAttempts  int           // default 20
	Cooldown     time.Duration // default 30 s
	MaxCooldown  time.Duration // default 10 minutes
}

func (b *BreakerPolicy) defaults() {
	if b.Failures <= 0 {
		b.Failures = 10
	}
	if b.FailureRatio <= 0 {
		b.FailureRatio = 0.5
	}
	if b.Window <= 0 {
		b.Window = time.Minute
	}
	if b.MinAttempts <= 0 {
		b.MinAttempts = 20
	}
	if b.Cooldown <= 0 {
		b.Cooldown = 30 * time.Second
	}
	if b.MaxCooldown <= 0 {
		b.MaxCooldown = 10 * time.Minute
	}
}

// cooldown is how long the opens-th opening in a row holds.
func (b BreakerPolicy) cooldown(opens int) time.Duration {
	d := b.Cooldown
	for i := 1; i < opens && d < b.MaxCooldown; i++ {
		d *= 2
	}
	return min(d, b.MaxCooldown)
}

// probeTimeout is how long a half-open breaker waits for its prober's
// report before another replica may probe: the prober may have died.
const probeTimeout = time.Minute

// flow is one destination's state in this process.
type flow struct {
	policy Policy

	slotMu sync.Mutex // one NextSlot at a time (see slot)

	mu       sync.Mutex
	until    time.Time // held until then (the rate's slots are far off, or a Retry-After)
	inFlight int       // attempts admitted and not yet reported

	consecutive   int
	statsAt       time.Time
	attempts, bad int
	breaker       store.Breaker // as last read or written; State "" is closed
	probing       bool          // this process won the probe
	probeOut      bool          // and has let it through
}

// heldLocked reports whether f holds its destination at now: a hold until
// a time, its attempts in flight at its bound, or a breaker open (or
// half-open, unless this process is about to send the probe). f.mu is
// held. Only a change to f can make it true (time passing only ends a
// hold): each such change tells Holds.watch.
func (f *flow) heldLocked(now time.Time) bool {
	if now.Before(f.until) {
		return true
	}
	if f.policy.Concurrency > 0 && f.inFlight >= f.policy.Concurrency {
		return true
	}
	switch f.breaker.State {
	case store.BreakerOpen:
		return true
	case store.BreakerHalfOpen:
		return !f.probing || f.probeOut
	}
	return false
}

// Admit decides whether destination may be sent to now, for an attempt
// that must start by latest (its lease must outlast it; zero: no bound).
// When not, the delivery is given back, no attempt spent, due again at the
// time it returns (the worker releases its lease).
func (h *Holds) Admit(ctx context.Context, destination string, latest time.Time) (bool, time.Time) {
	f := (*h.flows.Load())[destination]
	if f == nil {
		return true, time.Time{}
	}
	now := h.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Before(f.until) {
		return false, f.until
	}
	switch f.breaker.State {
	case store.BreakerOpen:
		return false, f.breaker.Until
	case store.BreakerHalfOpen:
		if !f.probing || f.probeOut {
			return false, now.Add(Refresh)
		}
	}
	if f.policy.Concurrency > 0 && f.inFlight >= f.policy.Concurrency {
		// Full: given back, due again shortly; the destination is held
		// (the writer leases no more of it) until an attempt reports.
		return false, now.Add(100 * time.Millisecond)
	}
	probe := f.breaker.State == store.BreakerHalfOpen
	if probe {
		f.probeOut = true // the one probe; the rest wait for its answer
		h.watch(destination, f)
		h.changed()
	}
	f.inFlight++
	if f.policy.Concurrency > 0 && f.inFlight >= f.policy.Concurrency {
		h.watch(destination, f)
	}
	if f.policy.Rate == 0 {
		return true, time.Time{}
	}
	interval := f.policy.Per / time.Duration(f.policy.Rate)
	f.mu.Unlock()
	ok, at := h.slot(ctx, destination, f, interval, now, latest)
	f.mu.Lock()
	if !ok {
		f.inFlight--
		if probe {
			f.probeOut = false // no slot, so no probe went: the next attempt is it
		}
	}
	return ok, at
}

// Lookahead is how far ahead of now an attempt takes its destination's
// send slot, at least (and LookaheadSlots intervals, up to
// store.MaxSlotAhead and what the attempt's lease leaves): while the
// slots within it are taken, the deliveries that will send at them wait
// in this process, and the next ones are leased while those wait, so no
// slot passes unused while deliveries are due. The deliveries a lease
// brings beyond the slots within reach go back (no attempt spent), so a
// slow destination's reach spans many slots: each lease then feeds it
// several.
const (
	Lookahead      = 2 * time.Second
	LookaheadSlots = 16
)

// slot takes the destination's next send slot (see store.Flow's NextSlot)
// when it starts within the lookahead, and before latest, and waits for
// it: a slot taken is used, never given up (unless the process stops).
// A slot further off is not taken, so it is not lost: the delivery goes
// back, and the destination is held (the writer leases no more of it)
// until half the lookahead is free again; the deliveries waiting in the
// meantime send at the rate.
//
// Taking the slot further off and giving the delivery back with it is
// what stopped backlogs: each lease batch ran the slots ahead by its
// size, the deliveries were pushed after them, and so on, with nothing
// sent.
func (h *Holds) slot(ctx context.Context, destination string, f *flow, interval time.Duration, now, latest time.Time) (bool, time.Time) {
	horizon := min(max(Lookahead, LookaheadSlots*interval), store.MaxSlotAhead)
	if !latest.IsZero() {
		horizon = max(0, min(horizon, latest.Sub(now)))
	}
	// One at a time per destination in this process: once the slots
	// within reach are taken, the rest of a lease batch learns it here
	// (f.until), not from one store round trip each.
	f.slotMu.Lock()
	f.mu.Lock()
	until := f.until
	f.mu.Unlock()
	if now.Before(until) {
		f.slotMu.Unlock()
		return false, until
	}
	at, taken, err := h.flow.NextSlot(ctx, destination, now, interval, horizon)
	if err != nil {
		f.slotMu.Unlock()
		h.log.Warn("rate limit: the store did not answer; holding", "destination", destination, "err", err)
		return false, now.Add(time.Second)
	}
	if !taken {
		due := at.Add(-horizon / 2)
		f.mu.Lock()
		if due.After(f.until) {
			f.until = due
			h.watch(destination, f)
			h.changedAt(due)
		}
		f.mu.Unlock()
		f.slotMu.Unlock()
		return false, due
	}
	f.slotMu.Unlock()
	if wait := at.Sub(h.now()); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false, at
		case <-t.C:
		}
	}
	// Paused, its breaker opened, or removed from the config while it
	// waited: the attempt does not go (its slot passes, but nothing is due
	// for a held destination).
	if h.stopped(destination, f) {
		return false, h.now()
	}
	return true, time.Time{}
}

// stopped reports whether destination was paused, or its breaker opened,
// since an attempt was admitted, or a reload took it out of the config (f
// is no longer its flow): a removed destination's deliveries are held.
func (h *Holds) stopped(destination string, f *flow) bool {
	if slices.Contains(*h.paused.Load(), destination) || (*h.flows.Load())[destination] != f {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.breaker.State == store.BreakerOpen || (f.breaker.State == store.BreakerHalfOpen && !f.probing)
}

// Report counts how an attempt to destination ended: a success closes a
// probing breaker, failures open one, a 429's Retry-After holds the
// destination.
func (h *Holds) Report(ctx context.Context, destination string, o deliver.GateOutcome) {
	f := (*h.flows.Load())[destination]
	if f == nil {
		return
	}
	now := h.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight > 0 {
		if f.inFlight--; f.policy.Concurrency > 0 && f.inFlight == f.policy.Concurrency-1 {
			h.changed() // a slot is free: the writer may lease again
		}
	}
	if o.RetryAfter > 0 {
		if t := now.Add(o.RetryAfter); t.After(f.until) {
			f.until = t
			h.watch(destination, f)
			h.changedAt(t)
		}
	}
	if f.policy.Breaker.Off {
		return
	}
	if now.Sub(f.statsAt) > f.policy.Breaker.Window {
		f.statsAt, f.attempts, f.bad = now, 0, 0
	}
	probe := f.probing && f.probeOut
	switch {
	case o.Success:
		f.consecutive = 0
		f.attempts++
		if probe {
			if err := h.flow.CloseBreaker(ctx, destination, now, store.AuditEntry{}); err != nil {
				h.log.Warn("breaker: could not close", "destination", destination, "err", err)
				f.probeOut = false // probe again
				return
			}
			// The store has the last word: an operator may have opened it
			// while the probe was out, and the close then left it open.
			f.breaker, f.probing, f.probeOut = store.Breaker{}, false, false
			if stored, err := h.flow.Breakers(ctx); err == nil {
				f.breaker = stored[destination]
				h.watch(destination, f) // an operator's open, kept
			}
			if f.breaker.State == "" {
				h.log.Info("breaker closed: the probe succeeded", "destination", destination)
			}
			h.changed()
		}
	case o.Failure:
		f.consecutive++
		f.attempts++
		f.bad++
		p := f.policy.Breaker
		tripped := f.consecutive >= p.Failures || (f.attempts >= p.MinAttempts && float64(f.bad)/float64(f.attempts) >= p.FailureRatio)
		if probe || (tripped && f.breaker.State == "") {
			opens := 1
			if probe {
				opens = f.breaker.Opens + 1
			}
			b := store.Breaker{Destination: destination, OpenedAt: now, Until: now.Add(p.cooldown(opens)), Opens: opens, Reason: o.Reason}
			stored, opened, err := h.flow.OpenBreaker(ctx, b, store.AuditEntry{})
			if err != nil {
				h.log.Warn("breaker: could not open", "destination", destination, "err", err)
				return
			}
			if opened {
				h.log.Warn("breaker opened: deliveries are held", "destination", destination, "failures", f.consecutive,
					"until", stored.Until.Format(time.RFC3339), "reason", o.Reason)
			}
			f.breaker, f.probing, f.probeOut = stored, false, false
			f.consecutive, f.attempts, f.bad = 0, 0, 0
			h.watch(destination, f)
			h.changed()
		}
	default:
		if probe {
			f.probeOut = false // a probe that said nothing (a 4xx, a shutdown): send another
			h.changed()
		}
	}
}

// refreshBreakers reads every breaker: another replica may have opened,
// closed or reopened one; and an open one whose cool-down is over is
// probed, by the one replica the store lets.
func (h *Holds) refreshBreakers(ctx context.Context) error {
	flows := *h.flows.Load()
	if len(flows) == 0 {
		return nil
	}
	stored, err := h.flow.Breakers(ctx)
	if err != nil {
		return fmt.Errorf("read breakers: %w", err)
	}
	now := h.now()
	for dest, f := range flows {
		b, ok := stored[dest]
		f.mu.Lock()
		off := f.policy.Breaker.Off
		f.mu.Unlock()
		if ok && off && !b.Manual() {
			// The breaker is off: one that failures opened before (a
			// reload turned it off, or the config did across a restart)
			// holds nothing. This process reports no outcome to it any
			// more, so no probe would ever close it: close it now, in the
			// audit log as the config's doing. One an operator opened by
			// hand still holds until closed by hand.
			audit := store.AuditEntry{Actor: "config", Action: "breaker_close", Target: "destination " + dest + " (breaker: off)"}
			if err := h.flow.CloseBreaker(ctx, dest, now, audit); err != nil {
				return fmt.Errorf("close breaker of %s (its breaker is off): %w", dest, err)
			}
			h.log.Info("breaker closed: the destination's breaker is off", "destination", dest)
			ok = false
		}
		f.mu.Lock()
		was := f.breaker.State
		switch {
		case !ok:
			f.breaker, f.probing, f.probeOut = store.Breaker{}, false, false
		case f.probing && b.State == store.BreakerHalfOpen && now.Before(b.Until):
			// This process's probe, within its deadline: keep it.
		default:
			// Anything else is the store's word: an operator opened it,
			// another replica reopened it, or this probe's deadline passed
			// without a report (a new probe is due below).
			f.breaker, f.probing, f.probeOut = b, false, false
		}
		if f.breaker.State != "" {
			h.watch(dest, f)
		}
		probeDue := ok && !f.probing && !now.Before(b.Until)
		f.mu.Unlock()
		if probeDue {
			won, err := h.flow.ProbeBreaker(ctx, dest, now, now.Add(probeTimeout))
			if err != nil {
				return fmt.Errorf("probe breaker: %w", err)
			}
			if won {
				f.mu.Lock()
				f.breaker.State, f.breaker.Until, f.probing, f.probeOut = store.BreakerHalfOpen, now.Add(probeTimeout), true, false
				f.mu.Unlock()
				h.log.Info("breaker half-open: sending one probe", "destination", dest)
			}
		}
		if was != "" && !ok || probeDue {
			h.changed()
		}
	}
	return nil
}
