// Package receive is oncehook's intake. Its core (Core: accept.go and
// event.go) takes one envelope for a source, whatever transport brought
// it, and reads top to bottom:
//
//	verify it with the source's preset → split it into events and take each
//	one's key, type, routes and place in its entity's order → claim them all
//	through the group committer → answer each event's verdict only once the
//	transaction holding them is durable.
//
// Rejected input (unknown source, bad signature, malformed or oversized
// body, a missing key where the source requires one) is refused before
// anything reaches the store, so it leaves no trace there; it is counted
// by reason and logged without secrets or payloads, as a named
// *Rejection. Queue consumers (package broker) and the outbox call the
// core; the HTTP handler behind POST /in/{source} (Handler, this file) is
// one more caller, and keeps what only HTTP has: the body's byte budget
// and pace (body.go), handshakes, methods, and the answer's status and
// headers (answer.go).
package receive

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/oncehook/oncehook/internal/forwarded"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/internal/seen"
	"github.com/oncehook/oncehook/internal/tracing"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
)

// Source is one inbound endpoint as intake sees it.
type Source struct {
	Name   string
	Preset provider.Preset
	Window time.Duration
	// BodyRetention, when set, is how long an event's body is kept once no
	// delivery needs it (store.NewEvent's BodyExpiresAt); zero: as long
	// as its key.
	BodyRetention time.Duration
	// Routes are the source's destinations and which events each wants
	// (package route decides; the event's deliveries are those it picks).
	Routes route.Routes
	// RejectMissingKey answers 422 to an event without a key. Otherwise the
	// event is accepted without dedup and flagged keyless: losing an event
	// is worse than a possible duplicate.
	RejectMissingKey bool
	// DiscardUnauthorized answers a request that fails verification with
	// 200 instead of 401, and still stores nothing: for providers that pause
	// or disable an endpoint after repeated failures (Asaas pauses its queue
	// after 15), so that forged traffic cannot switch real events off.
	DiscardUnauthorized bool
	// Order, when set, places each event among its entity's events (see
	// store.Order); an event it finds no place for is delivered outside
	// the order, and counted.
	Order *Order
	// Elsewhere, when set, says where the source's events come from
	// instead of HTTP ("the NATS stream ORDERS", "the outbox"): POST
	// /in/{name} answers 404 saying so, and only Accept takes its events.
	// Its preset may be unsigned: the transport authenticates.
	Elsewhere string
	// Limit, when set, bounds the requests intake takes for the source,
	// shared with every source of its tenant (tenants[].rate, on each
	// replica): past it, 429 with Retry-After, before the body is read,
	// and nothing is stored (the provider sends it again later).
	Limit *rate.Limiter

	all    []string    // every destination: the deliveries of an event when nothing is routed
	routed bool        // some destination wants only some events
	plan   *route.Plan // Routes, ready to pick (when routed)
	traits provider.Traits
}

// Order is how a source orders its entities' events.
type Order struct {
	Rule         provider.OrderRule
	Mode         store.OrderMode
	DeliverStale bool
}

// Claimer claims events durably; the group committer is one.
type Claimer interface {
	Claim(ctx context.Context, events []store.NewEvent) ([]store.Claim, error)
}

// Options configure a Handler.
type Options struct {
	Sources     []Source
	Claimer     Claimer
	MaxBodySize int64
	// MaxInflightBytes bounds the request bodies held at once, from the
	// first byte read until the answer (a body waits for its commit in
	// memory). A request that would go over it waits up to InflightWait,
	// then gets 503 with Retry-After: memory stays bounded however many
	// large requests arrive together. Default: 64 MiB, and never less than
	// MaxBodySize.
	MaxInflightBytes int64
	InflightWait     time.Duration
	// BodyGrace and MinBodyRate are the pace a body must keep: it may take
	// BodyGrace plus the time its bytes would take at MinBodyRate (bytes a
	// second), and is cut with 408 past that. Memory is reserved as bytes
	// arrive, each source may hold at most half of MaxInflightBytes when
	// there are several, and a request that finds no room cuts bodies
	// still arriving (see budget), so slow or unsigned traffic on one URL
	// can starve neither signed traffic nor the other sources. Defaults:
	// DefaultBodyGrace, DefaultMinBodyRate.
	BodyGrace   time.Duration
	MinBodyRate int64
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed when logging a request's client address. Without them, the
	// logged address is the connection's peer.
	TrustedProxies []netip.Prefix
	// Seen, when set, answers events already known to be committed without
	// queueing for the store. It never decides a new event: misses go to
	// the Claimer.
	Seen *seen.Set
	// OnDuplicate, when set, is told each duplicate's key and body (after
	// the answer is decided, before it is sent): the key doctor compares
	// them with the stored copy. It must be quick and must not keep body
	// past the call without copying it.
	OnDuplicate func(source, key string, body []byte)
	Logger      *slog.Logger
	Metrics     *metrics.Metrics
	// Tracer, when set, traces each request (a server span, its claim, and
	// the verdict) and stores the span with the events it brings, for
	// their deliveries to continue.
	Tracer trace.Tracer
	Now    func() time.Time
}

// Core is intake's transport-neutral core (accept.go): the sources, and
// Accept, Events and Verdicts over them. The outbox holds one alone; a
// Handler is one with HTTP around it (the body's budget and pace,
// handshakes, methods, status codes).
type Core struct {
	// sources are the sources now: an envelope reads them once, and
	// finishes under the sources it started with whatever a reload swaps
	// in.
	sources atomic.Pointer[sourceSet]
	claimer Claimer
	seen    *seen.Set
	onDup   func(source, key string, body []byte)
	maxBody int64
	log     *slog.Logger
	metrics *metrics.Metrics
	tracer  trace.Tracer // nil: not traced
	now     func() time.Time
}

// sourceSet is one set of sources, by name.
type sourceSet struct {
	byName map[string]*Source
}

// NewCore is intake's core alone, over opts' Sources, Claimer, limits,
// Seen, OnDuplicate, Logger, Metrics, Tracer and Now (what only HTTP has
// is New's).
func NewCore(opts Options) *Core {
	c := &Core{
		claimer: opts.Claimer,
		seen:    opts.Seen,
		onDup:   opts.OnDuplicate,
		log:     opts.Logger,
		metrics: opts.Metrics,
		tracer:  opts.Tracer,
		now:     opts.Now,
	}
	c.maxBody, _, _ = Limits(opts.MaxBodySize, opts.MaxInflightBytes)
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.metrics == nil {
		c.metrics = metrics.New()
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.sources.Store(newSourceSet(opts.Sources))
	return c
}

// newSourceSet is sources, each made ready to route.
func newSourceSet(sources []Source) *sourceSet {
	set := &sourceSet{byName: make(map[string]*Source, len(sources))}
	for i := range sources {
		s := sources[i]
		s.all, s.routed = s.Routes.Destinations(), s.Routes.Routed()
		s.plan = s.Routes.Plan()
		s.traits = provider.Describe(s.Preset)
		set.byName[s.Name] = &s
	}
	return set
}

// Handler serves POST /in/{source}: intake's core with HTTP around it.
type Handler struct {
	*Core
	// table is the sources now, with their shares of the in-flight
	// budget: a request reads it once, and finishes under what it
	// started with whatever a reload swaps in.
	table    atomic.Pointer[table]
	reload   sync.Mutex // one SetSources at a time
	inflight *budget
	apis     *shares // the user's APIs' share of inflight (ReadBody)
	pace     pace
	proxies  []netip.Prefix
	unknown  *unknownSources
}

// New creates a Handler.
func New(opts Options) *Handler {
	h := &Handler{Core: NewCore(opts), unknown: newUnknownSources()}
	maxBody, total, err := Limits(opts.MaxBodySize, opts.MaxInflightBytes)
	if err != nil {
		total = maxBody // the config refuses this; a library caller gets room for one body
	}
	wait := opts.InflightWait
	if wait <= 0 {
		wait = time.Second
	}
	h.pace = pace{grace: opts.BodyGrace, minRate: opts.MinBodyRate}
	if h.pace.grace <= 0 {
		h.pace.grace = DefaultBodyGrace
	}
	if h.pace.minRate <= 0 {
		h.pace.minRate = DefaultMinBodyRate
	}
	h.proxies = opts.TrustedProxies
	h.inflight = newBudget(total, maxBody, wait)
	h.apis = h.inflight.apiShare()
	h.SetSources(opts.Sources)
	return h
}

// table is one set of sources and their shares of the in-flight budget.
type table struct {
	sources map[string]*Source
	shares  *shares
}

// SetSources replaces the sources intake serves: a config reload's new
// secrets, routes and order, a source added or removed. Requests already
// in progress finish under the sources they started with; the next ones
// see these. A source that stays keeps its share of the in-flight budget,
// with the bytes its requests hold.
func (h *Handler) SetSources(sources []Source) {
	h.reload.Lock()
	defer h.reload.Unlock()
	set := newSourceSet(sources)
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name
	}
	var old *shares
	if prev := h.table.Load(); prev != nil {
		old = prev.shares
	}
	// The shares first: a source Accept finds has its share.
	h.table.Store(&table{sources: set.byName, shares: h.inflight.split(names, old)})
	h.sources.Store(set)
}

// EventResult is one event's verdict in a response.
type EventResult struct {
	Key     string `json:"key"`
	Status  string `json:"status"` // accepted | duplicate | republished (Envelope.Reconcile)
	Keyless bool   `json:"keyless,omitempty"`
}

// Response is the body of a 200 answer.
type Response struct {
	Status string        `json:"status"` // accepted when any event is new, else duplicate (republished under Envelope.Reconcile)
	Events []EventResult `json:"events"`
}

// ErrorResponse is the body of every error answer: the one error shape
// of every oncehook endpoint (jsonhttp.Error).
type ErrorResponse = jsonhttp.Error

// Statuses of events and responses.
const (
	StatusAccepted  = metrics.Accepted
	StatusDuplicate = metrics.Duplicate
	// StatusRepublished answers a reconciliation publish of a stored key:
	// a duplicate the caller sent on purpose (Envelope.Reconcile).
	StatusRepublished = metrics.Republished
	StatusDiscarded   = "discarded" // failed verification on a source that answers 200 anyway
)

// Reasons intake rejects a request, used in error bodies and metrics.
const (
	ReasonUnknownSource = metrics.UnknownSource
	ReasonMethod        = "method_not_allowed"
	ReasonTooLarge      = "too_large"
	ReasonUnreadable    = "unreadable"
	ReasonSlowBody      = "slow_body" // the body fell below the pace floor: 408
	ReasonSignature     = "unauthorized"
	ReasonMalformed     = "malformed"
	ReasonMissingKey    = "missing_key"
	ReasonUnavailable   = "unavailable"
	ReasonOverloaded    = "overloaded"     // over the in-flight byte budget: 503, retry later
	ReasonRateLimited   = "rate_limited"   // over its tenant's rate: 429, retry later
	ReasonNotFound      = "not_found"      // a path under /in/{source}/ the source does not serve
	ReasonStoreRejected = "store_rejected" // the store refused this request's data: 500
	ReasonDiscarded     = metrics.Discarded
)

// Limits on what intake stores beside the body.
const (
	maxContentType  = 256  // bytes of Content-Type
	maxForwardValue = 1024 // bytes of one forwarded header value; a longer one is not forwarded
	maxDetail       = 256  // bytes of a rejection's detail, in the answer and the log
)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.tracer == nil {
		h.serve(w, r)
		return
	}
	// The request is not verified yet: its traceparent is anybody's. So
	// the intake span is a root of its own, sampled by the gateway's
	// sampler alone, and only linked to the caller's context. Parented,
	// a stranger's sampled flag would export every rejected request under
	// a trace id of its choosing, with the sampler at 0 (invariant 17).
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.Source.String(r.PathValue("source")))}
	if caller := trace.SpanContextFromContext(tracing.Propagator.Extract(context.Background(), propagation.HeaderCarrier(r.Header))); caller.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
	}
	ctx, span := h.tracer.Start(r.Context(), "receive "+r.PathValue("source"), opts...)
	defer span.End()
	h.serve(w, r.WithContext(ctx))
}

// count counts a request's outcome, and says it on the request's span.
func (c *Core) count(ctx context.Context, source, outcome string) {
	c.metrics.Request(source, outcome)
	if c.tracer != nil {
		trace.SpanFromContext(ctx).SetAttributes(tracing.Verdict.String(outcome))
	}
}

// serve is intake over HTTP, as numbered steps; what only HTTP has (the
// body's budget and pace, handshakes, methods, status codes) is in the
// helpers below it, and the steps every transport shares are Accept's.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	// 0. The source, and whether it takes HTTP requests at this path.
	name := r.PathValue("source")
	tbl := h.table.Load()
	src, ok := h.source(w, r, tbl, name)
	if !ok {
		return
	}
	if rej := h.admit(r.Context(), src); rej != nil {
		rej.Answer(w)
		return
	}

	// 1. The raw body, bounded, within the in-flight byte budget.
	// Verification needs the exact bytes.
	if r.ContentLength > h.maxBody {
		h.answer(w, r, name, BodyRejection(&http.MaxBytesError{Limit: h.maxBody}))
		return
	}
	held := h.inflight.hold(tbl.shares, name)
	defer held.release()
	body, err := readBody(r.Context(), w, r, h.maxBody, held, h.pace)
	if err != nil {
		held.release() // now, not after the answer: a slow reader must not keep it
		h.answer(w, r, name, BodyRejection(err))
		return
	}
	token := r.PathValue("token")
	env := Envelope{Header: r.Header, Body: body, ReceivedAt: h.now(), Method: r.Method, URL: absoluteURL(r),
		PathToken: token, Client: h.client(r)}
	preq := &provider.Request{Method: r.Method, URL: env.URL, Header: r.Header, Body: body, PathToken: token}

	// A provider's endpoint check (WhatsApp's GET, Slack's url_verification)
	// is answered here and creates no event; anything else but a POST (or
	// a GET the preset takes) is refused.
	if h.handshake(w, r, src, preq, env.ReceivedAt) || !h.methodAllowed(w, r, src, preq) {
		return
	}

	// 2–4. Verify, split, key and claim: the core every transport shares
	// (Accept). What a batch's split holds beyond the body is taken from
	// the request's share of the in-flight budget.
	env.Reserve = reserveBeside(held, len(body))
	resp, rej := h.accept(r.Context(), src, env)

	// 5. The answer, written only now that the claims are durable.
	if rej != nil {
		rej.Answer(w)
		return
	}
	writeAnswer(w, resp)
}

// source finds the request's source, or answers 404: for a name no source
// has, for a source whose events come from elsewhere (a queue, the
// outbox), and for a secret in the path its preset does not take.
func (h *Handler) source(w http.ResponseWriter, r *http.Request, tbl *table, name string) (*Source, bool) {
	src, ok := tbl.sources[name]
	if !ok {
		// The label is not the requested name: strangers must not be able
		// to grow the metric's cardinality. The name is kept among the
		// recent unknown ones (the dashboard shows them) and logged at a
		// bounded rate.
		h.count(r.Context(), "", ReasonUnknownSource)
		if log, suppressed := h.unknown.seen(name, h.now()); log {
			h.log.Info("request rejected", "status", http.StatusNotFound, "reason", ReasonUnknownSource,
				"requested", bounded(name), "client", h.client(r), "not_logged_since", suppressed)
		}
		jsonhttp.WriteJSON(w, http.StatusNotFound, ErrorResponse{Error: bounded("no source named " + name), Reason: ReasonUnknownSource})
		return nil, false
	}
	if src.Elsewhere != "" {
		h.reject(w, r, name, http.StatusNotFound, ReasonNotFound, "source "+name+" takes no HTTP requests: its events come from "+src.Elsewhere)
		return nil, false
	}
	if r.PathValue("token") != "" {
		if !src.traits.PathSecret {
			h.reject(w, r, name, http.StatusNotFound, ReasonNotFound, "source "+name+" is at /in/"+name+"; its preset takes no secret in the path")
			return nil, false
		}
	}
	return src, true
}

// handshake answers a provider's endpoint check, and reports whether the
// request was one (answered, or refused when it failed verification).
func (h *Handler) handshake(w http.ResponseWriter, r *http.Request, src *Source, preq *provider.Request, now time.Time) bool {
	if src.traits.Handshake == nil {
		return false
	}
	reply, isHandshake, err := src.traits.Handshake(preq, now)
	if !isHandshake {
		return false
	}
	if err != nil {
		h.reject(w, r, src.Name, http.StatusUnauthorized, ReasonSignature, err.Error())
		return true
	}
	h.count(r.Context(), src.Name, metrics.Handshake)
	// The reply echoes what the caller sent (hub.challenge): never let a
	// browser sniff it into something else.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", reply.ContentType)
	w.WriteHeader(reply.Status)
	w.Write(reply.Body)
	return true
}

// methodAllowed reports whether the request's method carries events (POST,
// or a GET its preset takes), and answers 405 when not.
func (h *Handler) methodAllowed(w http.ResponseWriter, r *http.Request, src *Source, preq *provider.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	if src.traits.AcceptsGet != nil && r.Method == http.MethodGet && src.traits.AcceptsGet(preq) {
		return true
	}
	w.Header().Set("Allow", http.MethodPost)
	h.reject(w, r, src.Name, http.StatusMethodNotAllowed, ReasonMethod, "use POST")
	return false
}

// reserveBeside is Envelope.Reserve for a request whose body of n bytes
// is held: a batch's split is taken from the same share of the budget.
func reserveBeside(held *hold, n int) func(ctx context.Context, split int64) error {
	return func(ctx context.Context, split int64) error {
		if room := held.room(); split > room {
			// Beside its body the batch could never fit in the source's
			// share of max_inflight_bytes, however long it waited: the
			// budget is a bound, not a wish.
			return rejection(http.StatusRequestEntityTooLarge, ReasonTooLarge,
				"the batch's events would hold "+strconv.FormatInt(split, 10)+
					" bytes beside the request's "+strconv.Itoa(n)+": over this source's share of max_inflight_bytes")
		}
		if err := held.acquire(ctx, split); err != nil {
			return rejection(http.StatusServiceUnavailable, ReasonOverloaded, "too many request bytes in flight; retry later")
		}
		return nil
	}
}

// reject answers a request intake refuses before Accept: counted and
// logged as Accept's rejections are, and answered as they are.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, source string, status int, reason, msg string) {
	h.answer(w, r, source, rejection(status, reason, msg))
}

// answer counts, logs and writes rej for the request.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, source string, rej *Rejection) {
	h.rejected(r.Context(), source, h.client(r), rej).Answer(w)
}

// client is the address logged for a request: the connection's peer, or,
// when that peer is a trusted proxy, the nearest address in
// X-Forwarded-For that is not a trusted proxy (the rightmost untrusted one:
// anything left of it could have been written by the client itself).
func (h *Handler) client(r *http.Request) string {
	return forwarded.ClientAddr(r, h.proxies)
}

// absoluteURL is the URL the provider called, as far as this request tells:
// scheme and host from X-Forwarded-Proto and X-Forwarded-Host when a proxy
// set them. Presets that sign the URL (Twilio) need it; a spoofed header
// can only make verification fail, never pass.
func absoluteURL(r *http.Request) *url.URL {
	u := *r.URL
	u.Scheme = "http"
	if r.TLS != nil {
		u.Scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		u.Scheme = p
	}
	u.Host = r.Host
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
		u.Host = fh
	}
	return &u
}
