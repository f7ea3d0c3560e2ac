package metrics

import (
	"testing"

	"github.com/oncehook/oncehook/store"
)

// The store counts stale deliveries itself, in the transaction that marks
// them; its rollup must be the name the operator's views read.
func TestStaleRollupIsTheStoresName(t *testing.T) {
	if got := Rollup(Order, Stale); got != store.StaleMetric {
		t.Fatalf("Rollup(Order, Stale) = %q, the store writes %q", got, store.StaleMetric)
	}
}

func TestSourceCountsReadOrderRollups(t *testing.T) {
	var c SourceCounts
	c.Add(store.StaleMetric, 3)
	c.Add(Rollup(Order, Unordered), 2)
	if c.Stale != 3 || c.Unordered != 2 || c.Received != 0 {
		t.Fatalf("counts %+v: want 3 stale, 2 unordered, and neither counted as received", c)
	}
}
