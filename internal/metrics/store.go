package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncehook/oncehook/store"
)

// StoreCollector exports what the store holds that an operator watches: each
// destination's queue depth, oldest pending delivery, dead letters and
// pause, and the effects ledger's records by state. The store is read at
// most once per TTL however often Prometheus scrapes, and these are the
// same on every replica (they are the store's, not the process's).
type StoreCollector struct {
	admin        store.Admin
	destinations []string
	ttl          time.Duration
	now          func() time.Time

	mu      sync.Mutex
	at      time.Time
	metrics []prometheus.Metric

	depth, leased, oldest, dead, paused, breaker, effects, up, removed *prometheus.Desc
	flow                                                               store.Flow
}

// SetDestinations replaces the configured destinations (a config reload):
// a destination no longer among them that still has deliveries is
// counted as removed.
func (c *StoreCollector) SetDestinations(destinations []string) {
	c.mu.Lock()
	c.destinations, c.metrics = destinations, nil
	c.mu.Unlock()
}

// NewStoreCollector returns a StoreCollector for the store's queues, for the
// configured destinations (and any other that has deliveries).
func NewStoreCollector(st store.Store, destinations []string, ttl time.Duration) *StoreCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &StoreCollector{admin: st, flow: st, destinations: destinations, ttl: ttl, now: time.Now,
		depth:   d("oncehook_queue_depth", "Pending deliveries per destination (in backoff, due, or being attempted).", "destination"),
		leased:  d("oncehook_queue_leased", "Pending deliveries being attempted now, per destination.", "destination"),
		oldest:  d("oncehook_oldest_pending_seconds", "Age of the oldest pending delivery's event, per destination: how far behind it is.", "destination"),
		dead:    d("oncehook_dead_letters", "Dead letters per destination.", "destination"),
		paused:  d("oncehook_destination_paused", "1 while a destination is paused (deliveries held, intake accepting).", "destination"),
		breaker: d("oncehook_breaker_open", "1 while a destination's circuit breaker is open or half-open (deliveries held, none dropped).", "destination"),
		effects: d("oncehook_effects", "Effects ledger records by state (lease_expired: pending, its lease expired; stale: its old name, kept for one release).", "state"),
		removed: d("oncehook_destination_removed", "1 for a destination the config names no more that still has deliveries: its pending ones are held, not delivered, until a config names it again.", "destination"),
		up:      d("oncehook_store_queries_up", "1 when the store answered the queries behind the queue and effects metrics."),
	}
}

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.leased, c.oldest, c.dead, c.paused, c.breaker, c.effects, c.up, c.removed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.metrics == nil || now.Sub(c.at) >= c.ttl {
		c.metrics, c.at = c.read(now), now
	}
	for _, m := range c.metrics {
		ch <- m
	}
}

func (c *StoreCollector) read(now time.Time) []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	queues, err1 := c.admin.Queues(ctx, now)
	paused, err2 := c.admin.Paused(ctx)
	effects, err3 := c.admin.EffectCounts(ctx, now)
	breakers, err4 := c.flow.Breakers(ctx)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		gauge(c.up, 0)
		return out
	}
	gauge(c.up, 1)
	seen := map[string]bool{}
	for _, q := range queues {
		seen[q.Destination] = true
		gauge(c.depth, float64(q.Pending), q.Destination)
		gauge(c.leased, float64(q.Leased), q.Destination)
		gauge(c.dead, float64(q.Dead), q.Destination)
		age := 0.0
		if q.Pending > 0 && !q.Oldest.IsZero() {
			age = max(0, now.Sub(q.Oldest).Seconds())
		}
		gauge(c.oldest, age, q.Destination)
		if !slices.Contains(c.destinations, q.Destination) {
			gauge(c.removed, 1, q.Destination)
		}
	}
	for _, d := range c.destinations {
		if !seen[d] {
			// An empty queue is a zero, not a missing series.
			gauge(c.depth, 0, d)
			gauge(c.leased, 0, d)
			gauge(c.dead, 0, d)
			gauge(c.oldest, 0, d)
		}
		p := 0.0
		if _, ok := paused[d]; ok {
			p = 1
		}
		gauge(c.paused, p, d)
		b := 0.0
		if _, ok := breakers[d]; ok {
			b = 1
		}
		gauge(c.breaker, b, d)
	}
	for _, state := range []string{store.EffectPending, store.EffectLeaseExpired, store.EffectDone, store.EffectFailed, store.EffectExpired} {
		gauge(c.effects, float64(effects[state]), state)
	}
	// The old label of lease_expired, for one release: alerts written on
	// it keep firing while their authors move to the new one.
	gauge(c.effects, float64(effects[store.EffectLeaseExpired]), "stale")
	return out
}
