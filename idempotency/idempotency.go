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
// with Wait, the first one's answer once it is there). 2xx and 4xx answers
// are final, as the draft and Stripe have it; a 5xx, a panic or an answer
// too large to keep releases the key, so a retry runs again.
//
// Keys are scoped per client (a hash of Authorization, by default): one
// client never sees another's answer, whatever key it sends.
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
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/httpapi"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks an answer served from the ledger (Stripe's name;
// the draft names none).
const ReplayedHeader = "Idempotent-Replayed"

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
	// Client names who sent the request, to scope its keys (default: a
	// hash of Authorization; the empty string when there is none).
	Client func(r *http.Request) string
	// Lease is how long the first request owns its key while it runs,
	// renewed as it goes (default 1 minute): if its process dies, a retry
	// after the lease runs again.
	Lease time.Duration
	// Wait, when set, makes a request whose key is running wait up to Wait
	// for the first one's answer instead of answering 409 at once.
	Wait time.Duration
	// MaxBody bounds the request body read (default 1 MiB: 413 over it).
	MaxBody int64
	// Headers are the answer's headers kept with it besides Content-Type,
	// Content-Language, Location and Cache-Control.
	Headers []string
	// Final says which answers are stored (default: every one below 500).
	Final func(status int) bool
	// OnAnswer, when set, hears of every answer to a request with a key:
	// replayed when it came from the ledger (the gateway counts them per
	// API and hour: a spike of replays is a client retrying hard).
	OnAnswer func(replayed bool)
	// MaxStored bounds a stored answer, encoded (default the ledger's
	// default result limit, 1 MiB): a larger one is sent but not kept,
	// and its key is released (a retry runs again).
	MaxStored int
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
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.MaxStored <= 0 {
		o.MaxStored = effect.DefaultMaxResult
	}
	if o.Final == nil {
		o.Final = func(status int) bool { return status < 500 }
	}
	o.Headers = append([]string{"Content-Type", "Content-Language", "Location", "Cache-Control"}, o.Headers...)
}

// AuthorizationClient is the default client: a digest of the request's
// Authorization header, so that a key is one client's own.
func AuthorizationClient(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if a == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(a))
	return hex.EncodeToString(sum[:8])
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
}

// stored is an answer as the ledger keeps it.
type stored struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"` // base64 in JSON
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(m.opts.Methods, r.Method) {
		m.next.ServeHTTP(w, r)
		return
	}
	raw, ok := r.Header[http.CanonicalHeaderKey(Header)]
	if !ok || len(raw) == 0 {
		if m.opts.RequireKey {
			httpapi.WriteJSON(w, http.StatusBadRequest, httpapi.Error{Error: "this endpoint needs an Idempotency-Key header", Reason: "missing_key", Field: Header})
			return
		}
		m.next.ServeHTTP(w, r)
		return
	}
	key, err := ParseKey(raw)
	if err != nil {
		httpapi.WriteJSON(w, http.StatusBadRequest, httpapi.Error{Error: err.Error(), Reason: "invalid", Field: Header})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.opts.MaxBody))
	if err != nil {
		httpapi.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes, or could not be read", m.opts.MaxBody))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ledgerKey := "idem:" + m.opts.Name + ":" + m.opts.Client(r) + ":" + key
	if err := effect.ValidKey(ledgerKey); err != nil {
		httpapi.WriteJSON(w, http.StatusBadRequest, httpapi.Error{Error: "the key is too long or holds characters a key cannot: " + err.Error(), Reason: "invalid", Field: Header})
		return
	}
	fingerprint := Fingerprint(r.Method, r.URL.RequestURI(), body)
	deadline := time.Now().Add(m.opts.Wait)
	for {
		rec, done, err := m.run(r, ledgerKey, fingerprint)
		var busy *effect.BusyError
		switch {
		case err == nil && done:
			m.answered(true)
			replay(w, rec)
			return
		case err == nil:
			m.answered(false)
			write(w, rec, false)
			return
		case errors.As(err, &busy):
			if wait := time.Until(deadline); wait > 0 {
				sleep(r.Context(), min(wait, 50*time.Millisecond))
				if r.Context().Err() == nil {
					continue
				}
			}
			secs := max(1, int(time.Until(busy.RetryAfter).Seconds()+0.999))
			w.Header().Set("Retry-After", strconv.Itoa(min(secs, 60)))
			httpapi.WriteError(w, http.StatusConflict, "in_progress", "a request with this Idempotency-Key is still being processed: retry later")
			return
		case errors.Is(err, effect.ErrFingerprint):
			httpapi.WriteError(w, http.StatusUnprocessableEntity, "key_reused", "this Idempotency-Key was used for another request (method, path or body differ)")
			return
		case errors.Is(err, effect.ErrFailed), errors.Is(err, effect.ErrExpired):
			httpapi.WriteError(w, http.StatusUnprocessableEntity, "key_closed", "this Idempotency-Key can no longer be used: send a new one")
			return
		default:
			httpapi.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the idempotency store is unavailable: retry later")
			return
		}
	}
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

// notFinal releases the key after the answer, which is still sent.
type notFinal struct{ status int }

func (e notFinal) Error() string { return fmt.Sprintf("HTTP %d: not a final answer", e.status) }

// run claims the key and, if it is this request's, runs the handler; done
// is true when the answer came from the ledger.
func (m *middleware) run(r *http.Request, key, fingerprint string) (rec stored, done bool, err error) {
	var answered *recorder
	result, already, err := effect.Do(r.Context(), m.ledger, key, effect.ClaimOptions{Lease: m.opts.Lease, Fingerprint: fingerprint},
		func(ctx context.Context, _ effect.Claim) (json.RawMessage, error) {
			answered = newRecorder()
			func() {
				defer func() {
					if p := recover(); p != nil {
						if p == http.ErrAbortHandler {
							panic(p)
						}
						answered.status, answered.body = http.StatusInternalServerError, []byte("internal error\n")
					}
				}()
				m.next.ServeHTTP(answered, r.WithContext(ctx))
			}()
			if !m.opts.Final(answered.statusCode()) {
				return nil, notFinal{answered.statusCode()}
			}
			kept := stored{Status: answered.statusCode(), Header: map[string][]string{}, Body: answered.body}
			for _, h := range m.opts.Headers {
				if v := answered.header.Values(h); len(v) > 0 {
					kept.Header[http.CanonicalHeaderKey(h)] = v
				}
			}
			b, err := json.Marshal(kept)
			if err != nil {
				return nil, err
			}
			if len(b) > m.opts.MaxStored {
				return nil, notFinal{kept.Status} // sent, not kept
			}
			return b, nil
		})
	if already {
		if err := json.Unmarshal(result, &rec); err != nil {
			return rec, false, fmt.Errorf("idempotency: the stored answer of %q: %w", key, err)
		}
		return rec, true, nil
	}
	if answered != nil {
		// The handler ran: its answer goes out, stored or not (a 5xx, an
		// answer over the ledger's limit: the key was released).
		var nf notFinal
		if err != nil && !errors.As(err, &nf) {
			return stored{}, false, err
		}
		return stored{Status: answered.statusCode(), Header: answered.header, Body: answered.body}, false, nil
	}
	return stored{}, false, err
}

func replay(w http.ResponseWriter, rec stored) {
	w.Header().Set(ReplayedHeader, "true")
	write(w, rec, true)
}

func write(w http.ResponseWriter, rec stored, fromLedger bool) {
	for k, vs := range rec.Header {
		if fromLedger || !strings.EqualFold(k, "Content-Length") {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(rec.Status)
	w.Write(rec.Body)
}

// recorder keeps a handler's answer to store it before it is sent.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, b...)
	return len(b), nil
}
func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// ParseKey reads an Idempotency-Key header: the draft's structured-field
// string ("8e03978e-40d5-43e8-bc93-6894a57f9324") or a bare token.
func ParseKey(values []string) (string, error) {
	if len(values) != 1 {
		return "", errors.New("give one Idempotency-Key")
	}
	v := strings.TrimSpace(values[0])
	if strings.HasPrefix(v, `"`) {
		s, err := strconv.Unquote(v)
		if err != nil || strings.ContainsAny(s, "\x00\r\n") {
			return "", errors.New("Idempotency-Key: not a valid quoted string")
		}
		v = s
	}
	if v == "" || len(v) > 255 {
		return "", errors.New("Idempotency-Key: want 1 to 255 characters")
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f || c > 0x7e {
			return "", errors.New("Idempotency-Key: printable ASCII only")
		}
	}
	return v, nil
}

// Fingerprint is what a key is held to: the method, path (with its query)
// and body of the request that first used it.
func Fingerprint(method, uri string, body []byte) string {
	h := sha256.New()
	io.WriteString(h, method+" "+uri+"\n")
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}
