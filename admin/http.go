package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/store"
)

// maxRequestBody bounds an API request's body.
const maxRequestBody = 64 << 10

// APIError is every error answer of the API.
type APIError struct {
	Status int    `json:"-"`
	Err    string `json:"error"`
	Reason string `json:"reason"`
	Field  string `json:"field,omitempty"`
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%s, field %s)", e.Err, e.Reason, e.Field)
	}
	return fmt.Sprintf("%s (%s)", e.Err, e.Reason)
}

// Unwrap lets a Client's caller test an answer with errors.Is(err,
// ErrNotFound) and errors.Is(err, ErrInvalid).
func (e *APIError) Unwrap() error {
	switch e.Status {
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusBadRequest:
		return ErrInvalid
	}
	return nil
}

// Register mounts the admin API on mux, under /v1. The caller puts it
// behind authentication (the gateway uses api.tokens).
func Register(mux *http.ServeMux, s *Service, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{s: s, log: log}
	mux.HandleFunc("GET /v1/sources", h.sources)
	mux.HandleFunc("GET /v1/stats", h.stats)
	mux.HandleFunc("GET /v1/events", h.events)
	mux.HandleFunc("POST /v1/events/replay", h.replayEvents)
	mux.HandleFunc("GET /v1/events/{id}", h.event)
	mux.HandleFunc("POST /v1/events/{id}/replay", h.replayEvent)
	mux.HandleFunc("GET /v1/dead-letters", h.deadLetters)
	mux.HandleFunc("POST /v1/dead-letters/retry", h.retryDead)
	mux.HandleFunc("DELETE /v1/dead-letters", h.purgeDead)
	mux.HandleFunc("GET /v1/destinations", h.destinations)
	mux.HandleFunc("POST /v1/destinations/{name}/pause", h.pause(true))
	mux.HandleFunc("POST /v1/destinations/{name}/resume", h.pause(false))
	mux.HandleFunc("GET /v1/audit", h.audit)
	mux.HandleFunc("GET /v1/doctor", h.doctor)
	// The effects ledger's reset, audited (the ledger's own handler serves
	// the rest of /v1/effects).
	mux.HandleFunc("POST /v1/effects/{key}/reset", h.resetEffect)
}

type handler struct {
	s   *Service
	log *slog.Logger
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// respond answers v, or err when there is one.
func (h *handler) respond(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func writeError(w http.ResponseWriter, e *APIError) {
	writeJSON(w, e.Status, e)
}

// answerError maps an error to its answer.
func (h *handler) answerError(w http.ResponseWriter, r *http.Request, err error) {
	var inv *invalidError
	switch {
	case errors.As(err, &inv):
		writeError(w, &APIError{Status: http.StatusBadRequest, Err: inv.Error(), Reason: "invalid", Field: inv.Field})
	case errors.Is(err, ErrNotFound), errors.Is(err, effect.ErrNotFound):
		writeError(w, &APIError{Status: http.StatusNotFound, Err: err.Error(), Reason: "not_found"})
	case errors.Is(err, effect.ErrInvalid):
		writeError(w, &APIError{Status: http.StatusBadRequest, Err: err.Error(), Reason: "invalid", Field: "key"})
	case errors.Is(err, effect.ErrConflict):
		writeError(w, &APIError{Status: http.StatusConflict, Err: err.Error(), Reason: "conflict"})
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		h.log.Warn("admin API: store unavailable", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Err: "the store is unavailable", Reason: "unavailable"})
	default:
		h.log.Error("admin API", "path", r.URL.Path, "err", err)
		writeError(w, &APIError{Status: http.StatusInternalServerError, Err: "internal error", Reason: "internal"})
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
		if !contains(allowed, k) {
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
func decode(w http.ResponseWriter, r *http.Request, v any) *APIError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &APIError{Status: http.StatusRequestEntityTooLarge, Err: fmt.Sprintf("the body is over %d bytes", maxRequestBody), Reason: "too_large"}
		}
		return &APIError{Status: http.StatusBadRequest, Err: "could not read the body", Reason: "unreadable"}
	}
	if strings.TrimSpace(string(body)) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &APIError{Status: http.StatusBadRequest, Err: "the body is not the JSON this endpoint takes: " + err.Error(), Reason: "invalid"}
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
	writeJSON(w, http.StatusOK, map[string]any{"sources": list})
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "source", "destination", "from", "to", "granularity")
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	sq := StatsQuery{Source: q.Get("source"), Destination: q.Get("destination")}
	if sq.From, err = parseTime(q, "from"); err == nil {
		sq.To, err = parseTime(q, "to")
	}
	if err == nil {
		switch g := q.Get("granularity"); g {
		case "", "1h":
			sq.Granularity = Hourly
		case "1d":
			sq.Granularity = Daily
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

func eventFilter(q url.Values) (EventFilter, error) {
	f := EventFilter{Source: q.Get("source"), Key: q.Get("key"), State: q.Get("state"), KeyPrefix: q.Get("key_prefix"), Cursor: q.Get("cursor")}
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
	q, err := query(r, "source", "key", "state", "key_prefix", "from", "to", "cursor", "limit")
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
		return 0, fmt.Errorf("event %q: %w", r.PathValue("id"), ErrNotFound)
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

// bulkEvents is the body of a bulk replay.
type bulkEvents struct {
	EventFilter
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
	f := DeadFilter{Destination: q.Get("destination"), Source: q.Get("source"), Cursor: q.Get("cursor")}
	if f.Limit, err = parseInt(q, "limit"); err != nil {
		h.answerError(w, r, err)
		return
	}
	page, err := h.s.DeadLetters(r.Context(), f)
	h.respond(w, r, page, err)
}

// bulkDead is the body of a dead letters retry.
type bulkDead struct {
	DeadFilter
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
	f := DeadFilter{Destination: q.Get("destination"), Source: q.Get("source")}
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
	writeJSON(w, http.StatusOK, map[string]any{"destinations": list})
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
	writeJSON(w, http.StatusOK, map[string]any{"state": store.EffectPending})
}
