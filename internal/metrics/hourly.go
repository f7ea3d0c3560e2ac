package metrics

import (
	"sync"
	"time"

	"github.com/oncehook/oncehook/store"
)

// Hourly accumulates counters per hour until the writer takes them into a
// commit (store.Batch.Stats): the durable hourly rollups. Counting costs a
// map update; the store sees one row per counter per commit.
type Hourly struct {
	mu  sync.Mutex
	m   map[hourKey]int64
	now func() time.Time
}

type hourKey struct {
	hour                int64
	scope, name, metric string
}

// NewHourly returns an empty accumulator.
func NewHourly(now func() time.Time) *Hourly {
	if now == nil {
		now = time.Now
	}
	return &Hourly{m: map[hourKey]int64{}, now: now}
}

// Add adds n to a counter of the current hour.
func (h *Hourly) Add(scope, name, metric string, n int64) {
	if h == nil || n == 0 {
		return
	}
	k := hourKey{hour: h.now().Truncate(time.Hour).Unix(), scope: scope, name: name, metric: metric}
	h.mu.Lock()
	h.m[k] += n
	h.mu.Unlock()
}

// Take returns the counters accumulated so far and starts afresh.
func (h *Hourly) Take() []store.StatDelta {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	m := h.m
	if len(m) == 0 {
		h.mu.Unlock()
		return nil
	}
	h.m = make(map[hourKey]int64, len(m))
	h.mu.Unlock()
	out := make([]store.StatDelta, 0, len(m))
	for k, v := range m {
		out = append(out, store.StatDelta{Hour: time.Unix(k.hour, 0), Scope: k.scope, Name: k.name, Metric: k.metric, Value: v})
	}
	return out
}

// Restore puts back counters a failed commit did not write.
func (h *Hourly) Restore(deltas []store.StatDelta) {
	if h == nil {
		return
	}
	h.mu.Lock()
	for _, d := range deltas {
		h.m[hourKey{hour: d.Hour.Unix(), scope: d.Scope, name: d.Name, metric: d.Metric}] += d.Value
	}
	h.mu.Unlock()
}
