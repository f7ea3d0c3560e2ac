package oncehook

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/internal/secretbox"
	"github.com/oncehook/oncehook/store"
)

// The API's tokens (#45): POST /v1/tokens makes one, GET /v1/tokens and
// GET /v1/tokens/{name} show them (the file's too), DELETE
// /v1/tokens/{name} revokes one. A token is an object as a source is
// (store.ObjectToken): stored with its audit entry, merged into the
// config's api.tokens (config.Merge) and applied through a reload's swap,
// so that the file's check judges its rights, a reload of the file keeps
// it, and every replica picks up a create or delete by the objects' watch
// (objects_watch.go). The gateway makes its value (tokenPrefix and 32
// random bytes), answers it once, and keeps only its hash
// (apiauth.HashOf): the value is in no store, log, audit entry or later
// answer.

// TokenRoutes are the routes of the API's tokens, on the API listener
// behind api.tokens: what docs/openapi.yaml is checked against.
func TokenRoutes() []string {
	return []string{"POST /v1/tokens", "GET /v1/tokens", "GET /v1/tokens/{name}", "DELETE /v1/tokens/{name}"}
}

// tokenPrefix starts every token the gateway makes, so that a scanner
// (and a person) recognizes one in a leaked file.
const tokenPrefix = "ohk_"

// TokenView is an API token as the API answers it.
type TokenView = api.TokenView

// mountTokens mounts the routes on mux (the admin API's, behind auth).
func (g *Gateway) mountTokens(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tokens", g.createToken)
	mux.HandleFunc("GET /v1/tokens", g.listTokens)
	mux.HandleFunc("GET /v1/tokens/{name}", g.getToken)
	mux.HandleFunc("DELETE /v1/tokens/{name}", g.deleteToken)
}

// newTokenValue is a token's value: tokenPrefix and 32 random bytes,
// base64url.
func newTokenValue() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// tokenAt is the running config's token of name, the file's or the
// API's (nil: none). Called under the lock.
func (g *Gateway) tokenAt(name string) *config.APIToken {
	tokens := g.cfg.Load().API.Tokens
	if i := slices.IndexFunc(tokens, func(t config.APIToken) bool { return t.Name == name }); i >= 0 {
		return &tokens[i]
	}
	return nil
}

// tokenHidden reports whether the token of name is another tenant's (or
// a shared one) to the request's tenant token: answered as one nobody
// has. Called under the lock.
func (g *Gateway) tokenHidden(r *http.Request, name string) bool {
	t := callerTenant(r)
	if t == "" {
		return false
	}
	tok := g.tokenAt(name)
	return tok != nil && tok.Tenant != t
}

// tokenView is tok as the API shows it: never its value.
func (g *Gateway) tokenView(tok config.APIToken) TokenView {
	v := TokenView{Name: tok.Name, ManagedBy: "file", Tenant: tok.Tenant, ReadOnly: tok.ReadOnly, Publish: tok.Publish, Pull: tok.Pull}
	if tok.Hash == "" {
		v.Config = g.opts.ConfigFile
		v.Fingerprint = secretbox.Fingerprint(tok.Token)
		return v
	}
	v.ManagedBy = "api"
	v.Fingerprint = tok.Hash[:len("sha256:")+12] // secretbox.Fingerprint's form: the first 6 bytes
	if i := g.objectAt(store.ObjectToken, tok.Name); i >= 0 {
		s := g.objects[i].stored
		created := s.CreatedAt.UTC()
		v.Version, v.CreatedAt, v.CreatedBy = s.Version, &created, s.CreatedBy
	}
	return v
}

// createToken is POST /v1/tokens.
func (g *Gateway) createToken(w http.ResponseWriter, r *http.Request) {
	const plural = "api.tokens"
	spec, ok := readBody(w, r, tokenFields)
	if !ok {
		return
	}
	for _, f := range []string{"token", "hash"} {
		if _, given := spec[f]; given {
			answerInvalid(w, fmt.Errorf("%s: the gateway makes a token's value, and answers it once: leave %s out", f, f), plural, -1)
			return
		}
	}
	t := callerTenant(r)
	if t != "" {
		// A tenant's token makes its own tenant's tokens: said, or not.
		if given, ok := spec["tenant"]; ok && given != t {
			answerInvalid(w, fmt.Errorf("tenant: %v: this token is tenant %s's, and creates its tenant's tokens only (leave tenant out)", given, t), plural, -1)
			return
		}
		spec["tenant"] = t
	}
	text, err := json.Marshal(spec)
	if err != nil {
		answerInvalid(w, err, plural, -1)
		return
	}
	tok, err := config.ReadToken(text)
	if err != nil {
		answerInvalid(w, err, plural, -1)
		return
	}
	if !config.IsName(tok.Name) || len(tok.Name) > config.MaxNameLen {
		answerInvalid(w, fmt.Errorf("name: %.40q: want letters, digits, '.', '_' or '-', at most %d", tok.Name, config.MaxNameLen), plural, -1)
		return
	}
	name := tok.Name
	g.reloading.Lock()
	if t != "" {
		// Another tenant's source or destination (or a shared one) is
		// refused as one there is none of: the file's check would say
		// whose it is.
		for j, s := range tok.Publish {
			if g.tenantOf(store.ObjectSource, s) != t {
				g.reloading.Unlock()
				answerInvalid(w, fmt.Errorf("publish[%d]: no source named %q", j, s), plural, -1)
				return
			}
		}
		for j, d := range tok.Pull {
			if g.tenantOf(store.ObjectDestination, d) != t {
				g.reloading.Unlock()
				answerInvalid(w, fmt.Errorf("pull[%d]: no destination named %q", j, d), plural, -1)
				return
			}
		}
	}
	switch {
	case g.tokenHidden(r, name):
		g.reloading.Unlock()
		conflict(w, "exists", "token "+name+" already exists: choose another name")
		return
	case slices.ContainsFunc(g.file.API.Tokens, func(f config.APIToken) bool { return f.Name == name }):
		g.reloading.Unlock()
		g.fileOwns(w, "token", name)
		return
	case g.objectAt(store.ObjectToken, name) >= 0:
		g.reloading.Unlock()
		conflict(w, "exists", "token "+name+" already exists: choose another name, or revoke it (DELETE /v1/tokens/"+name+") first")
		return
	}
	tomb := g.tombAt(store.ObjectToken, name)
	if tomb >= 0 && !takesTomb(tok.Tenant, g.objects[tomb]) {
		// Revoked, and another tenant's (or the operator's): the audit
		// of what it did is kept by its name, so the name stays theirs.
		g.reloading.Unlock()
		conflict(w, "exists", "token "+name+" already exists: choose another name")
		return
	}
	value := newTokenValue()
	tok.Hash = apiauth.HashOf(value)
	spec["hash"] = tok.Hash
	stored, err := json.Marshal(spec)
	if err != nil {
		g.reloading.Unlock()
		answerInvalid(w, err, plural, -1)
		return
	}
	objects, last := withCreated(g.objects, object{stored: store.Object{Kind: store.ObjectToken, Name: name}, spec: spec, token: tok}, tomb)
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, "token "+name+" created through the API")
	if err != nil {
		index := g.mergedIndex(objects, last)
		g.reloading.Unlock()
		answerInvalid(w, err, plural, index)
		return
	}
	so, err := g.storeCreate(r.Context(), store.Object{Kind: store.ObjectToken, Name: name, Tenant: tok.Tenant, Spec: stored}, tomb, auditOf(r, store.ObjectToken, "create", name))
	if err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	objects[last].stored = so
	finish(true)
	g.reloading.Lock()
	v := g.tokenView(tok)
	g.reloading.Unlock()
	v.Token = value
	w.Header().Set("Cache-Control", "no-store") // the value, once: kept by no cache
	jsonhttp.WriteJSON(w, http.StatusCreated, v)
}

// listTokens is GET /v1/tokens: the file's and the API's, a tenant's
// token its tenant's only.
func (g *Gateway) listTokens(w http.ResponseWriter, r *http.Request) {
	t := callerTenant(r)
	g.reloading.Lock()
	out := []TokenView{}
	for _, tok := range g.cfg.Load().API.Tokens {
		if t == "" || tok.Tenant == t {
			out = append(out, g.tokenView(tok))
		}
	}
	g.reloading.Unlock()
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

// getToken is GET /v1/tokens/{name}.
func (g *Gateway) getToken(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.reloading.Lock()
	defer g.reloading.Unlock()
	tok := g.tokenAt(name)
	if tok == nil || g.tokenHidden(r, name) {
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no token "+name)
		return
	}
	jsonhttp.WriteJSON(w, http.StatusOK, g.tokenView(*tok))
}

// deleteToken is DELETE /v1/tokens/{name}: the token is refused on every
// replica from the change on (within the objects' bound on the others),
// and the dashboard's sessions made with it end. One of the file's is
// 409: the file manages it.
func (g *Gateway) deleteToken(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.reloading.Lock()
	i := g.objectAt(store.ObjectToken, name)
	switch {
	case g.tokenHidden(r, name) || (i < 0 && g.tokenAt(name) == nil):
		g.reloading.Unlock()
		jsonhttp.WriteError(w, http.StatusNotFound, "not_found", "no token "+name)
		return
	case i < 0:
		g.reloading.Unlock()
		g.fileOwns(w, "token", name)
		return
	}
	old := g.objects[i]
	objects := slices.Clone(g.objects)
	objects[i] = tombstoneOf(old)
	_, finish, err := g.prepareLocked(r.Context(), g.file, objects, "token "+name+" revoked through the API")
	if err != nil {
		g.reloading.Unlock()
		conflict(w, "in_use", err.Error())
		return
	}
	if objects[i], err = g.storeDelete(r.Context(), old, auditOf(r, store.ObjectToken, "delete", name)); err != nil {
		finish(false)
		g.storeFailed(w, r, err)
		return
	}
	finish(true)
	w.WriteHeader(http.StatusNoContent)
}
