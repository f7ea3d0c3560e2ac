// Package apiauth guards the gateway's API listener (the effects ledger,
// the admin API and the dashboard) with bearer tokens from the config.
//
// Intake is for providers, on the internet; the API is for the user's own
// services and operators. Every API request carries a token: unknown or
// missing is 401, a read-only token on a change is 403. Tokens are compared
// in constant time (both sides hashed first, so neither their contents nor
// their lengths leak), and the token's name, never its value, goes into
// logs and the audit log.
package apiauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/oncehook/oncehook/internal/actor"
	"github.com/oncehook/oncehook/internal/httpapi"
)

// Token is one configured API token.
type Token struct {
	Name     string
	Value    string
	ReadOnly bool
}

type entry struct {
	name     string
	hash     [32]byte
	readOnly bool
}

// Auth checks requests against a set of tokens.
type Auth struct {
	tokens atomic.Pointer[[]entry]
}

// New returns an Auth for tokens.
func New(tokens []Token) *Auth {
	a := &Auth{}
	a.SetTokens(tokens)
	return a
}

// SetTokens replaces the tokens (a config reload): a request checked
// before keeps its answer; every later one, and every dashboard session
// of a token no longer named, is checked against these.
func (a *Auth) SetTokens(tokens []Token) {
	entries := make([]entry, len(tokens))
	for i, t := range tokens {
		entries[i] = entry{name: t.Name, hash: sha256.Sum256([]byte(t.Value)), readOnly: t.ReadOnly}
	}
	a.tokens.Store(&entries)
}

// Caller is who made a request: the name of its token.
type Caller struct {
	Name     string
	ReadOnly bool
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
			return Caller{Name: t.name, ReadOnly: t.readOnly}, true
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
			found, ok = Caller{Name: t.name, ReadOnly: t.readOnly}, true
		}
	}
	return found, ok
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

// Wrap serves h to requests with a known bearer token, and only safe
// methods (GET, HEAD) to read-only tokens.
func (a *Auth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := a.Check(Bearer(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="oncehook"`)
			httpapi.WriteError(w, http.StatusUnauthorized, "unauthorized", "a bearer token from api.tokens is required")
			return
		}
		if c.ReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
			httpapi.WriteError(w, http.StatusForbidden, "read_only", "token "+c.Name+" is read-only")
			return
		}
		h.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
	})
}
