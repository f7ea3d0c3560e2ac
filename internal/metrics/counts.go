package metrics

import (
	"time"

	"github.com/oncehook/oncehook/store"
)

// Reading the hourly rollups back: what the operator's views (admin) and
// the alerts both sum from a source's and a destination's counters, summed
// here only, so that the overview, the stats and the alerts cannot count
// one rollup two ways.

// SourceCounts are what a source's intake answered, in a span of time.
type SourceCounts struct {
	// Received is every event that came in: accepted, duplicate or
	// keyless. A republished one is not: a reconciliation pass is the
	// caller's, not traffic, and counted in Received it would lower the
	// duplicate rate that reveals a provider's trouble as surely as
	// counted in Duplicate it would raise it.
	Received  int64 `json:"received"`
	Accepted  int64 `json:"accepted"`
	Duplicate int64 `json:"duplicate"`
	Keyless   int64 `json:"keyless"`
	// Republished counts the publishes marked as reconciliation
	// (?reconcile=true) of keys already stored: nothing written, no
	// delivery, and no part of the duplicate rate nor of its alert.
	Republished int64 `json:"republished"`
	// Requests is every request answered; Rejected, those refused, by
	// reason (unauthorized, malformed, too_large, missing_key,
	// unavailable, ...).
	Requests int64            `json:"requests"`
	Rejected map[string]int64 `json:"rejected"`
	// DuplicateRate is Duplicate / Received.
	DuplicateRate float64 `json:"duplicate_rate"`
	// Filtered counts the stored events no destination wanted.
	Filtered int64 `json:"filtered"`
	// FilterOverBudget counts the events whose filters on the body cost
	// more than their request's budget: the routes with those filters
	// passed over them (they are stored, filtered for those destinations).
	FilterOverBudget int64 `json:"filter_over_budget,omitempty"`
	// Types counts the stored events by type (untyped ones are not).
	Types map[string]int64 `json:"types,omitempty"`
	// Stale counts the deliveries held back as older than their entity's
	// delivered version; Unordered, the events of an ordered source that
	// had no place among their entity's (no entity or version found),
	// delivered outside the order. Zero for a source without order.
	Stale     int64 `json:"stale,omitempty"`
	Unordered int64 `json:"unordered,omitempty"`
	// SignatureAged counts the queue's messages taken though their
	// signature, which matched, was made outside the tolerance as the
	// broker's clock tells: a relay that held them, a clock astray, or
	// a replay (which the key's window answers as a duplicate).
	SignatureAged int64 `json:"signature_aged,omitempty"`
}

// Add counts v of a source's rollup metric.
func (c *SourceCounts) Add(metric string, v int64) {
	kind, what := SplitRollup(metric)
	switch kind {
	case Events:
		switch what {
		case Accepted:
			c.Accepted += v
		case Duplicate:
			c.Duplicate += v
		case Keyless:
			c.Keyless += v
		case Republished:
			c.Republished += v
			return // not Received: see Received
		}
		c.Received += v
	case Routing:
		switch what {
		case Filtered:
			c.Filtered += v
		case OverBudget:
			c.FilterOverBudget += v
		}
	case Order:
		switch what {
		case Stale:
			c.Stale += v
		case Unordered:
			c.Unordered += v
		}
	case Signature:
		if what == Aged {
			c.SignatureAged += v
		}
	case Types:
		if c.Types == nil {
			c.Types = map[string]int64{}
		}
		c.Types[what] += v
	case Requests:
		c.Requests += v
		switch what {
		case Accepted, Duplicate, Republished, Handshake:
		default:
			// Discarded too: it failed verification, and is answered 200
			// only so that the provider does not pause. Left out, a source
			// that discards showed nothing refused while a wrong secret
			// threw every event away.
			if c.Rejected == nil {
				c.Rejected = map[string]int64{}
			}
			c.Rejected[what] += v
		}
	}
}

// Finish sets what is derived from the counts (the rate; an empty
// Rejected rather than none).
func (c *SourceCounts) Finish() {
	if c.Rejected == nil {
		c.Rejected = map[string]int64{}
	}
	if c.Received > 0 {
		c.DuplicateRate = float64(c.Duplicate) / float64(c.Received)
	}
}

// RejectedTotal is every rejected request.
func (c SourceCounts) RejectedTotal() int64 {
	var n int64
	for _, v := range c.Rejected {
		n += v
	}
	return n
}

// DestinationCounts are a destination's attempts by outcome, in a span of
// time, and the average time from receipt to a successful delivery.
type DestinationCounts struct {
	Delivered    int64   `json:"delivered"`
	Retry        int64   `json:"retry"`
	Dead         int64   `json:"dead"`
	LatencyAvgMS float64 `json:"latency_avg_ms"`

	// The latency counters the average is made of, until Finish.
	latencyCount, latencySumMS int64
}

// Add counts v of a destination's rollup metric (the latency buckets,
// LatencyLEPrefix, are not summed here: only the stats split them).
func (c *DestinationCounts) Add(metric string, v int64) {
	switch metric {
	case Rollup(Attempts, Delivered):
		c.Delivered += v
	case Rollup(Attempts, Retry):
		c.Retry += v
	case Rollup(Attempts, Dead):
		c.Dead += v
	case LatencyCount:
		c.latencyCount += v
	case LatencySumMS:
		c.latencySumMS += v
	}
}

// Finish sets the average latency from the counters added.
func (c *DestinationCounts) Finish() {
	if c.latencyCount > 0 {
		c.LatencyAvgMS = float64(c.latencySumMS) / float64(c.latencyCount)
	}
}

// baselineMinVolume is how many events the same hour on the 7 days before
// must hold for their duplicate rate to be a baseline.
const baselineMinVolume = 20

// DuplicateBaselines returns, per source, the duplicate rate of the same hour of
// day as hour over the 7 days before it: the trailing baseline that a
// spike stands out against (traffic, and resends, follow the day).
func DuplicateBaselines(rows []store.Rollup, hour time.Time) map[string]float64 {
	type acc struct{ received, duplicate int64 }
	sums := map[string]*acc{}
	for _, r := range rows {
		if r.Scope != store.ScopeSource || !r.Hour.Before(hour) || hour.Sub(r.Hour)%(24*time.Hour) != 0 || hour.Sub(r.Hour) > 7*24*time.Hour {
			continue
		}
		kind, what := SplitRollup(r.Metric)
		if kind != Events || what == Republished {
			continue // a reconciliation pass is no provider's traffic
		}
		a := sums[r.Name]
		if a == nil {
			a = &acc{}
			sums[r.Name] = a
		}
		a.received += r.Value
		if what == Duplicate {
			a.duplicate += r.Value
		}
	}
	out := map[string]float64{}
	for name, a := range sums {
		if a.received >= baselineMinVolume {
			out[name] = float64(a.duplicate) / float64(a.received)
		}
	}
	return out
}
