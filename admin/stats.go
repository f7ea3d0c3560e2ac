package admin

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/store"
)

// Granularities of the stats.
const (
	Hourly = time.Hour
	Daily  = 24 * time.Hour
)

// StatsQuery selects the rollups of [From, To), summed per Granularity.
type StatsQuery struct {
	Source      string
	Destination string
	From, To    time.Time
	Granularity time.Duration // Hourly (default) or Daily
}

// SourceCounts are what a source's intake answered, in a span of time.
type SourceCounts = metrics.SourceCounts

// SourcePoint is a source's counts in one span.
type SourcePoint struct {
	At time.Time `json:"at"`
	SourceCounts
}

// DestinationPoint is a destination's attempts in one span.
type DestinationPoint struct {
	At time.Time `json:"at"`
	DestinationCounts
	// LatencyLE counts deliveries made at most this long after receipt
	// ("10ms", "100ms", "1s", "10s", "1m", "1h").
	LatencyLE map[string]int64 `json:"latency_le,omitempty"`
}

// add counts v of a destination's rollup metric in the point.
func (p *DestinationPoint) add(metric string, v int64) {
	if le, ok := strings.CutPrefix(metric, metrics.LatencyLEPrefix); ok {
		if p.LatencyLE == nil {
			p.LatencyLE = map[string]int64{}
		}
		p.LatencyLE[le] += v
		return
	}
	p.DestinationCounts.Add(metric, v)
}

// SourceSeries is a source's points, oldest first, one per span (zeros
// included, so a chart needs no gaps filled).
type SourceSeries struct {
	Name   string        `json:"name"`
	Total  SourceCounts  `json:"total"`
	Points []SourcePoint `json:"points"`
}

// DestinationSeries is a destination's points.
type DestinationSeries struct {
	Name   string             `json:"name"`
	Points []DestinationPoint `json:"points"`
}

// StatsView is the rollups of a span of time.
type StatsView struct {
	From         time.Time           `json:"from"`
	To           time.Time           `json:"to"`
	Granularity  string              `json:"granularity"`
	Sources      []SourceSeries      `json:"sources"`
	Destinations []DestinationSeries `json:"destinations"`
}

// maxSpans bounds a stats answer: 90 days of hours.
const maxSpans = 90 * 24

func (q *StatsQuery) normalize(now time.Time) error {
	if q.Granularity == 0 {
		q.Granularity = Hourly
	}
	if q.Granularity != Hourly && q.Granularity != Daily {
		return invalid("granularity", "want 1h or 1d")
	}
	if q.To.IsZero() {
		q.To = now
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-24 * time.Hour)
		if q.Granularity == Daily {
			q.From = q.To.Add(-30 * 24 * time.Hour)
		}
	}
	// Whole spans: from the start of From's span to the end of To's.
	q.From = truncate(q.From, q.Granularity)
	if t := truncate(q.To, q.Granularity); !t.Equal(q.To) {
		q.To = t.Add(q.Granularity)
	}
	if !q.From.Before(q.To) {
		return invalid("to", "must be after from")
	}
	if q.To.Sub(q.From)/q.Granularity > maxSpans {
		return invalid("from", "at most %d spans at a time", maxSpans)
	}
	if err := cmp.Or(filterText("source", q.Source, 200), filterText("destination", q.Destination, 200)); err != nil {
		return err
	}
	return nil
}

// points are a series' n zero points, each at the start of its span.
func points[P any](q StatsQuery, n int, setAt func(*P, time.Time)) []P {
	ps := make([]P, n)
	for i := range ps {
		setAt(&ps[i], q.From.Add(time.Duration(i)*q.Granularity))
	}
	return ps
}

// truncate cuts t to its span, in UTC (days start at 00:00 UTC).
func truncate(t time.Time, span time.Duration) time.Time {
	return t.UTC().Truncate(span)
}

// Stats implements Operator.
func (s *Service) Stats(ctx context.Context, q StatsQuery) (StatsView, error) {
	if err := q.normalize(s.opts.Now()); err != nil {
		return StatsView{}, err
	}
	view := StatsView{From: q.From, To: q.To, Granularity: "1h", Sources: []SourceSeries{}, Destinations: []DestinationSeries{}}
	if q.Granularity == Daily {
		view.Granularity = "1d"
	}
	spans := int(q.To.Sub(q.From) / q.Granularity)
	slot := func(hour time.Time) int { return int(truncate(hour, q.Granularity).Sub(q.From) / q.Granularity) }

	sources := map[string]*SourceSeries{}
	want := func(scope, name string) bool {
		switch scope {
		case store.ScopeSource:
			return q.Destination == "" && (q.Source == "" || q.Source == name)
		default:
			return q.Source == "" && (q.Destination == "" || q.Destination == name)
		}
	}
	newSource := func(name string) *SourceSeries {
		ss := &SourceSeries{Name: name, Points: points(q, spans, func(p *SourcePoint, at time.Time) { p.At = at })}
		sources[name] = ss
		return ss
	}
	// Every configured source shows, traffic or not.
	for _, src := range s.sources() {
		if want(store.ScopeSource, src.Name) {
			newSource(src.Name)
		}
	}
	dests := map[string]*DestinationSeries{}
	newDest := func(name string) *DestinationSeries {
		ds := &DestinationSeries{Name: name, Points: points(q, spans, func(p *DestinationPoint, at time.Time) { p.At = at })}
		dests[name] = ds
		return ds
	}
	for _, d := range s.destinations() {
		if want(store.ScopeDestination, d.Name) {
			newDest(d.Name)
		}
	}
	rows, err := s.opts.Store.Rollups(ctx, store.RollupQuery{From: q.From, To: q.To})
	if err != nil {
		return StatsView{}, err
	}
	for _, r := range rows {
		if !want(r.Scope, r.Name) {
			continue
		}
		i := slot(r.Hour)
		if i < 0 || i >= spans {
			continue
		}
		switch r.Scope {
		case store.ScopeSource:
			ss := sources[r.Name]
			if ss == nil {
				ss = newSource(r.Name)
			}
			ss.Points[i].Add(r.Metric, r.Value)
			ss.Total.Add(r.Metric, r.Value)
		case store.ScopeDestination:
			ds := dests[r.Name]
			if ds == nil {
				ds = newDest(r.Name)
			}
			ds.Points[i].add(r.Metric, r.Value)
		}
	}
	if q.Source != "" && sources[q.Source] == nil {
		// Neither configured nor counted in the range: a misspelt source
		// is an error, not an empty chart (an old source's events, still
		// stored, keep its name known).
		if err := s.knownSource(ctx, q.Source); err != nil {
			return StatsView{}, err
		}
	}
	if q.Destination != "" && dests[q.Destination] == nil {
		// The same for a destination: neither configured nor counted in
		// the range is a typo until shown otherwise.
		if err := s.knownNames("", q.Destination); err != nil {
			return StatsView{}, err
		}
	}
	for _, name := range sortedKeys(sources) {
		ss := sources[name]
		for i := range ss.Points {
			ss.Points[i].Finish()
		}
		ss.Total.Finish()
		view.Sources = append(view.Sources, *ss)
	}
	for _, name := range sortedKeys(dests) {
		ds := dests[name]
		for i := range ds.Points {
			ds.Points[i].Finish()
		}
		view.Destinations = append(view.Destinations, *ds)
	}
	return view, nil
}

// SourceView is a configured source with its last 24 hours.
type SourceView struct {
	Name         string   `json:"name"`
	Preset       string   `json:"preset"`
	Window       string   `json:"window"`
	Destinations []string `json:"destinations"`
	OnMissingKey string   `json:"on_missing_key"`
	// Transport is http, outbox, or the broker the source consumes (nats,
	// amqp, kafka); Where names its stream, queue or topic, and Broker says
	// whether its consumer is connected now.
	Transport string `json:"transport"`
	// ManagedBy is "file" (the config file's: change it there) or "api"
	// (created through the API: PATCH /v1/sources/{name}).
	ManagedBy string `json:"managed_by"`
	// Tenant owns it (absent: none, the operator's).
	Tenant  string         `json:"tenant,omitempty"`
	Where   string         `json:"where,omitempty"`
	Broker  *broker.Status `json:"broker,omitempty"`
	Last24h SourceCounts   `json:"last_24h"`
	// LastHour is the current hour so far; Baseline, the duplicate rate of
	// the same hour on the 7 days before (absent without enough traffic
	// then); AboveBaseline marks a duplicate rate that is.
	LastHour      SourceCounts `json:"last_hour"`
	Baseline      *float64     `json:"baseline_duplicate_rate,omitempty"`
	AboveBaseline bool         `json:"above_baseline"`
	Alerts        []string     `json:"alerts,omitempty"`
}

// Sources implements Operator.
func (s *Service) Sources(ctx context.Context) ([]SourceView, error) {
	return s.sourceViews(ctx, func(Source) bool { return true })
}

// sourceViews are the views of the configured sources keep keeps (a
// tenant's: TenantOperator.Sources), each built once, so that a tenant's
// list does not build every other tenant's.
func (s *Service) sourceViews(ctx context.Context, keep func(Source) bool) ([]SourceView, error) {
	now := s.opts.Now()
	hour := now.UTC().Truncate(time.Hour)
	rows, err := s.opts.Store.Rollups(ctx, store.RollupQuery{Scope: store.ScopeSource, From: hour.Add(-7 * 24 * time.Hour), To: hour.Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	base := metrics.DuplicateBaselines(rows, hour)
	consumers := map[string]broker.Status{}
	if s.opts.Consumers != nil {
		for _, st := range s.opts.Consumers() {
			consumers[st.Source] = st
		}
	}
	// Each source's rows, found once: a scan of every row for each
	// source was sources × rows (a week's hours of each).
	rowsOf := map[string][]store.Rollup{}
	for _, r := range rows {
		rowsOf[r.Name] = append(rowsOf[r.Name], r)
	}
	out := []SourceView{}
	for _, src := range s.sources() {
		if !keep(src) {
			continue
		}
		v := SourceView{Name: src.Name, ManagedBy: src.ManagedBy, Tenant: src.Tenant, Preset: src.Preset, Window: formatDuration(src.Window), Destinations: src.Destinations, OnMissingKey: src.OnMissingKey,
			Transport: src.Transport, Where: src.Where}
		if v.Transport == "" {
			v.Transport = "http"
		}
		if st, ok := consumers[src.Name]; ok {
			v.Broker = &st
		}
		if v.Destinations == nil {
			v.Destinations = []string{}
		}
		if v.OnMissingKey == "" {
			v.OnMissingKey = "accept"
		}
		for _, r := range rowsOf[src.Name] {
			if !r.Hour.Before(hour.Add(-23 * time.Hour)) {
				v.Last24h.Add(r.Metric, r.Value)
			}
			if r.Hour.Equal(hour) {
				v.LastHour.Add(r.Metric, r.Value)
			}
		}
		v.Last24h.Finish()
		v.LastHour.Finish()
		if b, ok := base[src.Name]; ok {
			v.Baseline = &b
			v.AboveBaseline = v.LastHour.Received > 0 && v.LastHour.DuplicateRate > b
		}
		if s.opts.Alerts != nil {
			v.Alerts = s.opts.Alerts.Firing(store.ScopeSource, src.Name)
		}
		out = append(out, v)
	}
	return out, nil
}

// formatDuration writes whole days as days (168h reads as 7d).
func formatDuration(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strings.TrimSuffix(time.Duration(d/(24*time.Hour)).String(), "ns") + "d"
	}
	return d.String()
}
