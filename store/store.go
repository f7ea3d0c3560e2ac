// Package store defines the one contract between oncehook's core and a
// durable backend. Receive, deliver, the effects ledger, the operator's
// service, flow control and the dashboard's sessions talk to a Store and
// nothing else, so that a backend is a package of its own (store/sqlite,
// store/postgres) that either passes the conformance suite
// (store/storetest) or does not ship.
//
// A backend must do everything Store names: the core's commit, sweep and
// counters, and the capabilities every part relies on (Admin, Flow,
// Sessions), so that no caller has to ask whether it may use one. What a
// backend may do is asked for explicitly, as River's drivers are asked
// (SupportsListener, then Listen), and a capability that is absent has
// one answer: an error wrapping ErrNotSupported. A layer in front of a
// backend (store/redis) embeds the Store it wraps and overrides only what
// it changes, so it offers exactly what its inner store does.
//
// The store is the arbiter of every race: a key is claimed by one atomic
// operation the backend decides (a unique constraint with ON CONFLICT DO
// NOTHING), never by a check followed by an insert.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrNotFound is returned when no stored event has the given source and key.
var ErrNotFound = errors.New("no such event")

// ErrBodyGone is a replay or a new delivery of an event whose body was
// dropped (its source's body_retention): its key is kept, its payload is
// not, so there is nothing to deliver.
var ErrBodyGone = errors.New("the event's body is gone (body_retention)")

// ErrUnavailable wraps every error that means the store could not be reached
// or could not commit. Intake answers 503 for it, never 200.
var ErrUnavailable = errors.New("store unavailable")

// ErrRejected wraps an error that means the store refused the data it was
// given (a value it cannot hold, a constraint), not that it is down. Another
// batch would commit: the group committer then commits each request on its
// own, so that only the request that carries the offending data fails.
var ErrRejected = errors.New("store rejected the data")

// ErrLocked wraps a write that waited for a lock another connection
// holds, and gave up (at its context's end, or the store's own bound),
// beside ErrUnavailable: SQLite has one writer per database, and a
// transaction a caller keeps open on the file holds every commit until it
// ends. The store itself is sound; readiness does not fail for it (see
// LockWait).
var ErrLocked = errors.New("the write lock is held by another connection")

// ErrNotSupported is the one answer of a backend asked for an optional
// capability it does not have (Listen on SQLite), wrapped with what was
// asked. Ask first (SupportsListener) where absence is expected.
var ErrNotSupported = errors.New("not supported by this store")

// NewEvent is one provider event, after its batch was split and its key
// extracted, on its way to being claimed.
type NewEvent struct {
	Source      string
	Key         string // the provider's stable event key, or a generated one when Keyless
	Keyless     bool   // no key was found; the event is accepted without dedup
	Type        string // the provider's event type (provider.Item.Type); empty when untyped
	ContentType string
	Header      http.Header // the provider's headers to forward (no credentials)
	Body        []byte
	ReceivedAt  time.Time
	ExpiresAt   time.Time // ReceivedAt + the source's window: the key is kept at least until then
	// BodyExpiresAt, when set (ReceivedAt + the source's body_retention),
	// is when the body may go before the key does: SweepExpired drops it
	// then, once no delivery needs it, and the key stays a barrier until
	// ExpiresAt. Zero: the body goes with the event.
	BodyExpiresAt time.Time
	Destinations  []string // one delivery is created per destination, in the same transaction
	// Filtered are the source's destinations that did not want the event
	// (their types or filter): kept with it, so that the event says why it
	// went nowhere, or not there.
	Filtered []string
	// Order, when its Entity is set, puts the event's deliveries in order
	// with its entity's other events (see order.go).
	Order Order
	// Trace is the W3C traceparent of the request that brought the event
	// (empty when not traced): its deliveries continue that trace.
	Trace string
}

// Claim is the verdict of the store on one NewEvent.
type Claim struct {
	EventID   int64
	Duplicate bool // the (source, key) was already stored: nothing was written
	// ExpiresAt is when the stored key's window ends: the new event's own,
	// or for a duplicate the stored event's. Zero when the store cannot
	// say; a cache of committed keys must then not remember the key.
	ExpiresAt time.Time
}

// DeliveryState is where a delivery stands.
type DeliveryState string

const (
	Pending   DeliveryState = "pending"   // waiting for its next attempt, or leased
	Delivered DeliveryState = "delivered" // the destination answered 2xx
	Dead      DeliveryState = "dead"      // permanent failure or retries exhausted: a dead letter
	// Stale is an ordered delivery older than one already delivered for
	// its entity: held back, not delivered (an operator can replay it).
	Stale DeliveryState = "stale"
	// Skipped is a delivery the destination's transformation skipped for
	// this event (it returned null, or set cancel): done, not dead, and
	// never attempted.
	Skipped DeliveryState = "skipped"
)

// LeasedDelivery is a delivery a worker owns until LeaseExpiresAt. If the
// worker dies, the lease expires and another worker takes the delivery over.
type LeasedDelivery struct {
	ID          int64
	EventID     int64
	Source      string
	Key         string
	Destination string
	Attempt     int // the number of this attempt, from 1
	// Type is NewEvent.Type, as stored: a queue destination's subject may
	// name it, and it travels as X-Oncehook-Type.
	Type string
	// Entity is the event's order entity as the provider wrote it
	// (NewEvent.Order.Entity), "" when its source does not order events:
	// a Kafka destination's record key, so that an entity's events stay
	// in one partition, in order.
	Entity         string
	ContentType    string
	Header         http.Header // as stored with the event
	Body           []byte
	ReceivedAt     time.Time
	LeaseToken     string
	LeaseExpiresAt time.Time
	// Ordered is a delivery in its entity's order: its outcome frees the
	// entity for the next one (Outcome.Ordered).
	Ordered bool
	// Stale is an ordered delivery older than the version already
	// delivered (CurrentVersion), sent because its source asks for stale
	// events to be delivered marked.
	Stale          bool
	CurrentVersion string
	// Trace is NewEvent.Trace, as stored with the event.
	Trace string
}

// OutcomeKind says what an attempt led to.
type OutcomeKind int

const (
	OutcomeDelivered OutcomeKind = iota // 2xx: the delivery is done
	OutcomeRetry                        // retryable failure: try again at NextAttemptAt
	OutcomeDead                         // permanent failure or attempts exhausted
	OutcomeReleased                     // the worker gave the lease back without an attempt (shutdown): due again at NextAttemptAt (now if zero)
	OutcomeSkipped                      // the destination's transformation skipped the event: done, recorded as skipped
)

// String names the outcome as attempts are recorded: delivered, retry,
// dead, released.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeDelivered:
		return "delivered"
	case OutcomeRetry:
		return "retry"
	case OutcomeDead:
		return "dead"
	case OutcomeReleased:
		return "released"
	case OutcomeSkipped:
		return "skipped"
	}
	return "unknown"
}

// Outcome is the result of one attempt (or a released lease), written back by
// the worker. An outcome whose LeaseToken no longer matches (the lease expired
// and another worker took the delivery) is ignored: that worker owns it now.
type Outcome struct {
	DeliveryID    int64
	LeaseToken    string
	Kind          OutcomeKind
	Attempt       int
	StartedAt     time.Time
	Duration      time.Duration
	StatusCode    int    // 0 when no HTTP answer arrived
	Error         string // empty on success
	Response      string // the start of the destination's answer, for the operator
	NextAttemptAt time.Time
	// Ordered is LeasedDelivery.Ordered, carried back: the commit then
	// frees the entity and wakes its next delivery.
	Ordered bool
	// ScriptDigest and SentDigest, when the destination transforms its
	// events: the script's version and what the attempt sent (path, query,
	// headers and body), recorded with the attempt so an operator can see
	// that two attempts sent the same bytes.
	ScriptDigest, SentDigest string
}

// Stats counts what the store holds. Tests and the admin API read it.
type Stats struct {
	Events    int64
	Keyless   int64
	Pending   int64
	Delivered int64
	Dead      int64
	Stale     int64
	Attempts  int64
	// Effects counts the effects ledger's records by state.
	Effects map[string]int64
}

// Batch is everything one tick of the writer commits, in one transaction:
// the events intake claims, the outcomes of attempts, and the deliveries
// leased to this process's worker. One commit (one fsync) carries all three,
// where each used to pay a commit of its own.
type Batch struct {
	Events   []NewEvent
	Outcomes []Outcome
	Lease    Lease
	// Effects are operations on the effects ledger (see effect.go), applied
	// in order for each key.
	Effects []EffectOp
	// Stats are hourly counters to add (see rollup.go), under Shard: the
	// writer's own rows.
	Stats []StatDelta
	Shard string
	// Copies are duplicates to count on their stored events (how many
	// copies of an event arrived, and when the last did), gathered by
	// intake and committed with the rollups, about once a second. A copy
	// of an event no longer stored changes nothing.
	Copies []Copy
}

// Copy is N more copies of the event source/key, the last at Last.
type Copy struct {
	Source, Key string
	N           int64
	Last        time.Time
}

// Lease asks a commit to lease deliveries to the caller, in the same
// transaction, up to Max in all:
//   - first the deliveries the batch itself creates ("hand-off"): they are
//     inserted already leased, as attempt 1, and returned with the bodies
//     the batch carried; nothing is read back;
//   - then, when Due is set, pending deliveries due at Now and not leased
//     by anyone (or whose lease expired), as LeaseDeliveries does.
//
// A delivery the batch creates beyond Max is stored unleased and due now,
// for any worker to lease.
type Lease struct {
	Max int
	Due bool
	Now time.Time
	For time.Duration
	// Held destinations' deliveries (a pause, for now: see internal/hold)
	// are neither handed off nor leased: they wait, never dropped.
	Held []string
}

// Committed is what a commit did.
type Committed struct {
	Claims  []Claim          // one per Batch.Events, in order
	Leased  []LeasedDelivery // handed off first, then due
	Effects []EffectResult   // one per Batch.Effects, in order
	// OrderedDue reports ordered deliveries this commit left due now and
	// did not lease (new ones it could not hand off, or an entity's next
	// one its outcomes woke): the caller asks for due deliveries again.
	OrderedDue bool
	// Deferred are the batch's Copies whose events' rows another open
	// transaction holds (a caller's outbox transaction that published a
	// copy of the same key, and holds the row until it ends): not counted
	// by this commit, which does not wait for that transaction, and
	// given back to be counted by a later one.
	Deferred []Copy
}

// Store is the contract a backend implements, whole. Every method that
// waits takes a context; every error that means "could not reach or
// commit" wraps ErrUnavailable.
//
// What a backend must do: the core's methods below (claims, outcomes,
// leases, effects, sweeps, counters), and the operator's queries (Admin),
// flow control (Flow), the dashboard's sessions (Sessions) and pull
// consumers' leases (Pulls), which every replica must share. What it may
// do: announce new deliveries (Listener), asked for with
// SupportsListener; without it, Listen returns an error wrapping
// ErrNotSupported.
type Store interface {
	Admin
	Flow
	Sessions
	AlertIssues
	Pulls
	Objects
	Listener

	// Commit applies a Batch in one transaction and returns only after it
	// is durable. Everything a batch carries (events and their
	// deliveries, the hand-off's leases, due leases, outcomes, counters,
	// copies and effects) is in that transaction: a commit that fails
	// wrote none of it (storetest's RejectedCommitWritesNothing). The one
	// step a backend may take in a second transaction, after the first
	// committed, is the ordered lease step (Committed.Leased's ordered
	// deliveries, see order.go): what the batch committed stands whatever
	// happens to it, and a step that fails leases nothing, leaving the
	// deliveries due for the next.
	//
	// Claims: every event's (source, key) is claimed and, for each one not
	// seen before, the event is stored with one pending delivery per
	// destination. Within a batch, a key that appears twice is claimed by
	// its first occurrence. A commit never deadlocks with a concurrent one
	// holding the same keys (the backend locks keys in one global order, or
	// retries).
	//
	// Outcomes record attempts and move deliveries on. An outcome whose
	// LeaseToken no longer matches (the lease expired and another worker
	// took the delivery) is ignored.
	//
	// Leases count the attempt they are for: LeasedDelivery.Attempt is the
	// stored count plus one, stored at once. So an attempt that never
	// reports (its worker crashed, or ran past the lease) still counts
	// toward the destination's max_attempts, and its repeat carries the next
	// number. An OutcomeReleased gives the count back.
	//
	// Effects are applied with Transition, each on its key's record, locked
	// (in key order, so that two commits never deadlock), and each claim
	// that takes a lease is recorded as an attempt.
	//
	// An error wraps ErrRejected when the data itself was refused (another
	// batch without it would commit), or ErrUnavailable; either way nothing
	// of the batch was written.
	Commit(ctx context.Context, b Batch) (Committed, error)

	// Effect returns the effects ledger's record for key, with its attempts,
	// or ErrNotFound.
	Effect(ctx context.Context, key string) (EffectRecord, error)

	// ListEffects lists records in key order (without their attempts): the
	// reconciliation list of what was left halfway or failed.
	ListEffects(ctx context.Context, q EffectQuery) ([]EffectRecord, error)

	// Rollups returns the hourly counters q selects, each summed over its
	// shards, ordered by hour, scope, name and metric.
	Rollups(ctx context.Context, q RollupQuery) ([]Rollup, error)
	// SweepRollups deletes the counters of hours before before.
	SweepRollups(ctx context.Context, before time.Time) (int, error)

	// NextDue returns when the earliest pending delivery of a destination
	// not held becomes due, and false when there is none. A lease moves a
	// delivery's due time to the lease's expiry (when another worker may take
	// it over), so this is one indexed MIN, however large the backlog.
	NextDue(ctx context.Context, held []string) (time.Time, bool, error)

	// SweepExpired deletes up to limit events whose window ended before now
	// and that have no delivery still pending or dead-lettered, drops the
	// bodies of up to limit events past their BodyExpiresAt under the same
	// rule (the event and its key stay), and deletes up to limit final
	// effect records past their retention, returning the most it removed of
	// any. Callers loop in small batches so intake is never blocked for
	// long.
	SweepExpired(ctx context.Context, now time.Time, limit int) (int, error)

	// Stats counts what the store holds, row by row: for tests and the
	// benchmarks, which need exact totals; operators read the rollups.
	Stats(ctx context.Context) (Stats, error)
	// Ping checks that the store can commit now: a small durable write, not
	// only a connection (a full disk still answers reads). A probe that
	// waited its whole ctx for a lock another connection holds wraps
	// ErrLocked.
	Ping(ctx context.Context) error
	// LockWait says how the store's writer waits for a lock another
	// connection holds (see LockWait). A backend without a database-wide
	// write lock (PostgreSQL: writers wait only on the rows they share)
	// answers the zero LockWait.
	LockWait() LockWait
	Close() error

	// ID is a random identity made once per database. Anything that caches
	// what this store committed keys its cache with it, so a cache can never
	// answer for another database (a fresh schema, a rebuilt server).
	ID() string
}

// LockWait is how the store's writer has waited for a lock another
// connection holds. SQLite has one writer per database: a transaction a
// caller keeps open on the file (an outbox PublishTx, an effect in the
// caller's own transaction, a CLI command, another process) holds every
// commit of the gateway, each webhook's claim with it, until it ends.
type LockWait struct {
	// For is how long the writer has waited in the wait going on now (0:
	// it waits for nothing). Waits that follow each other without the lock
	// taken in between count as one: a commit that gave up and the next
	// one, waiting on the same holder.
	For time.Duration
	// Total is the time every wait took since the store was opened (a
	// wait counts from 10 ms: a BEGIN without a holder takes microseconds).
	Total time.Duration
}

// String says what the wait means, in one sentence: for the log, readiness
// and the doctor.
func (w LockWait) String() string {
	return fmt.Sprintf("the store's writer has waited %s for the database's write lock, which another connection holds "+
		"(a transaction kept open on the file: an outbox PublishTx or an effect in your code's transaction, a CLI command, another process); "+
		"every webhook waits behind it", w.For.Round(100*time.Millisecond))
}

// Listener is the capability a backend may have: to announce, across
// replicas, that a transaction committed new deliveries (PostgreSQL's
// LISTEN/NOTIFY), so that every worker wakes at once rather than at its
// next poll.
type Listener interface {
	// SupportsListener reports whether Listen announces anything. When it
	// is false, workers find new deliveries by polling (NextDue) alone.
	SupportsListener() bool
	// Listen calls wake whenever a transaction (on any replica) commits new
	// deliveries, until ctx ends, and then returns nil. It reconnects by
	// itself after a failure and calls wake after each (re)connect, since
	// notifications sent meanwhile are lost. A backend without
	// notifications returns at once an error wrapping ErrNotSupported.
	Listen(ctx context.Context, wake func()) error
}
