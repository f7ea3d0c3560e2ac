package metrics

import (
	"strings"
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

// hourKey is one counter of one hour. Its metric is held as its two
// parts (kind and what, split at the first dot; dot says whether there
// was one), so that counting an event's Rollup(kind, what) joins no
// string: the name is joined once per counter, when the writer takes
// them.
type hourKey struct {
	hour        int64
	scope, name string
	kind, what  string
	dot         bool
}

func keyOf(hour int64, scope, name, metric string) hourKey {
	kind, what, dot := strings.Cut(metric, ".")
	return hourKey{hour: hour, scope: scope, name: name, kind: kind, what: what, dot: dot}
}

func (k hourKey) metric() string {
	if !k.dot {
		return k.kind
	}
	return Rollup(k.kind, k.what)
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
	k := keyOf(h.hour(), scope, name, metric)
	h.mu.Lock()
	h.m[k] += n
	h.mu.Unlock()
}

// addRollup adds n to the counter Rollup(kind, what) of the current
// hour, without joining its name.
func (h *Hourly) addRollup(scope, name, kind, what string, n int64) {
	if h == nil || n == 0 {
		return
	}
	if strings.IndexByte(kind, '.') >= 0 {
		h.Add(scope, name, Rollup(kind, what), n) // split elsewhere: the name decides
		return
	}
	k := hourKey{hour: h.hour(), scope: scope, name: name, kind: kind, what: what, dot: true}
	h.mu.Lock()
	h.m[k] += n
	h.mu.Unlock()
}

// addLatency counts a successful delivery's time from receipt: the
// count, the sum and every bucket it falls in, in one hour under one lock.
func (h *Hourly) addLatency(destination string, d time.Duration) {
	if h == nil {
		return
	}
	hour := h.hour()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[keyOf(hour, store.ScopeDestination, destination, LatencyCount)]++
	if ms := d.Milliseconds(); ms != 0 {
		h.m[keyOf(hour, store.ScopeDestination, destination, LatencySumMS)] += ms
	}
	for _, b := range LatencyBuckets {
		if d <= b.Le {
			h.m[keyOf(hour, store.ScopeDestination, destination, b.Metric)]++
		}
	}
}

func (h *Hourly) hour() int64 { return h.now().Truncate(time.Hour).Unix() }

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
		out = append(out, store.StatDelta{Hour: time.Unix(k.hour, 0), Scope: k.scope, Name: k.name, Metric: k.metric(), Value: v})
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
		h.m[keyOf(d.Hour.Unix(), d.Scope, d.Name, d.Metric)] += d.Value
	}
	h.mu.Unlock()
}
