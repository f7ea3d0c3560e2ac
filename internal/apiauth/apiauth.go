// Package apiauth guards the gateway's API listener (the effects ledger,
// the admin API and the dashboard) with bearer tokens from the config.
//
// Intake is for providers, on the internet; the API is for the user's own
// services and operators. Every API request carries a token: unknown or
// missing is 401, a read-only token on a change is 403. Tokens are compared
// in constant time (both sides hashed first, so neither their contents nor
// their lengths leak), and the token's name, never its value, goes into
// logs and the audit log.
//
// Wrong tokens are limited per client address (Failures): past the limit a
// wrong token gets 429 with Retry-After instead of 401, so that a script
// can neither fill the log nor take the CPU of the hashing. A right token
// is always accepted, whatever that address did before: the limit never
// locks an operator out because a stranger behind the same NAT guessed.
package apiauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncehook/oncehook/internal/actor"
	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// Token is one configured API token: its value (the config file's), or
// only its Hash (one created through the API, whose value is shown once,
// at its creation, and kept nowhere).
type Token struct {
	Name  string
	Value string
	// Hash, when set, is HashOf the token's value, which is then not
	// given: a request's token is hashed and compared with it.
	Hash     string
	ReadOnly bool
	// Publish, when set, are the outbox sources the token may publish to
	// (POST /v1/publish/{source}, WrapPublish): it may do nothing else.
	Publish []string
	// Pull, when set, are the pull destinations the token may pull from
	// and ack (WrapPull): it may do nothing else.
	Pull []string
	// Tenant, when set, is the customer the token is one of: what it
	// reaches is narrowed to that tenant's (the gateway's business, from
	// Caller.Tenant).
	Tenant string
}

type entry struct {
	name     string
	hash     [32]byte
	readOnly bool
	publish  []string
	pull     []string
	tenant   string
}

// Auth checks requests against a set of tokens.
type Auth struct {
	tokens   atomic.Pointer[[]entry]
	failures *Failures
	client   func(*http.Request) string
}

// Options tune an Auth.
type Options struct {
	// ClientAddr names a request's client, for the limit on wrong tokens
	// (default: the peer's address; the gateway reads trusted proxies'
	// X-Forwarded-For).
	ClientAddr func(*http.Request) string
	// MaxFailures wrong tokens per client in FailureWindow (defaults 10
	// and 10 minutes) get 401; the next ones, 429.
	MaxFailures   int
	FailureWindow time.Duration
	Now           func() time.Time
}

// New returns an Auth for tokens.
func New(tokens []Token) *Auth { return NewWith(tokens, Options{}) }

// NewWith returns an Auth for tokens, tuned by opts.
func NewWith(tokens []Token, opts Options) *Auth {
	if opts.ClientAddr == nil {
		opts.ClientAddr = peer
	}
	a := &Auth{failures: NewFailures(opts.MaxFailures, opts.FailureWindow, opts.Now), client: opts.ClientAddr}
	a.SetTokens(tokens)
	return a
}

func peer(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// SetTokens replaces the tokens (a config reload, a token created or
// deleted through the API): a request checked before keeps its answer;
// every later one, and every dashboard session of a token no longer
// named, is checked against these. A token whose Hash does not read
// (HashOf's form) matches nothing.
func (a *Auth) SetTokens(tokens []Token) {
	entries := make([]entry, 0, len(tokens))
	for _, t := range tokens {
		e := entry{name: t.Name, hash: sha256.Sum256([]byte(t.Value)), readOnly: t.ReadOnly, publish: t.Publish, pull: t.Pull, tenant: t.Tenant}
		if t.Hash != "" {
			h, ok := parseHash(t.Hash)
			if !ok {
				continue
			}
			e.hash = h
		}
		entries = append(entries, e)
	}
	a.tokens.Store(&entries)
}

// hashPrefix marks HashOf's digest, so that a stronger one may come later
// beside it.
const hashPrefix = "sha256:"

// HashOf is what the gateway keeps of a token created through the API:
// the SHA-256 of its value, "sha256:<hex>". A value of 32 random bytes
// cannot be found from it by trying values, so a slow hash would add
// nothing but the time every request takes to check.
func HashOf(value string) string {
	h := sha256.Sum256([]byte(value))
	return hashPrefix + hex.EncodeToString(h[:])
}

// ValidHash reports whether h is in HashOf's form.
func ValidHash(h string) bool {
	_, ok := parseHash(h)
	return ok
}

func parseHash(h string) ([32]byte, bool) {
	var out [32]byte
	hexed, ok := strings.CutPrefix(h, hashPrefix)
	if !ok || len(hexed) != 64 {
		return out, false
	}
	if _, err := hex.Decode(out[:], []byte(hexed)); err != nil {
		return out, false
	}
	return out, true
}

// Caller is who made a request: the name of its token.
type Caller struct {
	Name     string
	ReadOnly bool
	// Publish are the sources a publishing token may publish to; a
	// caller with them may do nothing else.
	Publish []string
	// Pull are the destinations a consumer's token may pull from; a
	// caller with them may do nothing else.
	Pull []string
	// Tenant is the customer the caller's token is one of ("" for the
	// operator's, which reaches everything).
	Tenant string
}

// Scoped reports whether the caller's token may only publish or only
// pull: it reaches neither the admin API nor the dashboard.
func (c Caller) Scoped() bool { return len(c.Publish) > 0 || len(c.Pull) > 0 }

// Consumer reports whether the caller's token only pulls.
func (c Caller) Consumer() bool { return len(c.Pull) > 0 }

// MayPull reports whether the caller may pull from (and ack the
// deliveries of) destination: a consumer's token that names it, or a
// token that may change anything.
func (c Caller) MayPull(destination string) bool {
	if c.Consumer() {
		return slices.Contains(c.Pull, destination)
	}
	return !c.ReadOnly && !c.Publisher()
}

// Publisher reports whether the caller's token only publishes.
func (c Caller) Publisher() bool { return len(c.Publish) > 0 }

// MayPublish reports whether the caller may publish to source: a
// publishing token that names it, or a token that may change anything.
func (c Caller) MayPublish(source string) bool {
	if c.Publisher() {
		return slices.Contains(c.Publish, source)
	}
	return !c.ReadOnly && !c.Consumer()
}

func (t entry) caller() Caller {
	return Caller{Name: t.name, ReadOnly: t.readOnly, Publish: t.publish, Pull: t.pull, Tenant: t.tenant}
}

type callerKey struct{}

// CallerOf returns the request's caller (set by Wrap).
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCaller returns ctx carrying c, and naming it as the actor of the
// changes made with ctx (the audit log's "token:<name>").
func WithCaller(ctx context.Context, c Caller) context.Context {
	return actor.With(context.WithValue(ctx, callerKey{}, c), actor.Token(c.Name))
}

// SessionToken is what a dashboard session keeps of its token: the
// token's name and a digest of its value (never the value), so that
// removing the token from the config or rotating its value ends the
// sessions made with it (Session).
func (a *Auth) SessionToken(c Caller) string {
	for _, t := range *a.tokens.Load() {
		if t.name == c.Name {
			return t.name + " " + hex.EncodeToString(t.hash[:8])
		}
	}
	return ""
}

// Session returns the caller of a session's token (SessionToken), if the
// config still names that token with the same value.
func (a *Auth) Session(token string) (Caller, bool) {
	name, digest, ok := strings.Cut(token, " ")
	if !ok {
		return Caller{}, false
	}
	for _, t := range *a.tokens.Load() {
		if t.name == name && hmac.Equal([]byte(digest), []byte(hex.EncodeToString(t.hash[:8]))) {
			if len(t.publish) > 0 || len(t.pull) > 0 {
				return Caller{}, false // a publisher or a consumer never signs in (see Login)
			}
			return t.caller(), true
		}
	}
	return Caller{}, false
}

// Check returns the caller a token value belongs to. Every configured token
// is compared, in constant time, whatever matches first.
func (a *Auth) Check(value string) (Caller, bool) {
	if value == "" {
		return Caller{}, false
	}
	h := sha256.Sum256([]byte(value))
	var found Caller
	ok := false
	for _, t := range *a.tokens.Load() {
		if hmac.Equal(h[:], t.hash[:]) && !ok {
			found, ok = t.caller(), true
		}
	}
	return found, ok
}

// CheckFrom is Check for a value that client sent. A right token is
// accepted, always. A wrong one counts against client; once client is over
// the limit, limited is how long until it may be told 401 again (the
// answer is then 429 with Retry-After). No token at all guesses nothing
// (a browser, a probe, a script whose variable is unset): it is 401,
// never counted, and never told it sent "a wrong token".
func (a *Auth) CheckFrom(client, value string) (c Caller, ok bool, limited time.Duration) {
	if value == "" {
		return Caller{}, false, 0
	}
	if c, ok := a.Check(value); ok {
		return c, true, 0
	}
	return Caller{}, false, a.failures.Fail(client)
}

// Bearer returns the token of an Authorization: Bearer header. The scheme
// is case-insensitive (RFC 9110, section 11.1): "bearer" and "BEARER" are
// "Bearer".
func Bearer(r *http.Request) string {
	scheme, v, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(v)
}

// Wrap serves h to requests with a known bearer token, only safe methods
// (GET, HEAD) to read-only tokens, and nothing to publishing tokens (403):
// they may only publish (WrapPublish).
func (a *Auth) Wrap(h http.Handler) http.Handler {
	return a.check(func(w http.ResponseWriter, r *http.Request, c Caller) {
		if c.Publisher() {
			jsonhttp.WriteError(w, http.StatusForbidden, "publish_only", "token "+c.Name+" may only publish (POST /v1/publish/{source})")
			return
		}
		if c.Consumer() {
			jsonhttp.WriteError(w, http.StatusForbidden, "pull_only", "token "+c.Name+" may only pull from its destinations (POST /v1/destinations/{name}/pull) and ack their deliveries")
			return
		}
		if c.ReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
			jsonhttp.WriteError(w, http.StatusForbidden, "read_only", "token "+c.Name+" is read-only")
			return
		}
		h.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
	})
}

// WrapPublish serves h (POST /v1/publish/{source}) to a token that may
// publish to the request's {source}: a publishing token that names it,
// or a token that may change anything. A read-only token, or a publishing
// one that does not name the source, gets 403.
func (a *Auth) WrapPublish(h http.Handler) http.Handler {
	return a.check(func(w http.ResponseWriter, r *http.Request, c Caller) {
		source := r.PathValue("source")
		if c.Consumer() { // as on every route but its pulls and acks
			jsonhttp.WriteError(w, http.StatusForbidden, "pull_only", "token "+c.Name+" may only pull from its destinations (POST /v1/destinations/{name}/pull) and ack their deliveries")
			return
		}
		if !c.MayPublish(source) {
			jsonhttp.WriteError(w, http.StatusForbidden, "not_publisher", "token "+c.Name+" may not publish to "+source)
			return
		}
		h.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
	})
}

// WrapPull serves h (a pull from, or an ack of a delivery of, the
// destination named destination(r)) to a token that may pull from it: a
// consumer's token that names it, or a token that may change anything.
// A read-only token, a publisher's, or a consumer's that does not name
// the destination gets 403. An ack whose lease is not known here
// (destination says "") goes on to h, which answers it 409, for any token
// that may pull from something.
func (a *Auth) WrapPull(destination func(*http.Request) string, h http.Handler) http.Handler {
	return a.check(func(w http.ResponseWriter, r *http.Request, c Caller) {
		name := destination(r)
		if !c.MayPull(name) && (name != "" || !c.Consumer()) {
			jsonhttp.WriteError(w, http.StatusForbidden, "not_consumer", "token "+c.Name+" may not pull from "+name)
			return
		}
		h.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
	})
}

// check answers a request without a known token (401, or 429 past the
// limit on wrong ones) and hands the others to next with their caller.
func (a *Auth) check(next func(http.ResponseWriter, *http.Request, Caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := Bearer(r)
		c, ok, limited := a.CheckFrom(a.client(r), token)
		if !ok && limited > 0 {
			w.Header().Set("Retry-After", RetryAfter(limited))
			jsonhttp.WriteError(w, http.StatusTooManyRequests, "too_many_failures", "too many requests with a wrong token from this address; retry later")
			return
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="oncehook"`)
			msg := "a bearer token from api.tokens is required"
			if token != "" {
				msg = "the bearer token is not one of api.tokens"
			}
			jsonhttp.WriteError(w, http.StatusUnauthorized, "unauthorized", msg)
			return
		}
		next(w, r, c)
	})
}

// RetryAfter is d as a Retry-After value: whole seconds, at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// Failures counts wrong credentials per client address in a fixed window,
// bounded in memory however many addresses send them.
type Failures struct {
	max    int
	window time.Duration
	now    func() time.Time
	mu     sync.Mutex
	by     map[string]*failed
}

type failed struct {
	n     int
	since time.Time
}

// maxClients bounds the addresses remembered: past it, those whose window
// has passed are forgotten, and if none has, the oldest half.
const maxClients = 10000

// NewFailures allows max failures per client in window (defaults 10 and
// 10 minutes).
func NewFailures(max int, window time.Duration, now func() time.Time) *Failures {
	if max <= 0 {
		max = 10
	}
	if window <= 0 {
		window = 10 * time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &Failures{max: max, window: window, now: now, by: map[string]*failed{}}
}

// Fail counts one failure of client and returns 0 while client is within
// the limit (this failure included), else how long until its window ends.
func (f *Failures) Fail(client string) time.Duration {
	client = network(client)
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	c := f.by[client]
	if c == nil || now.Sub(c.since) >= f.window {
		if c == nil && len(f.by) >= maxClients {
			f.forget(now)
		}
		c = &failed{since: now}
		f.by[client] = c
	}
	c.n++
	if c.n <= f.max {
		return 0
	}
	return c.since.Add(f.window).Sub(now)
}

// network is what a client's failures are counted under: an IPv6
// address's /64, which one host holds whole (it can give each connection
// an address of its own), or the address itself.
func network(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil || !a.Is6() || a.Is4In6() {
		return client
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

func (f *Failures) forget(now time.Time) {
	for k, c := range f.by {
		if now.Sub(c.since) >= f.window {
			delete(f.by, k)
		}
	}
	for k := range f.by { // all still counting: map order drops an arbitrary half
		if len(f.by) < maxClients/2 {
			break
		}
		delete(f.by, k)
	}
}
