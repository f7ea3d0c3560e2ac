package store

import "time"

// Hourly rollups: per source and per destination, per hour, counters of
// what intake answered and what delivery did. They are written with the
// writer's own commits (a StatDelta rides the Batch that carries the events
// it counts, or the next one), so they survive restarts and, on
// PostgreSQL, are shared by every replica, unlike Prometheus counters.
//
// A row is (hour, scope, name, metric, shard) += value. Each writer of each
// process writes rows of its own shard, so that two commits never wait on
// each other's counter rows; a read sums the shards.

// Rollup scopes.
const (
	ScopeSource      = "source"
	ScopeDestination = "destination"
	ScopeAPI         = "api" // the user's own APIs behind the Idempotency-Key proxy
)

// StatDelta adds Value to a counter of an hour.
type StatDelta struct {
	Hour   time.Time // truncated to the hour
	Scope  string    // source or destination
	Name   string    // the source's or destination's name
	Metric string    // e.g. requests.accepted, events.duplicate, attempts.delivered, latency.sum_ms
	Value  int64
}

// RollupQuery selects counters of hours From (inclusive) to To (exclusive).
type RollupQuery struct {
	Scope string // empty: both
	Name  string // empty: every name
	From  time.Time
	To    time.Time
}

// Rollup is a counter's total for an hour, over every shard.
type Rollup struct {
	Hour   time.Time
	Scope  string
	Name   string
	Metric string
	Value  int64
}
