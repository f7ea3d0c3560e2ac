package store

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"time"
)

// Admin is what the operator surface (the admin API, the dashboard, the
// CLI) needs beyond the core: reading events with their deliveries and
// attempts, acting on dead letters, pausing destinations, and an audit log.
// It is part of Store: every backend implements it.
//
// Every change takes the audit entry that records it, and writes it in the
// same transaction: an operator's action and its record never part.
type Admin interface {
	// ListEvents lists events newest first (by id), a page at a time: the
	// next page is q with Before set to the last id.
	ListEvents(ctx context.Context, q EventQuery) ([]EventSummary, error)
	// EventContents reads the events q selects as ListEvents lists them
	// (newest first, paged by Before and Limit), each with its forwarded
	// headers and body (nil once dropped): what a search by content
	// reads, a page at a time, one short read each, so that a long search
	// holds no snapshot open.
	EventContents(ctx context.Context, q EventQuery) ([]EventContent, error)
	// Event returns one event with its body, forwarded headers, and every
	// delivery with every attempt, or ErrNotFound.
	Event(ctx context.Context, id int64) (EventDetail, error)
	// Replay is an operator's deliberate redelivery, the one way a stored
	// delivery is requeued: see Replay (the type). It returns how many
	// deliveries it requeued, or with DryRun how many it would, and
	// ErrNotFound when r names one event (by ID, or Source and Key) that is
	// not stored.
	Replay(ctx context.Context, r Replay) (int, error)
	// ListDeadLetters lists dead deliveries newest first, a page at a time.
	ListDeadLetters(ctx context.Context, q DeadQuery) ([]DeadLetter, error)
	// AddDelivery gives one stored event a delivery to destination, due at
	// now: an operator's explicit choice for a destination that did not
	// want it when it arrived (its types or filter did not match, or the
	// route came later). The destination leaves the event's Filtered, and
	// the audit entry is written in the same transaction. It returns 1, or
	// 0 when the event already has a delivery there (replay that one
	// instead), ErrBodyGone when the event's body was dropped, or
	// ErrNotFound. A sweep never deletes the event under it.
	AddDelivery(ctx context.Context, eventID int64, destination string, now time.Time, audit AuditEntry) (int, error)
	// AddDeliveries is AddDelivery for every event d selects: see
	// Deliver (the type). It returns what it added, what it left alone
	// and why, or with DryRun what it would; ErrNotFound or ErrBodyGone
	// when d names one event that is not stored or has no body.
	AddDeliveries(ctx context.Context, d Deliver) (DeliverCount, error)
	// SkipDelivery ends an event's pending delivery to destination
	// without delivering it: an operator's way past a fifo head that
	// cannot succeed. It becomes a dead letter that says it was skipped
	// (replayable), and its entity's next delivery goes. It returns 1, or 0
	// when the event has no pending delivery there, ErrInFlight when an
	// attempt of it is running now, or ErrNotFound.
	SkipDelivery(ctx context.Context, eventID int64, destination string, now time.Time, audit AuditEntry) (int, error)
	// ResetOrder forgets the version delivered of source's entity to
	// destination (to every destination when it is ""): an operator's
	// way out when a version far ahead (a test event, a provider's bug)
	// made the entity's later events stale. Its next event is current
	// again; deliveries already marked stale stay so (replay them), and a
	// delivery in flight keeps its place. It returns how many
	// (destination, entity) it reset: 0 when the store keeps no version
	// for the entity.
	ResetOrder(ctx context.Context, source, entity, destination string, now time.Time, audit AuditEntry) (int, error)
	// PurgeDeadLetters deletes the dead letters q selects (all of them, not
	// a page; their events go with the window sweep) and returns how many,
	// or with dryRun how many it would.
	PurgeDeadLetters(ctx context.Context, q DeadQuery, dryRun bool, audit AuditEntry) (int, error)
	// SetPaused pauses or resumes a destination. A paused destination's
	// deliveries are neither handed off nor leased (attempts already running
	// finish); intake keeps accepting; resuming drains them. It is stored,
	// so it survives restarts and applies to every replica.
	SetPaused(ctx context.Context, destination string, paused bool, now time.Time, audit AuditEntry) error
	// Paused returns the paused destinations and since when.
	Paused(ctx context.Context) (map[string]time.Time, error)
	// Queues returns, per destination with pending or dead deliveries, how
	// many are pending, how many of those are leased now, when the oldest
	// pending one's event was received, and how many are dead letters.
	Queues(ctx context.Context, now time.Time) ([]Queue, error)
	// EffectCounts counts the effects ledger's records by state, and the
	// pending ones whose lease expired at now as EffectLeaseExpired.
	EffectCounts(ctx context.Context, now time.Time) (map[string]int64, error)
	// RecordAudit writes an audit entry for a change made outside the
	// store (a config reload), which has no transaction of its own to
	// ride.
	RecordAudit(ctx context.Context, e AuditEntry) error
	// ListAudit lists the audit log newest first; Before pages.
	ListAudit(ctx context.Context, before int64, limit int) ([]AuditEntry, error)
}

// Replay selects what a replay requeues: every delivery, of every event
// Events selects (Before and Limit are ignored: all of them, not a page),
// that no worker holds right now (delivered, dead-lettered, or pending in
// backoff), narrowed to one destination and to dead letters when asked.
// Each is due again at Now with its attempt count reset (the attempts stay
// on record). The event keeps its key, so the destination sees the same
// Idempotency-Key, and inbound dedup is not involved. A delivery leased
// right now is left to its worker.
//
// The change and its audit entry are written together (a bulk replay in
// several transactions raises the entry's count with each), and a replay
// that returned a count is never undone by a concurrent SweepExpired: the
// events and their requeued deliveries stay.
//
// A delivery of an event whose body was dropped (body_retention) is never
// requeued; a replay that names one such event is ErrBodyGone.
type Replay struct {
	Events      EventQuery
	Destination string // only this destination's deliveries, when set
	Dead        bool   // only dead letters: retrying them
	Now         time.Time
	DryRun      bool
	Audit       AuditEntry // Action defaults to replay, or retry with Dead
}

// OneEvent is true when r names a single event, by ID or by source and key.
func (r Replay) OneEvent() bool {
	return r.Events.ID != 0 || (r.Events.Source != "" && r.Events.Key != "")
}

// Entry is r's audit entry, its action filled in.
func (r Replay) Entry() AuditEntry {
	a := r.Audit
	if a.Action == "" {
		a.Action = "replay"
		if r.Dead {
			a.Action = "retry"
		}
	}
	return a
}

// Deliver selects what AddDeliveries adds: a delivery to Destination, due
// at Now, for every event Events selects (Before and Limit are ignored:
// all of them, not a page), an operator's explicit choice as AddDelivery's
// is for one. An event that already has a delivery there is left as it is
// (replay that one instead), and one whose body was dropped has nothing to
// deliver; both are counted apart, never given a second delivery. Each
// event gets at most one, however often it is asked: the store's unique
// (event, destination) decides, not a read before the write.
//
// The events are read in id order, in transactions of a bounded batch
// each, so that intake's commits get the writer in between; the audit
// entry is written by the first and its count raised by each later one,
// with the deliveries it added: the record and the change never part,
// even if the process dies halfway (a second call adds the rest). A sweep
// never deletes an event under a batch that adds its delivery.
type Deliver struct {
	Events      EventQuery
	Destination string
	Now         time.Time
	DryRun      bool
	Audit       AuditEntry // Action defaults to deliver
}

// Entry is d's audit entry, its action filled in.
func (d Deliver) Entry() AuditEntry {
	a := d.Audit
	if a.Action == "" {
		a.Action = "deliver"
	}
	return a
}

// OneEvent is true when d names a single event, by ID or by source and key.
func (d Deliver) OneEvent() bool {
	return Replay{Events: d.Events}.OneEvent()
}

// DeliverCount is what AddDeliveries did, or in a dry run would do, with the
// events it selected: each is counted once, in one of the three.
type DeliverCount struct {
	// Added is how many events it gave a delivery to the destination.
	Added int
	// Already is how many had one there already: left as they are.
	Already int
	// Gone is how many had their body dropped (body_retention): nothing
	// to deliver.
	Gone int
}

// SplitIDs splits q into queries of at most batch events each, for a
// bulk change that a backend makes in batches (AddDeliveries, Replay):
// when q names its events by IDs (a search's result, thousands of them),
// each names its own share, sorted, so that no statement carries them
// all; else it returns q alone, and the backend pages it by id.
func SplitIDs(q EventQuery, batch int) []EventQuery {
	if q.IDs == nil || len(q.IDs) <= batch {
		return []EventQuery{q}
	}
	ids := slices.Clone(q.IDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var out []EventQuery
	for len(ids) > 0 {
		n := min(batch, len(ids))
		c := q
		c.IDs = ids[:n:n]
		out = append(out, c)
		ids = ids[n:]
	}
	return out
}

// ErrInFlight is returned when an operator's change would take a delivery
// from the worker attempting it now: wait for the attempt to end.
var ErrInFlight = errors.New("an attempt of the delivery is in flight")

// SkippedReason is what a skipped delivery says.
const SkippedReason = "skipped by an operator: the entity's next event was released"

// Event states, as listed: the state of an event's deliveries taken
// together.
const (
	EventPending   = "pending"   // a delivery is still to be made
	EventDelivered = "delivered" // every delivery is done, and at least one succeeded
	EventDead      = "dead"      // a delivery is a dead letter
	EventStale     = "stale"     // a delivery was held back: older than its entity's delivered version (see Order)
	EventStored    = "stored"    // the event has no destination
	EventFiltered  = "filtered"  // no destination of its source wanted it (see NewEvent.Filtered)
	// EventSkipped is an event whose every delivery its destination's
	// transformation skipped: nothing was sent, which "delivered" would
	// hide.
	EventSkipped = "skipped"
)

// EventStates are the states an event lists in, the ones a filter takes.
func EventStates() []string {
	return []string{EventPending, EventDelivered, EventDead, EventStale, EventSkipped, EventStored, EventFiltered}
}

// EventQuery selects events. Zero fields select everything.
type EventQuery struct {
	ID        int64  // one event
	Key       string // with Source: one event, by its key
	Source    string
	Type      string // the event type; a trailing * matches a prefix (invoice.*)
	State     string // one of EventStates
	KeyPrefix string
	From, To  time.Time // received in [From, To)
	Before    int64     // the cursor: ids below this one
	Limit     int
	// IDs, when set, selects only these events (what a search by
	// content found, for a bulk replay of it). Empty (nil or not) is no
	// narrowing: a caller whose search found nothing must not ask.
	IDs []int64
	// Sources, when not nil, selects only the events of these sources
	// (a tenant's: see admin.Tenant); empty but not nil selects none.
	Sources []string
}

// EventSummary is an event in a list.
type EventSummary struct {
	ID          int64
	Source      string
	Key         string
	Type        string
	Keyless     bool
	ContentType string
	Size        int
	ReceivedAt  time.Time
	ExpiresAt   time.Time
	State       string
	Deliveries  int
}

// EventContent is what a search by content reads of an event: no more, so
// that a search reads each row without the summary's subqueries (its
// state, its deliveries), which ListEvents gives for what it found.
type EventContent struct {
	ID         int64
	Source     string
	ReceivedAt time.Time
	Header     http.Header
	Body       []byte
}

// EventDetail is one event, whole.
type EventDetail struct {
	EventSummary
	Header     http.Header
	Body       []byte
	Deliveries []DeliveryDetail
	// Copies is how many duplicate copies arrived after the first (counted
	// about once a second: see Batch.Copies); LastCopyAt, when the last did
	// (zero when none has).
	Copies     int64
	LastCopyAt time.Time
	// Filtered are the source's destinations that did not want the event.
	Filtered []string
	// BodyDroppedAt is when the body was dropped (its source's
	// body_retention; Body is then empty), zero while it is kept.
	BodyDroppedAt time.Time
}

// DeliveryDetail is one delivery of an event, with its attempts.
type DeliveryDetail struct {
	ID             int64
	Destination    string
	State          DeliveryState
	Attempts       int
	NextAttemptAt  time.Time
	LeaseExpiresAt time.Time
	LastStatus     int
	LastError      string
	UpdatedAt      time.Time
	History        []AttemptRecord
	// Order is the delivery's place among its entity's events, when its
	// source orders them (Entity empty otherwise, and after a replay).
	Order DeliveryOrder
}

// DeliveryOrder is where an ordered delivery stands.
type DeliveryOrder struct {
	Entity  string // as the provider names it (without the source)
	Version string // as the provider wrote it; "#id" in arrival order
	Mode    OrderMode
	// Waiting is a pending delivery parked behind its entity's delivery in
	// flight, or its fifo head.
	Waiting bool
}

// AttemptRecord is one attempt, as recorded.
type AttemptRecord struct {
	Attempt    int
	StartedAt  time.Time
	Duration   time.Duration
	StatusCode int
	Error      string
	Outcome    string
	Response   string // the start of the destination's answer
	// ScriptDigest and SentDigest are Outcome's: the transformation's
	// version and what it sent ("" without one).
	ScriptDigest, SentDigest string
}

// DeadQuery selects dead letters.
type DeadQuery struct {
	Destination string
	Source      string
	// Sources, when not nil, selects only the dead letters of these
	// sources' events (a tenant's); empty but not nil selects none.
	Sources []string
	Before  int64 // the cursor: delivery ids below this one
	Limit   int
}

// DeadLetter is a dead delivery, with its event's identity.
type DeadLetter struct {
	DeliveryID  int64
	EventID     int64
	Source      string
	Key         string
	Destination string
	Attempts    int
	LastStatus  int
	LastError   string
	ReceivedAt  time.Time
	DiedAt      time.Time
}

// Queue is a destination's pending deliveries.
type Queue struct {
	Destination string
	Pending     int64
	Leased      int64
	Oldest      time.Time // when the oldest pending delivery's event was received
	Dead        int64
}

// MergeDead adds dead-letter counts to queues, in destination order.
func MergeDead(queues []Queue, dead map[string]int64) []Queue {
	for i := range queues {
		if n, ok := dead[queues[i].Destination]; ok {
			queues[i].Dead = n
			delete(dead, queues[i].Destination)
		}
	}
	for d, n := range dead {
		queues = append(queues, Queue{Destination: d, Dead: n})
	}
	sort.Slice(queues, func(i, j int) bool { return queues[i].Destination < queues[j].Destination })
	return queues
}

// AuditEntry is one change an operator made.
type AuditEntry struct {
	ID     int64
	At     time.Time
	Actor  string // the API token's name, or "cli"
	Action string // replay, retry, purge, pause, resume, effect_reset
	Target string // what it applied to: an event, a filter, a destination
	Count  int    // how many things changed
}
