// Package api is the operator's HTTP API, under /v1 on the gateway's API
// listener: Register serves an admin.Operator (the gateway's Service), and
// Client is an admin.Operator over HTTP (what `oncehook ... --api` uses).
// Both read admin's table of actions (admin.Actions), so an action's
// route and the shape of its argument are written once, there; bind.go
// is the one rule of where an argument travels. docs/api.md is the
// reference.
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
	"strings"

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
	// Fields are every field at fault of an object refused as invalid
	// (a source's or destination's 400); Body.Field is the first.
	Fields []FieldError
}

func (e *Error) Error() string {
	if e.Body.Field != "" {
		return fmt.Sprintf("%s (%s, field %s)", e.Body.Error, e.Body.Reason, e.Body.Field)
	}
	return fmt.Sprintf("%s (%s)", e.Body.Error, e.Body.Reason)
}

// Unwrap lets a Client's caller test an answer with errors.Is as it would
// the Service's own error (errors.Is(err, admin.ErrConflict) after a 409,
// store.ErrUnavailable after a 503): the named errors its status answers
// (see answers).
func (e *Error) Unwrap() []error {
	for _, a := range answers {
		if a.status == e.Status {
			return a.errs
		}
	}
	return nil
}

// answer is the status and reason the API answers the named errors errs
// with.
type answer struct {
	status int
	reason string
	errs   []error
}

// answers are an Operator's named errors and the answer the API gives
// each, written once: the handler answers an error with the entry of the
// first it wraps, and the Client's Error unwraps that status to the same
// errors, so a caller tells them apart alike whether the operator's
// service ran in its process (--config) or behind the API (--api).
var answers = []answer{
	{http.StatusBadRequest, "invalid", []error{admin.ErrInvalid, effect.ErrInvalid}},
	{http.StatusNotFound, "not_found", []error{admin.ErrNotFound, effect.ErrNotFound}},
	{http.StatusConflict, "conflict", []error{admin.ErrConflict, effect.ErrConflict}},
	{http.StatusForbidden, "forbidden", []error{admin.ErrForbidden}},
	{http.StatusGone, "body_gone", []error{admin.ErrGone}},
	{http.StatusServiceUnavailable, "unavailable", []error{store.ErrUnavailable}},
}

func fail(status int, reason, msg string) *Error {
	return &Error{Status: status, Body: jsonhttp.Error{Error: msg, Reason: reason}}
}

func invalid(field, format string, args ...any) error {
	return &admin.InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Register mounts the admin API on mux, under /v1: every action of the
// table (admin.Actions) at its route. The caller puts it behind
// authentication (the gateway uses api.tokens).
func Register(mux *http.ServeMux, op admin.Operator, log *slog.Logger) {
	RegisterFor(mux, func(*http.Request) admin.Operator { return op }, log)
}

// RegisterFor is Register with the Operator each request is served by
// chosen by op: the gateway gives a tenant's token its tenant's
// (admin.Service's Tenant).
func RegisterFor(mux *http.ServeMux, op func(*http.Request) admin.Operator, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{s: op, log: log}
	for _, a := range admin.Actions() {
		mux.HandleFunc(a.Route.Pattern(), h.serve(a))
	}
}

// Routes lists the admin API's routes as "METHOD /path", the table
// Register mounts: what docs/openapi.yaml is checked against.
func Routes() []string {
	var out []string
	for _, a := range admin.Actions() {
		out = append(out, a.Route.Method+" "+a.Route.Path)
	}
	return out
}

// serve answers action a: its argument bound from the request (see bind),
// its answer as JSON.
func (h *handler) serve(a admin.Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in := a.Input()
		if err := bind(w, r, in); err != nil {
			var e *Error
			if errors.As(err, &e) {
				writeError(w, e)
				return
			}
			h.answerError(w, r, err)
			return
		}
		out, err := a.Do(r.Context(), h.s(r), in)
		h.respond(w, r, out, err)
	}
}

type handler struct {
	s   func(*http.Request) admin.Operator
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

// answerError maps an error to its answer (see answers). A store that
// did not answer in time is unavailable, as one that refused; an error
// that is none of the named ones is the API's own, a 500.
func (h *handler) answerError(w http.ResponseWriter, r *http.Request, err error) {
	var inv *admin.InvalidError
	switch {
	case errors.As(err, &inv):
		jsonhttp.WriteFieldError(w, inv.Field, inv.Error())
		return
	case errors.Is(err, effect.ErrInvalid):
		jsonhttp.WriteFieldError(w, "key", err.Error())
		return
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	for _, a := range answers {
		if !slices.ContainsFunc(a.errs, func(e error) bool { return errors.Is(err, e) }) {
			continue
		}
		msg := err.Error()
		if a.status == http.StatusServiceUnavailable {
			h.log.Warn("admin API: store unavailable", "path", r.URL.Path, "err", err)
			w.Header().Set("Retry-After", "1")
			msg = "the store is unavailable"
		}
		jsonhttp.WriteError(w, a.status, a.reason, msg)
		return
	}
	h.log.Error("admin API", "path", r.URL.Path, "err", err)
	jsonhttp.WriteError(w, http.StatusInternalServerError, "internal", "internal error")
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
			// Named as sent, but cut: a body pasted as a parameter's name
			// (curl --data-urlencode @file) is not answered back whole.
			if len(k) > 64 {
				k = strings.ToValidUTF8(k[:64], "") + "..."
			}
			return nil, invalid(k, "unknown parameter; this endpoint takes %s", strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, invalid(k, "given more than once")
		}
	}
	return q, nil
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
