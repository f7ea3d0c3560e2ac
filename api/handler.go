package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/store"
)

// maxRequestBody bounds an API request's body.
const maxRequestBody = 64 << 10

// Error is an error answer of the API, as the Client returns it: the
// status, and the one error shape of every endpoint.
type Error struct {
	Status int
	Body   jsonhttp.Error
}

func (e *Error) Error() string {
	if e.Body.Field != "" {
		return fmt.Sprintf("%s (%s, field %s)", e.Body.Error, e.Body.Reason, e.Body.Field)
	}
	return fmt.Sprintf("%s (%s)", e.Body.Error, e.Body.Reason)
}

// Unwrap lets a Client's caller test an answer with errors.Is(err,
// admin.ErrNotFound) and errors.Is(err, admin.ErrInvalid), as it would the
// Service's.
func (e *Error) Unwrap() error {
	switch e.Status {
	case http.StatusNotFound:
		return admin.ErrNotFound
	case http.StatusBadRequest:
		return admin.ErrInvalid
	case http.StatusGone:
		return admin.ErrGone
	}
	return nil
}

func fail(status int, reason, msg string) *Error {
	return &Error{Status: status, Body: jsonhttp.Error{Error: msg, Reason: reason}}
}

func invalid(field, format string, args ...any) error {
	return &admin.InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Register mounts the admin API on mux, under /v1. The caller puts it
// behind authentication (the gateway uses api.tokens).
func Register(mux *http.ServeMux, op admin.Operator, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{s: op, log: log}
	for _, e := range h.table() {
		mux.HandleFunc(e.route.Pattern(), e.serve)
	}
}

// Routes lists the admin API's routes as "METHOD /path", the table
// Register mounts: what docs/openapi.yaml is checked against.
func Routes() []string {
	var out []string
	for _, e := range (&handler{}).table() {
		out = append(out, e.route.Method+" "+e.route.Path)
	}
	return out
}

type route struct {
	route jsonhttp.Route
	serve http.HandlerFunc
}

// table is every route of the admin API with its handler.
func (h *handler) table() []route {
	return []route{
		{routeSources, h.sources},
		{routeStats, h.stats},
		{routeEvents, h.events},
		{routeReplayEvents, h.replayEvents},
		{routeEvent, h.event},
		{routeReplayEvent, h.replayEvent},
		{routeDeliverEvent, h.deliverEvent},
		{routeSkipEvent, h.skipEvent},
		{routeResetOrder, h.resetOrder},
		{routeDeadLetters, h.deadLetters},
		{routeRetryDead, h.retryDead},
		{routePurgeDead, h.purgeDead},
		{routeDestinations, h.destinations},
		{routePause, h.pause(true)},
		{routeResume, h.pause(false)},
		{routeBreakerOpen, h.breaker(true)},
		{routeBreakerClose, h.breaker(false)},
		{routeAudit, h.audit},
		{routeDoctor, h.doctor},
		{routeReload, h.reload},
		// The effects ledger's reset, audited (the ledger's own handler
		// serves the rest of /v1/effects).
		{effect.ResetRoute, h.resetEffect},
	}
}

type handler struct {
	s   admin.Operator
	log *slog.Logger
}

// respond answers v, or err when there is one.
func (h *handler) respond(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, v)
}

func writeError(w http.ResponseWriter, e *Error) {
	jsonhttp.WriteJSON(w, e.Status, e.Body)
}

// answerError maps an error to its answer.
func (h *handler) answerError(w http.ResponseWriter, r *http.Request, err error) {
	var inv *admin.InvalidError
	switch {
	case errors.As(err, &inv):
		jsonhttp.WriteFieldError(w, inv.Field, inv.Error())
	case errors.Is(err, admin.ErrNotFound), errors.Is(err, effect.ErrNotFound):
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, effect.ErrInvalid):
		jsonhttp.WriteFieldError(w, "key", err.Error())
	case errors.Is(err, effect.ErrConflict), errors.Is(err, admin.ErrConflict):
		jsonhttp.WriteError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, admin.ErrGone):
		jsonhttp.WriteError(w, http.StatusGone, "body_gone", err.Error())
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		h.log.Warn("admin API: store unavailable", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		jsonhttp.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the store is unavailable")
	default:
		h.log.Error("admin API", "path", r.URL.Path, "err", err)
		jsonhttp.WriteError(w, http.StatusInternalServerError, "internal", "internal error")
	}
}

// query reads a request's query, refusing parameters the endpoint does not
// take: a misspelt filter (sorce=) must not silently select everything.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalid("query", "not a valid query string")
	}
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			return nil, invalid(k, "unknown parameter; this endpoint takes %s", strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, invalid(k, "given more than once")
		}
	}
	return q, nil
}

func parseTime(q url.Values, field string) (time.Time, error) {
	v := q.Get(field)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, invalid(field, "want an RFC 3339 time, e.g. 2026-11-30T15:00:00Z")
	}
	return t, nil
}

func parseInt(q url.Values, field string) (int, error) {
	v := q.Get(field)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, invalid(field, "want a number")
	}
	return n, nil
}

func parseBool(q url.Values, field string) (bool, error) {
	v := q.Get(field)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid(field, "want true or false")
	}
	return b, nil
}

// decode reads a JSON body (which may be empty), bounded, refusing unknown
// fields.
func decode(w http.ResponseWriter, r *http.Request, v any) *Error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fail(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", maxRequestBody))
		}
		return fail(http.StatusBadRequest, "unreadable", "could not read the body")
	}
	if strings.TrimSpace(string(body)) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fail(http.StatusBadRequest, "invalid", "the body is not the JSON this endpoint takes: "+err.Error())
	}
	return nil
}

func (h *handler) sources(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		h.answerError(w, r, err)
		return
	}
	list, err := h.s.Sources(r.Context())
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"sources": list})
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "source", "destination", "from", "to", "granularity")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	sq := admin.StatsQuery{Source: q.Get("source"), Destination: q.Get("destination")}
	if sq.From, err = parseTime(q, "from"); err == nil {
		sq.To, err = parseTime(q, "to")
	}
	if err == nil {
		switch g := q.Get("granularity"); g {
		case "", "1h":
			sq.Granularity = admin.Hourly
		case "1d":
			sq.Granularity = admin.Daily
		default:
			err = invalid("granularity", "want 1h or 1d")
		}
	}
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	view, err := h.s.Stats(r.Context(), sq)
	h.respond(w, r, view, err)
}

func eventFilter(q url.Values) (admin.EventFilter, error) {
	f := admin.EventFilter{Source: q.Get("source"), Key: q.Get("key"), Type: q.Get("type"), State: q.Get("state"), KeyPrefix: q.Get("key_prefix"), Cursor: q.Get("cursor")}
	var err error
	if f.From, err = parseTime(q, "from"); err != nil {
		return f, err
	}
	if f.To, err = parseTime(q, "to"); err != nil {
		return f, err
	}
	f.Limit, err = parseInt(q, "limit")
	return f, err
}

func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "source", "key", "type", "state", "key_prefix", "from", "to", "cursor", "limit")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	f, err := eventFilter(q)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	page, err := h.s.Events(r.Context(), f)
	h.respond(w, r, page, err)
}

func eventID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("event %q: %w", r.PathValue("id"), admin.ErrNotFound)
	}
	return id, nil
}

func (h *handler) event(w http.ResponseWriter, r *http.Request) {
	id, err := eventID(r)
	if err == nil {
		_, err = query(r)
	}
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	e, err := h.s.Event(r.Context(), id)
	h.respond(w, r, e, err)
}

func (h *handler) replayEvent(w http.ResponseWriter, r *http.Request) {
	id, err := eventID(r)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	var none struct{}
	if e := decode(w, r, &none); e != nil {
		writeError(w, e)
		return
	}
	n, err := h.s.ReplayEvent(r.Context(), id)
	h.respond(w, r, n, err)
}

// deliverBody is the body of POST /v1/events/{id}/deliver.
type deliverBody struct {
	Destination string `json:"destination"`
}

func (h *handler) deliverEvent(w http.ResponseWriter, r *http.Request) {
	h.toDestination(w, r, h.s.DeliverEvent)
}

// skipEvent answers POST /v1/events/{id}/skip, whose body names the
// destination as deliverBody does.
func (h *handler) skipEvent(w http.ResponseWriter, r *http.Request) {
	h.toDestination(w, r, h.s.SkipEvent)
}

// resetOrderBody is the body of POST /v1/sources/{name}/order/reset: an
// entity's id can hold any character, so it travels in the body.
type resetOrderBody struct {
	Entity      string `json:"entity"`
	Destination string `json:"destination,omitempty"`
}

// resetOrder answers POST /v1/sources/{name}/order/reset.
func (h *handler) resetOrder(w http.ResponseWriter, r *http.Request) {
	var b resetOrderBody
	if e := decode(w, r, &b); e != nil {
		writeError(w, e)
		return
	}
	n, err := h.s.ResetOrder(r.Context(), r.PathValue("name"), b.Entity, b.Destination)
	h.respond(w, r, n, err)
}

// toDestination answers an operator's action on one event's delivery to
// one destination: the event's id in the path, the destination in the body.
func (h *handler) toDestination(w http.ResponseWriter, r *http.Request, act func(context.Context, int64, string) (admin.Count, error)) {
	id, err := eventID(r)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	var b deliverBody
	if e := decode(w, r, &b); e != nil {
		writeError(w, e)
		return
	}
	n, err := act(r.Context(), id, b.Destination)
	h.respond(w, r, n, err)
}

// bulkEvents is the body of a bulk replay.
type bulkEvents struct {
	admin.EventFilter
	DryRun bool `json:"dry_run,omitempty"`
}

func (h *handler) replayEvents(w http.ResponseWriter, r *http.Request) {
	var b bulkEvents
	if e := decode(w, r, &b); e != nil {
		writeError(w, e)
		return
	}
	n, err := h.s.ReplayEvents(r.Context(), b.EventFilter, b.DryRun)
	h.respond(w, r, n, err)
}

func (h *handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "destination", "source", "cursor", "limit")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	f := admin.DeadFilter{Destination: q.Get("destination"), Source: q.Get("source"), Cursor: q.Get("cursor")}
	if f.Limit, err = parseInt(q, "limit"); err != nil {
		h.answerError(w, r, err)
		return
	}
	page, err := h.s.DeadLetters(r.Context(), f)
	h.respond(w, r, page, err)
}

// bulkDead is the body of a dead letters retry.
type bulkDead struct {
	admin.DeadFilter
	DryRun bool `json:"dry_run,omitempty"`
}

func (h *handler) retryDead(w http.ResponseWriter, r *http.Request) {
	var b bulkDead
	if e := decode(w, r, &b); e != nil {
		writeError(w, e)
		return
	}
	n, err := h.s.RetryDeadLetters(r.Context(), b.DeadFilter, b.DryRun)
	h.respond(w, r, n, err)
}

// purgeDead takes its filter in the query: DELETE bodies are often dropped
// by proxies.
func (h *handler) purgeDead(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "destination", "source", "all", "dry_run")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	f := admin.DeadFilter{Destination: q.Get("destination"), Source: q.Get("source")}
	var dry bool
	if f.All, err = parseBool(q, "all"); err == nil {
		dry, err = parseBool(q, "dry_run")
	}
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	n, err := h.s.PurgeDeadLetters(r.Context(), f, dry)
	h.respond(w, r, n, err)
}

func (h *handler) destinations(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		h.answerError(w, r, err)
		return
	}
	list, err := h.s.Destinations(r.Context())
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"destinations": list})
}

func (h *handler) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var none struct{}
		if e := decode(w, r, &none); e != nil {
			writeError(w, e)
			return
		}
		d, err := h.s.SetPaused(r.Context(), r.PathValue("name"), paused)
		h.respond(w, r, d, err)
	}
}

func (h *handler) breaker(open bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var none struct{}
		if e := decode(w, r, &none); e != nil {
			writeError(w, e)
			return
		}
		d, err := h.s.SetBreaker(r.Context(), r.PathValue("name"), open)
		h.respond(w, r, d, err)
	}
}

func (h *handler) audit(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "cursor", "limit")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	limit, err := parseInt(q, "limit")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	page, err := h.s.Audit(r.Context(), q.Get("cursor"), limit)
	h.respond(w, r, page, err)
}

func (h *handler) doctor(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "source")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	rep, err := h.s.Doctor(r.Context(), q.Get("source"))
	h.respond(w, r, rep, err)
}

// reload reads the gateway's config file anew and applies it (the same
// as SIGHUP), audited under the caller's token.
func (h *handler) reload(w http.ResponseWriter, r *http.Request) {
	var none struct{}
	if e := decode(w, r, &none); e != nil {
		writeError(w, e)
		return
	}
	v, err := h.s.Reload(r.Context())
	h.respond(w, r, v, err)
}

func (h *handler) resetEffect(w http.ResponseWriter, r *http.Request) {
	var none struct{}
	if e := decode(w, r, &none); e != nil {
		writeError(w, e)
		return
	}
	if err := h.s.ResetEffect(r.Context(), r.PathValue("key")); err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"state": store.EffectPending})
}
