// Package dashboard is oncehook's web dashboard, at /ui on the API
// listener: the duplicate rate per source per hour, events and their
// attempts, dead letters, destinations, effects and the audit log, and the
// operator's actions on them.
//
// It is server-rendered HTML from embedded templates, with one small
// embedded script and stylesheet: no CDN, no build step, and a strict
// Content-Security-Policy (no inline script or style at all). Charts are
// SVG drawn on the server.
//
// Login takes an API token and starts a session kept in the store (so that
// every replica accepts it and a logout ends it everywhere); the cookie
// holds only the session's random id, HttpOnly and SameSite=Strict, Secure
// and __Host- prefixed when the request came over TLS. Every action is a
// POST carrying the session's own CSRF token, and is written to the audit
// log under the token's name, as the API's are.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/forwarded"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the dashboard is mounted.
const Prefix = "/ui"

const (
	sessionCookie       = "oncehook_session"        // over plain HTTP, Path=/ui
	secureSessionCookie = "__Host-oncehook_session" // over TLS: Secure, Path=/, no Domain
	langCookie          = "oncehook_lang"
	sessionTTL          = 12 * time.Hour
)

// CSP is the dashboard's Content-Security-Policy: its own script and
// stylesheet only, nothing inline, no frames, forms posting only to
// itself.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Operator is what the dashboard shows and does: the operator's surface,
// and the effects ledger's reconciliation list (admin.Service is one).
type Operator interface {
	admin.Operator
	// ListEffects lists the ledger's records q selects, or answers
	// admin.ErrNotFound when there is no ledger.
	ListEffects(ctx context.Context, q store.EffectQuery) ([]effect.Record, error)
}

// Options configure a Dashboard.
type Options struct {
	Service Operator
	// Tenant is the Operator a tenant's session reaches: its tenant's
	// part of Service (see admin.Service's Tenant). Required: without
	// it, a tenant's session would reach everything.
	Tenant func(tenant string) Operator
	Auth   *apiauth.Auth
	Logger *slog.Logger
	Now    func() time.Time
	// UnknownSources, when set, lists the source names requests asked
	// for lately that the config does not have (intake's, this replica's).
	UnknownSources func() []metrics.RecentUnknownSource
	// Sessions keeps sign-ins (the store's: see store.Sessions).
	Sessions store.Sessions
	// TrustedProxies are the reverse proxies whose X-Forwarded-Proto and
	// X-Forwarded-For are believed: a request that came over TLS to such a
	// proxy gets a Secure cookie, and failed logins count per client.
	TrustedProxies []netip.Prefix
	// Demo says the gateway runs the demo: its token is not in any config
	// file but printed in the console, and the login page says so.
	Demo bool
	// Transformed, when set, runs a destination's transformation on a
	// stored event as an attempt would now, for the event page to show
	// the transformed request beside the original; nil and no error when
	// the destination has none.
	Transformed func(ctx context.Context, e admin.EventDetail, destination string) (*Transformed, error)
	// Objects, when set, is the API's handler of its sources and
	// destinations (POST /v1/sources, GET, PATCH and DELETE
	// /v1/sources/{name}, the same for destinations), run in process as
	// the session's caller: the forms that create, change and delete them
	// go through it, so that its checks, sealing, store, audit and tenant
	// rules are theirs. Nil: no forms.
	Objects http.Handler
	// Presets are the names of the known presets, for a new source's
	// form.
	Presets []string
}

// Transformed is what a destination's transformation makes of an event, as
// the event page shows it: the request that would be sent (credentials
// hidden), or that it is skipped, or the script's error.
type Transformed struct {
	Skipped     bool
	URL         string
	ContentType string
	Headers     []HeaderLine
	Body        string
	Digest      string
	TookMS      float64
	Error       string
}

// HeaderLine is one header of a transformed request.
type HeaderLine struct{ Name, Value string }

// Dashboard serves /ui.
type Dashboard struct {
	opts  Options
	langs *catalog
	pages map[string]*template.Template
	mux   *http.ServeMux

	mu    sync.Mutex
	links map[string]loginLink // one-time login links
}

type loginLink struct {
	token   string
	expires time.Time
}

// New returns the dashboard.
func New(opts Options) (*Dashboard, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sessions == nil {
		return nil, errors.New("dashboard: no session store")
	}
	if opts.Tenant == nil {
		return nil, errors.New("dashboard: no tenant scope (Options.Tenant)")
	}
	langs, err := loadCatalog(translationFS)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{opts: opts, langs: langs, pages: map[string]*template.Template{}, mux: http.NewServeMux(), links: map[string]loginLink{}}
	layout, err := template.New("layout.html").Funcs(funcs).Funcs(template.FuncMap{"langs": func() []Lang { return langs.langs }}).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"login", "overview", "source", "events", "event", "dead", "destinations", "effects", "audit", "alerts", "error", "object_form", "object_setup", "object_delete"} {
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		d.pages[name] = t
	}
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))
	d.mux.HandleFunc("GET "+Prefix+"/static/", func(w http.ResponseWriter, r *http.Request) {
		// Files only: a folder's listing tells a stranger nothing it needs.
		if strings.HasSuffix(r.URL.Path, "/") {
			d.fail(w, r, http.StatusNotFound, "not_found")
			return
		}
		files.ServeHTTP(w, r)
	})
	d.mux.HandleFunc("GET "+Prefix+"/login", d.loginPage)
	d.mux.HandleFunc("POST "+Prefix+"/login", d.login)
	d.mux.HandleFunc("GET "+Prefix+"/login/{code}", d.loginByLink)
	d.mux.HandleFunc("POST "+Prefix+"/logout", d.authed(d.logout))
	d.mux.HandleFunc("GET "+Prefix+"/{$}", d.authed(d.overview))
	d.mux.HandleFunc("GET "+Prefix+"/live", d.authed(d.live))
	d.mux.HandleFunc("GET "+Prefix+"/sources/{name}", d.authed(d.source))
	d.mux.HandleFunc("GET "+Prefix+"/events", d.authed(d.events))
	d.mux.HandleFunc("GET "+Prefix+"/events/{id}", d.authed(d.event))
	d.mux.HandleFunc("POST "+Prefix+"/events/{id}/replay", d.authed(d.replay))
	d.mux.HandleFunc("POST "+Prefix+"/events/{id}/deliver", d.authed(d.onDelivery(admin.ActDeliverEvent)))
	d.mux.HandleFunc("POST "+Prefix+"/events/all/deliver", d.authed(d.deliverAll))
	d.mux.HandleFunc("POST "+Prefix+"/events/{id}/skip", d.authed(d.onDelivery(admin.ActSkipEvent)))
	d.mux.HandleFunc("POST "+Prefix+"/order/reset", d.authed(d.resetOrder))
	d.mux.HandleFunc("GET "+Prefix+"/dead-letters", d.authed(d.dead))
	d.mux.HandleFunc("POST "+Prefix+"/dead-letters/retry", d.authed(d.retryDead))
	d.mux.HandleFunc("POST "+Prefix+"/dead-letters/purge", d.authed(d.purgeDead))
	d.mux.HandleFunc("GET "+Prefix+"/destinations", d.authed(d.destinations))
	d.mux.HandleFunc("POST "+Prefix+"/destinations/{name}/{action}", d.authed(d.onDestination))
	if opts.Objects != nil {
		for _, k := range []string{"sources", "destinations"} {
			d.mux.HandleFunc("GET "+Prefix+"/"+k+"/new", d.authed(d.newObject))
			d.mux.HandleFunc("POST "+Prefix+"/"+k+"/new", d.authed(d.createObject))
			d.mux.HandleFunc("GET "+Prefix+"/"+k+"/{name}/edit", d.authed(d.editObject))
			d.mux.HandleFunc("POST "+Prefix+"/"+k+"/{name}/edit", d.authed(d.updateObject))
			d.mux.HandleFunc("GET "+Prefix+"/"+k+"/{name}/delete", d.authed(d.deletePage))
			d.mux.HandleFunc("POST "+Prefix+"/"+k+"/{name}/delete", d.authed(d.deleteObject))
		}
		d.mux.HandleFunc("GET "+Prefix+"/sources/{name}/setup", d.authed(d.setupPage))
	}
	d.mux.HandleFunc("GET "+Prefix+"/effects", d.authed(d.effects))
	d.mux.HandleFunc("POST "+Prefix+"/effects/reset", d.authed(d.resetEffect))
	d.mux.HandleFunc("GET "+Prefix+"/audit", d.authed(d.audit))
	d.mux.HandleFunc("GET "+Prefix+"/alerts", d.authed(d.alerts))
	d.mux.HandleFunc("POST "+Prefix+"/alerts/{id}/{action}", d.authed(d.onIssue))
	d.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, http.StatusNotFound, "not_found")
	})
	return d, nil
}

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	if !strings.HasPrefix(r.URL.Path, Prefix+"/static/") {
		h.Set("Cache-Control", "no-store")
	}
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusFound)
		return
	}
	d.mux.ServeHTTP(w, r)
}

// LoginLink makes a one-time link that logs in with token, valid for ttl:
// the demo's start banner prints it so that a newcomer sees the dashboard
// at once. The path is relative to the API listener.
func (d *Dashboard) LoginLink(token string, ttl time.Duration) string {
	var b [24]byte
	rand.Read(b[:])
	code := base64.RawURLEncoding.EncodeToString(b[:])
	d.mu.Lock()
	now := d.opts.Now()
	for c, l := range d.links {
		if now.After(l.expires) {
			delete(d.links, c)
		}
	}
	d.links[code] = loginLink{token: token, expires: now.Add(ttl)}
	d.mu.Unlock()
	return Prefix + "/login/" + code
}

// ---- sessions, CSRF, language ----

type session struct {
	caller apiauth.Caller
	idHash string
	csrf   string // the session's own CSRF token, made with it and kept in the store
}

type sessionKey struct{}

// sessionOf finds the request's session in the store. A store that cannot
// answer is an error (503), not a logout.
func (d *Dashboard) sessionOf(r *http.Request) (session, bool, error) {
	var id string
	for _, name := range []string{secureSessionCookie, sessionCookie} {
		if c, err := r.Cookie(name); err == nil && c.Value != "" {
			id = c.Value
			break
		}
	}
	if id == "" || len(id) > 128 {
		return session{}, false, nil
	}
	ss, err := d.opts.Sessions.Session(r.Context(), hashID(id), d.opts.Now())
	if errors.Is(err, store.ErrNotFound) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, err
	}
	caller, ok := d.opts.Auth.Session(ss.Token)
	if !ok {
		return session{}, false, nil // the token left the config, or its value changed: so did its sessions
	}
	return session{caller: caller, idHash: ss.IDHash, csrf: ss.CSRF}, true, nil
}

func hashID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// authed runs h for a logged-in session; a POST must also carry the CSRF
// token and come from this origin, and a read-only token may not change
// anything.
func (d *Dashboard) authed(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok, err := d.sessionOf(r)
		if err != nil {
			d.failErr(w, r, err)
			return
		}
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
				return
			}
			d.fail(w, r, http.StatusUnauthorized, "unauthorized")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if err := r.ParseForm(); err != nil {
				d.fail(w, r, http.StatusBadRequest, "bad_request")
				return
			}
			if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) || !sameOrigin(r) {
				d.fail(w, r, http.StatusForbidden, "csrf")
				return
			}
			if s.caller.ReadOnly && !strings.HasSuffix(r.URL.Path, "/logout") {
				d.fail(w, r, http.StatusForbidden, "read_only")
				return
			}
		}
		ctx := apiauth.WithCaller(r.Context(), s.caller)
		h(w, r.WithContext(context.WithValue(ctx, sessionKey{}, s)), s)
	}
}

// sameOrigin checks Origin (or, without it, Referer) against Host: a
// second line behind SameSite=Strict and the CSRF token.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		o = r.Header.Get("Referer")
	}
	if o == "" {
		return true // not a browser, or one that sends neither: the CSRF token stands
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (d *Dashboard) lang(w http.ResponseWriter, r *http.Request) Lang {
	if l := r.URL.Query().Get("lang"); l != "" {
		lang := d.langs.pick(l)
		http.SetCookie(w, &http.Cookie{Name: langCookie, Value: lang.Code, Path: Prefix, MaxAge: 365 * 24 * 3600, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return lang
	}
	return d.langOf(r)
}

// langOf is the request's language, as lang picks it, without setting the
// cookie: for what a page computes before it renders (a chart's labels).
func (d *Dashboard) langOf(r *http.Request) Lang {
	if l := r.URL.Query().Get("lang"); l != "" {
		return d.langs.pick(l)
	}
	if c, err := r.Cookie(langCookie); err == nil {
		return d.langs.pick(c.Value)
	}
	return d.langs.fromAcceptLanguage(r.Header.Get("Accept-Language"))
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok, _ := d.sessionOf(r); ok {
		http.Redirect(w, r, next(r.URL.Query().Get("next")), http.StatusFound)
		return
	}
	d.render(w, r, http.StatusOK, "login", session{}, map[string]any{"Next": next(r.URL.Query().Get("next")), "Demo": d.opts.Demo})
}

// next keeps a post-login redirect on the dashboard.
func next(v string) string {
	if !strings.HasPrefix(v, Prefix+"/") || strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n") {
		return Prefix + "/"
	}
	return v
}

// setSession starts a session for the token's caller: a random id in the
// cookie, its digest and a CSRF token of its own in the store.
func (d *Dashboard) setSession(w http.ResponseWriter, r *http.Request, caller apiauth.Caller) error {
	var id, csrf [32]byte
	rand.Read(id[:])
	rand.Read(csrf[:])
	value := base64.RawURLEncoding.EncodeToString(id[:])
	now := d.opts.Now()
	if err := d.opts.Sessions.CreateSession(r.Context(), store.Session{IDHash: hashID(value), Token: d.opts.Auth.SessionToken(caller),
		CSRF: hex.EncodeToString(csrf[:16]), CreatedAt: now, ExpiresAt: now.Add(sessionTTL)}); err != nil {
		return err
	}
	http.SetCookie(w, d.sessionCookie(r, value, int(sessionTTL/time.Second)))
	return nil
}

// sessionCookie is the session's cookie: over TLS (directly, or to a
// trusted proxy that says so) Secure and __Host- prefixed, which pins it
// to this host and path /; over plain HTTP (loopback, a dev machine) the
// browser would not send a Secure cookie back.
func (d *Dashboard) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	c := &http.Cookie{Name: sessionCookie, Value: value, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: maxAge}
	if d.overTLS(r) {
		c.Name, c.Path, c.Secure = secureSessionCookie, "/", true
	}
	return c
}

// overTLS reports whether the browser reached us over TLS: directly, or
// through a trusted proxy that terminated it (X-Forwarded-Proto: https).
func (d *Dashboard) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return d.fromTrustedProxy(r) && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

func (d *Dashboard) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	for _, p := range d.opts.TrustedProxies {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil || !sameOrigin(r) {
		d.fail(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	// Wrong tokens are limited per client address, with the API's (one
	// count: both take the same tokens); a right token always logs in,
	// or a stranger behind the operator's NAT could lock them out.
	client := forwarded.ClientAddr(r, d.opts.TrustedProxies)
	token := strings.TrimSpace(r.PostFormValue("token"))
	caller, ok, limited := d.opts.Auth.CheckFrom(client, token)
	if !ok && limited > 0 {
		w.Header().Set("Retry-After", apiauth.RetryAfter(limited))
		d.fail(w, r, http.StatusTooManyRequests, "too_many_logins")
		return
	}
	if !ok {
		d.opts.Logger.Warn("dashboard: login with an unknown token", "client", client)
		d.render(w, r, http.StatusUnauthorized, "login", session{}, map[string]any{"Next": next(r.PostFormValue("next")), "Failed": true, "Demo": d.opts.Demo})
		return
	}
	if caller.Scoped() {
		// A publishing (or pulling) token may publish (pull) and do
		// nothing else: no session.
		d.opts.Logger.Warn("dashboard: login with a publishing token", "token", caller.Name, "client", client)
		d.render(w, r, http.StatusForbidden, "login", session{}, map[string]any{"Next": next(r.PostFormValue("next")), "PublishOnly": true, "Demo": d.opts.Demo})
		return
	}
	if err := d.setSession(w, r, caller); err != nil {
		d.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, next(r.PostFormValue("next")), http.StatusSeeOther)
}

func (d *Dashboard) loginByLink(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		// Link previewers (chat apps, mail scanners) send HEAD: it must
		// not use up the one time the link works.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		return
	}
	code := r.PathValue("code")
	d.mu.Lock()
	l, ok := d.links[code]
	delete(d.links, code) // one time
	d.mu.Unlock()
	if !ok || d.opts.Now().After(l.expires) {
		// A link reopened in the browser it already signed in (from the
		// console's scrollback, the browser's history) leads where it led
		// the first time: the session is there, "already used" would only
		// puzzle.
		if _, signedIn, _ := d.sessionOf(r); signedIn {
			http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
			return
		}
		d.render(w, r, http.StatusUnauthorized, "login", session{}, map[string]any{"Next": Prefix + "/", "LinkUsed": true, "Demo": d.opts.Demo})
		return
	}
	caller, ok := d.opts.Auth.Check(l.token)
	if !ok || caller.Scoped() {
		d.render(w, r, http.StatusUnauthorized, "login", session{}, map[string]any{"Next": Prefix + "/", "LinkUsed": true, "Demo": d.opts.Demo})
		return
	}
	if err := d.setSession(w, r, caller); err != nil {
		d.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// logout ends the session in the store, on every replica at once, and
// clears the cookie.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, s session) {
	if err := d.opts.Sessions.DeleteSession(r.Context(), s.idHash); err != nil {
		d.failErr(w, r, err)
		return
	}
	http.SetCookie(w, d.sessionCookie(r, "", -1))
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// ---- rendering ----

// page is what every template gets.
type page struct {
	L      Lang
	CSRF   string
	Caller string
	// ReadOnly hides what the session's token may not do (Replay, Retry,
	// Purge, Pause, Reset), instead of showing buttons that answer 403.
	ReadOnly bool
	// Forms says the session may create, change and delete the API's
	// sources and destinations (not read-only, and the forms are there).
	Forms bool
	Nav   string
	Flash string
	Data  any
	Path  string // the current path and query, for the language switch
	Now   time.Time
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, s session, data any) {
	p := page{L: d.lang(w, r), Nav: name, Data: data, Now: d.opts.Now(), Flash: r.URL.Query().Get("done")}
	if s.idHash != "" {
		p.CSRF, p.Caller, p.ReadOnly = s.csrf, s.caller.Name, s.caller.ReadOnly
		p.Forms = !s.caller.ReadOnly && d.opts.Objects != nil
	}
	q := r.URL.Query()
	q.Del("lang")
	q.Del("done")
	p.Path = r.URL.Path
	if enc := q.Encode(); enc != "" {
		p.Path += "?" + enc + "&"
	} else {
		p.Path += "?"
	}
	var buf strings.Builder
	if err := d.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		d.opts.Logger.Error("dashboard: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(buf.String()))
}

func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, reason string) {
	s, _, _ := d.sessionOf(r) // a store that cannot answer shows the page signed out
	d.render(w, r, status, "error", s, map[string]any{"Status": status, "Reason": reason})
}

// failErr answers an error from the operator service.
func (d *Dashboard) failErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, admin.ErrNotFound):
		d.fail(w, r, http.StatusNotFound, "not_found")
	case errors.Is(err, admin.ErrInvalid):
		d.fail(w, r, http.StatusBadRequest, "bad_request")
	case errors.Is(err, admin.ErrForbidden):
		d.fail(w, r, http.StatusForbidden, "tenant")
	case errors.Is(err, store.ErrUnavailable):
		d.fail(w, r, http.StatusServiceUnavailable, "unavailable")
	default:
		d.opts.Logger.Error("dashboard", "path", r.URL.Path, "err", err)
		d.fail(w, r, http.StatusInternalServerError, "internal")
	}
}

// done redirects after an action (POST, then GET), with what it did.
func done(w http.ResponseWriter, r *http.Request, to, what string) {
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	http.Redirect(w, r, to+sep+"done="+url.QueryEscape(what), http.StatusSeeOther)
}

// pair passes two values to a template.
type pair struct{ A, B any }

var funcs = template.FuncMap{
	// ui is where the dashboard is mounted: every path in the templates
	// (and the live endpoint app.js reads from <body data-live>) starts
	// with it, so the prefix is written once, as Prefix.
	"ui": func() string { return Prefix },
	// eventState is the catalog key of an event's or delivery's state:
	// state.<state>, but for stale, which is told with the order's words
	// (order.stale): an event older than its entity's delivered version.
	"eventState": func(state string) string {
		if state == store.EventStale {
			return "order.stale"
		}
		return "state." + state
	},
	"pair": func(a, b any) pair { return pair{a, b} },
	"sub1": func(n int64) int64 { return n - 1 },
	// restarted tells whether h[i] starts the count again: a replay or a
	// dead letter's retry numbers a delivery's attempts from 1 anew.
	"restarted": func(h []admin.AttemptDetail, i int) bool {
		return i > 0 && h[i].Attempt <= h[i-1].Attempt
	},
	// target writes an audit entry's target in the reader's language: its
	// leading word (event, destination, effect) or the whole of a bulk
	// target ("all events") is the catalog's; the rest (an id, a name, a
	// filter) is data, shown as it is. A target prefixed with the tenant
	// the change reached ("tenant acme: all events", "every tenant: ...")
	// has its prefix's words the catalog's too.
	"target": auditTarget,
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"dur": func(secs float64) string {
		if secs <= 0 {
			return "—"
		}
		return (time.Duration(secs * float64(time.Second))).Round(time.Second).String()
	},
	"join":  strings.Join,
	"query": func(kv ...string) template.URL { return template.URL(queryOf(kv...)) },
}

// auditTarget is the template's target (see funcs).
func auditTarget(l Lang, t string) string {
	if rest, ok := strings.CutPrefix(t, "every tenant: "); ok {
		return l.T("target.every_tenant") + ": " + auditTarget(l, rest)
	}
	if rest, ok := strings.CutPrefix(t, "tenant "); ok {
		if name, rest, ok := strings.Cut(rest, ": "); ok {
			return l.T("target.tenant") + " " + name + ": " + auditTarget(l, rest)
		}
	}
	for _, whole := range []string{"all events", "all dead letters"} {
		if t == whole {
			return l.T("target." + strings.ReplaceAll(whole, " ", "_"))
		}
	}
	if word, rest, ok := strings.Cut(t, " "); ok && (word == "event" || word == "source" || word == "destination" || word == "effect" || word == "config" || word == "issue") {
		return l.T("target."+word) + " " + rest
	}
	return t
}

// queryOf encodes pairs of names and values, leaving out empty values.
func queryOf(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q.Encode()
}

// tenantOf is the tenant of r's caller ("" for the operator's).
func tenantOf(r *http.Request) string {
	c, _ := apiauth.CallerOf(r.Context())
	return c.Tenant
}

// svc is the Operator r's caller reaches: a tenant's session, its
// tenant's part only.
func (d *Dashboard) svc(r *http.Request) Operator {
	t := tenantOf(r)
	if t == "" {
		return d.opts.Service
	}
	return d.opts.Tenant(t)
}
