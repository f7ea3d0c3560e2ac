// Package alert watches the rollups and the queues, and says when a source's
// duplicates spike above their baseline, a destination's dead letters
// rise, or its oldest pending delivery falls behind: as a metric, on the
// dashboard, and once per alert and hour (across every replica and every
// restart) as a log line, a count and a POST.
package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/redact"
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
	// URL, when set, receives each alert as a JSON POST, at most once per
	// alert, source (or destination) and hour, across every replica.
	URL     string
	Headers map[string]string
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

	Store  store.Store
	Ledger *effect.Local // makes the POST once across replicas
	Client *http.Client
	Logger *slog.Logger
	// Registerer, when set, gets oncehook_alert_firing and
	// oncehook_alerts_total.
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Alert is one alert, as logged and POSTed.
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
	// Resolved marks the one POST that says an alert told before has
	// ended (its Hour is the hour it was told for).
	Resolved bool `json:"resolved,omitempty"`
}

// Alerter runs the checks and remembers what fires.
type Alerter struct {
	opts   Options
	admin  store.Admin
	firing *prometheus.GaugeVec
	total  *prometheus.CounterVec

	mu    sync.Mutex
	state map[alertID]Alert // firing now
	// seeded: state was read back from the ledger (what was told this
	// hour or the last, before a restart), at the first check.
	seeded bool
	// ending are alerts that ended but whose end could not be told yet.
	ending map[alertID]Alert
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
	if opts.Client == nil {
		// Redirects are not followed, as deliveries do not follow them: a
		// 3xx is the URL's misconfiguration, and following it would POST
		// the alert somewhere nobody configured.
		opts.Client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
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
			Name: "oncehook_alerts_total", Help: "Alerts told, by kind (once per alert and hour, by the replica that told it; a restart does not tell it again).",
		}, []string{"kind"}),
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

// Check runs every check once and returns the alerts that fire now (each
// is logged, counted, and POSTed unless it was this hour already).
func (a *Alerter) Check(ctx context.Context) ([]Alert, error) {
	now := a.opts.Now()
	hour := now.UTC().Truncate(time.Hour)
	alerts, err := a.conditions(ctx, now, hour)
	if err != nil {
		return nil, err
	}
	return alerts, a.notify(ctx, hour, alerts)
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

// notify tells what changed since the last check: each alert that began
// (once per alert and hour) and each that ended, and keeps the gauge.
func (a *Alerter) notify(ctx context.Context, hour time.Time, alerts []Alert) error {
	next := map[alertID]Alert{}
	for _, al := range alerts {
		next[alertID{al.Kind, al.Scope, al.Name}] = al
	}
	var errs []error
	if !a.seeded && a.opts.Ledger != nil {
		told, err := a.toldBefore(ctx, hour)
		if err != nil {
			return err
		}
		a.mu.Lock()
		maps.Copy(a.state, told)
		a.mu.Unlock()
		a.seeded = true
	}
	a.mu.Lock()
	prev := a.state
	a.state = next
	a.mu.Unlock()
	for id, al := range prev {
		if _, ok := next[id]; !ok {
			a.firing.DeleteLabelValues(id.kind, id.scope, id.name)
			if a.ending == nil {
				a.ending = map[alertID]Alert{}
			}
			a.ending[id] = al
		}
	}
	for id, al := range a.ending {
		if _, ok := next[id]; ok {
			delete(a.ending, id) // firing again before its end was told
			continue
		}
		if err := a.tellEnd(ctx, al); err != nil {
			errs = append(errs, err) // kept: the next check tries again
			continue
		}
		delete(a.ending, id)
	}
	for _, al := range alerts {
		id := alertID{al.Kind, al.Scope, al.Name}
		a.firing.WithLabelValues(al.Kind, al.Scope, al.Name).Set(1)
		if old, ok := prev[id]; ok && old.Hour.Equal(al.Hour) {
			continue // told already this hour
		}
		if err := a.tell(ctx, al); err != nil {
			errs = append(errs, err)
			// Not told: the next check tries again.
			a.mu.Lock()
			delete(a.state, id)
			a.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// tell says al (the log's warning, oncehook_alerts_total, the POST) once
// per alert and hour, across replicas and restarts: with a ledger, the
// telling is an effect under the alert's key, so a replica that finds it
// done, and a gateway that restarted within the hour and finds what it
// told before it stopped, say nothing again (invariant 27). The firing
// state itself (oncehook_alert_firing, the dashboard) is set by every
// check, whoever told it.
func (a *Alerter) tell(ctx context.Context, al Alert) error {
	say := func(ctx context.Context) (json.RawMessage, error) {
		a.total.WithLabelValues(al.Kind).Inc()
		a.opts.Logger.Warn("alert: "+al.Message, "kind", al.Kind, al.Scope, al.Name, "value", al.Value, "threshold", al.Threshold)
		return a.post(ctx, al)
	}
	if a.opts.Ledger == nil {
		_, err := say(ctx)
		return err
	}
	_, _, err := effect.Do(ctx, a.opts.Ledger, alertKey(al), effect.ClaimOptions{Lease: 30 * time.Second, Deadline: al.Hour.Add(time.Hour)},
		func(ctx context.Context, _ effect.Claim) (json.RawMessage, error) { return say(ctx) })
	var busy *effect.BusyError
	if errors.As(err, &busy) || errors.Is(err, effect.ErrExpired) {
		return nil // another replica is telling it, or the hour is over
	}
	if err != nil {
		return fmt.Errorf("alert %s %s: %w", al.Kind, al.Name, err)
	}
	return nil
}

// tellEnd says once that al, told before, has ended (invariant 27: an
// alert is sent once when its condition starts and once when it ends): an
// Info line and a POST with resolved: true, an effect under its own key,
// so that neither another replica nor a restart says it again.
func (a *Alerter) tellEnd(ctx context.Context, al Alert) error {
	end := Alert{Kind: al.Kind, Scope: al.Scope, Name: al.Name, Hour: al.Hour, Resolved: true,
		Message: fmt.Sprintf("%s %s: %s alert resolved", al.Scope, al.Name, al.Kind)}
	say := func(ctx context.Context) (json.RawMessage, error) {
		a.opts.Logger.Info("alert resolved", "kind", al.Kind, al.Scope, al.Name)
		return a.post(ctx, end)
	}
	if a.opts.Ledger == nil {
		_, err := say(ctx)
		return err
	}
	_, _, err := effect.Do(ctx, a.opts.Ledger, endKey(al), effect.ClaimOptions{Lease: 30 * time.Second},
		func(ctx context.Context, _ effect.Claim) (json.RawMessage, error) { return say(ctx) })
	var busy *effect.BusyError
	if errors.As(err, &busy) {
		return nil // another replica is telling it
	}
	if err != nil {
		return fmt.Errorf("alert %s %s resolved: %w", al.Kind, al.Name, err)
	}
	return nil
}

// alertPrefix begins every alert's key in the effects ledger.
const alertPrefix = "oncehook:alert:"

// alertKey is al's key: the effect that tells it, and the POST's
// Idempotency-Key.
func alertKey(al Alert) string {
	return fmt.Sprintf(alertPrefix+"%s:%s:%s:%s", al.Kind, al.Scope, al.Name, al.Hour.Format("2006-01-02T15"))
}

// endKey is the key of the effect that tells al's end.
func endKey(al Alert) string {
	return "oncehook:alert-resolved:" + strings.TrimPrefix(alertKey(al), alertPrefix)
}

// toldBefore reads back from the ledger the alerts told (done) for hour
// or the hour before, the latest per alert: what a gateway that restarted
// told before it stopped, so that it neither tells them again nor misses
// telling their end.
func (a *Alerter) toldBefore(ctx context.Context, hour time.Time) (map[alertID]Alert, error) {
	out := map[alertID]Alert{}
	after := alertPrefix
	for range 100 { // 100 pages of 500: an alert's keys are one an hour, swept with the effects
		recs, err := a.opts.Ledger.List(ctx, store.EffectQuery{State: store.EffectDone, After: after, Limit: 500})
		if err != nil {
			return nil, fmt.Errorf("alerts told before: %w", err)
		}
		for _, r := range recs {
			if !strings.HasPrefix(r.Key, alertPrefix) {
				return out, nil
			}
			parts := strings.Split(strings.TrimPrefix(r.Key, alertPrefix), ":")
			if len(parts) < 4 {
				continue
			}
			h, err := time.Parse("2006-01-02T15", parts[len(parts)-1])
			if err != nil || !(h.Equal(hour) || h.Equal(hour.Add(-time.Hour))) {
				continue
			}
			al := Alert{Kind: parts[0], Scope: parts[1], Name: strings.Join(parts[2:len(parts)-1], ":"), Hour: h}
			id := alertID{al.Kind, al.Scope, al.Name}
			if old, ok := out[id]; !ok || old.Hour.Before(h) {
				out[id] = al
			}
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].Key
	}
	return out, nil
}

// post sends al to the configured URL (nothing without one), and says
// what it answered, for the alert's effect record.
func (a *Alerter) post(ctx context.Context, al Alert) (json.RawMessage, error) {
	if a.opts.URL == "" {
		return json.RawMessage(`{"logged":true}`), nil
	}
	body, err := json.Marshal(al)
	if err != nil {
		return nil, effect.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.opts.URL, bytes.NewReader(body))
	if err != nil {
		return nil, effect.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "oncehook-alerts")
	req.Header.Set("Idempotency-Key", alertKey(al))
	for k, v := range a.opts.Headers {
		req.Header.Set(k, v)
	}
	resp, err := a.opts.Client.Do(req)
	if err != nil {
		// Logged and stored in the alert's effect record (which a
		// read-only token may list): never the URL's secrets.
		return nil, redact.Error(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("alert POST: %s", resp.Status)
	}
	return json.RawMessage(fmt.Sprintf(`{"status":%d}`, resp.StatusCode)), nil
}
