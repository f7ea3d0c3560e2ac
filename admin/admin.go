// Package admin is oncehook's operator surface: what came in, what was a
// duplicate, what was rejected and why, what is stuck, and the actions that
// unstick it (replay, retry, purge, pause), each written to an audit log.
//
// Operator is what an operator can do; Service does it on a store directly
// (the gateway's API and dashboard, and the CLI with --config). The JSON
// API under /v1 that serves an Operator, and the Client that calls a
// running gateway's (the CLI with --api), are package api's; docs/api.md
// documents the API.
//
// Traffic counts (received, duplicates, rejected, attempts) come from the
// hourly rollups (see store.Rollup), not from counting events, so the
// overview stays fast with millions stored; what only rows can say (queue
// depths, effects by state, a bulk action's dry run) is counted on indexes.
// Lists page by keyset (a cursor), never by offset.
package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/actor"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/internal/tenant"
	"github.com/oncehook/oncehook/store"
)

// Operator is everything an operator can see and do. Service and Client
// implement it; the CLI takes either.
type Operator interface {
	Sources(ctx context.Context) ([]SourceView, error)
	Stats(ctx context.Context, q StatsQuery) (StatsView, error)
	Events(ctx context.Context, f EventFilter) (EventPage, error)
	Event(ctx context.Context, id int64) (EventDetail, error)
	// ReplayEvent redelivers one stored event to its destinations.
	ReplayEvent(ctx context.Context, id int64) (Count, error)
	// ReplayEvents redelivers every event f selects (not a page of them);
	// with dryRun it only counts.
	ReplayEvents(ctx context.Context, f EventFilter, dryRun bool) (Count, error)
	DeadLetters(ctx context.Context, f DeadFilter) (DeadPage, error)
	RetryDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error)
	PurgeDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error)
	Destinations(ctx context.Context) ([]DestinationView, error)
	// SetPaused pauses (holds, never drops) or resumes a destination.
	SetPaused(ctx context.Context, destination string, paused bool) (DestinationView, error)
	Audit(ctx context.Context, cursor string, limit int) (AuditPage, error)
	// Doctor checks a source's keys (every source when source is empty).
	Doctor(ctx context.Context, source string) (DoctorReport, error)
	// SetBreaker opens a destination's circuit breaker by hand (held until
	// closed by hand) or closes it (its held deliveries drain), audited.
	SetBreaker(ctx context.Context, destination string, open bool) (DestinationView, error)
	// DeliverEvent sends one stored event to a destination it has no
	// delivery for (one its route passed over: see store.Admin's
	// AddDelivery), audited. Count is 1, or 0 when it already has one.
	DeliverEvent(ctx context.Context, id int64, destination string) (Count, error)
	// DeliverEvents is DeliverEvent for every event f selects (not a
	// page of them) to f.Destination, audited once; with dryRun it only
	// counts. Count is how many it gave a delivery; Already and Gone,
	// how many it left alone and why.
	DeliverEvents(ctx context.Context, f EventFilter, dryRun bool) (Count, error)
	// SkipEvent ends an event's pending delivery to a destination without
	// delivering it, audited: the way past a fifo head that cannot succeed
	// (its entity's next event goes). Count is 1, or 0 when there is none
	// pending; ErrConflict while an attempt of it is in flight.
	SkipEvent(ctx context.Context, id int64, destination string) (Count, error)
	// ResetOrder forgets the version delivered of a source's entity to a
	// destination (every destination when it is empty), audited: the way
	// out when a version far ahead made the entity's later events stale
	// (see store.Admin's ResetOrder). Count is how many it reset.
	ResetOrder(ctx context.Context, source, entity, destination string) (Count, error)
	// ResetEffect reopens a failed or expired effects ledger record, the
	// operator's second chance (audited).
	ResetEffect(ctx context.Context, key string) error
	// Reload reads the running gateway's config file anew and applies
	// it without a restart, audited (see Service.Reload).
	Reload(ctx context.Context) (ReloadView, error)
	// Issues lists the alerts' issues, newest first; Issue is one with
	// its timeline (see alerts.go).
	Issues(ctx context.Context, f IssueFilter) (IssuePage, error)
	Issue(ctx context.Context, id int64) (IssueView, error)
	// AcknowledgeIssue silences an open issue until it resolves;
	// ResolveIssue ends one by hand. Both audited.
	AcknowledgeIssue(ctx context.Context, id int64) (IssueView, error)
	ResolveIssue(ctx context.Context, id int64) (IssueView, error)
}

// Errors an Operator returns; the API answers them with 404 and 400.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid")
	// ErrConflict is a change that must wait (the API answers 409).
	ErrConflict = errors.New("conflict")
	// ErrGone is an event whose body was dropped (its source's
	// body_retention): its key is kept, but there is nothing to deliver
	// (the API answers 410).
	ErrGone = errors.New("gone")
)

// bodyGone says that event id's body was dropped, when err is the store's
// ErrBodyGone; else it returns err.
func bodyGone(err error, id string) error {
	if errors.Is(err, store.ErrBodyGone) {
		return fmt.Errorf("event %s: its body was dropped after its source's body_retention (the key is kept as a barrier): there is nothing to deliver: %w", id, ErrGone)
	}
	return err
}

// InvalidError is a bad argument, naming the field (the API answers it
// with 400 and the field).
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Source is a configured source, as the operator sees it.
type Source struct {
	Name         string
	Preset       string
	Window       time.Duration
	Destinations []string
	OnMissingKey string
	// Ordered: the source asks for order per entity (order:).
	Ordered bool
	// Transport is where its events come from: http (POST /in/{name}),
	// outbox (the user's code: PublishTx, POST /v1/publish), or the broker
	// it consumes (nats, amqp, kafka); Where names the stream, queue or
	// topic.
	Transport string
	Where     string
	// ManagedBy is "file" (the config file's) or "api" (created through
	// the API).
	ManagedBy string
	// Tenant owns it ("" for none: the operator's); see Tenant.
	Tenant string
}

// Destination is a configured destination.
type Destination struct {
	Name string
	URL  string
	// Kind is http, or the broker it publishes to (nats, amqp, kafka);
	// Target names the subject, exchange or topic.
	Kind   string
	Target string
	// Rate sends per RatePer at most (0: no limit), as configured.
	Rate    int
	RatePer time.Duration
	// ManagedBy is "file" or "api", as a Source's.
	ManagedBy string
	// Tenant owns it, as a Source's.
	Tenant string
}

// Options configure a Service.
type Options struct {
	Store        store.Store
	Sources      []Source
	Destinations []Destination
	// Effects, when set, lets the dashboard show the effects ledger.
	Effects *effect.Local
	// Changed is called after a change that the delivery side must see at
	// once (a pause, a resume, a replay, a retry): the gateway refreshes
	// its paused set and wakes its worker.
	Changed func()
	// Consumers, when set, says how each queue source's consumer stands
	// with its broker now (the gateway's ConsumerStatus).
	Consumers func() []broker.Status
	// LockWait, when set, is how the gateway's writer waits for a lock
	// another connection holds (its store's LockWait), for the doctor.
	// Unset (a command on the store, whose writer is not the gateway's),
	// the doctor says to ask the gateway.
	LockWait func() store.LockWait
	// ObjectsBehind, when set, says why the gateway does not run the
	// sources and destinations as stored (another replica's change it
	// could not apply) and since when; "" when it runs them. For the
	// doctor.
	ObjectsBehind func() (string, time.Time)
	// Samples are recent duplicates' bodies, for the key doctor's second
	// check; without them it runs only the first.
	Samples *Samples
	// Alerts, when set, marks sources and destinations that are alerting.
	Alerts Firing
	// Reload, when set, reloads the config (the gateway's; see Reload).
	Reload Reloader
	Now    func() time.Time
}

// Firing says which alerts fire now for a source or destination (scope
// store.ScopeSource or store.ScopeDestination): the gateway's alerter.
type Firing interface {
	Firing(scope, name string) []string
}

// Service is the Operator over a store.
type Service struct {
	opts    Options
	admin   store.Admin
	catalog atomic.Pointer[catalog] // the configured sources and destinations
}

// catalog is one config's sources and destinations.
type catalog struct {
	sources      []Source
	destinations []Destination
	// tenants are their owners, by name: built once per catalog, read by
	// every check of a tenant's reach (see Tenants).
	tenants *tenant.Index
	// tokens are the API tokens' tenants, by token name (a tenant's
	// audit entries are its tokens').
	tokens map[string]string
}

// SetCatalog replaces the configured sources and destinations (a config
// reload). A destination that is no longer configured is still listed
// while it has deliveries, marked removed: they are held, not dropped.
func (s *Service) SetCatalog(sources []Source, destinations []Destination) {
	c := catalog{sources: sources, destinations: destinations, tenants: tenantIndex(sources, destinations)}
	if old := s.catalog.Load(); old != nil {
		c.tokens = old.tokens
	}
	s.catalog.Store(&c)
}

// tenantIndex indexes the catalog's owners.
func tenantIndex(sources []Source, destinations []Destination) *tenant.Index {
	src := make([]tenant.Object, len(sources))
	for i, x := range sources {
		src[i] = tenant.Object{Name: x.Name, Tenant: x.Tenant}
	}
	dst := make([]tenant.Object, len(destinations))
	for i, x := range destinations {
		dst[i] = tenant.Object{Name: x.Name, Tenant: x.Tenant}
	}
	return tenant.NewIndex(src, dst)
}

// SetTenantTokens names each API token's tenant ("" for none), by token
// name, as the config gives them (a reload).
func (s *Service) SetTenantTokens(tokens map[string]string) {
	c := *s.catalog.Load()
	c.tokens = tokens
	s.catalog.Store(&c)
}

func (s *Service) tenantTokens() map[string]string { return s.catalog.Load().tokens }

// TenantOf is the tenant of the configured source or destination (kind:
// store.ObjectSource or store.ObjectDestination, which are also the
// alerts' scopes) of name, and whether there is one: the one answer the
// gateway, its objects API and its alerts read too.
func (s *Service) TenantOf(kind, name string) (string, bool) {
	return s.tenants().Of(kind, name)
}

func (s *Service) tenants() *tenant.Index { return s.catalog.Load().tenants }

// sourceTenant and destinationTenant are a configured source's and
// destination's tenant ("" for none, or for no such name).
func (s *Service) sourceTenant(name string) string {
	t, _ := s.tenants().Of(tenant.Source, name)
	return t
}

func (s *Service) destinationTenant(name string) string {
	t, _ := s.tenants().Of(tenant.Destination, name)
	return t
}

// tenantSources are the names of tenant's sources, never nil (an empty
// list narrows a query to nothing).
func (s *Service) tenantSources(tenant string) []string {
	return s.tenants().SourcesOf(tenant)
}

func (s *Service) sources() []Source           { return s.catalog.Load().sources }
func (s *Service) destinations() []Destination { return s.catalog.Load().destinations }

var _ Operator = (*Service)(nil)

// New returns a Service over opts.Store's operator queries.
func New(opts Options) (*Service, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Changed == nil {
		opts.Changed = func() {}
	}
	svc := &Service{opts: opts, admin: opts.Store}
	svc.SetCatalog(opts.Sources, opts.Destinations)
	return svc, nil
}

// ListEffects lists the effects ledger's records q selects (the
// reconciliation list), or ErrNotFound when the Service has no ledger.
func (s *Service) ListEffects(ctx context.Context, q store.EffectQuery) ([]effect.Record, error) {
	if s.opts.Effects == nil {
		return nil, fmt.Errorf("effects ledger: %w", ErrNotFound)
	}
	return s.opts.Effects.List(ctx, q)
}

// WithActor names who makes the changes made with ctx, for the audit log
// (the CLI passes "cli:<user>"). The API's callers are named by their
// token's name.
func WithActor(ctx context.Context, name string) context.Context {
	return actor.With(ctx, name)
}

// ActorOf returns who makes the changes made with ctx.
func ActorOf(ctx context.Context) string {
	if name, ok := actor.Of(ctx); ok {
		return name
	}
	return UnknownActor
}

// UnknownActor is ActorOf a context that names nobody.
const UnknownActor = "unknown"

// audit is the audit log's entry for a, taken now on target by ctx's
// actor.
func (s *Service) audit(ctx context.Context, a interface{ action() Action }, target string) store.AuditEntry {
	return s.auditAs(ctx, a.action().Audit, target)
}

// auditAs is an audit log entry under a word of its own (a refused
// reload, which no action in the table takes).
func (s *Service) auditAs(ctx context.Context, word, target string) store.AuditEntry {
	return store.AuditEntry{At: s.opts.Now(), Actor: ActorOf(ctx), Action: word, Target: target}
}

// Count is how many things an action changed (or, in a dry run, would).
type Count struct {
	Count  int  `json:"count"`
	DryRun bool `json:"dry_run,omitempty"`
	// Already and Gone, on a bulk delivery to a destination, count the
	// events it left alone, apart from Count (those it gave a delivery):
	// Already, the events that had one there (replay those instead);
	// Gone, those whose body was dropped (body_retention), with nothing
	// to deliver.
	Already int `json:"already,omitempty"`
	Gone    int `json:"gone,omitempty"`
	// Searched, on a bulk action on a search by content, says how far
	// the search read.
	Searched *Searched `json:"searched,omitempty"`
}

// counted is the answer of an action that changed n things (or, in a dry
// run, would): the delivery side hears of a real change at once.
func (s *Service) counted(n int, dryRun bool) (Count, error) {
	if n > 0 && !dryRun {
		s.opts.Changed()
	}
	return Count{Count: n, DryRun: dryRun}, nil
}

// ---- events ----

// EventFilter selects events. Zero fields select everything.
type EventFilter struct {
	Source    string    `json:"source,omitempty"`
	Key       string    `json:"key,omitempty"`  // exactly this key (with Source: one event)
	Type      string    `json:"type,omitempty"` // the event type; a trailing * matches a prefix
	State     string    `json:"state,omitempty"`
	KeyPrefix string    `json:"key_prefix,omitempty"`
	From      time.Time `json:"from,omitzero"`
	To        time.Time `json:"to,omitzero"`
	// Where keeps only the events whose body and headers a filter
	// matches, written as a route's filter: is in the config, as JSON
	// ({"body": {"data": {"customer": "cus_1"}}}); see search.go.
	Where string `json:"where,omitempty"`
	// Scan bounds how many events a search by Where reads (DefaultScan
	// when 0, at most MaxScan).
	Scan int `json:"scan,omitempty"`
	// Cursor is the NextCursor of the previous page.
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	// All must be set to act (replay) on every event with an empty filter,
	// so that a forgotten filter never replays everything. A list takes
	// no All (nor does the API's query for one).
	All bool `json:"all,omitempty" query:"-"`
	// Destination and Dead narrow a bulk replay to part of what the
	// filter found (a list takes neither): Destination, to the events'
	// deliveries to that one destination, the others left as they are;
	// Dead, to their dead letters (a retry of the found events that gave
	// up, where a replay would also send again those that were delivered).
	// A bulk delivery (DeliverEvents) takes Destination as where to
	// deliver, and no Dead.
	Destination string `json:"destination,omitempty" query:"-"`
	Dead        bool   `json:"dead,omitempty" query:"-"`
	// Sources, when not nil, narrows everything above to these sources'
	// events: a tenant's (see Tenant), set by the gateway, never sent.
	// Empty but not nil selects nothing.
	Sources []string `json:"-" query:"-"`
}

func (f EventFilter) empty() bool {
	return f.Source == "" && f.Key == "" && f.Type == "" && f.State == "" && f.KeyPrefix == "" && f.From.IsZero() && f.To.IsZero() && selectsAll(f.Where)
}

// selectsAll is true of a where that narrows nothing: none, or one whose
// objects hold no condition ({}, {"body": {}}), which a bulk replay must
// not take as a filter (it replayed every stored event without all).
func selectsAll(where string) bool {
	if strings.TrimSpace(where) == "" {
		return true
	}
	var spec any
	if json.Unmarshal([]byte(where), &spec) != nil {
		return false // not JSON: refused as such by where()
	}
	var bare func(any) bool
	bare = func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for _, x := range m {
			if !bare(x) {
				return false
			}
		}
		return true
	}
	return bare(spec)
}

// String describes the filter, for the audit log.
func (f EventFilter) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("source", f.Source)
	add("key", f.Key)
	add("type", f.Type)
	add("state", f.State)
	add("key_prefix", f.KeyPrefix)
	if !f.From.IsZero() {
		add("from", f.From.UTC().Format(time.RFC3339))
	}
	if !f.To.IsZero() {
		add("to", f.To.UTC().Format(time.RFC3339))
	}
	add("where", f.Where)
	if f.Scan != 0 {
		add("scan", fmt.Sprint(f.Scan))
	}
	add("destination", f.Destination)
	if f.Dead {
		add("dead", "true")
	}
	if len(parts) == 0 {
		return "all events"
	}
	return strings.Join(parts, " ")
}

// maxLimit bounds a page.
const maxLimit = 500

func (f EventFilter) query() (store.EventQuery, error) {
	q := store.EventQuery{Source: f.Source, Key: f.Key, Type: f.Type, State: f.State, KeyPrefix: f.KeyPrefix, From: f.From, To: f.To, Limit: f.Limit,
		Sources: f.Sources}
	if err := cmp.Or(filterText("source", f.Source, 200), filterText("key_prefix", f.KeyPrefix, 1024),
		filterText("key", f.Key, 1024), filterText("type", f.Type, 1024)); err != nil {
		return q, err
	}
	if states := store.EventStates(); f.State != "" && !contains(states, f.State) {
		return q, invalid("state", "want one of %s", strings.Join(states, ", "))
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return q, invalid("to", "must be after from")
	}
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 1 || q.Limit > maxLimit {
		return q, invalid("limit", "want 1 to %d", maxLimit)
	}
	before, err := parseCursor(f.Cursor)
	if err != nil {
		return q, err
	}
	q.Before = before
	return q, nil
}

// A cursor is the last id of the previous page, prefixed so that it reads
// as opaque and cannot be mistaken for a count.
func cursorOf(id int64) string { return fmt.Sprintf("c%d", id) }

func parseCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	var id int64
	if _, err := fmt.Sscanf(c, "c%d", &id); err != nil || id <= 0 || cursorOf(id) != c {
		return 0, invalid("cursor", "not a cursor this API gave")
	}
	return id, nil
}

// EventSummary is an event in a list.
type EventSummary struct {
	ID            int64     `json:"id"`
	Source        string    `json:"source"`
	Key           string    `json:"key"`
	Type          string    `json:"type,omitempty"` // the provider's event type; absent when untyped
	Keyless       bool      `json:"keyless,omitempty"`
	ContentType   string    `json:"content_type"`
	Size          int       `json:"size"`
	ReceivedAt    time.Time `json:"received_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	State         string    `json:"state"`
	DeliveryCount int       `json:"delivery_count"`
}

// EventPage is a page of events, newest first.
type EventPage struct {
	Events     []EventSummary `json:"events"`
	NextCursor string         `json:"next_cursor,omitempty"`
	// Searched says how far a search by content (where) read.
	Searched *Searched `json:"searched,omitempty"`
}

// EventDetail is one event, whole: its payload, the headers forwarded with
// it, and every delivery with every attempt.
type EventDetail struct {
	EventSummary
	Headers map[string][]string `json:"headers"`
	// Body is the payload as text when it is UTF-8, else BodyBase64.
	Body       string           `json:"body,omitempty"`
	BodyBase64 []byte           `json:"body_base64,omitempty"`
	Deliveries []DeliveryDetail `json:"deliveries"`
	// Copies is how many copies of the event arrived in all (the first and
	// every duplicate; counted about once a second), LastCopyAt when the
	// last duplicate did.
	Copies     int64      `json:"copies"`
	LastCopyAt *time.Time `json:"last_copy_at,omitempty"`
	// Filtered are the source's destinations that did not want the event
	// (their types or filter did not match when it arrived).
	Filtered []string `json:"filtered,omitempty"`
	// BodyDroppedAt is when the body was dropped (the source's
	// body_retention): the key is kept, the payload is not.
	BodyDroppedAt *time.Time `json:"body_dropped_at,omitempty"`
}

// Delivery is the event as a delivery to destination would lease it, for a
// preview that sends nothing (the dashboard's event page, `oncehook
// transform test --id`): its body whatever it holds, its headers, key,
// type and arrival. attempt 0 is the delivery's next attempt (1 when the
// event has no delivery to destination).
func (e EventDetail) Delivery(destination string, attempt int) store.LeasedDelivery {
	if attempt == 0 {
		attempt = 1
		for _, d := range e.Deliveries {
			if d.Destination == destination {
				attempt = d.Attempts + 1
			}
		}
	}
	body := []byte(e.Body)
	if e.BodyBase64 != nil {
		body = e.BodyBase64
	}
	return store.LeasedDelivery{
		Source: e.Source, Key: e.Key, Type: e.Type, Destination: destination, Attempt: attempt,
		ContentType: e.ContentType, Header: e.Headers, Body: body, ReceivedAt: e.ReceivedAt,
	}
}

// DeliveryDetail is one delivery of an event.
type DeliveryDetail struct {
	ID             int64           `json:"id"`
	Destination    string          `json:"destination"`
	State          string          `json:"state"`
	Attempts       int             `json:"attempts"`
	NextAttemptAt  *time.Time      `json:"next_attempt_at,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
	LastStatus     int             `json:"last_status,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	UpdatedAt      time.Time       `json:"updated_at"`
	History        []AttemptDetail `json:"history"`
	// Order is the delivery's place among its entity's events, when its
	// source orders them.
	Order *OrderDetail `json:"order,omitempty"`
}

// OrderDetail is where an ordered delivery stands. Waiting: parked behind
// its entity's delivery in flight or its fifo head. Released: a dead fifo
// head, whose entity's next event was let go.
type OrderDetail struct {
	Entity   string `json:"entity"`
	Version  string `json:"version"`
	Mode     string `json:"mode"`
	Waiting  bool   `json:"waiting,omitempty"`
	Released bool   `json:"released_next,omitempty"`
	Skipped  bool   `json:"skipped,omitempty"` // by an operator (SkipEvent)
}

// AttemptDetail is one attempt of a delivery.
type AttemptDetail struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	Status     int       `json:"status,omitempty"`
	Error      string    `json:"error,omitempty"`
	Outcome    string    `json:"outcome"`
	Response   string    `json:"response,omitempty"`
	// ScriptDigest and SentDigest, for a transforming destination: the
	// script's version and what the attempt sent (sha256 of the path,
	// query, headers and body): two attempts that sent the same bytes
	// show the same digest.
	ScriptDigest string `json:"script_digest,omitempty"`
	SentDigest   string `json:"sent_digest,omitempty"`
}

func summaryOf(e store.EventSummary) EventSummary {
	return EventSummary{ID: e.ID, Source: e.Source, Key: e.Key, Type: e.Type, Keyless: e.Keyless, ContentType: e.ContentType, Size: e.Size,
		ReceivedAt: e.ReceivedAt.UTC(), ExpiresAt: e.ExpiresAt.UTC(), State: e.State, DeliveryCount: e.Deliveries}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// Events implements Operator.
func (s *Service) Events(ctx context.Context, f EventFilter) (EventPage, error) {
	q, err := f.query()
	if err != nil {
		return EventPage{}, err
	}
	if f.Where != "" {
		return s.searchEvents(ctx, f, q)
	}
	list, err := s.admin.ListEvents(ctx, q)
	if err != nil {
		return EventPage{}, err
	}
	if len(list) == 0 {
		// An empty page under a misspelt source says so, not "no events".
		if err := s.knownSource(ctx, f.Source); err != nil {
			return EventPage{}, err
		}
	}
	page := EventPage{Events: make([]EventSummary, len(list))}
	for i, e := range list {
		page.Events[i] = summaryOf(e)
	}
	if len(list) == q.Limit {
		page.NextCursor = cursorOf(list[len(list)-1].ID)
	}
	return page, nil
}

// Event implements Operator.
func (s *Service) Event(ctx context.Context, id int64) (EventDetail, error) {
	if err := eventID(id); err != nil {
		return EventDetail{}, err
	}
	e, err := s.admin.Event(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return EventDetail{}, fmt.Errorf("event %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return EventDetail{}, err
	}
	d := EventDetail{EventSummary: summaryOf(e.EventSummary), Headers: e.Header, Deliveries: []DeliveryDetail{}, Copies: 1 + e.Copies, Filtered: e.Filtered}
	if !e.LastCopyAt.IsZero() {
		d.LastCopyAt = timePtr(e.LastCopyAt)
	}
	if !e.BodyDroppedAt.IsZero() {
		d.BodyDroppedAt = timePtr(e.BodyDroppedAt)
	}
	if d.Headers == nil {
		d.Headers = map[string][]string{}
	}
	if utf8.Valid(e.Body) {
		d.Body = string(e.Body)
	} else {
		d.BodyBase64 = e.Body
	}
	for _, dl := range e.Deliveries {
		dd := DeliveryDetail{ID: dl.ID, Destination: dl.Destination, State: string(dl.State), Attempts: dl.Attempts,
			LastStatus: dl.LastStatus, LastError: dl.LastError, UpdatedAt: dl.UpdatedAt.UTC(), History: []AttemptDetail{}}
		if dl.State == store.Pending {
			dd.NextAttemptAt = timePtr(dl.NextAttemptAt)
			if dl.LeaseExpiresAt.After(s.opts.Now()) {
				dd.LeaseExpiresAt = timePtr(dl.LeaseExpiresAt)
			}
		}
		if o := dl.Order; o.Entity != "" {
			dd.Order = &OrderDetail{Entity: o.Entity, Version: o.Version, Mode: string(o.Mode.Named()),
				Waiting: o.Waiting && dl.State == store.Pending, Released: o.Mode == store.OrderFIFO && dl.State == store.Dead,
				Skipped: dl.State == store.Dead && dl.LastError == store.SkippedReason}
		}
		for _, a := range dl.History {
			dd.History = append(dd.History, AttemptDetail{Attempt: a.Attempt, StartedAt: a.StartedAt.UTC(),
				DurationMS: float64(a.Duration.Microseconds()) / 1000, Status: a.StatusCode, Error: a.Error, Outcome: a.Outcome, Response: a.Response,
				ScriptDigest: a.ScriptDigest, SentDigest: a.SentDigest})
		}
		d.Deliveries = append(d.Deliveries, dd)
	}
	return d, nil
}

// ReplayEvent implements Operator.
func (s *Service) ReplayEvent(ctx context.Context, id int64) (Count, error) {
	if err := eventID(id); err != nil {
		return Count{}, err // id 0 would be no id at all: a replay of everything
	}
	target, err := s.eventTarget(ctx, id, fmt.Sprintf("event %d", id))
	if err != nil {
		return Count{}, err
	}
	n, err := s.admin.Replay(ctx, store.Replay{Events: store.EventQuery{ID: id}, Now: s.opts.Now(), Audit: s.audit(ctx, ActReplayEvent, target)})
	if errors.Is(err, store.ErrNotFound) {
		return Count{}, fmt.Errorf("event %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Count{}, bodyGone(err, fmt.Sprint(id))
	}
	s.opts.Changed()
	return Count{Count: n}, nil
}

// eventID refuses an id no event has (ids start at 1) as not found: to
// the store, ID 0 in a query is no id at all, and a replay of "event 0"
// replayed every stored event.
func eventID(id int64) error {
	if id < 1 {
		return fmt.Errorf("event %d: %w", id, ErrNotFound)
	}
	return nil
}

// ResetOrder implements Operator.
func (s *Service) ResetOrder(ctx context.Context, source, entity, destination string) (Count, error) {
	if source == "" {
		return Count{}, invalid("source", "missing")
	}
	if entity == "" {
		return Count{}, invalid("entity", "missing")
	}
	// The entity as stored (store.StorableEntity), as events show prints
	// it: one that is not UTF-8 or holds a NUL is stored encoded, never so.
	if err := cmp.Or(filterText("source", source, 200), filterText("entity", entity, store.MaxEntityLen),
		filterText("destination", destination, 200)); err != nil {
		return Count{}, err
	}
	if err := s.knownNames(source, destination); err != nil {
		return Count{}, err
	}
	if i := slices.IndexFunc(s.sources(), func(x Source) bool { return x.Name == source }); i >= 0 && !s.sources()[i].Ordered {
		return Count{}, invalid("source", "%s does not order its events (it has no order:): there is no version to reset", source)
	}
	target := "source " + source + " entity " + entity
	if destination != "" {
		target += " to " + destination
	}
	n, err := s.admin.ResetOrder(ctx, source, entity, destination, s.opts.Now(), s.audit(ctx, ActResetOrder, tenantTarget(s.reach(source, destination, nil), target)))
	if err != nil {
		return Count{}, err
	}
	return s.counted(n, false)
}

// SkipEvent implements Operator.
func (s *Service) SkipEvent(ctx context.Context, id int64, destination string) (Count, error) {
	if err := eventID(id); err != nil {
		return Count{}, err
	}
	if destination == "" {
		return Count{}, invalid("destination", "missing")
	}
	target, err := s.eventTarget(ctx, id, fmt.Sprintf("event %d to %s", id, destination))
	if err != nil {
		return Count{}, err
	}
	n, err := s.admin.SkipDelivery(ctx, id, destination, s.opts.Now(), s.audit(ctx, ActSkipEvent, target))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Count{}, fmt.Errorf("event %d: %w", id, ErrNotFound)
	case errors.Is(err, store.ErrInFlight):
		return Count{}, fmt.Errorf("event %d to %s: an attempt is in flight; skip it once it ends: %w", id, destination, ErrConflict)
	case err != nil:
		return Count{}, err
	}
	return s.counted(n, false)
}

// DeliverEvent implements Operator.
func (s *Service) DeliverEvent(ctx context.Context, id int64, destination string) (Count, error) {
	if err := eventID(id); err != nil {
		return Count{}, err
	}
	if destination == "" {
		return Count{}, invalid("destination", "missing")
	}
	if err := s.knownNames("", destination); err != nil {
		return Count{}, err
	}
	if t := s.destinationTenant(destination); t != "" {
		// A tenant's destination takes its tenant's events only, as a
		// route does (config's check): never another's, nor a shared
		// source's.
		e, err := s.admin.Event(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return Count{}, fmt.Errorf("event %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return Count{}, err
		}
		if s.sourceTenant(e.Source) != t {
			return Count{}, invalid("destination", "%s is tenant %s's: it takes that tenant's events only, and event %d is source %s's", destination, t, id, e.Source)
		}
	}
	target, err := s.eventTarget(ctx, id, fmt.Sprintf("event %d to %s", id, destination))
	if err != nil {
		return Count{}, err
	}
	n, err := s.admin.AddDelivery(ctx, id, destination, s.opts.Now(), s.audit(ctx, ActDeliverEvent, target))
	if errors.Is(err, store.ErrNotFound) {
		return Count{}, fmt.Errorf("event %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Count{}, bodyGone(err, fmt.Sprint(id))
	}
	return s.counted(n, false)
}

// ReplayEvents implements Operator.
func (s *Service) ReplayEvents(ctx context.Context, f EventFilter, dryRun bool) (Count, error) {
	if err := filterText("destination", f.Destination, 200); err != nil {
		return Count{}, err
	}
	q, searched, err := s.bulk(ctx, f, "replay")
	if err != nil {
		return Count{}, err
	}
	if searched != nil && len(q.IDs) == 0 {
		// A search that found nothing acts on nothing: to the store no
		// ids is no narrowing at all (every event the rest selects).
		return Count{DryRun: dryRun, Searched: searched}, nil
	}
	audit := s.audit(ctx, ActReplayEvents, tenantTarget(s.reach(f.Source, f.Destination, f.Sources), f.String()))
	if f.Dead {
		audit.Action = "retry"
	}
	n, err := s.admin.Replay(ctx, store.Replay{Events: q, Destination: f.Destination, Dead: f.Dead, Now: s.opts.Now(), DryRun: dryRun, Audit: audit})
	if errors.Is(err, store.ErrNotFound) {
		return Count{}, fmt.Errorf("replay %s:%s: no such event stored (never received, or swept after its window): %w", f.Source, f.Key, ErrNotFound)
	}
	if err != nil {
		return Count{}, bodyGone(err, f.Source+":"+f.Key)
	}
	c, err := s.counted(n, dryRun)
	c.Searched = searched
	return c, err
}

// DeliverEvents implements Operator.
func (s *Service) DeliverEvents(ctx context.Context, f EventFilter, dryRun bool) (Count, error) {
	if f.Destination == "" {
		return Count{}, invalid("destination", "missing: name the destination to deliver the events to")
	}
	if err := filterText("destination", f.Destination, 200); err != nil {
		return Count{}, err
	}
	if f.Dead {
		return Count{}, invalid("dead", "a delivery to a destination adds one where there is none; to retry the found events' dead letters, replay them with dead")
	}
	if t := s.destinationTenant(f.Destination); t != "" {
		// A tenant's destination takes its tenant's events only (see
		// DeliverEvent): the others the filter finds are left alone.
		own := s.tenantSources(t)
		if f.Sources != nil {
			own = slices.DeleteFunc(own, func(name string) bool { return !slices.Contains(f.Sources, name) })
		}
		f.Sources = own
	}
	q, searched, err := s.bulk(ctx, f, "deliver")
	if err != nil {
		return Count{}, err
	}
	if searched != nil && len(q.IDs) == 0 {
		return Count{DryRun: dryRun, Searched: searched}, nil // as ReplayEvents: nothing found, nothing done
	}
	n, err := s.admin.AddDeliveries(ctx, store.Deliver{Events: q, Destination: f.Destination, Now: s.opts.Now(), DryRun: dryRun,
		Audit: s.audit(ctx, ActDeliverEvents, tenantTarget(s.reach(f.Source, f.Destination, f.Sources), f.String()))})
	if errors.Is(err, store.ErrNotFound) {
		return Count{}, fmt.Errorf("deliver %s:%s: no such event stored (never received, or swept after its window): %w", f.Source, f.Key, ErrNotFound)
	}
	if err != nil {
		return Count{}, bodyGone(err, f.Source+":"+f.Key)
	}
	c, err := s.counted(n.Added, dryRun)
	c.Already, c.Gone, c.Searched = n.Already, n.Gone, searched
	return c, err
}

// bulk is the store's query for a bulk action (verb) on every event f
// selects: f checked (no page, all for an empty filter, names the config
// knows), and, for a search by content, the events it finds, as its pages
// would list them, each once, by id, under the same bound (a search past
// its bound says so in searched, and the action takes only what it read).
// A search that found nothing leaves q.IDs empty, which the store reads as
// no narrowing: the caller must act on nothing then.
func (s *Service) bulk(ctx context.Context, f EventFilter, verb string) (store.EventQuery, *Searched, error) {
	if f.Cursor != "" || f.Limit != 0 {
		return store.EventQuery{}, nil, invalid("cursor", "a bulk %s takes every event the filter selects, not a page", verb)
	}
	q, err := f.query()
	if err != nil {
		return q, nil, err
	}
	if f.empty() && !f.All {
		return q, nil, invalid("all", "the filter is empty: set all to %s every stored event", verb)
	}
	if err := s.knownNames(f.Source, f.Destination); err != nil {
		return q, nil, err // a typo, not "nothing to act on"
	}
	q.Limit = 0
	if f.Where == "" {
		return q, nil, nil
	}
	filter, err := f.where()
	if err != nil {
		return q, nil, err
	}
	scan, err := f.scan()
	if err != nil {
		return q, nil, err
	}
	found, rep, _, err := s.search(ctx, q, filter, scan, 0)
	if err != nil {
		return q, nil, err
	}
	q.IDs = found
	return q, &rep, nil
}

// ---- dead letters ----

// DeadFilter selects dead letters.
type DeadFilter struct {
	Destination string `json:"destination,omitempty"`
	Source      string `json:"source,omitempty"`
	Cursor      string `json:"cursor,omitempty"`
	Limit       int    `json:"limit,omitempty"`
	// All must be set to retry or purge every dead letter with an empty
	// filter (a list, and its query in the API, take none).
	All bool `json:"all,omitempty" query:"-"`
	// Sources narrows to these sources' dead letters, as EventFilter's.
	Sources []string `json:"-" query:"-"`
}

func (f DeadFilter) String() string {
	var parts []string
	if f.Destination != "" {
		parts = append(parts, "destination="+f.Destination)
	}
	if f.Source != "" {
		parts = append(parts, "source="+f.Source)
	}
	if len(parts) == 0 {
		return "all dead letters"
	}
	return strings.Join(parts, " ")
}

func (f DeadFilter) query() (store.DeadQuery, error) {
	q := store.DeadQuery{Destination: f.Destination, Source: f.Source, Limit: f.Limit, Sources: f.Sources}
	if err := cmp.Or(filterText("destination", f.Destination, 200), filterText("source", f.Source, 200)); err != nil {
		return q, err
	}
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 1 || q.Limit > maxLimit {
		return q, invalid("limit", "want 1 to %d", maxLimit)
	}
	before, err := parseCursor(f.Cursor)
	q.Before = before
	return q, err
}

func (f DeadFilter) bulk() (store.DeadQuery, error) {
	if f.Cursor != "" || f.Limit != 0 {
		return store.DeadQuery{}, invalid("cursor", "a bulk action takes every dead letter the filter selects, not a page")
	}
	q, err := f.query()
	if err != nil {
		return q, err
	}
	if f.Destination == "" && f.Source == "" && !f.All {
		return q, invalid("all", "the filter is empty: set all to act on every dead letter")
	}
	q.Limit = 0
	return q, nil
}

// DeadLetter is a delivery that gave up.
type DeadLetter struct {
	DeliveryID  int64     `json:"delivery_id"`
	EventID     int64     `json:"event_id"`
	Source      string    `json:"source"`
	Key         string    `json:"key"`
	Destination string    `json:"destination"`
	Attempts    int       `json:"attempts"`
	LastStatus  int       `json:"last_status,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	ReceivedAt  time.Time `json:"received_at"`
	DiedAt      time.Time `json:"died_at"`
}

// DeadPage is a page of dead letters, newest first.
type DeadPage struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	NextCursor  string       `json:"next_cursor,omitempty"`
}

// DeadLetters implements Operator.
func (s *Service) DeadLetters(ctx context.Context, f DeadFilter) (DeadPage, error) {
	q, err := f.query()
	if err != nil {
		return DeadPage{}, err
	}
	list, err := s.admin.ListDeadLetters(ctx, q)
	if err != nil {
		return DeadPage{}, err
	}
	if len(list) == 0 {
		// As events ls: a misspelt name is said so. A destination no
		// dead letter is stored under and the config lacks is unknown.
		if err := s.knownNames("", f.Destination); err != nil {
			return DeadPage{}, err
		}
		if err := s.knownSource(ctx, f.Source); err != nil {
			return DeadPage{}, err
		}
	}
	page := DeadPage{DeadLetters: make([]DeadLetter, len(list))}
	for i, d := range list {
		page.DeadLetters[i] = DeadLetter{DeliveryID: d.DeliveryID, EventID: d.EventID, Source: d.Source, Key: d.Key, Destination: d.Destination,
			Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, ReceivedAt: d.ReceivedAt.UTC(), DiedAt: d.DiedAt.UTC()}
	}
	if len(list) == q.Limit {
		page.NextCursor = cursorOf(list[len(list)-1].DeliveryID)
	}
	return page, nil
}

// RetryDeadLetters implements Operator.
func (s *Service) RetryDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error) {
	q, err := f.bulk()
	if err != nil {
		return Count{}, err
	}
	if err := s.knownDead(ctx, q); err != nil {
		return Count{}, err
	}
	n, err := s.admin.Replay(ctx, store.Replay{Events: store.EventQuery{Source: q.Source, Sources: q.Sources}, Destination: q.Destination, Dead: true,
		Now: s.opts.Now(), DryRun: dryRun, Audit: s.audit(ctx, ActRetryDead, tenantTarget(s.reach(q.Source, q.Destination, q.Sources), f.String()))})
	if err != nil {
		return Count{}, err
	}
	return s.counted(n, dryRun)
}

// PurgeDeadLetters implements Operator.
func (s *Service) PurgeDeadLetters(ctx context.Context, f DeadFilter, dryRun bool) (Count, error) {
	q, err := f.bulk()
	if err != nil {
		return Count{}, err
	}
	if err := s.knownDead(ctx, q); err != nil {
		return Count{}, err
	}
	n, err := s.admin.PurgeDeadLetters(ctx, q, dryRun, s.audit(ctx, ActPurgeDead, tenantTarget(s.reach(q.Source, q.Destination, q.Sources), f.String())))
	if err != nil {
		return Count{}, err
	}
	return Count{Count: n, DryRun: dryRun}, nil
}

// ---- destinations ----

// DestinationView is a destination with its queue.
type DestinationView struct {
	Name string `json:"name"`
	URL  string `json:"url"` // without credentials or query; "" for a queue
	// Kind is http, or the broker a queue destination publishes to (nats,
	// amqp, kafka), and Target what it publishes to there.
	Kind        string     `json:"kind"`
	Target      string     `json:"target,omitempty"`
	Paused      bool       `json:"paused"`
	PausedSince *time.Time `json:"paused_since,omitempty"`
	// Tenant owns it (absent: none, the operator's).
	Tenant  string `json:"tenant,omitempty"`
	Pending int64  `json:"pending"`
	Leased  int64  `json:"leased"`
	Dead    int64  `json:"dead"`
	// OldestPendingSeconds is how long ago the oldest pending delivery's
	// event came in: how far behind the destination is.
	OldestPendingSeconds float64           `json:"oldest_pending_seconds"`
	Last24h              DestinationCounts `json:"last_24h"`
	Alerts               []string          `json:"alerts,omitempty"`
	// Removed: the config names it no more (a reload, or a restart with a
	// new config), and it still has deliveries. Its pending ones are held,
	// not delivered and not dropped, until a config names it again; its
	// dead letters stay for replay.
	Removed bool `json:"removed,omitempty"`
	// ManagedBy is "file" (the config file's: change it there) or "api"
	// (created through the API: PATCH /v1/destinations/{name}); none for
	// one removed.
	ManagedBy string `json:"managed_by,omitempty"`
	// Breaker is the destination's circuit breaker when it is not closed:
	// open (deliveries held until until), or half_open (one probe out).
	Breaker *BreakerView `json:"breaker,omitempty"`
	// State says whether the destination sends its pending deliveries
	// now, and if not, why (one of the Destination states): "active"
	// alone would hide a destination that holds 234 deliveries.
	State string `json:"state"`
	// Rate is its rate limit as configured ("5/s", "600/m"), if any.
	Rate string `json:"rate,omitempty"`
	// DrainSeconds is, when it is rate-limited, how long its pending
	// deliveries take at that rate.
	DrainSeconds float64 `json:"drain_seconds,omitempty"`
}

// Destination states: why a destination's pending deliveries are not all
// going now, the first that applies.
const (
	StateRemoved         = "removed"           // no config names it: held until one does
	StatePaused          = "paused"            // held until resumed
	StateBreakerOpen     = "breaker_open"      // held until the breaker closes (or by hand)
	StateBreakerHalfOpen = "breaker_half_open" // one probe is out; the rest wait for it
	StateRateLimited     = "rate_limited"      // sending at its rate, with more than a second's worth pending
	StateActive          = "active"            // sending
)

// rateText is a rate as the config writes it.
func rateText(n int, per time.Duration) string {
	switch per {
	case time.Second:
		return fmt.Sprintf("%d/s", n)
	case time.Minute:
		return fmt.Sprintf("%d/m", n)
	case time.Hour:
		return fmt.Sprintf("%d/h", n)
	}
	return fmt.Sprintf("%d per %s", n, per)
}

// setState fills v's State (and its rate) once everything else is known.
func (v *DestinationView) setState(d *Destination) {
	if d != nil && d.Rate > 0 {
		per := d.RatePer
		if per <= 0 {
			per = time.Second
		}
		v.Rate = rateText(d.Rate, per)
		if drain := time.Duration(v.Pending) * per / time.Duration(d.Rate); drain > time.Second {
			v.DrainSeconds = drain.Seconds()
		}
	}
	switch {
	case v.Removed:
		v.State = StateRemoved
	case v.Paused:
		v.State = StatePaused
	case v.Breaker != nil && v.Breaker.State == store.BreakerHalfOpen:
		v.State = StateBreakerHalfOpen
	case v.Breaker != nil:
		v.State = StateBreakerOpen
	case v.DrainSeconds > 0:
		v.State = StateRateLimited
	default:
		v.State = StateActive
	}
	if v.State != StateRateLimited {
		v.DrainSeconds = 0
	}
}

// BreakerView is a breaker that is not closed.
type BreakerView struct {
	State    string    `json:"state"` // open or half_open
	OpenedAt time.Time `json:"opened_at"`
	Until    time.Time `json:"until"`
	Opens    int       `json:"opens"`  // times in a row: the cool-down doubles with each
	Reason   string    `json:"reason"` // the failure that opened it, or who did
	// Manual: an operator (OpenedBy) opened it, and it holds until one
	// closes it.
	Manual   bool   `json:"manual,omitempty"`
	OpenedBy string `json:"opened_by,omitempty"`
}

// openedBy is how the reason of a breaker an operator opened begins.
const openedBy = "opened by "

// DestinationCounts are a destination's attempts by outcome.
type DestinationCounts = metrics.DestinationCounts

// displayURL hides what a URL may carry that is secret: its password and
// query values (redact.URL, as everywhere a URL is shown).
func displayURL(raw string) string { return redact.URL(raw) }

// Destinations implements Operator.
func (s *Service) Destinations(ctx context.Context) ([]DestinationView, error) {
	now := s.opts.Now()
	queues, err := s.admin.Queues(ctx, now)
	if err != nil {
		return nil, err
	}
	paused, err := s.admin.Paused(ctx)
	if err != nil {
		return nil, err
	}
	rollups, err := s.opts.Store.Rollups(ctx, store.RollupQuery{Scope: store.ScopeDestination, From: now.Add(-24 * time.Hour).Truncate(time.Hour), To: now.Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	// The configured destinations, then any other that still has
	// deliveries (removed from the config: shown, so they are not
	// forgotten).
	var out []DestinationView
	pos := map[string]int{}
	add := func(name, url string) *DestinationView {
		if i, ok := pos[name]; ok {
			return &out[i]
		}
		pos[name] = len(out)
		out = append(out, DestinationView{Name: name, URL: url, Kind: "http"})
		return &out[len(out)-1]
	}
	dests := s.destinations()
	confs := make([]*Destination, 0, len(dests)) // confs[i] is out[i]'s, for the configured ones
	for j, d := range dests {
		if _, seen := pos[d.Name]; !seen {
			confs = append(confs, &dests[j])
		}
		v := add(d.Name, displayURL(d.URL))
		v.ManagedBy, v.Tenant = d.ManagedBy, d.Tenant
		if d.Kind != "" && d.Kind != "http" {
			v.URL, v.Kind, v.Target = "", d.Kind, d.Target
		}
	}
	breakers, err := s.opts.Store.Breakers(ctx)
	if err != nil {
		return nil, err
	}
	configured := len(out)
	for _, q := range queues {
		v := add(q.Destination, "")
		v.Removed = pos[q.Destination] >= configured
		v.Pending, v.Leased, v.Dead = q.Pending, q.Leased, q.Dead
		if q.Pending > 0 && !q.Oldest.IsZero() {
			v.OldestPendingSeconds = max(0, now.Sub(q.Oldest).Seconds())
		}
	}
	// Every destination is in out now; the rest only fills fields in.
	known := func(name string) *DestinationView {
		if i, ok := pos[name]; ok {
			return &out[i]
		}
		return nil
	}
	for name, since := range paused {
		if v := known(name); v != nil {
			v.Paused, v.PausedSince = true, timePtr(since)
		}
	}
	for _, r := range rollups {
		if v := known(r.Name); v != nil {
			v.Last24h.Add(r.Metric, r.Value)
		}
	}
	for i := range out {
		out[i].Last24h.Finish()
		if s.opts.Alerts != nil {
			out[i].Alerts = s.opts.Alerts.Firing(store.ScopeDestination, out[i].Name)
		}
		if b, ok := breakers[out[i].Name]; ok {
			v := &BreakerView{State: b.State, OpenedAt: b.OpenedAt.UTC(), Until: b.Until.UTC(), Opens: b.Opens, Reason: b.Reason,
				Manual: b.Manual()}
			if v.Manual {
				v.OpenedBy = strings.TrimPrefix(b.Reason, openedBy)
			}
			out[i].Breaker = v
		}
		var conf *Destination
		if i < len(confs) {
			conf = confs[i]
		}
		out[i].setState(conf)
	}
	return out, nil
}

// filterText refuses a filter's text (a name, a key, a type, an entity)
// over max bytes, or one no stored value can equal: bytes that are not
// UTF-8, or a NUL. A key, type or entity that held them is stored
// percent-encoded (as events ls prints it), and PostgreSQL cannot even
// compare such a value with its text (it answered 503, or 500 for a
// replay whose audit line quoted it): both backends now answer 400,
// naming the field.
func filterText(field, v string, max int) error {
	switch {
	case len(v) > max:
		return invalid(field, "too long (%d bytes; at most %d)", len(v), max)
	case !utf8.ValidString(v):
		return invalid(field, "not UTF-8: nothing stored is; name it as events ls prints it (percent-encoded)")
	case strings.IndexByte(v, 0) >= 0:
		return invalid(field, "holds a NUL: nothing stored does; name it as events ls prints it (%%00)")
	}
	return nil
}

// knownNames answers ErrNotFound for a source or destination (when set)
// that the config does not have: a bulk action on a misspelt name must say
// so, not report that it changed nothing.
func (s *Service) knownNames(source, destination string) error {
	if destination != "" && !s.known(destination) {
		return fmt.Errorf("no such destination %q (known: %s): %w", destination, names(s.destinations(), func(d Destination) string { return d.Name }), ErrNotFound)
	}
	if _, ok := s.tenants().Of(tenant.Source, source); source != "" && !ok {
		return fmt.Errorf("no such source %q (known: %s): %w", source, names(s.sources(), func(x Source) string { return x.Name }), ErrNotFound)
	}
	return nil
}

// knownDead is knownNames for the dead letters q selects, but a name the
// config no longer has (a source or destination removed) is still known
// while dead letters are stored under it: dead ls lists them, and they
// must be retried or purged by that name, not with --all.
func (s *Service) knownDead(ctx context.Context, q store.DeadQuery) error {
	err := s.knownNames(q.Source, q.Destination)
	if err == nil {
		return nil
	}
	q.Limit = 1
	if stored, lerr := s.admin.ListDeadLetters(ctx, q); lerr == nil && len(stored) > 0 {
		return nil
	}
	return err
}

// knownSource is knownNames for a filter on stored events (events ls,
// stats): a source the config no longer has is still known while events
// are stored under it, and can be listed by that name. "" is every source.
func (s *Service) knownSource(ctx context.Context, source string) error {
	err := s.knownNames(source, "")
	if err == nil {
		return nil
	}
	stored, lerr := s.admin.ListEvents(ctx, store.EventQuery{Source: source, Limit: 1})
	switch {
	case lerr != nil:
		return lerr // the store could not say: unavailable, not unknown
	case len(stored) > 0:
		return nil
	}
	return err
}

// names lists items' names for an error message.
func names[T any](items []T, name func(T) string) string {
	if len(items) == 0 {
		return "none configured"
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return strings.Join(out, ", ")
}

func (s *Service) known(destination string) bool {
	_, ok := s.tenants().Of(tenant.Destination, destination)
	return ok
}

// SetPaused implements Operator.
func (s *Service) SetPaused(ctx context.Context, destination string, paused bool) (DestinationView, error) {
	if !s.known(destination) {
		return DestinationView{}, fmt.Errorf("destination %q: %w", destination, ErrNotFound)
	}
	action := ActResume
	if paused {
		action = ActPause
	}
	if err := s.admin.SetPaused(ctx, destination, paused, s.opts.Now(), s.audit(ctx, action, "destination "+destination)); err != nil {
		return DestinationView{}, err
	}
	s.opts.Changed()
	return s.destination(ctx, destination)
}

// destination is one destination's view, after a change to it.
func (s *Service) destination(ctx context.Context, name string) (DestinationView, error) {
	all, err := s.Destinations(ctx)
	if err != nil {
		return DestinationView{}, err
	}
	for _, d := range all {
		if d.Name == name {
			return d, nil
		}
	}
	return DestinationView{Name: name}, nil
}

// SetBreaker implements Operator.
func (s *Service) SetBreaker(ctx context.Context, destination string, open bool) (DestinationView, error) {
	if !s.known(destination) {
		return DestinationView{}, fmt.Errorf("destination %q: %w", destination, ErrNotFound)
	}
	flow := s.opts.Store
	now := s.opts.Now()
	var err error
	if open {
		actor := ActorOf(ctx)
		_, _, err = flow.OpenBreaker(ctx, store.Breaker{Destination: destination, OpenedAt: now, Until: now.Add(store.ManualBreaker), Opens: 1,
			Reason: openedBy + actor}, s.audit(ctx, ActOpenBreaker, "destination "+destination))
	} else {
		err = flow.CloseBreaker(ctx, destination, now, s.audit(ctx, ActCloseBreaker, "destination "+destination))
	}
	if err != nil {
		return DestinationView{}, err
	}
	s.opts.Changed()
	return s.destination(ctx, destination)
}

// ---- audit ----

// AuditEntry is one change an operator made.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Count  int       `json:"count"`
}

// AuditPage is a page of the audit log, newest first.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// Audit implements Operator.
func (s *Service) Audit(ctx context.Context, cursor string, limit int) (AuditPage, error) {
	before, err := parseCursor(cursor)
	if err != nil {
		return AuditPage{}, err
	}
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > maxLimit {
		return AuditPage{}, invalid("limit", "want 1 to %d", maxLimit)
	}
	list, err := s.admin.ListAudit(ctx, before, limit)
	if err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Entries: make([]AuditEntry, len(list))}
	for i, e := range list {
		page.Entries[i] = AuditEntry{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Target: e.Target, Count: e.Count}
	}
	if len(list) == limit {
		page.NextCursor = cursorOf(list[len(list)-1].ID)
	}
	return page, nil
}

// ResetEffect reopens a failed or expired effect (see effect.Local.Reset),
// recorded in the audit log.
func (s *Service) ResetEffect(ctx context.Context, key string) error {
	if s.opts.Effects == nil {
		return fmt.Errorf("effects ledger: %w", ErrNotFound)
	}
	return s.opts.Effects.ResetAudited(ctx, key, s.audit(ctx, ActResetEffect, "effect "+key))
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
