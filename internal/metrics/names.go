package metrics

import (
	"strings"
	"time"
)

// What the counters count, written once: receive and deliver count with
// these words, the hourly rollups store them, and the operator's views
// (admin's stats and alerts) read them back by the same constants.
const (
	// Event verdicts, after a batch is split.
	Accepted  = "accepted"
	Duplicate = "duplicate"
	Keyless   = "keyless"
	// Republished is a duplicate the caller sent on purpose: a publish
	// marked as reconciliation (?reconcile=true) of a key already stored.
	// Nothing is written, as for a duplicate, but it is counted apart:
	// the duplicate rate reveals trouble at a provider or on the network,
	// and a deliberate re-publish pass is neither (invariant 27).
	Republished = "republished"

	// Intake answers that reject nothing (every other request outcome is
	// one of receive's reasons, a rejection). Accepted, Duplicate and
	// Republished answer requests too.
	Handshake = "handshake"              // a provider's verification challenge, answered
	Discarded = "discarded_unauthorized" // failed verification on a source that answers 200 anyway

	// UnknownSource is a request for a source the config does not have
	// (receive's reason for it).
	UnknownSource = "unknown_source"

	// Filtered is an event no destination of its source wanted.
	Filtered = "filtered"
	// OverBudget is an event whose source's filters on the body cost
	// more than its request's budget: the routes with them passed it over.
	OverBudget = "over_budget"

	// Attempt outcomes.
	Delivered = "delivered"
	Retry     = "retry"
	Dead      = "dead"
	// Skipped: the destination's transformation skipped the event (it
	// returned null, or set cancel): done, never attempted.
	Skipped = "skipped"
)

// Rollup metric names are a kind and what it counts, "events.duplicate":
// a source's Requests (by outcome) and Events (by verdict), a
// destination's Attempts (by outcome) and its latency counters.
const (
	Requests = "requests"
	Events   = "events"
	Types    = "types"   // stored events by type: types.invoice.paid
	Routing  = "routing" // routing.filtered: stored events no destination wanted; routing.over_budget: see OverBudget
	// Order counts order per entity: order.stale (held back; the store
	// counts them as it marks them: store.StaleMetric) and order.unordered
	// (no place found, delivered outside the order).
	Order     = "order"
	Stale     = "stale"
	Unordered = "unordered"
	Attempts  = "attempts"
	// Signature counts signatures taken though they were made outside
	// the tolerance: signature.aged (a queue's message; see
	// receive.Envelope.Queued).
	Signature = "signature"
	Aged      = "aged"

	Answers         = "answers"        // an API's answers: answers.new, answers.replayed
	LatencyCount    = "latency.count"  // successful deliveries
	LatencySumMS    = "latency.sum_ms" // their time from receipt, summed
	LatencyLEPrefix = "latency.le_"    // + a bucket (see LatencyBuckets)
)

// Rollup is the rollup metric name of what, counted under kind.
func Rollup(kind, what string) string { return kind + "." + what }

// SplitRollup is Rollup's inverse.
func SplitRollup(metric string) (kind, what string) {
	kind, what, _ = strings.Cut(metric, ".")
	return kind, what
}

// RecentUnknownSource is a source name that requests asked for and the
// config does not have: a provider pointed at a misspelt URL, an old
// source, or a scanner. Intake keeps the recent ones; the dashboard shows
// them.
type RecentUnknownSource struct {
	Name  string    `json:"name"`
	Count int64     `json:"count"`
	Last  time.Time `json:"last"`
}
