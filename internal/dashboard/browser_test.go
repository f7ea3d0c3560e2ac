package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

const (
	token  = "ops-token-0123456789"
	secret = "whsec_test"
)

// chromium finds Debian's headless Chromium (.ci/run installs it). A
// developer's machine without it skips; CI fails.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's chromium package")
	}
	t.Skip("no chromium on PATH (apt-get install chromium)")
	return ""
}

// screenshots go to $ONCEHOOK_SCREENSHOTS when set (docs/ keeps the
// committed ones), else to the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("ONCEHOOK_SCREENSHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// TestDashboardInABrowser drives the dashboard in headless Chromium as an
// operator would: sign in, read the chart, open an event and replay it,
// pause a destination and resume it. It checks what a user sees, and that
// the page runs under its Content-Security-Policy without a violation.
// newBrowser starts headless Chromium for one test, with the flags this
// machine's closed network needs; it is stopped when the test ends, or by
// the function returned.
func newBrowser(t *testing.T, exe string) (context.Context, context.CancelFunc) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // start the browser, with no timeout
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, cancel
}

func TestDashboardInABrowser(t *testing.T) {
	exe := chromium(t)
	app, ledger := testenv.NewSink(t), testenv.NewSink(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens: [{name: ops, token: `+token+`}]
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
  - {name: hotmart, preset: stripe, secrets: [`+secret+`]}
  - {name: github, preset: github, secrets: [`+secret+`], destinations: [app]}
  - {name: billing, preset: stripe, secrets: [`+secret+`], destinations: [{name: app, types: ["invoice.*"]}]}
destinations:
  - {name: app, url: `+app.URL+`}
  - {name: ledger, url: `+ledger.URL+`}
upstreams:
  - {name: payments, prefix: /payments, upstream: `+app.URL+`, idempotency: {single_tenant: true}}
`)

	// A known storm: 40 events, each sent 1 to 3 times, the copies of one
	// event at the same moment; and 2 forged requests.
	var wg sync.WaitGroup
	var received, duplicates int
	for i := range 40 {
		copies := 1 + i%3
		received += copies
		duplicates += copies - 1
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				post(t, gw.URL+"/in/stripe", fmt.Sprintf(`{"id":"evt_%03d","type":"invoice.paid","data":{"amount":%d}}`, i, 1000+i))
			}()
		}
	}
	wg.Wait()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/stripe", strings.NewReader(`{"id":"evt_forged"}`))
		req.Header.Set("Stripe-Signature", "t=1,v1=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return len(app.ByKey()) == 40 }) {
		t.Fatalf("delivered %d of 40", len(app.ByKey()))
	}
	// The rollups ride the writer's next commit or its 10s flush.
	if !testenv.WaitFor(15*time.Second, func() bool {
		src, err := gw.Admin().Sources(context.Background())
		return err == nil && src[0].LastHour.Received == int64(received) && src[0].LastHour.RejectedTotal() == 2
	}) {
		t.Fatal("the rollups never showed the storm")
	}

	ctx, cancel := newBrowser(t, exe)

	// Every console error and uncaught exception: a CSP violation is one.
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	step, cancelSteps := context.WithTimeout(ctx, 90*time.Second)
	defer cancelSteps()
	do := func(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(step, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		// Every page the test visits rendered: a page that failed is
		// "Error <status>" or, when its template broke, no page at all.
		title, err := chromedp.Run(step, chromedp.Title())
		if err != nil || title == "" || strings.HasPrefix(title, "Error") {
			body, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("%s: the page is %q (%v): %.300s", what, title, err, body)
		}
	}
	text := func(t *testing.T, sel string) string {
		t.Helper()
		v, err := chromedp.Run(step, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	// noFlash removes the page's flash before an action whose answer is
	// one, so that waiting for it waits for the next page's.
	removeFlash := chromedp.Evaluate[bool](`(document.querySelector('.flash')?.remove(), true)`)
	noFlash := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := removeFlash(ctx, t)
		return err
	})
	shots := screenshotDir(t)
	shot := func(t *testing.T, name string) {
		t.Helper()
		png, err := chromedp.Run(step, chromedp.FullScreenshot(100)) // quality 100: a PNG
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ui := gw.APIURL + "/ui/"

	t.Run("SignIn", func(t *testing.T) {
		// Sign in: the overview asks for a token first.
		do(t, "login page", chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("token")))
		if title, _ := chromedp.Run(step, chromedp.Title()); !strings.Contains(title, "Sign in") {
			t.Fatalf("before signing in: %q", title)
		}
		do(t, "sign in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
			chromedp.WaitVisible(chromedp.CSS(`section[data-source="stripe"]`)))
	})
	t.Run("Overview", func(t *testing.T) {
		// The chart's bar for this hour shows the storm's numbers.
		bar, err := chromedp.Run(step, chromedp.Attributes(chromedp.CSS(`section[data-source="stripe"] svg.chart g.bar:last-of-type`)))
		if err != nil {
			t.Fatal(err)
		}
		hour := time.Now().UTC().Truncate(time.Hour).Format(time.RFC3339)
		if bar["data-hour"] != hour || bar["data-received"] != strconv.Itoa(received) || bar["data-duplicate"] != strconv.Itoa(duplicates) {
			t.Fatalf("this hour's bar %v, want %s: %d received, %d duplicates", bar, hour, received, duplicates)
		}
		counters := text(t, `section[data-source="stripe"] .counters`)
		rate := fmt.Sprintf("%.1f%%", 100*float64(duplicates)/float64(received))
		if !strings.Contains(counters, strconv.Itoa(received)) || !strings.Contains(counters, rate) {
			t.Fatalf("counters %q, want %d received and a %s duplicate rate", counters, received, rate)
		}
		// Found from outside: the overview must be readable at a glance. This
		// hour and the last 24 hours are labelled apart, the hour's duplicate
		// rate is written on the chart (not only in a tooltip), the colours
		// have a legend, and a missing baseline says why.
		label, err := chromedp.Run(step, chromedp.TextContent(chromedp.CSS(`section[data-source="stripe"] svg.chart text.rate-label`))) // SVG text has no innerText
		if err != nil || label != fmt.Sprintf("%.0f%%", 100*float64(duplicates)/float64(received)) {
			t.Fatalf("the hour's rate on the chart: %q %v", label, err)
		}
		if c := text(t, `section[data-source="stripe"] .counters`); !strings.Contains(strings.ToLower(c), "this hour") || !strings.Contains(strings.ToLower(c), "last 24 hours") {
			t.Fatalf("the counters do not say which span they count: %q", c)
		}
		if l := text(t, `section[data-source="stripe"] ul.legend`); !strings.Contains(l, "duplicates") || !strings.Contains(l, "baseline") {
			t.Fatalf("legend %q", l)
		}
		if why := text(t, `section[data-source="stripe"] [data-test="no-baseline"]`); !strings.Contains(why, "7 days") {
			t.Fatalf("a missing baseline says %q", why)
		}
		// The live counters' endpoint is where the page says (the prefix is
		// written once), and answers this session with the counts.
		live, err := chromedp.Run(step, chromedp.Evaluate[int64](`fetch(document.body.dataset.liveUrl, {credentials: "same-origin", headers: {"Accept": "application/json"}}).then(r => r.json()).then(d => d.stripe.received)`, chromedp.EvalAwaitPromise))
		if err != nil || live != int64(received) {
			t.Fatalf("the live endpoint answered %d received, %v; want %d", live, err, received)
		}
		shot(t, "dashboard-overview.png")
	})
	t.Run("EventAndReplay", func(t *testing.T) {
		// Open an event from the list, and replay it.
		do(t, "events", chromedp.Navigate(ui+"events?source=stripe"), chromedp.WaitVisible(chromedp.ID("events")),
			chromedp.Click(chromedp.CSS("#events a.event-link")), chromedp.WaitVisible(chromedp.ID("event-key")))
		key := text(t, "#event-key")
		idem := "stripe:" + key
		if copies := text(t, "#event-copies"); !strings.Contains(copies, "arrived") {
			t.Fatalf("the event page does not say how many copies arrived: %q", copies)
		}
		if n := app.ByKey()[idem]; n != 1 {
			t.Fatalf("%s delivered %d times before the replay", idem, n)
		}
		shot(t, "dashboard-event.png")
		do(t, "replay", chromedp.Click(chromedp.ID("replay")), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if !testenv.WaitFor(5*time.Second, func() bool { return app.ByKey()[idem] == 2 }) {
			t.Fatalf("the replay never reached the destination: %d", app.ByKey()[idem])
		}
		var attempts []*chromedp.Node
		var err error
		if !testenv.WaitFor(5*time.Second, func() bool {
			do(t, "reload event", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("event-key")))
			attempts, err = chromedp.Run(step, chromedp.Nodes(chromedp.CSSAll(`.delivery[data-destination="app"] tr.attempt`), chromedp.AtLeast(0)))
			return err == nil && len(attempts) == 2
		}) {
			t.Fatalf("the event page shows %d attempts after the replay, want 2 (%v)", len(attempts), err)
		}

		// Found from outside: at ~500 px the attempts table overflowed its card
		// and the viewport. Tables scroll inside their card; the page does not.
		do(t, "narrow", chromedp.EmulateViewport(500, 900), chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("event-key")))
		width, err := chromedp.Run(step, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
		if err != nil || width > 500 {
			t.Fatalf("at 500 px the event page is %d px wide (%v): it overflows the viewport", width, err)
		}
		shot(t, "narrow-event.png")
		do(t, "wide again", chromedp.EmulateReset(), chromedp.EmulateViewport(1280, 900))
	})
	t.Run("SearchAndReplayTheResult", func(t *testing.T) {
		// Issue 46: search the events by what their bodies say, with a
		// route's filter typed in the events page; the filter stays in the
		// URL, the page says how far it read, and the result is replayed
		// after its dry run: each found event once more, no other.
		where := `{"body":{"data":{"amount":{"$gte":1037}}}}`
		do(t, "search", chromedp.Navigate(ui+"events?source=stripe"), chromedp.WaitVisible(chromedp.ID("where")),
			chromedp.SendKeys(chromedp.ID("where"), where), chromedp.Submit(chromedp.ID("where")), chromedp.WaitVisible(chromedp.ID("searched")))
		loc, err := chromedp.Run(step, chromedp.Location())
		if err != nil || !strings.Contains(loc, "where=") {
			t.Fatalf("the search is not in the URL: %q %v", loc, err)
		}
		if got := text(t, "#searched"); !strings.Contains(got, "3 matched") {
			t.Fatalf("the search says %q", got)
		}
		rows, err := chromedp.Run(step, chromedp.Nodes(chromedp.CSSAll("#events tbody tr"), chromedp.AtLeast(0)))
		if err != nil || len(rows) != 3 {
			t.Fatalf("the search lists %d events, want 3 (evt_037 to evt_039): %v", len(rows), err)
		}
		shot(t, "dashboard-search.png")
		before := app.ByKey()
		do(t, "dry run", noFlash, chromedp.Click(chromedp.CSS("#replay-all summary")), chromedp.Click(chromedp.CSS(`#replay-all button[name="dry_run"]`)),
			chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(t, ".flash"); !strings.Contains(f, "3 deliveries would be requeued") {
			t.Fatalf("the dry run says %q", f)
		}
		if got, _ := chromedp.Run(step, chromedp.Value(chromedp.ID("where"))); got != where {
			t.Fatalf("after the dry run the search field holds %q", got)
		}
		// The replay's card stays open after its dry run, to be taken as
		// counted.
		do(t, "replay the result", noFlash, chromedp.Click(chromedp.CSS(`#replay-all button.danger`)),
			chromedp.WaitVisible(chromedp.CSS(".flash")))
		if !testenv.WaitFor(10*time.Second, func() bool {
			now := app.ByKey()
			for _, k := range []string{"stripe:evt_037", "stripe:evt_038", "stripe:evt_039"} {
				if now[k] != before[k]+1 {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("the replay of the search did not reach each found event once")
		}
		time.Sleep(300 * time.Millisecond)
		now := app.ByKey()
		for k, n := range now {
			if n != before[k] && k != "stripe:evt_037" && k != "stripe:evt_038" && k != "stripe:evt_039" {
				t.Errorf("the replay of the search reached %s too (%d, was %d)", k, n, before[k])
			}
		}
		// Narrowed to one destination's dead letters: none of the found
		// events gave up, so the dry run counts none, and the page comes
		// back with the narrowing chosen.
		do(t, "narrowed dry run", noFlash, chromedp.Click(chromedp.CSS("#replay-all summary")),
			chromedp.SetValue(chromedp.CSS(`#replay-all select[name="destination"]`), "app"),
			chromedp.Click(chromedp.CSS(`#replay-all input[name="dead"]`)),
			chromedp.Click(chromedp.CSS(`#replay-all button[name="dry_run"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(t, ".flash"); !strings.Contains(f, "0 deliveries would be requeued") {
			t.Fatalf("the narrowed dry run says %q", f)
		}
		kept, err := chromedp.Run(step, chromedp.Evaluate[string](
			`document.querySelector('#replay-all select[name="destination"]').value + ' ' + document.querySelector('#replay-all input[name="dead"]').checked`))
		if err != nil || kept != "app true" {
			t.Fatalf("after the narrowed dry run the replay's choices are %q (%v), want app and dead", kept, err)
		}
		shot(t, "dashboard-search-replay-narrowed.png")

		// Deliver the result to a destination no route sends stripe's
		// events to: the dry run counts and sends nothing, then each
		// found event arrives there once, with its Idempotency-Key; asked
		// again, nothing is added, and the page says they are there.
		found := []string{"stripe:evt_037", "stripe:evt_038", "stripe:evt_039"}
		do(t, "deliver dry run", noFlash, chromedp.Click(chromedp.CSS("#deliver-all summary")),
			chromedp.SetValue(chromedp.CSS(`#deliver-all select[name="destination"]`), "ledger"),
			chromedp.Click(chromedp.CSS(`#deliver-all button[name="dry_run"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(t, ".flash"); !strings.Contains(f, "Dry run: 3 events would get a delivery to ledger.") || strings.Contains(f, "Left alone") {
			t.Fatalf("the delivery's dry run says %q", f)
		}
		shot(t, "dashboard-search-deliver-dry.png")
		time.Sleep(300 * time.Millisecond)
		if n := len(ledger.Deliveries()); n != 0 {
			t.Fatalf("the dry run delivered %d events", n)
		}
		do(t, "deliver the result", noFlash, chromedp.Click(chromedp.CSS(`#deliver-all button.danger`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(t, ".flash"); !strings.Contains(f, "Delivered: 3 events got a delivery to ledger") {
			t.Fatalf("the delivery says %q", f)
		}
		if !testenv.WaitFor(10*time.Second, func() bool { return len(ledger.Deliveries()) >= 3 }) {
			t.Fatalf("ledger got %d of the 3 found events", len(ledger.Deliveries()))
		}
		time.Sleep(300 * time.Millisecond)
		if got := ledger.ByKey(); len(got) != 3 || got[found[0]] != 1 || got[found[1]] != 1 || got[found[2]] != 1 {
			t.Fatalf("ledger got %v, want each of %v once", got, found)
		}
		do(t, "deliver again", noFlash, chromedp.Click(chromedp.CSS("#deliver-all summary")),
			chromedp.SetValue(chromedp.CSS(`#deliver-all select[name="destination"]`), "ledger"),
			chromedp.Click(chromedp.CSS(`#deliver-all button[name="dry_run"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(t, ".flash"); !strings.Contains(f, "0 events would get a delivery to ledger. Left alone: 3 already had one there, 0 had no body left") {
			t.Fatalf("a second delivery's dry run says %q", f)
		}
		shot(t, "dashboard-search-deliver-again.png")
		// A search that is no filter is said beside its field, kept as typed.
		do(t, "bad search", chromedp.Navigate(ui+"events?where="+url.QueryEscape(`{"body":{"id":{"$bogus":1}}}`)), chromedp.WaitVisible(chromedp.ID("bad-where")))
		if got := text(t, "#bad-where"); !strings.Contains(got, "$bogus") {
			t.Fatalf("a bad search says %q", got)
		}
	})
	t.Run("ForwardedHeaders", func(t *testing.T) {
		// An event that carries forwarded headers (GitHub's X-GitHub-Event)
		// opens too, and shows them. It answered 500 before.
		ghReq := testenv.SignedRequest(t, gw.URL+"/in/github", "github", secret, []byte(`{"action":"opened","number":7}`), "delivery-7")
		ghReq.Header.Set("X-GitHub-Event", "pull_request")
		if resp, err := http.DefaultClient.Do(ghReq); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GitHub event: %v %v", resp, err)
		}
		do(t, "github event", chromedp.Navigate(ui+"events?source=github"), chromedp.WaitVisible(chromedp.ID("events")),
			chromedp.Click(chromedp.CSS("#events a.event-link")), chromedp.WaitVisible(chromedp.ID("event-key")))
		if page := text(t, "main"); !strings.Contains(page, "X-Github-Event") || !strings.Contains(page, "pull_request") {
			t.Fatalf("the GitHub event's page does not show its forwarded header: %.500s", page)
		}
	})
	t.Run("PauseAndResume", func(t *testing.T) {
		// Pause app: new events are held, not delivered; resume drains them.
		do(t, "pause", chromedp.Navigate(ui+"destinations"), chromedp.Click(chromedp.CSS(`tr[data-destination="app"] button.pause`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="app"] .paused`)))
		for i := range 3 {
			post(t, gw.URL+"/in/stripe", fmt.Sprintf(`{"id":"evt_held_%d","type":"invoice.paid"}`, i))
		}
		time.Sleep(700 * time.Millisecond)
		held := func() int {
			n := 0
			for k := range app.ByKey() {
				if strings.HasPrefix(k, "stripe:evt_held_") {
					n++
				}
			}
			return n
		}
		if n := held(); n != 0 {
			t.Fatalf("a paused destination received %d events", n)
		}
		do(t, "reload destinations", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("destinations")))
		if pending := strings.TrimSpace(text(t, `tr[data-destination="app"] td.pending`)); pending != "3" {
			t.Fatalf("pending while paused: %q", pending)
		}
		shot(t, "dashboard-destinations.png")
		do(t, "resume", chromedp.Click(chromedp.CSS(`tr[data-destination="app"] button.resume`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="app"] button.pause`)))
		if !testenv.WaitFor(5*time.Second, func() bool { return held() == 3 }) {
			t.Fatalf("resume delivered %d of 3 held events", held())
		}
	})
	t.Run("FilteredEvent", func(t *testing.T) {
		// An event the route passed over: its page says so, with its type,
		// and sends it there on purpose.
		post(t, gw.URL+"/in/billing", `{"id":"evt_charge","type":"charge.succeeded"}`)
		do(t, "filtered event", chromedp.Navigate(ui+"events?source=billing&state=filtered"), chromedp.WaitVisible(chromedp.ID("events")),
			chromedp.Click(chromedp.CSS("#events a.event-link")), chromedp.WaitVisible(chromedp.ID("event-filtered")))
		if typ := text(t, "#event-type"); typ != "charge.succeeded" {
			t.Fatalf("the event page's type: %q", typ)
		}
		shot(t, "dashboard-event-filtered.png")
		do(t, "deliver anyway", chromedp.Click(chromedp.CSS(`button.deliver-to[data-destination="app"]`)), chromedp.WaitVisible(chromedp.CSS(".delivery")))
		if !testenv.WaitFor(5*time.Second, func() bool { return app.ByKey()["billing:evt_charge"] == 1 }) {
			t.Fatal("the filtered event never reached app after Deliver")
		}
	})
	t.Run("Breaker", func(t *testing.T) {
		// A breaker opened by hand holds; the page says so; closing drains.
		do(t, "open breaker", chromedp.Navigate(ui+"destinations"), chromedp.Click(chromedp.CSS(`tr[data-destination="app"] button.breaker-open`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="app"] .breaker`)))
		if b := text(t, `tr[data-destination="app"] .breaker`); !strings.Contains(b, "Breaker open") {
			t.Fatalf("breaker badge %q", b)
		}
		shot(t, "dashboard-destinations-breaker.png")
		do(t, "close breaker", chromedp.Click(chromedp.CSS(`tr[data-destination="app"] button.breaker-close`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="app"] button.breaker-open`)))
	})
	t.Run("Audit", func(t *testing.T) {
		// The audit log names the token for each change.
		do(t, "audit", chromedp.Navigate(ui+"audit"), chromedp.WaitVisible(chromedp.ID("audit")))
		audit := text(t, "#audit")
		for _, want := range []string{"token:ops", "replay", "pause", "resume", "breaker opened", "breaker closed", "delivery to a filtered destination"} {
			if !strings.Contains(audit, want) {
				t.Errorf("audit log lacks %q: %s", want, audit)
			}
		}
	})
	t.Run("Effects", func(t *testing.T) {
		// The effects ledger's page: one held, one failed with its Reset.
		if _, err := gw.Effects().Claim(step, "capi:Purchase:order-987", effect.ClaimOptions{Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
		c, err := gw.Effects().Claim(step, "pix-reminder:HP123:24h", effect.ClaimOptions{Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := gw.Effects().Fail(step, "pix-reminder:HP123:24h", c.Token, "invalid phone number"); err != nil {
			t.Fatal(err)
		}
		// And an answer of the API behind the proxy, which the page lists
		// under the config's name for it, upstreams: (it said apis:).
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/payments/charges", strings.NewReader(`{"amount":4990}`))
		req.Header.Set("Idempotency-Key", `"order-987"`)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /payments/charges through the proxy: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		do(t, "effects", chromedp.Navigate(ui+"effects"), chromedp.WaitVisible(chromedp.ID("api-answers")))
		if page := text(t, "main"); !strings.Contains(page, "capi:Purchase:order-987") || !strings.Contains(page, "invalid phone number") ||
			!strings.Contains(text(t, "#api-answers"), "order-987") || !strings.Contains(page, "(upstreams:)") || strings.Contains(page, "apis:") {
			t.Fatalf("effects page: %s", page)
		}
		shot(t, "dashboard-effects.png")
	})
	t.Run("Portuguese", func(t *testing.T) {
		// Portuguese, by the switch (and kept in a cookie).
		do(t, "pt-BR", chromedp.Navigate(ui+"?lang=pt-BR"), chromedp.WaitVisible(chromedp.CSS("h1")))
		if h := text(t, "h1"); h != "Visão geral" {
			t.Fatalf("pt-BR heading %q", h)
		}
		shot(t, "dashboard-overview-pt.png")
		do(t, "pt-BR effects", chromedp.Navigate(ui+"effects"), chromedp.WaitVisible(chromedp.ID("api-answers")))
		if page := text(t, "main"); !strings.Contains(page, "Respostas guardadas das APIs atrás do proxy (upstreams:)") || strings.Contains(page, "apis:") {
			t.Fatalf("pt-BR effects page: %s", page)
		}
		shot(t, "dashboard-effects-pt.png")
		do(t, "pt-BR kept", chromedp.Navigate(ui+"destinations"), chromedp.WaitVisible(chromedp.CSS("h1")))
		if h := text(t, "h1"); h != "Destinos" {
			t.Fatalf("pt-BR not kept: %q", h)
		}
		// The breaker and a filtered event, in Portuguese too.
		do(t, "pt-BR breaker", chromedp.Click(chromedp.CSS(`tr[data-destination="app"] button.breaker-open`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="app"] .breaker`)))
		if b := text(t, `tr[data-destination="app"] .breaker`); b != "Disjuntor aberto" {
			t.Fatalf("pt-BR breaker badge %q", b)
		}
		if why := text(t, `tr[data-destination="app"] td:nth-child(2)`); !strings.Contains(why, "aberto por token:ops") {
			t.Fatalf("pt-BR breaker note %q: who opened it, in Portuguese", why)
		}
		shot(t, "dashboard-destinations-breaker-pt.png")
		do(t, "pt-BR breaker closed", chromedp.Click(chromedp.CSS(`tr[data-destination="app"] button.breaker-close`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="app"] button.breaker-open`)))
		post(t, gw.URL+"/in/billing", `{"id":"evt_charge_pt","type":"charge.refunded"}`)
		do(t, "pt-BR filtered event", chromedp.Navigate(ui+"events?source=billing&state=filtered"), chromedp.WaitVisible(chromedp.ID("events")),
			chromedp.Click(chromedp.CSS("#events a.event-link")), chromedp.WaitVisible(chromedp.ID("event-filtered")))
		if f := text(t, "#event-filtered"); !strings.Contains(f, "Não encaminhado") {
			t.Fatalf("pt-BR filtered note %q", f)
		}
		shot(t, "dashboard-event-filtered-pt.png")
		do(t, "pt-BR search", chromedp.Navigate(ui+"events?source=stripe&where="+url.QueryEscape(`{"body":{"data":{"amount":{"$gte":1037}}}}`)),
			chromedp.WaitVisible(chromedp.ID("searched")))
		if got := text(t, "#searched"); !strings.Contains(got, "3 correspondem") {
			t.Fatalf("pt-BR search says %q", got)
		}
		if l := text(t, `label.wide`); !strings.Contains(l, "Buscar pelo conteúdo") {
			t.Fatalf("pt-BR search field %q", l)
		}
		shot(t, "dashboard-search-pt.png")
		do(t, "pt-BR deliver dry run", noFlash, chromedp.Click(chromedp.CSS("#deliver-all summary")),
			chromedp.SetValue(chromedp.CSS(`#deliver-all select[name="destination"]`), "ledger"),
			chromedp.Click(chromedp.CSS(`#deliver-all button[name="dry_run"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(t, ".flash"); !strings.Contains(f, "Simulação: 0 eventos ganhariam uma entrega a ledger. Deixados como estão: 3 já tinham uma lá") {
			t.Fatalf("pt-BR delivery's dry run says %q", f)
		}
		if s := text(t, "#deliver-all summary"); !strings.Contains(s, "Entregar todos os eventos deste filtro") {
			t.Fatalf("pt-BR deliver card %q", s)
		}
		shot(t, "dashboard-search-deliver-pt.png")
	})

	cancel()
	<-consoleDone
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("the browser reported errors (CSP violations among them): %q", problems)
	}
}

func post(t *testing.T, url, body string) {
	req := testenv.SignedRequest(t, url, "stripe", secret, []byte(body), "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("POST %s: %d", url, resp.StatusCode)
	}
}

// An entity held behind a fifo head that fails: its waiting event's page
// says so and offers to skip the head; skipping it from the page lets the
// entity's next event go.
func TestOrderedEventPageInABrowser(t *testing.T) {
	exe := chromium(t)
	var mu sync.Mutex
	var got []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"v":1`) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer app.Close()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens: [{name: ops, token: `+token+`}]
sources:
  - name: shop
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:order", version: "json:v", mode: fifo}
    destinations: [app]
destinations:
  - {name: app, url: `+app.URL+`, retry: {base_delay: 1m, max_delay: 1m}}
`)
	for v := 1; v <= 2; v++ {
		post(t, gw.URL+"/in/shop", fmt.Sprintf(`{"id":"o1-v%d","order":"o1","v":%d}`, v, v))
	}
	ctx, _ := newBrowser(t, exe)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ui := gw.APIURL + "/ui/"
	if err := chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`section[data-source="shop"]`))); err != nil {
		t.Fatal(err)
	}
	// Event 2 (v2) waits behind event 1 (v1, failing, retried in a minute).
	waiting := ""
	if !testenv.WaitFor(10*time.Second, func() bool {
		chromedp.Do(step, chromedp.Navigate(ui+"events/2"), chromedp.WaitVisible(chromedp.CSS(".delivery")))
		waiting, _ = chromedp.Run(step, chromedp.Text(chromedp.CSS(".delivery .order")))
		return strings.Contains(waiting, "waiting")
	}) {
		t.Fatalf("event 2's order line %q: want it waiting", waiting)
	}
	if !strings.Contains(waiting, "o1") || !strings.Contains(waiting, "fifo") {
		t.Fatalf("order line %q: want the entity and the mode", waiting)
	}
	shots := screenshotDir(t)
	saveShot(t, step, shots, "event-ordered-waiting.png")
	if n, _ := chromedp.Run(step, chromedp.Evaluate[int](`document.querySelectorAll("button.skip").length`)); n != 0 {
		t.Fatalf("a waiting event offers %d skip buttons: only its entity's head should", n)
	}
	// Skip the head from its page.
	if err := chromedp.Do(step, chromedp.Navigate(ui+"events/1"), chromedp.WaitVisible(chromedp.CSS("button.skip")),
		chromedp.Click(chromedp.CSS("button.skip")), chromedp.WaitVisible(chromedp.CSS(".delivery .state.dead"))); err != nil {
		t.Fatal(err)
	}
	line, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(".delivery .order")))
	if !strings.Contains(line, "released") || !strings.Contains(line, "skipped by an operator") {
		t.Fatalf("the skipped head's order line %q: want it to say the next was released", line)
	}
	saveShot(t, step, shots, "event-ordered-skipped.png")
	if !testenv.WaitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }) {
		t.Fatalf("after the skip the destination got %q, want v2", got)
	}
	// An event older than v2, which was delivered: held back as stale,
	// and the source's card counts it.
	post(t, gw.URL+"/in/shop", `{"id":"o1-v0","order":"o1","v":0}`)
	counts := ""
	if !testenv.WaitFor(10*time.Second, func() bool {
		chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.CSS(`section[data-source="shop"]`)))
		counts, _ = chromedp.Run(step, chromedp.Evaluate[string](`(document.querySelector("[data-test=order-counts]") || {}).textContent || ""`))
		return strings.Contains(counts, "1 stale")
	}) {
		t.Fatalf("the source's order counts %q: want 1 stale", counts)
	}
	if err := chromedp.Do(step, chromedp.Click(chromedp.CSS(`[data-test=order-counts] a`)), chromedp.WaitVisible(chromedp.ID("events"))); err != nil {
		t.Fatal(err)
	}
	if list, _ := chromedp.Run(step, chromedp.Text(chromedp.ID("events"))); !strings.Contains(list, "o1-v0") || strings.Contains(list, "o1-v2") {
		t.Fatalf("the stale events list %q: want o1-v0 only", list)
	}
	saveShot(t, step, shots, "events-stale.png")
	// The same in Portuguese: the skipped head and the stale event.
	if err := chromedp.Do(step, chromedp.Navigate(ui+"events/1?lang=pt-BR"), chromedp.WaitVisible(chromedp.CSS(".delivery .order"))); err != nil {
		t.Fatal(err)
	}
	if line, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(".delivery .order"))); !strings.Contains(line, "entidade") || !strings.Contains(line, "pulado por um operador") {
		t.Fatalf("pt-BR order line %q", line)
	}
	saveShot(t, step, shots, "event-ordered-skipped-pt.png")
	if err := chromedp.Do(step, chromedp.Navigate(ui+"events/3"), chromedp.WaitVisible(chromedp.CSS(".delivery .reason"))); err != nil {
		t.Fatal(err)
	}
	if why, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(".delivery .reason"))); !strings.Contains(why, "Não entregue") {
		t.Fatalf("pt-BR stale reason %q", why)
	}
	if state, _ := chromedp.Run(step, chromedp.Text(chromedp.ID("event-state"))); state != "obsoleto" {
		t.Fatalf("pt-BR stale state %q, want obsoleto (not the effects' word)", state)
	}
	saveShot(t, step, shots, "event-stale-pt.png")
	mu.Lock()
	if len(got) != 1 {
		t.Fatalf("the destination got %q: the stale event must not be delivered", got)
	}
	mu.Unlock()
	// The stale event's page resets the entity's version (as if v2 had been
	// a version far ahead): an event older than v2 then goes, and the
	// stale one stays stale.
	step, cancel = context.WithTimeout(ctx, 60*time.Second) // a step of its own: the page's checks above took their time
	defer cancel()
	if err := chromedp.Do(step, chromedp.Navigate(ui+"events/3?lang=en"), chromedp.WaitVisible(chromedp.CSS("button.order-reset")),
		chromedp.Click(chromedp.CSS("button.order-reset")), chromedp.WaitVisible(chromedp.CSS("p.flash"))); err != nil {
		saveShot(t, ctx, shots, "event-stale-order-reset-failed.png")
		t.Fatal(err)
	}
	saveShot(t, step, shots, "event-stale-order-reset.png")
	if state, _ := chromedp.Run(step, chromedp.Text(chromedp.ID("event-state"))); state != "stale" {
		t.Fatalf("after the reset the stale event reads %q: it stays stale until replayed", state)
	}
	post(t, gw.URL+"/in/shop", `{"id":"o1-vm1","order":"o1","v":-1}`)
	if !testenv.WaitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 }) {
		t.Fatalf("after the reset the destination got %q, want v-1 too", got)
	}
}

// saveShot writes the page as it is now to dir/name, a PNG.
func saveShot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), png, 0o644)
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
}

// A destination a reload removed while it had deliveries: its row says
// they are held and offers no pause or breaker (it has no config to hold
// by), in both languages. Rotating the token's value then ends the
// session made with the old one.
func TestRemovedDestinationInABrowser(t *testing.T) {
	exe := chromium(t)
	app := testenv.NewSink(t)
	audit := testenv.NewSink(t)
	audit.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusServiceUnavailable) }
	dir := t.TempDir()
	yaml := func(tok, routes, auditDest string) string {
		return `
store: sqlite://` + dir + `/oncehook.db
api:
  tokens: [{name: ops, token: ` + tok + `}]
sources:
  - {name: stripe, preset: stripe, secrets: [` + secret + `], window: 1h, body_retention: 1s, destinations: ` + routes + `}
destinations:
  - {name: app, url: ` + app.URL + `}` + auditDest + "\n"
	}
	withAudit := "\n  - {name: audit, url: " + audit.URL + ", retry: {base_delay: 1m, max_delay: 1m}, breaker: {off: true}}"
	gw := oncehooktest.StartWith(t, yaml(token, "[app, audit]", withAudit), oncehook.Options{SweepInterval: 100 * time.Millisecond})
	for i := range 3 {
		post(t, gw.URL+"/in/stripe", fmt.Sprintf(`{"id":"evt_removed_%d","object":"event"}`, i))
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(audit.ByKey()) == 3 }) {
		t.Fatalf("audit was tried for %d events, want 3", len(audit.ByKey()))
	}
	reload := func(text string) {
		t.Helper()
		cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
		if err == nil {
			_, err = gw.Reload(context.Background(), cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reload(yaml(token, "[app]", ""))

	ctx, _ := newBrowser(t, exe)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ui := gw.APIURL + "/ui/"
	row := `tr[data-destination="audit"]`
	if err := chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		// The overview's card, not an h1: the login page has one too, and
		// navigating away before the sign-in's answer aborts it.
		chromedp.WaitVisible(chromedp.CSS(`section[data-source="stripe"]`)),
		chromedp.Navigate(ui+"destinations"), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatal(err)
	}
	text, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(row)))
	if !strings.Contains(text, "Removed from the config") || !strings.Contains(text, "held") {
		t.Fatalf("the removed destination's row says %q: want it removed, its deliveries held", text)
	}
	if pending, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(row+" .pending"))); pending != "3" {
		t.Fatalf("the removed destination shows %q pending, want 3", pending)
	}
	if n, _ := chromedp.Run(step, chromedp.Evaluate[int](`document.querySelectorAll('`+row+` button').length`)); n != 0 {
		t.Fatalf("the removed destination's row offers %d buttons, want none", n)
	}
	shots := screenshotDir(t)
	saveShot(t, step, shots, "destinations-removed.png")
	if err := chromedp.Do(step, chromedp.Navigate(ui+"destinations?lang=pt-BR"), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatal(err)
	}
	if text, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS(row))); !strings.Contains(text, "Removido da configuração") || !strings.Contains(text, "retidas") {
		t.Fatalf("pt-BR row %q", text)
	}
	saveShot(t, step, shots, "destinations-removed-pt.png")

	// An event delivered after the reload loses its body a second later
	// (body_retention: 1s); its page says so, and shows no payload. The
	// held ones keep theirs.
	post(t, gw.URL+"/in/stripe", `{"id":"evt_after","object":"event"}`)
	if !testenv.WaitFor(10*time.Second, func() bool {
		chromedp.Do(step, chromedp.Navigate(ui+"events/4?lang=en"), chromedp.WaitVisible(chromedp.CSS("h1")))
		n, _ := chromedp.Run(step, chromedp.Evaluate[int](`document.querySelectorAll("#body-dropped").length`))
		return n == 1
	}) {
		t.Fatal("the delivered event's page never said its body was dropped")
	}
	if n, _ := chromedp.Run(step, chromedp.Evaluate[int](`document.querySelectorAll("pre.payload, #replay").length`)); n != 0 {
		t.Fatal("the page of an event without its body shows a payload or offers a replay")
	}
	saveShot(t, step, shots, "event-body-dropped.png")
	if err := chromedp.Do(step, chromedp.Navigate(ui+"events/1"), chromedp.WaitVisible(chromedp.CSS("pre.payload"))); err != nil {
		t.Fatalf("a held event's page shows no payload: %v", err)
	}

	// The token's value rotated: the session made with the old one ends.
	reload(yaml("ops-token-rotated-98765", "[app]", ""))
	if err := chromedp.Do(step, chromedp.Navigate(ui+"destinations"), chromedp.WaitVisible(chromedp.ID("token"))); err != nil {
		t.Fatalf("after the token's rotation the session still opens the dashboard: %v", err)
	}
}
