// Package alert watches the rollups and the queues, and says when a source's
// duplicates spike above their baseline, a destination's dead letters
// rise, its breaker opens or its oldest pending delivery falls behind: as
// a metric and on the dashboard at every check, and as an issue (see
// issues.go) that opens when the condition begins and resolves when it
// ends, each notified once to the configured channels, across every
// replica and every restart.
package alert

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/alert/channel"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/store"
)

// Alert kinds.
const (
	KindDuplicateRate = "duplicate_rate" // a source's duplicates above its baseline
	KindDeadLetters   = "dead_letters"   // a destination's dead letters rising
	KindBreakerOpen   = "breaker_open"   // a destination's circuit breaker holds its deliveries
	KindOldestPending = "oldest_pending" // a destination falling behind
)

// Options configure an Alerter.
type Options struct {
	// Channels are where issues' notices go (internal/alert/channel);
	// none: each notice is only logged.
	Channels []channel.Channel
	// ChannelTenants are the channels' tenants, by channel name: a
	// tenant's channel is told of its tenant's issues only (TenantOf
	// says whose an issue is); the others, of every issue.
	ChannelTenants map[string]string
	// TenantOf is the tenant of a source or destination (scope
	// store.ScopeSource or store.ScopeDestination) now: "" for none.
	// Unset: every issue is of no tenant.
	TenantOf func(scope, name string) string
	// RemindAfter, when set, notifies an issue still open (and not
	// acknowledged) again after this long without a notice; 0: never.
	RemindAfter time.Duration
	// DuplicateFactor: a source alerts when the current hour's duplicate
	// rate is above this many times its baseline (default 3) and it
	// received at least MinVolume events this hour (default 100). The
	// baseline is the duplicate rate of the same hour on the 7 days before,
	// and never below BaselineFloor (default 0.02), so a source with no
	// history, or none of duplicates, is not alerted on by a handful.
	DuplicateFactor float64
	MinVolume       int64
	BaselineFloor   float64
	// DeadLetters: a destination alerts when this many of its deliveries
	// became dead letters in the current hour (default 10).
	DeadLetters int64
	// OldestPending: a destination alerts when its oldest pending delivery
	// came in longer ago than this (default 15m).
	OldestPending time.Duration
	// Interval is how often the checks run (default 1m).
	Interval time.Duration

	Store store.Store
	// Ledger makes each channel's notice once across replicas and
	// restarts (an effect per issue, notice and channel).
	Ledger *effect.Local
	Logger *slog.Logger
	// Registerer, when set, gets oncehook_alert_firing and
	// oncehook_alerts_total.
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Alert is one condition that holds at a check.
type Alert struct {
	Kind      string    `json:"kind"`
	Scope     string    `json:"scope"` // source or destination
	Name      string    `json:"name"`
	Hour      time.Time `json:"hour"`
	Value     float64   `json:"value"`
	Threshold float64   `json:"threshold"`
	Baseline  *float64  `json:"baseline,omitempty"`
	Volume    int64     `json:"volume,omitempty"`
	Message   string    `json:"message"`
}

// Alerter runs the checks and remembers what fires.
type Alerter struct {
	opts   Options
	admin  store.Admin
	firing *prometheus.GaugeVec
	total  *prometheus.CounterVec

	mu    sync.Mutex
	state map[alertID]Alert // firing now
}

type alertID struct{ kind, scope, name string }

// New returns an Alerter; Run runs it.
func New(opts Options) (*Alerter, error) {
	if opts.DuplicateFactor <= 0 {
		opts.DuplicateFactor = 3
	}
	if opts.MinVolume <= 0 {
		opts.MinVolume = 100
	}
	if opts.BaselineFloor <= 0 {
		opts.BaselineFloor = 0.02
	}
	if opts.DeadLetters <= 0 {
		opts.DeadLetters = 10
	}
	if opts.OldestPending <= 0 {
		opts.OldestPending = 15 * time.Minute
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	al := &Alerter{opts: opts, admin: opts.Store, state: map[alertID]Alert{},
		firing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "oncehook_alert_firing", Help: "1 while an alert fires, by kind, scope (source, destination) and name.",
		}, []string{"kind", "scope", "name"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_alerts_total", Help: "Issues' notices told, by kind and event (opened, reminder, resolved): once per issue and event, by the replica that marked it told; a restart does not tell it again.",
		}, []string{"kind", "event"}),
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(al.firing); err != nil {
			return nil, err
		}
		if err := opts.Registerer.Register(al.total); err != nil {
			return nil, err
		}
	}
	return al, nil
}

// Run checks every Interval until ctx ends.
func (a *Alerter) Run(ctx context.Context) {
	t := time.NewTicker(a.opts.Interval)
	defer t.Stop()
	for {
		if _, err := a.Check(ctx); err != nil && ctx.Err() == nil {
			a.opts.Logger.Error("alert checks", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Firing returns the kinds of alert firing for a source or destination.
func (a *Alerter) Firing(scope, name string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id := range a.state {
		if id.scope == scope && id.name == name {
			out = append(out, id.kind)
		}
	}
	sort.Strings(out)
	return out
}

// Check runs every check once and returns the alerts that fire now: an
// issue opens for each that began, one resolves for each that ended, and
// the notices due are sent (see issues.go).
func (a *Alerter) Check(ctx context.Context) ([]Alert, error) {
	now := a.opts.Now()
	hour := now.UTC().Truncate(time.Hour)
	alerts, err := a.conditions(ctx, now, hour)
	if err != nil {
		return nil, err
	}
	a.setFiring(alerts)
	return alerts, a.track(ctx, now, alerts)
}

// setFiring keeps what fires now for Firing and oncehook_alert_firing.
func (a *Alerter) setFiring(alerts []Alert) {
	next := map[alertID]Alert{}
	for _, al := range alerts {
		id := alertID{al.Kind, al.Scope, al.Name}
		next[id] = al
		a.firing.WithLabelValues(al.Kind, al.Scope, al.Name).Set(1)
	}
	a.mu.Lock()
	prev := a.state
	a.state = next
	a.mu.Unlock()
	for id := range prev {
		if _, ok := next[id]; !ok {
			a.firing.DeleteLabelValues(id.kind, id.scope, id.name)
		}
	}
}

// conditions are the alerts that hold at now (in hour), read from the
// rollups, the queues and the breakers.
func (a *Alerter) conditions(ctx context.Context, now, hour time.Time) ([]Alert, error) {
	rows, err := a.opts.Store.Rollups(ctx, store.RollupQuery{From: hour.Add(-7 * 24 * time.Hour), To: hour.Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	queues, err := a.admin.Queues(ctx, now)
	if err != nil {
		return nil, err
	}
	var alerts []Alert

	// Duplicate rate per source, this hour against the same hour before.
	current := map[string]*metrics.SourceCounts{}
	dead := map[string]metrics.DestinationCounts{}
	for _, r := range rows {
		if !r.Hour.Equal(hour) {
			continue
		}
		switch {
		case r.Scope == store.ScopeSource:
			c := current[r.Name]
			if c == nil {
				c = &metrics.SourceCounts{}
				current[r.Name] = c
			}
			c.Add(r.Metric, r.Value)
		case r.Scope == store.ScopeDestination:
			c := dead[r.Name]
			c.Add(r.Metric, r.Value)
			dead[r.Name] = c
		}
	}
	base := metrics.DuplicateBaselines(rows, hour)
	for _, name := range slices.Sorted(maps.Keys(current)) {
		c := current[name]
		c.Finish()
		b, ok := base[name]
		baseline := max(b, a.opts.BaselineFloor)
		threshold := a.opts.DuplicateFactor * baseline
		if c.Received < a.opts.MinVolume || c.DuplicateRate <= threshold {
			continue
		}
		al := Alert{Kind: KindDuplicateRate, Scope: store.ScopeSource, Name: name, Hour: hour, Value: c.DuplicateRate,
			Threshold: threshold, Volume: c.Received,
			Message: fmt.Sprintf("source %s: %.1f%% of %d events this hour were duplicates, above %.1f× its baseline", name, 100*c.DuplicateRate, c.Received, a.opts.DuplicateFactor)}
		if ok {
			al.Baseline = &b
		}
		alerts = append(alerts, al)
	}
	for _, name := range slices.Sorted(maps.Keys(dead)) {
		if n := dead[name].Dead; n >= a.opts.DeadLetters {
			alerts = append(alerts, Alert{Kind: KindDeadLetters, Scope: store.ScopeDestination, Name: name, Hour: hour,
				Value: float64(n), Threshold: float64(a.opts.DeadLetters),
				Message: fmt.Sprintf("destination %s: %d deliveries became dead letters this hour", name, n)})
		}
	}
	for _, q := range queues {
		if q.Pending == 0 || q.Oldest.IsZero() {
			continue
		}
		if age := now.Sub(q.Oldest); age > a.opts.OldestPending {
			alerts = append(alerts, Alert{Kind: KindOldestPending, Scope: store.ScopeDestination, Name: q.Destination, Hour: hour,
				Value: age.Seconds(), Threshold: a.opts.OldestPending.Seconds(),
				Message: fmt.Sprintf("destination %s: its oldest pending delivery came in %s ago", q.Destination, age.Round(time.Second))})
		}
	}

	breakers, err := a.opts.Store.Breakers(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(breakers)) {
		b := breakers[name]
		alerts = append(alerts, Alert{Kind: KindBreakerOpen, Scope: store.ScopeDestination, Name: name, Hour: hour,
			Value: float64(b.Opens), Threshold: 1,
			Message: fmt.Sprintf("destination %s: its circuit breaker is %s (%s): its deliveries are held, none dropped", name, b.State, b.Reason)})
	}
	return alerts, nil
}
