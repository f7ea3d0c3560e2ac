package idempotency

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/effect"
)

// A 409's Retry-After says when the running request is likely to be done,
// so that a client retrying on it gets the answer, neither a second 409
// nor a wait of the whole lease (a minute by default, renewed while the
// request runs, so what is left of it said nothing about a 3 s call). It
// is what a typical request of this API took (the 90th percentile of the
// last ones this process answered) less how long the running one has run;
// one that has already run longer than that, or the first one, is given
// as long again as it has run. Either way it is at most what is left of
// the lease (a retry after it runs the request again), at least 1 s, at
// most 60.

// paceSamples is how many of the last answered requests' durations are
// kept.
const paceSamples = 64

// pace keeps how long this middleware's requests take and when the ones
// running in this process started.
type pace struct {
	mu      sync.Mutex
	took    [paceSamples]time.Duration
	n       int                  // samples taken, ever
	running map[string]time.Time // ledger key → when its request started here
}

// start notes that the request of key began now.
func (p *pace) start(key string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.running = map[string]time.Time{}
	}
	p.running[key] = now
}

// end notes that the request of key ended; answered, its duration counts
// toward the typical one.
func (p *pace) end(key string, answered bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if started, ok := p.running[key]; ok && answered {
		p.took[p.n%paceSamples] = now.Sub(started)
		p.n++
	}
	delete(p.running, key)
}

// typical is the 90th percentile of the durations kept; false before any.
func (p *pace) typical() (time.Duration, bool) {
	p.mu.Lock()
	n := min(p.n, paceSamples)
	took := slices.Clone(p.took[:n])
	p.mu.Unlock()
	if n == 0 {
		return 0, false
	}
	slices.Sort(took)
	return took[(n*9+9)/10-1], true
}

// startedAt is when the request of key began, if it runs in this process.
func (p *pace) startedAt(key string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.running[key]
	return t, ok
}

// retryAfter is the Retry-After, in seconds, of a 409 for key, whose lease
// ends at leaseEnds. A request running in another process (a replica) is
// timed from its claim, as the ledger keeps it.
func (m *middleware) retryAfter(ctx context.Context, key string, leaseEnds time.Time) int {
	now := time.Now()
	left := leaseEnds.Sub(now)
	wait := left
	started, ok := m.pace.startedAt(key)
	if !ok {
		started, ok = claimedAt(ctx, m.ledger, key)
	}
	if ok {
		ran := max(now.Sub(started), 0)
		wait = ran
		if typical, known := m.pace.typical(); known && typical > ran {
			wait = typical - ran
		}
	}
	secs := int((min(wait, left) + time.Second - 1) / time.Second)
	return min(max(secs, 1), 60)
}

// claimedAt is when the held claim of key was taken, as the ledger says.
func claimedAt(ctx context.Context, ledger effect.Ledger, key string) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rec, err := ledger.Get(ctx, key)
	if err != nil || rec.State != "pending" {
		return time.Time{}, false
	}
	for _, a := range slices.Backward(rec.Attempts) {
		if a.EndedAt == nil {
			return a.ClaimedAt, true
		}
	}
	return time.Time{}, false
}
