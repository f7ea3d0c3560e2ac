// Package maintain runs a gateway's upkeep, as River's maintenance
// services do: each job a Service with its own ticker, started together,
// stopped together. The window sweep and the rollups sweep are here; the
// hold refresh and the alert checks are Services of their own packages.
// A new periodic job (a breaker's probe, a cleanup) is one more Service.
package maintain

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/oncehook/oncehook/store"
)

// Service is one periodic job: Run works until ctx ends.
type Service interface {
	Run(ctx context.Context)
}

// Maintainer runs its services.
type Maintainer struct {
	services []Service
}

// New returns a Maintainer of services.
func New(services ...Service) *Maintainer { return &Maintainer{services: services} }

// Run runs every service until ctx ends, and returns when all have.
func (m *Maintainer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range m.services {
		wg.Go(func() { s.Run(ctx) })
	}
	wg.Wait()
}

// SweepBatch keeps each sweep transaction short, so that it never holds
// the writer long enough to stall intake.
const SweepBatch = 500

// sweepShare bounds the part of the store's time a sweep of a backlog
// takes: after each full batch it waits sweepShare⁻¹−1 times as long as the
// batch took (at least 10 ms), so that intake keeps the rest. Clearing a
// million expired events at once cost intake 37% with a fixed 10 ms pause
// (it deleted 6 events for each one intake stored); a backlog now clears
// more slowly instead, and a steady state, which deletes as fast as events
// arrive, never waits.
const sweepShare = 0.1

// Sweeper deletes, every Interval, what no longer needs keeping: events
// whose dedup window ended and that have nothing left to deliver, final
// effect records past their retention (store.SweepExpired, in batches of
// SweepBatch with a pause between for intake's commits), and hourly
// rollups older than RollupRetention.
type Sweeper struct {
	Store           store.Store
	Interval        time.Duration // default 1 minute
	RollupRetention time.Duration // default 90 days
	Logger          *slog.Logger
	Now             func() time.Time
}

func (s *Sweeper) defaults() {
	if s.Interval <= 0 {
		s.Interval = time.Minute
	}
	if s.RollupRetention <= 0 {
		s.RollupRetention = 90 * 24 * time.Hour
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
}

// Run implements Service.
func (s *Sweeper) Run(ctx context.Context) {
	s.defaults()
	tick := time.NewTicker(s.Interval)
	defer tick.Stop()
	for {
		s.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sweep runs one round of both sweeps.
func (s *Sweeper) Sweep(ctx context.Context) {
	s.defaults()
	for ctx.Err() == nil {
		began := time.Now()
		n, err := s.Store.SweepExpired(ctx, s.Now(), SweepBatch)
		took := time.Since(began)
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Error("window sweep", "err", err)
			}
			break
		}
		if n > 0 {
			s.Logger.Debug("window sweep", "deleted", n)
		}
		if n < SweepBatch {
			break
		}
		pause := max(10*time.Millisecond, time.Duration(float64(took)*(1/sweepShare-1)))
		select { // let intake's commits in between
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
	before := s.Now().Add(-s.RollupRetention).Truncate(time.Hour)
	if _, err := s.Store.SweepRollups(ctx, before); err != nil && ctx.Err() == nil {
		s.Logger.Error("rollups sweep", "err", err)
	}
}
