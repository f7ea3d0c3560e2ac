// Package metrics holds oncehook's Prometheus collectors. Each gateway owns
// its own registry: no package-level state, so tests and embedded uses can run
// several gateways in one process.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/oncehook/oncehook/store"
)

// Metrics are the collectors of one gateway.
type Metrics struct {
	Registry *prometheus.Registry

	// Requests counts intake answers by source and outcome (accepted,
	// duplicate, republished, unauthorized, malformed, too_large, missing_key,
	// unknown_source, unavailable, ...).
	Requests *prometheus.CounterVec
	// Events counts events by source and verdict (accepted, duplicate,
	// republished, keyless), after batches are split.
	Events *prometheus.CounterVec
	// CommitBatch observes how many events each group commit carried.
	CommitBatch prometheus.Histogram
	// Attempts counts delivery attempts by destination and outcome
	// (delivered, retry, dead).
	Attempts *prometheus.CounterVec
	// DeliveryLatency observes the time from receipt to successful delivery.
	DeliveryLatency *prometheus.HistogramVec
	// RedisHits counts duplicates the Redis hot layer answered; RedisErrors
	// counts its failed calls (each one fell back to the store).
	RedisHits   prometheus.Counter
	RedisErrors *prometheus.CounterVec
	// ReloadOK is 1 when the latest config reload was applied (or none
	// was asked for), 0 when it was refused and the config before it still
	// runs; ReloadAt is when the config running now was applied. Named as
	// Prometheus names its own, for the alert rules people already have.
	ReloadOK prometheus.Gauge
	ReloadAt prometheus.Gauge

	// Hourly accumulates the durable hourly rollups of the same counts;
	// the writer commits them (nil: none).
	Hourly *Hourly
	// Copies accumulates the duplicates per stored event; the writer
	// commits them with the rollups (nil: none).
	Copies *Copies
}

// Request counts an intake answer, in Prometheus and the hourly rollups.
func (m *Metrics) Request(source, outcome string) {
	if m.Requests != nil {
		m.Requests.WithLabelValues(source, outcome).Inc()
	}
	m.Hourly.addRollup(store.ScopeSource, source, Requests, outcome, 1)
}

// Copy counts a duplicate of the stored event source/key (see Copies).
func (m *Metrics) Copy(source, key string, at time.Time) { m.Copies.Add(source, key, at) }

// Event counts an event's verdict, in Prometheus and the hourly rollups.
func (m *Metrics) Event(source, verdict string) {
	if m.Events != nil {
		m.Events.WithLabelValues(source, verdict).Inc()
	}
	m.Hourly.addRollup(store.ScopeSource, source, Events, verdict, 1)
}

// Stored counts a stored event by its type, in the hourly rollups only:
// types are the provider's (Stripe has hundreds), too many for Prometheus
// labels, and an untyped event is not counted here.
func (m *Metrics) Stored(source, typ string) {
	if typ != "" {
		m.Hourly.addRollup(store.ScopeSource, source, Types, typ, 1)
	}
}

// Unordered counts a stored event of an ordered source that had no place
// among its entity's events (no entity, or no version where one is read),
// delivered outside the order, in the hourly rollups.
func (m *Metrics) Unordered(source string) {
	m.Hourly.addRollup(store.ScopeSource, source, Order, Unordered, 1)
}

// SignatureAged counts a queue's message taken with a signature that
// matched but was made outside the tolerance, as its broker's clock
// tells (a backlog is not; see receive.Envelope.Queued), in the hourly
// rollups: signature.aged.
func (m *Metrics) SignatureAged(source string) {
	m.Hourly.addRollup(store.ScopeSource, source, Signature, Aged, 1)
}

// Filtered counts a stored event that no destination of its source
// wanted, in the hourly rollups.
func (m *Metrics) Filtered(source string) {
	m.Hourly.addRollup(store.ScopeSource, source, Routing, Filtered, 1)
}

// FilterOverBudget counts n events whose source's filters on the body
// cost more than their request's budget (see route.Budget), so that the
// routes with those filters passed over them, in the hourly rollups:
// routing.over_budget. It counts when the filters run: a request a
// provider sends again counts again.
func (m *Metrics) FilterOverBudget(source string, n int) {
	m.Hourly.addRollup(store.ScopeSource, source, Routing, OverBudget, int64(n))
}

// Answered counts an answer of the user's API api to a request with an
// Idempotency-Key, in the hourly rollups: new (the upstream answered) or
// replayed (the ledger did).
func (m *Metrics) Answered(api string, replayed bool) {
	what := "new"
	if replayed {
		what = "replayed"
	}
	m.Hourly.addRollup(store.ScopeAPI, api, Answers, what, 1)
}

// Attempt counts a delivery attempt's outcome (delivered, retry, dead).
func (m *Metrics) Attempt(destination, outcome string) {
	m.Attempts.WithLabelValues(destination, outcome).Inc()
	m.Hourly.addRollup(store.ScopeDestination, destination, Attempts, outcome, 1)
}

// LatencyBuckets are the hourly rollups' delivery latency buckets: counts
// of deliveries at most that long after receipt (cumulative, so they add
// up across hours and replicas).
var LatencyBuckets = []struct {
	Metric string
	Le     time.Duration
}{{LatencyLEPrefix + "10ms", 10 * time.Millisecond}, {LatencyLEPrefix + "100ms", 100 * time.Millisecond}, {LatencyLEPrefix + "1s", time.Second},
	{LatencyLEPrefix + "10s", 10 * time.Second}, {LatencyLEPrefix + "1m", time.Minute}, {LatencyLEPrefix + "1h", time.Hour}}

// Latency counts a successful delivery's time from receipt.
func (m *Metrics) Latency(destination string, d time.Duration) {
	m.DeliveryLatency.WithLabelValues(destination).Observe(d.Seconds())
	m.Hourly.addLatency(destination, d)
}

// Rollups returns Metrics that count into the hourly rollups and the
// duplicate copies only, all in the hour of now(): the outbox's tally of
// one publish, which it writes in the caller's own transaction (a
// process that publishes is not the gateway, and has no Prometheus
// endpoint to count in). Only Request, Event, Copy, Stored, Unordered
// and Filtered may be called on them.
func Rollups(now func() time.Time) *Metrics {
	return &Metrics{Hourly: NewHourly(now), Copies: NewCopies()}
}

// New creates and registers the collectors on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_requests_total", Help: "Intake answers by source and outcome.",
		}, []string{"source", "outcome"}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_events_total", Help: "Events by source and verdict (accepted, duplicate, republished, keyless).",
		}, []string{"source", "verdict"}),
		CommitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "oncehook_commit_batch_events", Help: "Events per group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_delivery_attempts_total", Help: "Delivery attempts by destination and outcome.",
		}, []string{"destination", "outcome"}),
		DeliveryLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "oncehook_delivery_latency_seconds", Help: "Time from receipt to successful delivery.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{"destination"}),
		RedisHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncehook_redis_hits_total", Help: "Duplicates answered by the Redis hot layer.",
		}),
		RedisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_redis_errors_total", Help: "Failed Redis calls; each fell back to the store.",
		}, []string{"op"}),
		ReloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oncehook_config_last_reload_successful", Help: "1 when the latest config reload was applied (or none was asked for), 0 when it was refused: the config before it still runs.",
		}),
		ReloadAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oncehook_config_last_reload_success_timestamp_seconds", Help: "When the config running now was applied (at start, or by the latest reload that was).",
		}),
	}
	m.ReloadOK.Set(1)
	m.ReloadAt.SetToCurrentTime()
	m.Registry.MustRegister(m.Requests, m.Events, m.CommitBatch, m.Attempts, m.DeliveryLatency, m.RedisHits, m.RedisErrors, m.ReloadOK, m.ReloadAt,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
