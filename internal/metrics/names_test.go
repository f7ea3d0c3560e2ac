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

// A request that failed verification on a source that discards (answered
// 200 so that the provider does not pause) is refused all the same: the
// stats, the CLI and the dashboard show it among the rejected, by reason,
// or a wrong secret would throw every event away unseen.
func TestADiscardedRequestIsCountedAsRejected(t *testing.T) {
	var c SourceCounts
	c.Add(Rollup(Requests, Discarded), 3)
	c.Add(Rollup(Requests, Accepted), 2)
	c.Add(Rollup(Requests, Handshake), 1)
	if c.Requests != 6 || c.Rejected[Discarded] != 3 || c.RejectedTotal() != 3 {
		t.Fatalf("counts %+v: want 6 requests, 3 of them rejected as %s", c, Discarded)
	}
}
