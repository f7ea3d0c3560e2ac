// Package idempotency makes a user's own API take effect once per
// Idempotency-Key, as Stripe's does and as the IETF httpapi draft "The
// Idempotency-Key HTTP Header Field" writes it down, on oncehook's effects
// ledger (in process, or over HTTP from any service).
//
// The first request with a key runs the handler; its answer (status, the
// headers that matter, the body) is stored as the key's result, under a
// fingerprint of the method, path and body. A retry with the same key and
// the same request gets the stored answer byte for byte, with
// Idempotent-Replayed: true (Stripe's header); with another request, 422.
// The same key while the first still runs gets 409 and Retry-After (or,
// with Wait, the first one's answer once it is there).
//
// Every answer the handler gives is the request's result and is stored,
// 5xx included, as Stripe does: the handler ran, and may have taken
// effect. Only the statuses by which it says it did not start (NotStarted:
// 429 and 503 by default) release the key, so a retry runs again. A
// handler that gives no answer (the upstream's connection broke, a
// timeout, a panic) leaves the key held until its lease runs out: nobody
// knows whether it took effect, so retries get 409 until then, and the
// next one after it runs again.
//
// A client that gives up changes nothing: the handler runs on after the
// client hangs up, and its answer is stored for the retry.
//
// Keys are scoped per client, by the credential the upstream uses (a
// digest of Authorization, by default): one client never sees another's
// answer, whatever key it sends. A request with a key and no credential is
// refused, unless the API is declared single-tenant.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks an answer served from the ledger (Stripe's name;
// the draft names none).
const ReplayedHeader = "Idempotent-Replayed"

// DefaultTimeout bounds a handler that runs on after its client left.
const DefaultTimeout = 5 * time.Minute

// Options configure the middleware of one route (or API).
type Options struct {
	// Name scopes the keys of this route in the ledger (default "api"):
	// its records are idem:<name>:<client>:<key>.
	Name string
	// Methods are the methods it applies to (default POST and PATCH);
	// others pass through.
	Methods []string
	// RequireKey answers 400 to a request of those methods without a key.
	RequireKey bool
	// Client names who sent the request, to scope its keys: a digest of
	// the credential the handler knows its clients by (default
	// Credentials("Authorization")). The empty string is no client: a
	// request with a key and no client is refused (400 no_client), since
	// its answer would be every anonymous client's, unless SingleTenant.
	Client func(r *http.Request) string
	// SingleTenant declares that every caller is one client (an internal
	// API without credentials): keys share one scope, and no credential
	// is needed.
	SingleTenant bool
	// Lease is how long the first request owns its key while it runs,
	// renewed as it goes (default 1 minute): if its process dies, or the
	// handler gives no answer, a retry after the lease runs again.
	Lease time.Duration
	// Wait, when set, makes a request whose key is running wait up to Wait
	// for the first one's answer instead of answering 409 at once.
	Wait time.Duration
	// Timeout bounds the handler (default DefaultTimeout). It runs on
	// after its client hangs up, so this is what ends one that never
	// answers; its key then stays held until the lease runs out.
	Timeout time.Duration
	// MaxBody bounds the request body read (default 1 MiB: 413 over it).
	MaxBody int64
	// ReadBody, when set, reads the request's body in place of a plain
	// bounded read (the gateway reads it within intake's memory budget and
	// pace floor). It returns the body and what gives its memory back once
	// the request is over; an error that is a BodyRefusal is answered as
	// it says (any other: 413).
	ReadBody func(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, done func(), err error)
	// Headers are the answer's headers kept with it besides Content-Type,
	// Content-Encoding, Content-Language, Vary, Location and Cache-Control.
	Headers []string
	// NotStarted are the statuses by which the handler says it did not
	// start (default 429 and 503, which come with Retry-After): such an
	// answer is sent and releases the key, so a retry runs again. Every
	// other answer is stored.
	NotStarted []int
	// OnAnswer, when set, hears of every answer to a request with a key:
	// replayed when it came from the ledger (the gateway counts them per
	// API and hour: a spike of replays is a client retrying hard).
	OnAnswer func(replayed bool)
	// MaxStored bounds a stored answer, encoded (default the ledger's
	// default result limit, 1 MiB). A larger one is streamed to the client
	// and not kept: the key is done without it, and a retry gets 422
	// answer_not_kept (it took effect; its answer cannot be given again).
	MaxStored int
	// Logger hears of what the middleware cannot answer to anyone: a
	// ledger that failed to record an outcome (default: discard).
	Logger *slog.Logger
}

// BodyRefusal is a request body ReadBody refused that says its own answer
// (the gateway's *receive.Rejection: 413, 503 with Retry-After, 408).
type BodyRefusal interface {
	error
	Answer(w http.ResponseWriter)
}

func (o *Options) defaults() {
	if o.Name == "" {
		o.Name = "api"
	}
	if len(o.Methods) == 0 {
		o.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if o.Client == nil {
		o.Client = AuthorizationClient
	}
	if o.Lease <= 0 {
		o.Lease = time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.MaxStored <= 0 {
		o.MaxStored = effect.DefaultMaxResult
	}
	if o.NotStarted == nil {
		o.NotStarted = []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// Content-Encoding belongs to the body as much as Content-Type: a
	// compressed body replayed without it reaches the client as garbage
	// (Go's own client asks for gzip and decodes only what says it is).
	// Vary tells caches which request headers chose that encoding.
	o.Headers = append([]string{"Content-Type", "Content-Encoding", "Content-Language", "Vary", "Location", "Cache-Control"}, o.Headers...)
}

// AuthorizationClient is the default client: a digest of the request's
// Authorization credential, so that a key is one client's own.
var AuthorizationClient = Credentials([]string{"Authorization"}, nil)

// Credentials returns a Client that names the client by the credentials
// the handler knows it by: the request's headers and cookies of those
// names, digested together. Authorization's scheme is case-insensitive and
// the spaces around its parts are not the client's, so "Bearer X",
// "bearer X" and "Bearer  X" are one client. A request with none of them
// is no client ("").
func Credentials(headers, cookies []string) func(r *http.Request) string {
	return func(r *http.Request) string {
		h := sha256.New()
		found := false
		for _, name := range headers {
			vs := r.Header.Values(name)
			if len(vs) == 0 {
				continue
			}
			v := strings.TrimSpace(strings.Join(vs, ","))
			if auth := http.CanonicalHeaderKey(name); auth == "Authorization" || auth == "Proxy-Authorization" {
				if f := strings.Fields(v); len(f) > 0 {
					v = strings.ToLower(f[0]) + " " + strings.Join(f[1:], " ")
				}
			}
			if v == "" {
				continue
			}
			found = true
			fmt.Fprintf(h, "header %s\x00%s\x00", http.CanonicalHeaderKey(name), v)
		}
		for _, name := range cookies {
			c, err := r.Cookie(name)
			if err != nil || c.Value == "" {
				continue
			}
			found = true
			fmt.Fprintf(h, "cookie %s\x00%s\x00", name, c.Value)
		}
		if !found {
			return ""
		}
		return hex.EncodeToString(h.Sum(nil)[:8])
	}
}

// New returns the middleware over ledger.
func New(ledger effect.Ledger, opts Options) func(http.Handler) http.Handler {
	opts.defaults()
	return func(next http.Handler) http.Handler {
		return &middleware{ledger: ledger, opts: opts, next: next}
	}
}

type middleware struct {
	ledger effect.Ledger
	opts   Options
	next   http.Handler
	pace   pace // how long requests take, for a 409's Retry-After
}

// stored is an answer as the ledger keeps it.
type stored struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"` // base64 in JSON
	// NotKept marks an answer over MaxStored: sent once, not kept; Size
	// is its body's length.
	NotKept bool  `json:"not_kept,omitempty"`
	Size    int64 `json:"size,omitempty"`
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(m.opts.Methods, r.Method) {
		m.next.ServeHTTP(w, r)
		return
	}
	raw, ok := r.Header[http.CanonicalHeaderKey(Header)]
	if !ok || len(raw) == 0 {
		if m.opts.RequireKey {
			jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "this endpoint needs an Idempotency-Key header", Reason: "missing_key", Field: Header})
			return
		}
		m.next.ServeHTTP(w, r)
		return
	}
	key, err := ParseKey(raw)
	if err != nil {
		RefuseKey(w, err)
		return
	}
	// The handler (the upstream, behind the proxy) gets the key in the one
	// form its every spelling takes, as it is held here: "ord_q1" and
	// ord_q1 are one key to both.
	r.Header[Header] = []string{FormatKey(key)}
	client := ""
	if !m.opts.SingleTenant {
		if client = m.opts.Client(r); client == "" {
			jsonhttp.WriteError(w, http.StatusBadRequest, "no_client", "an Idempotency-Key is kept per client, and this request carries no credential that tells its client: send the credential the API knows you by")
			return
		}
	}
	ledgerKey := LedgerKey(m.opts.Name, client, key)
	if err := effect.ValidKey(ledgerKey); err != nil {
		jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "the key is too long or holds characters a key cannot: " + err.Error(), Reason: "invalid", Field: Header})
		return
	}
	body, done, err := m.readBody(w, r)
	if err != nil {
		var refusal BodyRefusal
		if errors.As(err, &refusal) {
			refusal.Answer(w)
			return
		}
		jsonhttp.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes, or could not be read", m.opts.MaxBody))
		return
	}
	defer done()
	r.Body = io.NopCloser(bytes.NewReader(body))
	fingerprint := Fingerprint(r.Method, r.URL.RequestURI(), body)
	deadline := time.Now().Add(m.opts.Wait)
	for {
		c, err := m.ledger.Claim(r.Context(), ledgerKey, effect.ClaimOptions{Lease: m.opts.Lease, Fingerprint: fingerprint})
		var busy *effect.BusyError
		switch {
		case err == nil && c.AlreadyDone:
			m.answered(true)
			m.replay(w, ledgerKey, c.Result)
			return
		case err == nil:
			m.answered(false)
			m.own(w, r, ledgerKey, c)
			return
		case errors.As(err, &busy):
			if wait := time.Until(deadline); wait > 0 {
				sleep(r.Context(), min(wait, 50*time.Millisecond))
				if r.Context().Err() == nil {
					continue
				}
			}
			w.Header().Set("Retry-After", strconv.Itoa(m.retryAfter(r.Context(), ledgerKey, busy.RetryAfter)))
			jsonhttp.WriteError(w, http.StatusConflict, "in_progress", "a request with this Idempotency-Key is still being processed: retry later")
			return
		case errors.Is(err, effect.ErrFingerprint):
			jsonhttp.WriteError(w, http.StatusUnprocessableEntity, "key_reused", "this Idempotency-Key was used for another request (method, path or body differ)")
			return
		case errors.Is(err, effect.ErrFailed), errors.Is(err, effect.ErrExpired):
			jsonhttp.WriteError(w, http.StatusUnprocessableEntity, "key_closed", "this Idempotency-Key can no longer be used: send a new one")
			return
		default:
			jsonhttp.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the idempotency store is unavailable: retry later")
			return
		}
	}
}

func (m *middleware) readBody(w http.ResponseWriter, r *http.Request) ([]byte, func(), error) {
	if m.opts.ReadBody != nil {
		return m.opts.ReadBody(w, r, m.opts.MaxBody)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.opts.MaxBody))
	return body, func() {}, err
}

func (m *middleware) answered(replayed bool) {
	if m.opts.OnAnswer != nil {
		m.opts.OnAnswer(replayed)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// fate is what the handler tells of its attempt besides its answer.
type fate struct{ unanswered, notStarted bool }

type fateKey struct{}

// Unanswered marks r's attempt as one whose handler cannot tell whether it
// took effect (the upstream's connection broke, or it timed out), though
// it may still write an error answer: the key is not released then, but
// stays held until its lease runs out. Retries get 409 meanwhile; the
// first one after it runs again, told the claim was Reclaimed.
func Unanswered(r *http.Request) {
	if f, ok := r.Context().Value(fateKey{}).(*fate); ok {
		f.unanswered = true
	}
}

// NotStarted marks r's attempt as one that certainly did not reach the
// effect (the upstream could not be connected to): whatever error answer
// it writes, the key is released, so a retry runs again at once.
func NotStarted(r *http.Request) {
	if f, ok := r.Context().Value(fateKey{}).(*fate); ok {
		f.notStarted = true
	}
}

// own runs the handler for a key this request claimed, and records its
// outcome. The handler's context is not the client's: a client that hangs
// up changes nothing, the answer is stored when it arrives.
func (m *middleware) own(w http.ResponseWriter, r *http.Request, key string, c effect.Claim) {
	base, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.opts.Timeout)
	defer cancel()
	work, stop := context.WithCancelCause(base)
	lost := make(chan error, 1)
	go func() { lost <- m.renew(work, stop, key, c.Token) }()
	f := &fate{}
	t := &tee{w: w, client: r.Context(), limit: m.opts.MaxStored}
	var panicked any
	m.pace.start(key, time.Now())
	func() {
		defer func() { panicked = recover() }()
		m.next.ServeHTTP(t, r.WithContext(context.WithValue(work, fateKey{}, f)))
	}()
	stop(nil)
	leaseErr := <-lost
	// Only a stored answer tells how long a request takes: one released
	// (not started) or left unanswered would make typical what is not.
	stored := leaseErr == nil && panicked == nil && !f.unanswered && !f.notStarted && !slices.Contains(m.opts.NotStarted, t.statusCode())
	m.pace.end(key, stored, time.Now())
	// The outcome is recorded even when the client is gone.
	ctx, cancelRecord := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancelRecord()
	switch {
	case leaseErr != nil:
		// Another owner may hold the key now: this attempt records nothing.
		m.opts.Logger.Warn("an Idempotency-Key's lease was lost while its request ran", "key", key, "err", leaseErr)
		if t.status == 0 {
			jsonhttp.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the idempotency store is unavailable: retry later")
		}
	case panicked != nil || f.unanswered:
		// Nobody knows whether it took effect: the key stays held until
		// its lease runs out.
		if panicked == http.ErrAbortHandler {
			panic(panicked) // the answer was cut short: so is the client's
		}
		if panicked != nil {
			m.opts.Logger.Error("the handler panicked: its Idempotency-Key stays held until its lease runs out", "key", key, "panic", fmt.Sprint(panicked))
			if t.status == 0 {
				jsonhttp.WriteError(w, http.StatusInternalServerError, "internal", "internal error: retry with the same Idempotency-Key")
			}
		}
	case f.notStarted || slices.Contains(m.opts.NotStarted, t.statusCode()):
		if err := m.ledger.Release(ctx, key, c.Token, fmt.Sprintf("HTTP %d: did not start", t.statusCode())); err != nil {
			m.opts.Logger.Warn("could not release an Idempotency-Key: it is held until its lease runs out", "key", key, "err", err)
		}
	default:
		// Tried again while the ledger is out of reach (a gateway
		// restarting), for as long as the lease surely lasts (renewed at
		// least every third of it): a key left held runs its request again
		// once the lease runs out. The token fences every try.
		until := time.Now().Add(m.opts.Lease * 2 / 3)
		complete := func(result json.RawMessage) error {
			return effect.RecordOutcome(ctx, until, func() error { return m.ledger.Complete(ctx, key, c.Token, result) })
		}
		err := complete(m.result(t))
		if errors.Is(err, effect.ErrInvalid) {
			// The ledger keeps less than MaxStored (its own result limit is
			// smaller): the answer is not kept, as one over MaxStored is.
			// A key left pending would run the request again after its lease.
			m.opts.Logger.Warn("an answer is over the ledger's result limit: it is not kept, and a retry gets 422 answer_not_kept; set MaxStored to the ledger's limit", "key", key, "err", err)
			err = complete(m.notKept(t))
		}
		if err != nil {
			m.opts.Logger.Error("could not store an answer: its Idempotency-Key is held until its lease runs out, and runs again after", "key", key, "err", err)
		}
	}
}

// result is the stored form of t's answer, or its not-kept marker.
func (m *middleware) result(t *tee) json.RawMessage {
	kept := stored{Status: t.statusCode(), Header: map[string][]string{}, Body: t.body}
	for _, h := range m.opts.Headers {
		if v := t.header.Values(h); len(v) > 0 {
			kept.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	if !t.over {
		if b, err := json.Marshal(kept); err == nil && len(b) <= m.opts.MaxStored {
			return b
		}
	}
	return m.notKept(t)
}

// notKept is the stored marker of t's answer, sent once and not kept.
func (m *middleware) notKept(t *tee) json.RawMessage {
	b, _ := json.Marshal(stored{Status: t.statusCode(), NotKept: true, Size: t.size})
	return b
}

// renew keeps the lease while ctx lasts; a lease it cannot keep ends ctx.
func (m *middleware) renew(ctx context.Context, stop context.CancelCauseFunc, key, token string) error {
	t := time.NewTicker(max(m.opts.Lease/3, time.Millisecond)) // a lease under 3ns would make a ticker panic
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := m.ledger.Renew(ctx, key, token, m.opts.Lease); err != nil && ctx.Err() == nil {
				err = fmt.Errorf("idempotency %q: lease lost: %w", key, err)
				stop(err)
				return err
			}
		}
	}
}

func (m *middleware) replay(w http.ResponseWriter, key string, result json.RawMessage) {
	var rec stored
	if err := json.Unmarshal(result, &rec); err != nil {
		m.opts.Logger.Error("an unreadable stored answer", "key", key, "err", err)
		jsonhttp.WriteError(w, http.StatusInternalServerError, "internal", "the stored answer of this Idempotency-Key cannot be read")
		return
	}
	if rec.NotKept {
		jsonhttp.WriteError(w, http.StatusUnprocessableEntity, "answer_not_kept", fmt.Sprintf(
			"the request with this Idempotency-Key was done (HTTP %d), but its answer (%d bytes) was too large to keep, so it cannot be sent again: look its result up, or send a new key to do it again",
			rec.Status, rec.Size))
		return
	}
	w.Header().Set(ReplayedHeader, "true")
	for k, vs := range rec.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Status)
	w.Write(rec.Body)
}

// tee sends the handler's answer to the client as it comes (streamed,
// whatever its size) and keeps up to limit bytes of it to store. A client
// that is gone is no error to the handler: it runs to its end.
type tee struct {
	w      http.ResponseWriter
	client context.Context
	limit  int

	status int
	header http.Header // as sent
	body   []byte
	size   int64
	over   bool // the body outgrew limit: not kept
	gone   bool // a write to the client failed
}

func (t *tee) Header() http.Header { return t.w.Header() }

func (t *tee) WriteHeader(status int) {
	if t.status != 0 {
		return
	}
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		if t.sending() {
			t.w.WriteHeader(status) // an early hint; the answer follows
		}
		return
	}
	t.status = status
	t.header = t.w.Header().Clone()
	if t.sending() {
		t.w.WriteHeader(status)
	}
}

func (t *tee) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	t.size += int64(len(b))
	if !t.over {
		if len(t.body)+len(b) > t.limit {
			t.over, t.body = true, nil
		} else {
			t.body = append(t.body, b...)
		}
	}
	if t.sending() {
		if _, err := t.w.Write(b); err != nil {
			t.gone = true
		}
	}
	return len(b), nil
}

// FlushError passes a flush on (the reverse proxy streams with it).
func (t *tee) FlushError() error {
	if t.sending() {
		if err := http.NewResponseController(t.w).Flush(); err != nil {
			t.gone = true
		}
	}
	return nil
}

func (t *tee) sending() bool { return !t.gone && t.client.Err() == nil }

func (t *tee) statusCode() int {
	if t.status == 0 {
		return http.StatusOK
	}
	return t.status
}

// Fingerprint is what a key is held to: the method, path (with its query)
// and body of the request that first used it.
func Fingerprint(method, uri string, body []byte) string {
	h := sha256.New()
	io.WriteString(h, method+" "+uri+"\n")
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}
