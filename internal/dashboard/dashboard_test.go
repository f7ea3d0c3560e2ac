package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/dashboard"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store"
)

const viewer = "viewer-token-0123456789"

func startGateway(t *testing.T) *oncehooktest.Gateway {
	return oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: ops, token: `+token+`}
    - {name: viewer, token: `+viewer+`, read_only: true}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - {name: app, url: http://127.0.0.1:9/never}
`)
}

// browser is an HTTP client with cookies that does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func postForm(t *testing.T, c *http.Client, u string, form url.Values, origin string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func login(t *testing.T, gw *oncehooktest.Gateway, tok string) (*http.Client, string) {
	t.Helper()
	c := browser(t)
	resp, _ := postForm(t, c, gw.APIURL+"/ui/login", url.Values{"token": {tok}, "next": {"/ui/destinations"}}, gw.APIURL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/destinations" {
		t.Fatalf("login: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "oncehook_session" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui" {
		t.Fatalf("session cookie %+v", session)
	}
	_, page := get(t, c, gw.APIURL+"/ui/destinations")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page: %s", page)
	}
	return c, m[1]
}

func TestLoginCSRFAndHeaders(t *testing.T) {
	gw := startGateway(t)
	ui := gw.APIURL + "/ui/"

	// Without a session, pages send to the login form; actions are refused.
	resp, _ := get(t, browser(t), ui+"events")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login?next=") {
		t.Fatalf("anonymous: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := postForm(t, browser(t), ui+"destinations/app/pause", url.Values{}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous pause: %d", resp.StatusCode)
	}
	// A wrong token is refused, and says so.
	resp, body := postForm(t, browser(t), ui+"login", url.Values{"token": {"wrong-token-0000000000"}}, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not one of api.tokens") {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	// An open redirect after login is not possible.
	c := browser(t)
	resp, _ = postForm(t, c, ui+"login", url.Values{"token": {token}, "next": {"//evil.example/ui/"}}, "")
	if resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("next=//evil: %s", resp.Header.Get("Location"))
	}

	c, csrf := login(t, gw, token)
	// Every page: a strict CSP, no framing, no sniffing, no caching.
	resp, _ = get(t, c, ui)
	h := resp.Header
	if h.Get("Content-Security-Policy") != dashboard.CSP || !strings.Contains(dashboard.CSP, "script-src 'self'") ||
		strings.Contains(dashboard.CSP, "unsafe-inline") || h.Get("X-Frame-Options") != "DENY" ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", h)
	}
	// Actions need the CSRF token, and the same origin.
	if resp, _ := postForm(t, c, ui+"destinations/app/pause", url.Values{}, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("pause without CSRF: %d", resp.StatusCode)
	}
	if resp, _ := postForm(t, c, ui+"destinations/app/pause", url.Values{"csrf": {csrf}}, "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("pause from another origin: %d", resp.StatusCode)
	}
	if d, _ := gw.Admin().Destinations(t.Context()); d[0].Paused {
		t.Fatal("a refused action paused the destination")
	}
	resp, _ = postForm(t, c, ui+"destinations/app/pause", url.Values{"csrf": {csrf}}, gw.APIURL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pause: %d", resp.StatusCode)
	}
	if d, _ := gw.Admin().Destinations(t.Context()); !d[0].Paused {
		t.Fatal("pause did not pause")
	}
	// A read-only token sees, and may not act.
	rc, rcsrf := login(t, gw, viewer)
	if resp, _ := postForm(t, rc, ui+"destinations/app/resume", url.Values{"csrf": {rcsrf}}, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("read-only resume: %d", resp.StatusCode)
	}
	if resp, _ := get(t, rc, ui+"audit"); resp.StatusCode != 200 {
		t.Fatalf("read-only audit: %d", resp.StatusCode)
	}
	// Log out ends the session.
	postForm(t, c, ui+"logout", url.Values{"csrf": {csrf}}, "")
	if resp, _ := get(t, c, ui); resp.StatusCode != http.StatusFound {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
}

func TestLoginLinkWorksOnce(t *testing.T) {
	gw := startGateway(t)
	link := gw.APIURL + gw.DashboardLoginLink(token, time.Minute)
	c := browser(t)
	resp, _ := get(t, c, link)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login link: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, gw.APIURL+"/ui/"); resp.StatusCode != 200 {
		t.Fatalf("after the link: %d", resp.StatusCode)
	}
	if resp, _ := get(t, browser(t), link); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the link worked twice: %d", resp.StatusCode)
	}
	// A link previewer's HEAD does not use the link up.
	fresh := gw.APIURL + gw.DashboardLoginLink(token, time.Minute)
	if resp, err := browser(t).Head(fresh); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD of a login link: %v %v", resp, err)
	}
	if resp, _ := get(t, browser(t), fresh); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the link after a HEAD: %d, want it still to work", resp.StatusCode)
	}
	expired := gw.APIURL + gw.DashboardLoginLink(token, -time.Second)
	if resp, _ := get(t, browser(t), expired); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an expired link worked: %d", resp.StatusCode)
	}
}

// A used or expired link, reopened in the browser that is signed in, opens
// the dashboard; in any other browser it still says the link is used up.
func TestUsedLoginLinkOpensTheDashboardWhereSignedIn(t *testing.T) {
	gw := startGateway(t)
	c := browser(t)
	used := gw.APIURL + gw.DashboardLoginLink(token, time.Minute)
	if resp, _ := get(t, c, used); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login link: %d", resp.StatusCode)
	}
	expired := gw.APIURL + gw.DashboardLoginLink(token, -time.Second)
	for name, link := range map[string]string{"used": used, "expired": expired, "unknown": gw.APIURL + "/ui/login/0123456789abcdef"} {
		resp, _ := get(t, c, link)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
			t.Errorf("the %s link, signed in: %d %q, want the dashboard", name, resp.StatusCode, resp.Header.Get("Location"))
		}
		resp, body := get(t, browser(t), link)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) {
			t.Errorf("the %s link, signed out: %d, want the login form", name, resp.StatusCode)
		}
	}
	if resp, _ := get(t, c, gw.APIURL+"/ui/"); resp.StatusCode != 200 {
		t.Fatalf("the dashboard after the redirect: %d", resp.StatusCode)
	}
}

func TestLanguage(t *testing.T) {
	gw := startGateway(t)
	c, _ := login(t, gw, token)
	req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/ui/destinations", nil)
	req.Header.Set("Accept-Language", "pt-BR,pt;q=0.9,en;q=0.5")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `<html lang="pt-BR">`) || !strings.Contains(string(b), "Pausar") {
		t.Fatal("Accept-Language pt-BR did not give Portuguese")
	}
	req.Header.Set("Accept-Language", "fr-FR,fr;q=0.9")
	resp, _ = c.Do(req)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `<html lang="en">`) {
		t.Fatal("an unknown language did not fall back to English")
	}
}

// The effects page lists what is held, left halfway and failed; a reset
// reopens a failed effect and is audited under the token's name.
func TestEffectsPageReset(t *testing.T) {
	gw := startGateway(t)
	ctx := t.Context()
	l := gw.Effects()
	c1, err := l.Claim(ctx, "pix-reminder:HP123:24h", effect.ClaimOptions{Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, "pix-reminder:HP123:24h", c1.Token, "invalid phone number"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx, "capi:Purchase:order-987", effect.ClaimOptions{Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c, csrf := login(t, gw, token)
	_, page := get(t, c, gw.APIURL+"/ui/effects")
	if !strings.Contains(page, "capi:Purchase:order-987") || !strings.Contains(page, "invalid phone number") {
		t.Fatalf("effects page lacks the held or the failed effect:\n%s", page)
	}
	resp, _ := postForm(t, c, gw.APIURL+"/ui/effects/reset", url.Values{"csrf": {csrf}, "key": {"pix-reminder:HP123:24h"}}, "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	rec, err := l.Get(ctx, "pix-reminder:HP123:24h")
	if err != nil || rec.State != "pending" {
		t.Fatalf("after reset: %+v %v", rec, err)
	}
	a, _ := gw.Admin().Audit(ctx, "", 5)
	if len(a.Entries) != 1 || a.Entries[0].Action != "effect_reset" || a.Entries[0].Actor != "token:ops" {
		t.Fatalf("audit %+v", a.Entries)
	}
}

// Found from outside: /ui/static/ listed its files; it serves files only.
func TestStaticServesFilesOnly(t *testing.T) {
	gw := startGateway(t)
	if resp, body := get(t, browser(t), gw.APIURL+"/ui/static/"); resp.StatusCode != http.StatusNotFound || strings.Contains(body, `href="app.css"`) {
		t.Fatalf("/ui/static/: %d %.200s", resp.StatusCode, body)
	}
	if resp, _ := get(t, browser(t), gw.APIURL+"/ui/static/app.css"); resp.StatusCode != 200 {
		t.Fatalf("app.css: %d", resp.StatusCode)
	}
}

// Found from outside: the demo's login page sent a newcomer to api.tokens
// in a configuration the demo does not have; the token is in the console.
func TestDemoLoginPageSaysWhereTheTokenIs(t *testing.T) {
	gw := oncehooktest.StartWith(t, `
store: sqlite://$DIR/oncehook.db
sources: [{name: demo, preset: stripe, secrets: [x]}]
`, oncehook.Options{DemoSink: true})
	_, body := get(t, browser(t), gw.APIURL+"/ui/login")
	if !strings.Contains(body, "printed it in the console") || strings.Contains(body, "from api.tokens in your configuration") {
		t.Fatalf("the demo's login page: %s", body)
	}
	_, body = get(t, browser(t), startGateway(t).APIURL+"/ui/login")
	if !strings.Contains(body, "from api.tokens in your configuration") {
		t.Fatalf("a configured gateway's login page: %s", body)
	}
}

// Found from outside: read-only sessions saw Replay, Retry, Purge, Pause
// and Reset, which answered 403 when pressed. They see none of them, and
// are told why; a token that may act sees them all.
func TestReadOnlySessionsSeeNoActions(t *testing.T) {
	gw := startGateway(t)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_ro","type":"invoice.paid"}`)
	list, err := gw.Admin().Events(t.Context(), admin.EventFilter{Source: "stripe"})
	if err != nil || len(list.Events) != 1 {
		t.Fatalf("events %+v %v", list, err)
	}
	pages := []string{fmt.Sprintf("events/%d", list.Events[0].ID), "events", "dead-letters", "destinations", "effects"}
	actions := regexp.MustCompile(`<form method="post" action="/ui/(events/[^"]*replay|dead-letters/(retry|purge)|destinations/[^"]+/(pause|resume)|effects/reset)"`)
	ro, _ := login(t, gw, viewer)
	ops, _ := login(t, gw, token)
	seen := 0
	for _, p := range pages {
		resp, body := get(t, ro, gw.APIURL+"/ui/"+p)
		if resp.StatusCode != 200 {
			t.Fatalf("read-only %s: %d", p, resp.StatusCode)
		}
		if m := actions.FindString(body); m != "" {
			t.Errorf("read-only %s shows %s", p, m)
		}
		_, body = get(t, ops, gw.APIURL+"/ui/"+p)
		seen += len(actions.FindAllString(body, -1))
	}
	if seen < 4 {
		t.Fatalf("a token that may act saw %d action forms: the check above proves nothing", seen)
	}
	if _, body := get(t, ro, gw.APIURL+"/ui/dead-letters"); !strings.Contains(body, `id="read-only"`) {
		t.Error("the read-only dead letters page does not say why it has no actions")
	}
}

// A proxy key whose attempts were all released is nobody's: it shows as
// released, not as held with an empty lease. One key of two clients is
// two answers, told apart by their client.
func TestEffectsPageReleasedKeysAndTheirClients(t *testing.T) {
	gw := startGateway(t)
	ctx := t.Context()
	l := gw.Effects()
	for range 3 { // a 503 three times: released each time
		c, err := l.Claim(ctx, "idem:payments:0a1b2c3d4e5f6071:order-1", effect.ClaimOptions{Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, "idem:payments:0a1b2c3d4e5f6071:order-1", c.Token, "HTTP 503: did not start"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Claim(ctx, "capi:Purchase:order-987", effect.ClaimOptions{Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"1111111111111111", "2222222222222222"} {
		key := "idem:payments:" + client + ":order-2"
		c, err := l.Claim(ctx, key, effect.ClaimOptions{Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(ctx, key, c.Token, []byte(`{"status":201}`)); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := login(t, gw, token)
	_, page := get(t, c, gw.APIURL+"/ui/effects")
	section := func(title string) string {
		i := strings.Index(page, "<h2>"+title+"</h2>")
		if i < 0 {
			t.Fatalf("no section %q:\n%s", title, page)
		}
		rest := page[i:]
		if j := strings.Index(rest, "</section>"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	held, released := section("Pending, held by an owner now"), section("Released: nobody holds them, the next claim runs them again")
	if strings.Contains(held, "order-1") || !strings.Contains(held, "capi:Purchase:order-987") {
		t.Fatalf("held:\n%s", held)
	}
	if !strings.Contains(released, "idem:payments:0a1b2c3d4e5f6071:order-1") || !strings.Contains(released, "HTTP 503: did not start") {
		t.Fatalf("released:\n%s", released)
	}
	answers := section("Answers of your APIs (Idempotency-Key)")
	if strings.Count(answers, "order-2") != 2 || !strings.Contains(answers, "1111111111111111") || !strings.Contains(answers, "2222222222222222") {
		t.Fatalf("two clients' answers for one key are not told apart:\n%s", answers)
	}
}

// A destination with deliveries pending says why they are not all gone:
// rate-limited (at what rate, how long to drain), paused, its breaker
// open by hand; not "Active". Opening a breaker is a secondary action on
// a healthy row, not a primary button beside Pause.
func TestDestinationsSayWhyDeliveriesWait(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(sink.Close)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app, slow]}
destinations:
  - {name: app, url: `+sink.URL+`}
  - {name: slow, url: `+sink.URL+`, rate: 1/s}
`)
	now := time.Now()
	var events []store.NewEvent
	for i := range 30 {
		key := fmt.Sprintf("evt_%d", i)
		events = append(events, store.NewEvent{Source: "stripe", Key: key, ContentType: "application/json", Body: []byte(`{"id":"` + key + `"}`),
			ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"slow"}})
	}
	if _, err := store.ClaimEvents(t.Context(), gw.Store(), events); err != nil {
		t.Fatal(err)
	}
	c, csrf := login(t, gw, token)
	row := func(name string) string {
		t.Helper()
		_, page := get(t, c, gw.APIURL+"/ui/destinations")
		m := regexp.MustCompile(`(?s)<tr data-destination="` + name + `">.*?</tr>`).FindString(page)
		if m == "" {
			t.Fatalf("no row for %s:\n%s", name, page)
		}
		return m
	}
	slow := row("slow")
	if !strings.Contains(slow, `data-state="rate_limited"`) || !strings.Contains(slow, "Rate-limited") || !strings.Contains(slow, "sending at 1/s; about ") || strings.Contains(slow, "Active") {
		t.Fatalf("a 1/s destination with 30 pending:\n%s", slow)
	}
	app := row("app")
	if !strings.Contains(app, "Active") || !strings.Contains(app, `class="breaker-open secondary"`) || !strings.Contains(app, `class="pause"`) {
		t.Fatalf("a healthy destination's row:\n%s", app)
	}
	for _, step := range [][2]string{{"pause", "Paused"}, {"resume", "Rate-limited"}, {"breaker_open", "held until closed by hand"}} { // in this order
		action, want := step[0], step[1]
		if resp, _ := postForm(t, c, gw.APIURL+"/ui/destinations/slow/"+action, url.Values{"csrf": {csrf}}, gw.APIURL); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d", action, resp.StatusCode)
		}
		if r := row("slow"); !strings.Contains(r, want) || strings.Contains(r, "Active") {
			t.Fatalf("after %s, want %q:\n%s", action, want, r)
		}
	}
}

// A dead letter retried starts its count again at 1. The event's page said
// "Attempts: 2" over a table of four attempts numbered 1, 2, 1, 2, with
// nothing between them: it now marks where the count started again and
// says how many there were in all, as `oncehook events show` does.
func TestEventPageMarksWhereARetryStartedTheCountAgain(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(sink.Close)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - {name: app, url: `+sink.URL+`, retry: {max_attempts: 2, base_delay: 10ms, max_delay: 20ms}}
`)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_twice","type":"invoice.paid"}`)
	dead := func() bool {
		p, err := gw.Admin().DeadLetters(t.Context(), admin.DeadFilter{All: true})
		return err == nil && len(p.DeadLetters) == 1
	}
	if !testenv.WaitFor(10*time.Second, dead) {
		t.Fatal("the event never became a dead letter")
	}
	c, csrf := login(t, gw, token)
	if resp, _ := postForm(t, c, gw.APIURL+"/ui/dead-letters/retry", url.Values{"csrf": {csrf}}, gw.APIURL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry: %d", resp.StatusCode)
	}
	var id int64
	if !testenv.WaitFor(10*time.Second, func() bool {
		e, err := gw.Admin().Events(t.Context(), admin.EventFilter{All: true})
		if err != nil || len(e.Events) != 1 {
			return false
		}
		id = e.Events[0].ID
		d, err := gw.Admin().Event(t.Context(), id)
		return err == nil && len(d.Deliveries) == 1 && len(d.Deliveries[0].History) == 4 && dead()
	}) {
		t.Fatal("the retried dead letter was not tried twice more")
	}
	_, page := get(t, c, fmt.Sprintf("%s/ui/events/%d", gw.APIURL, id))
	if !strings.Contains(page, `<span class="attempts">2</span> (4 in all, counted again from 1 since a replay or retry)`) {
		t.Fatalf("the delivery's count does not say how many in all:\n%s", page)
	}
	rows := regexp.MustCompile(`<tr class="(attempt|restarted)"`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1])
	}
	if strings.Join(got, " ") != "attempt attempt restarted attempt attempt" {
		t.Fatalf("rows %q: want the count's restart marked between the 2nd and 3rd attempts\n%s", got, page)
	}
}

// The events page's "Replay every event this filter selects", on the page
// with no filter, replays every stored event to every destination. The
// API asks for all: true then; the page sent it by itself, so one click on
// the button beside "Count first" replayed everything. With no filter it
// now asks for a confirmation, as purging dead letters does; counting
// first needs none, and neither does a filtered replay.
func TestReplayingEveryEventFromThePageAsksForConfirmation(t *testing.T) {
	gw := startGateway(t)
	for i := range 3 {
		post(t, gw.URL+"/in/stripe", fmt.Sprintf(`{"id":"evt_all_%d","type":"invoice.paid"}`, i))
	}
	c, csrf := login(t, gw, token)
	_, page := get(t, c, gw.APIURL+"/ui/events")
	if !strings.Contains(page, `name="confirm" value="1" required`) {
		t.Fatalf("the unfiltered events page replays everything without a confirmation:\n%s", page)
	}
	replay := func(form url.Values) (int, string) {
		t.Helper()
		form.Set("csrf", csrf)
		form.Set("all", "1")
		resp, _ := postForm(t, c, gw.APIURL+"/ui/events/all/replay", form, gw.APIURL)
		return resp.StatusCode, resp.Header.Get("Location")
	}
	if code, loc := replay(url.Values{}); code != http.StatusBadRequest {
		t.Fatalf("every event, unconfirmed: %d %s, want 400", code, loc)
	}
	if code, loc := replay(url.Values{"dry_run": {"1"}}); code != http.StatusSeeOther || !strings.Contains(loc, "done=replay_dry%3A") {
		t.Fatalf("counting every event: %d %s", code, loc)
	}
	if code, loc := replay(url.Values{"confirm": {"1"}}); code != http.StatusSeeOther || !strings.Contains(loc, "done=replay%3A") {
		t.Fatalf("every event, confirmed: %d %s", code, loc)
	}
	if code, loc := replay(url.Values{"source": {"stripe"}, "key_prefix": {"evt_all_1"}}); code != http.StatusSeeOther || !strings.Contains(loc, "done=replay%3A") {
		t.Fatalf("a filtered replay: %d %s", code, loc)
	}
	if _, page := get(t, c, gw.APIURL+"/ui/events?source=stripe"); strings.Contains(page, `name="confirm"`) {
		t.Fatalf("a filtered page asks for a confirmation:\n%s", page)
	}
}

// A reconciliation pass's republished events are shown on the source's
// card apart from its duplicates (invariant 27), in each language; the
// duplicate rate does not count them.
func TestSourceCardShowsRepublishedApartFromDuplicates(t *testing.T) {
	gw := startGateway(t)
	hour := time.Now().UTC().Truncate(time.Hour)
	if _, err := gw.Store().Commit(context.Background(), store.Batch{Shard: "test", Stats: []store.StatDelta{
		{Hour: hour, Scope: store.ScopeSource, Name: "stripe", Metric: "events.accepted", Value: 190},
		{Hour: hour, Scope: store.ScopeSource, Name: "stripe", Metric: "events.republished", Value: 190},
	}}); err != nil {
		t.Fatal(err)
	}
	c, _ := login(t, gw, token)
	for lang, want := range map[string]string{"en": "Republished by a reconciliation pass", "pt-BR": "Republicados por uma reconciliação"} {
		req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/ui/sources/stripe", nil)
		req.Header.Set("Accept-Language", lang)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(b)
		i := strings.Index(page, `data-test="republished"`)
		if i < 0 || !strings.Contains(page[i:], want) || !strings.Contains(page[i:min(len(page), i+400)], "190") {
			t.Fatalf("%s: no republished line with 190 on the source's page", lang)
		}
		if !strings.Contains(page, `data-test="rate-hour">0`) {
			t.Errorf("%s: the hour's duplicate rate is not 0: %s", lang, page[strings.Index(page, `data-test="rate-hour"`):][:60])
		}
	}
}

// A pull destination's row says what it is, and where its consumers take
// its deliveries, in English and in Portuguese.
func TestPullDestinationsRowSaysConsumersTakeItsDeliveries(t *testing.T) {
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [laptop]}
destinations:
  - {name: laptop, pull: {}}
`)
	c, _ := login(t, gw, token)
	for lang, want := range map[string]string{"en": "Pull: its consumers take its deliveries", "pt-BR": "Pull: seus consumidores retiram as entregas"} {
		req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/ui/destinations", nil)
		req.Header.Set("Accept-Language", lang)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		row := regexp.MustCompile(`(?s)<tr data-destination="laptop">.*?</tr>`).FindString(string(b))
		if !strings.Contains(row, `data-kind="pull"`) || !strings.Contains(row, want) || !strings.Contains(row, "POST /v1/destinations/laptop/pull") {
			t.Fatalf("%s: the pull destination's row:\n%s", lang, row)
		}
	}
}
