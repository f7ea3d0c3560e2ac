package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// What an event counts lands under the names the operator's views read,
// one counter per name however it was counted (by its parts, by its whole
// name, or given back by a failed commit), and latency's counters are
// each bucket the delivery fell in.
func TestHourlyCountsByName(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 30, 0, 0, time.UTC)
	m := Rollups(func() time.Time { return now })
	m.Request("src", Accepted)
	m.Event("src", Accepted)
	m.Hourly.Add(store.ScopeSource, "src", "events.accepted", 1)
	m.Stored("src", "invoice.paid")
	m.Stored("src", "invoice.paid")
	m.Hourly.Add(store.ScopeSource, "src", "dotless", 5)
	m.Hourly.Add(store.ScopeSource, "src", "trailing.", 6)
	m.Hourly.addLatency("dst", 50*time.Millisecond)

	got := m.Hourly.Take()
	m.Hourly.Restore(got)
	m.Event("src", Accepted)
	again := m.Hourly.Take()

	want := map[string]int64{
		"source/src/requests.accepted": 1, "source/src/events.accepted": 3, "source/src/types.invoice.paid": 2,
		"source/src/dotless": 5, "source/src/trailing.": 6,
		"destination/dst/latency.count": 1, "destination/dst/latency.sum_ms": 50, "destination/dst/latency.le_100ms": 1,
		"destination/dst/latency.le_1s": 1, "destination/dst/latency.le_10s": 1, "destination/dst/latency.le_1m": 1,
		"destination/dst/latency.le_1h": 1,
	}
	var names []string
	for _, d := range again {
		if !d.Hour.Equal(now.Truncate(time.Hour)) {
			t.Fatalf("%+v: not in the hour of %s", d, now)
		}
		name := d.Scope + "/" + d.Name + "/" + d.Metric
		names = append(names, name)
		if d.Value != want[name] {
			t.Errorf("%s = %d, want %d", name, d.Value, want[name])
		}
	}
	if len(again) != len(want) {
		slices.Sort(names)
		t.Fatalf("counters %s, want %d of them", strings.Join(names, ", "), len(want))
	}
}

// BenchmarkHourlyEvent is what intake counts in the rollups for one
// accepted event of a typed request.
func BenchmarkHourlyEvent(b *testing.B) {
	m := Rollups(time.Now)
	b.ReportAllocs()
	for b.Loop() {
		m.Event("src", Accepted)
		m.Stored("src", "invoice.paid")
		m.Request("src", Accepted)
	}
}
