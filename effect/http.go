package effect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	durationpkg "github.com/oncehook/oncehook/internal/duration"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/store"
)

// The HTTP API, under /v1/effects on the gateway's API listener (behind its
// bearer tokens). Bodies and answers are JSON:
//
//	POST /v1/effects/{key}/claim     {"lease":"30s","fingerprint":"...","deadline":"RFC 3339"}
//	  201 {"state":"pending","token":"...","attempt":1,"reclaimed":false,"lease_expires_at":"..."}
//	  200 {"state":"done","already_done":true,"result":<stored JSON>}
//	      ("replayed":true too: the older name, for clients that read it)
//	  409 {"error":"...","reason":"busy","state":"pending","retry_after":"..."}, with Retry-After
//	  409 {"error":"<the stored failure>","reason":"failed","state":"failed"}
//	  422 {"error":"...","reason":"fingerprint_mismatch", the existing record}; nothing changes
//	  410 {"error":"...","reason":"expired","state":"expired"}
//	POST /v1/effects/{key}/complete  {"token":"...","result":<any JSON>}   200, or 409 stale_token
//	POST /v1/effects/{key}/release   {"token":"...","error":"..."}         200, or 409
//	POST /v1/effects/{key}/fail      {"token":"...","error":"..."}         200, or 409
//	POST /v1/effects/{key}/renew     {"token":"...","lease":"30s"}         200, or 409
//	POST /v1/effects/{key}/reset     not here: an operator's action, served (and audited) by the admin API
//	GET  /v1/effects/{key}           the record, with its attempts
//	GET  /v1/effects?state=pending&lease_expired=true&cursor=&limit=   the reconciliation list
//
// Bad input (an empty or oversized key, a malformed body, a lease of 0 or
// over the maximum, a result over the limit, a field or query parameter
// the endpoint does not take) is 400 naming the field, and changes
// nothing. docs/api.md is the reference.

// Handler serves the ledger's HTTP API. Mount it at /v1/effects and
// /v1/effects/ behind the API's authentication.
func Handler(l *Local, log *slog.Logger) http.Handler {
	return HandlerIn(l, log, nil)
}

// Namespace is where a tenant's keys live in the ledger: "tenant:acme/"
// before each key its token gives. A tenant's name holds no '/', so no
// tenant's keys are another's.
func Namespace(tenant string) string { return "tenant:" + tenant + "/" }

// HandlerIn is Handler with each request's keys in the namespace ns
// gives it ("" for none): a tenant's token claims "order-1" as
// Namespace("acme")+"order-1", and is answered and listed its own keys
// only, as it gave them, never another's stored result.
func HandlerIn(l *Local, log *slog.Logger, ns func(*http.Request) string) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ns == nil {
		ns = func(*http.Request) string { return "" }
	}
	h := &handler{l: l, log: log, ns: ns}
	mux := http.NewServeMux()
	for _, e := range h.table() {
		mux.HandleFunc(e.route.Pattern(), e.serve)
	}
	mux.HandleFunc("/v1/effects/", func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no such effects endpoint: see POST /v1/effects/{key}/claim")
	})
	return mux
}

type handler struct {
	l   *Local
	log *slog.Logger
	ns  func(*http.Request) string
}

// key is the ledger's key of the request's {key}: in its namespace.
func (h *handler) key(r *http.Request) string { return h.ns(r) + r.PathValue("key") }

// shown is rec as the request's caller named it: without its namespace.
func (h *handler) shown(r *http.Request, rec Record) Record {
	rec.Key = strings.TrimPrefix(rec.Key, h.ns(r))
	return rec
}

type route struct {
	route jsonhttp.Route
	serve http.HandlerFunc
}

// table is every route Handler serves, with its handler.
func (h *handler) table() []route {
	return []route{
		{routeClaim, h.claim}, {routeComplete, h.complete}, {routeRelease, h.release}, {routeFail, h.fail},
		{routeRenew, h.renew}, {routeGet, h.get}, {routeList, h.list},
	}
}

// Routes lists the routes Handler serves as "METHOD /path" (the reset,
// ResetRoute, is the admin API's): what docs/openapi.yaml is checked
// against.
func Routes() []string {
	var out []string
	for _, e := range (&handler{}).table() {
		out = append(out, e.route.Method+" "+e.route.Path)
	}
	return out
}

// The ledger's routes, written once for Handler and Client.
var (
	routeClaim    = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/effects/{key}/claim"}
	routeComplete = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/effects/{key}/complete"}
	routeRelease  = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/effects/{key}/release"}
	routeFail     = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/effects/{key}/fail"}
	routeRenew    = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/effects/{key}/renew"}
	routeGet      = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/effects/{key}"}
	routeList     = jsonhttp.Route{Method: http.MethodGet, Path: "/v1/effects"}
	// ResetRoute is the operator's reset of a record: not served here but
	// by the admin API (package api), which audits it; Client.Reset calls it.
	ResetRoute = jsonhttp.Route{Method: http.MethodPost, Path: "/v1/effects/{key}/reset"}
)

// duration reads "30s", "5m", "1d" (as the config does) or a number of
// seconds (5 is 5 s).
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := durationpkg.Parse(s)
		if err != nil {
			return err
		}
		*d = duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return errors.New("want a duration such as \"30s\" or a number of seconds")
	}
	v, err := durationpkg.Seconds(secs)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// instant reads an RFC 3339 time, saying so when it is something else.
type instant time.Time

func (t *instant) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		return errors.New("want a time as an RFC 3339 string, e.g. \"2026-12-01T10:00:00Z\"")
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%q: want a time in RFC 3339, e.g. \"2026-12-01T10:00:00Z\"", s)
	}
	*t = instant(v)
	return nil
}

// fieldError is a body field that could not be read.
type fieldError struct {
	field string
	err   error
}

// decodeField decodes one field of a body, naming it when it fails.
func decodeField(raw json.RawMessage, name string, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return &fieldError{name, fmt.Errorf("a JSON %s where a JSON %s was expected", typ.Value, typ.Type.Kind())}
		}
		return &fieldError{name, err}
	}
	return nil
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }

// decode reads a JSON body (it may be empty), bounded.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.l.opts.MaxResult)+64<<10))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			jsonhttp.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "the body is over the size limit")
		} else {
			jsonhttp.WriteError(w, http.StatusBadRequest, "unreadable", "could not read the body")
		}
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return true
	}
	// Field by field, so that an error names the field at fault.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "the body is not a JSON object: " + err.Error(), Reason: "invalid"})
		return false
	}
	known := v.(interface{ fields() map[string]any }).fields()
	for name, raw := range fields {
		dst, ok := known[name]
		if !ok {
			jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: fmt.Sprintf("%s: this endpoint takes no such field", name), Reason: "invalid", Field: name})
			return false
		}
		if err := decodeField(raw, name, dst); err != nil {
			var fe *fieldError
			errors.As(err, &fe)
			jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: fe.Error(), Reason: "invalid", Field: fe.field})
			return false
		}
	}
	return true
}

// onlyParams answers 400 to a query parameter the endpoint does not take:
// a misspelt filter (?stat=pending) must not quietly mean "everything".
func onlyParams(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	for name := range r.URL.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || name == a
		}
		if !ok {
			jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: fmt.Sprintf("%s: no such query parameter (this endpoint takes %s)", name, strings.Join(allowed, ", ")), Reason: "invalid", Field: name})
			return false
		}
	}
	return true
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request) { h.end(w, r, h.l.Fail) }

func (h *handler) release(w http.ResponseWriter, r *http.Request) { h.end(w, r, h.l.Release) }

// answerError answers an error of the ledger.
func (h *handler) answerError(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *InvalidError
	var busy *BusyError
	var failedErr *FailedError
	switch {
	case errors.As(err, &invalid):
		jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: invalid.Error(), Reason: "invalid", Field: invalid.Field})
	case errors.As(err, &busy):
		secs := int(time.Until(busy.RetryAfter).Seconds()) + 1
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		jsonhttp.WriteJSON(w, http.StatusConflict, map[string]any{"error": "another owner holds the lease", "reason": "busy",
			"state": store.EffectPending, "retry_after": busy.RetryAfter.UTC()})
	case errors.As(err, &failedErr):
		jsonhttp.WriteJSON(w, http.StatusConflict, map[string]any{"state": store.EffectFailed, "error": failedErr.Reason, "reason": "failed"})
	case errors.Is(err, ErrExpired):
		jsonhttp.WriteJSON(w, http.StatusGone, map[string]any{"error": "its deadline passed before it was done", "reason": "expired", "state": store.EffectExpired})
	case errors.Is(err, ErrStaleToken):
		jsonhttp.WriteError(w, http.StatusConflict, "stale_token", err.Error())
	case errors.Is(err, ErrConflict):
		jsonhttp.WriteError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, ErrNotFound):
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, r.Context().Err()) && r.Context().Err() != nil:
		h.log.Error("effects: the store is unavailable", "err", err)
		w.Header().Set("Retry-After", "1")
		jsonhttp.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the ledger could not commit; retry")
	default:
		h.log.Error("effects: unexpected error", "err", err)
		jsonhttp.WriteError(w, http.StatusInternalServerError, "internal", "internal error")
	}
}

func (h *handler) claim(w http.ResponseWriter, r *http.Request) {
	var body claimRequest
	if !h.decode(w, r, &body) {
		return
	}
	key := h.key(r)
	opts := ClaimOptions{Fingerprint: body.Fingerprint, Deadline: time.Time(body.Deadline)}
	if body.Lease != nil {
		if *body.Lease <= 0 {
			jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "lease: want more than 0 (leave it out for the default)", Reason: "invalid", Field: "lease"})
			return
		}
		opts.Lease = time.Duration(*body.Lease)
	}
	c, err := h.l.Claim(r.Context(), key, opts)
	if errors.Is(err, ErrFingerprint) {
		// The existing record, unchanged: the caller's key is too coarse.
		rec, gerr := h.l.Get(r.Context(), key)
		if gerr != nil {
			h.answerError(w, r, gerr)
			return
		}
		jsonhttp.WriteJSON(w, http.StatusUnprocessableEntity, struct {
			Record
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}{h.shown(r, rec), err.Error(), "fingerprint_mismatch"})
		return
	}
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	if c.AlreadyDone {
		// Written by hand: an encoder would compact the result, and a later
		// claim gets it back byte for byte.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "{\"state\":%q,\"already_done\":true,\"replayed\":true,\"result\":%s}\n", store.EffectDone, c.Result)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusCreated, map[string]any{"state": store.EffectPending, "token": c.Token, "attempt": c.Attempt,
		"reclaimed": c.Reclaimed, "lease_expires_at": c.LeaseExpiresAt.UTC()})
}

func (h *handler) complete(w http.ResponseWriter, r *http.Request) {
	var body completeRequest
	if !h.decode(w, r, &body) {
		return
	}
	if err := h.l.Complete(r.Context(), h.key(r), body.Token, body.Result); err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"state": store.EffectDone})
}

func (h *handler) end(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, key, token, reason string) error) {
	var body endRequest
	if !h.decode(w, r, &body) {
		return
	}
	if err := op(r.Context(), h.key(r), body.Token, body.Error); err != nil {
		h.answerError(w, r, err)
		return
	}
	rec, err := h.l.Get(r.Context(), h.key(r))
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"state": rec.State})
}

func (h *handler) renew(w http.ResponseWriter, r *http.Request) {
	var body renewRequest
	if !h.decode(w, r, &body) {
		return
	}
	if body.Lease <= 0 {
		jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "lease: want more than 0", Reason: "invalid", Field: "lease"})
		return
	}
	until, err := h.l.Renew(r.Context(), h.key(r), body.Token, time.Duration(body.Lease))
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"state": store.EffectPending, "lease_expires_at": until.UTC()})
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r) {
		return
	}
	rec, err := h.l.Get(r.Context(), h.key(r))
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	jsonhttp.WriteRaw(w, http.StatusOK, append(recordJSON(h.shown(r, rec)), '\n'))
}

// recordJSON is rec as JSON with its result as it was stored, byte for
// byte: an encoder would compact it.
func recordJSON(rec Record) []byte {
	result := rec.Result
	rec.Result = nil
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(rec)
	b := bytes.TrimRight(buf.Bytes(), "\n")
	if result == nil {
		return b
	}
	b = append(b[:len(b)-1], `,"result":`...)
	return append(append(b, result...), '}')
}

// list answers the reconciliation list, a page at a time: next_cursor is
// the cursor of the next page, absent on the last.
func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r, "state", "lease_expired", "stale", "cursor", "limit") {
		return
	}
	q := r.URL.Query()
	query := store.EffectQuery{State: q.Get("state"), After: q.Get("cursor"), Limit: 100}
	switch query.State {
	case "", store.EffectPending, store.EffectDone, store.EffectFailed, store.EffectExpired:
	default:
		jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "state: want pending, done, failed or expired", Reason: "invalid", Field: "state"})
		return
	}
	// stale is lease_expired's old name, read for one release more.
	for _, param := range []string{"lease_expired", "stale"} {
		if s := q.Get(param); s != "" {
			expired, err := strconv.ParseBool(s)
			if err != nil {
				jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: param + ": want true or false", Reason: "invalid", Field: param})
				return
			}
			query.LeaseExpired = query.LeaseExpired || expired
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "limit: want 1 to 1000", Reason: "invalid", Field: "limit"})
			return
		}
		query.Limit = n
	}
	if len(query.After) > MaxKeyLen {
		jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "cursor: not a cursor this API gave", Reason: "invalid", Field: "cursor"})
		return
	}
	if ns := h.ns(r); ns != "" {
		query.Prefix = ns
		if query.After != "" {
			query.After = ns + query.After
		}
	}
	recs, err := h.l.List(r.Context(), query)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	// Written by hand, so that each result is given back as it was stored.
	b := []byte(`{"effects":[`)
	for i, rec := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, recordJSON(h.shown(r, rec))...)
	}
	b = append(b, ']')
	if len(recs) == query.Limit {
		cursor, _ := json.Marshal(h.shown(r, recs[len(recs)-1]).Key)
		b = append(append(b, `,"next_cursor":`...), cursor...)
	}
	jsonhttp.WriteRaw(w, http.StatusOK, append(b, "}\n"...))
}

// The bodies the endpoints take; fields maps each JSON name to where it
// is decoded, so that decode can name the field at fault.
type (
	claimRequest struct {
		Lease       *duration
		Fingerprint string
		Deadline    instant
	}
	completeRequest struct {
		Token  string
		Result json.RawMessage
	}
	endRequest struct {
		Token string
		Error string
	}
	renewRequest struct {
		Token string
		Lease duration
	}
)

func (b *claimRequest) fields() map[string]any {
	return map[string]any{"lease": &b.Lease, "fingerprint": &b.Fingerprint, "deadline": &b.Deadline}
}
func (b *completeRequest) fields() map[string]any {
	return map[string]any{"token": &b.Token, "result": &b.Result}
}
func (b *endRequest) fields() map[string]any {
	return map[string]any{"token": &b.Token, "error": &b.Error}
}
func (b *renewRequest) fields() map[string]any {
	return map[string]any{"token": &b.Token, "lease": &b.Lease}
}
