// Package receive is oncehook's intake: the HTTP handler behind
// POST /in/{source}. The hot path reads top to bottom in ServeHTTP:
//
//	read the raw body (bounded) → verify it with the source's preset →
//	split it into events and take each one's key → claim them all through the
//	group committer → answer 200 only once the transaction holding them is
//	durable.
//
// Rejected input (unknown source, bad signature, malformed or oversized body,
// a missing key where the source requires one) is answered before anything
// reaches the store, so it leaves no trace there; it is counted by reason
// and logged without secrets or payloads.
package receive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

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

	all    []string    // every destination: the deliveries of an event when nothing is routed
	routed bool        // some destination wants only some events
	plan   *route.Plan // Routes, ready to pick (when routed)
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

// Handler serves POST /in/{source}.
type Handler struct {
	// table is the sources now: a request reads it once, and finishes
	// under the sources it started with whatever a reload swaps in.
	table    atomic.Pointer[table]
	reload   sync.Mutex // one SetSources at a time
	claimer  Claimer
	seen     *seen.Set
	onDup    func(source, key string, body []byte)
	maxBody  int64
	inflight *budget
	apis     *shares // the user's APIs' share of inflight (ReadBody)
	pace     pace
	proxies  []netip.Prefix
	log      *slog.Logger
	metrics  *metrics.Metrics
	tracer   trace.Tracer // nil: not traced
	now      func() time.Time
	unknown  *unknownSources
}

// New creates a Handler.
func New(opts Options) *Handler {
	h := &Handler{
		claimer: opts.Claimer,
		seen:    opts.Seen,
		onDup:   opts.OnDuplicate,
		maxBody: opts.MaxBodySize,
		log:     opts.Logger,
		metrics: opts.Metrics,
		now:     opts.Now,
		unknown: newUnknownSources(),
	}
	maxBody, total, err := Limits(opts.MaxBodySize, opts.MaxInflightBytes)
	if err != nil {
		total = maxBody // the config refuses this; a library caller gets room for one body
	}
	h.maxBody = maxBody
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
	h.tracer = opts.Tracer
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.metrics == nil {
		h.metrics = metrics.New()
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.inflight = newBudget(total, h.maxBody, wait)
	h.apis = h.inflight.apiShare()
	h.SetSources(opts.Sources)
	return h
}

// table is one set of sources, by name, and their shares of the
// in-flight budget.
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
	t := &table{sources: make(map[string]*Source, len(sources))}
	names := make([]string, len(sources))
	for i := range sources {
		s := sources[i]
		s.all, s.routed = s.Routes.Destinations(), s.Routes.Routed()
		s.plan = s.Routes.Plan()
		t.sources[s.Name] = &s
		names[i] = s.Name
	}
	var old *shares
	if prev := h.table.Load(); prev != nil {
		old = prev.shares
	}
	t.shares = h.inflight.split(names, old)
	h.table.Store(t)
}

// EventResult is one event's verdict in a response.
type EventResult struct {
	Key     string `json:"key"`
	Status  string `json:"status"` // accepted | duplicate
	Keyless bool   `json:"keyless,omitempty"`
}

// Response is the body of a 200 answer.
type Response struct {
	Status string        `json:"status"` // accepted when any event is new, else duplicate
	Events []EventResult `json:"events"`
}

// ErrorResponse is the body of every error answer: the one error shape
// of every oncehook endpoint (jsonhttp.Error).
type ErrorResponse = jsonhttp.Error

// Statuses of events and responses.
const (
	StatusAccepted  = metrics.Accepted
	StatusDuplicate = metrics.Duplicate
	StatusDiscarded = "discarded" // failed verification on a source that answers 200 anyway
)

// Reasons intake rejects a request, used in error bodies and metrics.
const (
	ReasonUnknownSource = "unknown_source"
	ReasonMethod        = "method_not_allowed"
	ReasonTooLarge      = "too_large"
	ReasonUnreadable    = "unreadable"
	ReasonSlowBody      = "slow_body" // the body fell below the pace floor: 408
	ReasonSignature     = "unauthorized"
	ReasonMalformed     = "malformed"
	ReasonMissingKey    = "missing_key"
	ReasonUnavailable   = "unavailable"
	ReasonOverloaded    = "overloaded"     // over the in-flight byte budget: 503, retry later
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
func (h *Handler) count(ctx context.Context, source, outcome string) {
	h.metrics.Request(source, outcome)
	if h.tracer != nil {
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

	// 1. The raw body, bounded, within the in-flight byte budget.
	// Verification needs the exact bytes.
	if r.ContentLength > h.maxBody {
		h.reject(w, r, name, http.StatusRequestEntityTooLarge, ReasonTooLarge, "body exceeds the size limit")
		return
	}
	held := h.inflight.hold(tbl.shares, name)
	defer held.release()
	body, err := readBody(r.Context(), w, r, h.maxBody, held, h.pace)
	if err != nil {
		held.release() // now, not after the answer: a slow reader must not keep it
		h.unreadable(w, r, name, err)
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
		switch rej.Reason {
		case ReasonUnavailable:
			w.Header().Set("Retry-After", "5")
		case ReasonOverloaded:
			w.Header().Set("Retry-After", "1")
		}
		jsonhttp.WriteJSON(w, rej.Status, rej.ErrorResponse())
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
		if ps, ok := src.Preset.(provider.PathSecreter); !ok || !ps.AcceptsPathSecret() {
			h.reject(w, r, name, http.StatusNotFound, ReasonNotFound, "source "+name+" is at /in/"+name+"; its preset takes no secret in the path")
			return nil, false
		}
	}
	return src, true
}

// unreadable answers a body that could not be read whole: too large, no
// room in the budget, evicted for bodies that arrived in full, too slow,
// or broken off.
func (h *Handler) unreadable(w http.ResponseWriter, r *http.Request, name string, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.reject(w, r, name, http.StatusRequestEntityTooLarge, ReasonTooLarge, "body exceeds the size limit")
	case errors.Is(err, errOverloaded):
		h.overloaded(w, r, name)
	case errors.Is(err, errEvicted):
		// The rest of the body was never read: the connection cannot
		// carry another request.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		h.reject(w, r, name, http.StatusServiceUnavailable, ReasonOverloaded,
			"the body was still arriving when the memory it held was needed for bodies that arrived in full; retry later")
	case errors.Is(err, errSlowBody):
		w.Header().Set("Connection", "close")
		h.reject(w, r, name, http.StatusRequestTimeout, ReasonSlowBody, "the body arrived too slowly; it was cut")
	default:
		h.reject(w, r, name, http.StatusBadRequest, ReasonUnreadable, "could not read the body")
	}
}

// handshake answers a provider's endpoint check, and reports whether the
// request was one (answered, or refused when it failed verification).
func (h *Handler) handshake(w http.ResponseWriter, r *http.Request, src *Source, preq *provider.Request, now time.Time) bool {
	hs, ok := src.Preset.(provider.Handshaker)
	if !ok {
		return false
	}
	reply, isHandshake, err := hs.Handshake(preq, now)
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
	if ga, ok := src.Preset.(provider.GetAccepter); ok && r.Method == http.MethodGet && ga.AcceptsGet(preq) {
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

// forwardHeaders picks the preset's routing headers out of the request.
// A value that is long, not UTF-8 or not a valid header value is left
// out: it travels with every delivery, and a destination (or the store,
// or Go's HTTP client) could refuse it.
func forwardHeaders(p provider.Preset, h http.Header) http.Header {
	f, ok := p.(provider.Forwarder)
	if !ok {
		return nil
	}
	var out http.Header
	for _, name := range f.ForwardHeaders() {
		for _, v := range h.Values(name) {
			if !sendable(v, maxForwardValue) {
				continue
			}
			if out == nil {
				out = http.Header{}
			}
			k := http.CanonicalHeaderKey(name)
			out[k] = append(out[k], v)
		}
	}
	return out
}

// overloaded answers a request that could not get memory in time: 503,
// to be retried by the provider.
func (h *Handler) overloaded(w http.ResponseWriter, r *http.Request, source string) {
	w.Header().Set("Retry-After", "1")
	h.reject(w, r, source, http.StatusServiceUnavailable, ReasonOverloaded, "too many request bytes in flight; retry later")
}

func (h *Handler) reject(w http.ResponseWriter, r *http.Request, source string, status int, reason, msg string) {
	msg = bounded(msg)
	h.count(r.Context(), source, reason)
	if h.tracer != nil && status >= 500 {
		trace.SpanFromContext(r.Context()).SetStatus(codes.Error, reason)
	}
	h.log.Info("request rejected", "source", source, "status", status, "reason", reason,
		"detail", msg, "client", h.client(r))
	jsonhttp.WriteJSON(w, status, ErrorResponse{Error: msg, Reason: reason})
}

// bounded cuts a message that may quote the request (an id, a header) to
// maxDetail bytes, so that neither a log line nor an answer grows with what
// a client sends.
func bounded(msg string) string {
	if len(msg) <= maxDetail {
		return msg
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "… (" + strconv.Itoa(len(msg)-cut) + " more bytes)"
}

// client is the address logged for a request: the connection's peer, or,
// when that peer is a trusted proxy, the nearest address in
// X-Forwarded-For that is not a trusted proxy (the rightmost untrusted one:
// anything left of it could have been written by the client itself).
func (h *Handler) client(r *http.Request) string {
	return ClientAddr(r, h.proxies)
}

// ClientAddr is the address a request came from, believing X-Forwarded-For
// only as far as it was written by proxies in trusted.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer := r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	if len(trusted) == 0 || !isTrusted(peer, trusted) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, hop := range strings.Split(v, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		if !isTrusted(hops[i], trusted) {
			return hops[i]
		}
	}
	if len(hops) > 0 {
		return hops[0]
	}
	return peer
}

func isTrusted(addr string, trusted []netip.Prefix) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
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

// newEvents makes the request's items into events: each with its key
// (or a keyless one), its type, and the deliveries its source's routes
// pick (package route decides). keyless is the index of the first item
// that has no key when the source rejects such events (then there are no
// events), else -1.
func newEvents(src *Source, items []provider.Item, header http.Header, u *url.URL, contentType, traceparent string, now time.Time) (_ []store.NewEvent, keyless int) {
	forward := forwardHeaders(src.Preset, header)
	events := make([]store.NewEvent, len(items))
	var query url.Values // read once, when a route asks for it
	for i, it := range items {
		e := store.NewEvent{
			Source:       src.Name,
			Key:          provider.SafeKey(it.Key),
			Type:         it.Type,
			ContentType:  contentType,
			Header:       forward,
			Body:         it.Body,
			ReceivedAt:   now,
			ExpiresAt:    now.Add(src.Window),
			Destinations: src.all,
			Trace:        traceparent,
		}
		if src.BodyRetention > 0 {
			e.BodyExpiresAt = now.Add(src.BodyRetention)
		}
		if src.routed {
			if query == nil {
				query = u.Query()
			}
			e.Destinations, e.Filtered = src.plan.Pick(it.Type, &route.Input{Body: it.Body, Header: header, Query: query, Path: u.Path})
		}
		if src.Order != nil {
			e.Order = src.Order.place(header, it.Body, now)
		}
		if it.Key == "" {
			if src.RejectMissingKey {
				return nil, i
			}
			e.Key, e.Keyless = keylessKey(), true
		}
		events[i] = e
	}
	return events, -1
}

// keylessKey names an event that has no provider key. It is unique, so the
// event is never deduplicated, and stored, so its deliveries still carry one
// stable Idempotency-Key.
func keylessKey() string {
	var b [16]byte
	rand.Read(b[:])
	return "keyless:" + strings.ToLower(hex.EncodeToString(b[:]))
}

// place reads an event's place among its entity's events; the zero Order
// (not ordered) when it has none. The entity is stored as every store
// can hold it (store.StorableEntity): an id with a NUL, bytes that are not
// UTF-8 or a megabyte of text still orders its events.
func (o *Order) place(h http.Header, body []byte, now time.Time) store.Order {
	p, ok := o.Rule.Read(h, body, now)
	if !ok {
		return store.Order{}
	}
	return store.Order{Entity: store.StorableEntity(p.Entity), Mode: o.Mode, Version: p.Version, Versioned: p.Versioned, VersionText: p.VersionText, DeliverStale: o.DeliverStale}
}
