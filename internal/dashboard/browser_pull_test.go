package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// Issue 44: a pull destination's row says what it is and where its
// consumers take its deliveries, and its attempts name the consumer that
// acked each (the token's name and what it said of itself), with its
// latency, in both languages. A consumer takes two events: acks one
// delivered, the other first as a failure (retried) and then delivered.
func TestPullDestinationInABrowser(t *testing.T) {
	exe := chromium(t)
	const devToken = "dev-pull-token-0123456789"
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: ops, token: `+token+`}
    - {name: dev, token: `+devToken+`, pull: [laptop]}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [laptop]}
destinations:
  - name: laptop
    pull: {}
    retry: {base_delay: 10ms, max_delay: 50ms}
`)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_pull_ok","object":"event","type":"invoice.paid"}`)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_pull_retry","object":"event","type":"invoice.paid"}`)
	ctx := context.Background()
	c := pull.NewClient(gw.APIURL, devToken, nil)
	acked := map[string][]string{} // key -> the outcomes acked
	deadline := time.Now().Add(30 * time.Second)
	for (len(acked["evt_pull_ok"]) < 1 || len(acked["evt_pull_retry"]) < 2) && time.Now().Before(deadline) {
		ds, err := c.Pull(ctx, "laptop", pull.PullBody{Max: 10, Lease: "30s", Wait: "2s", Consumer: "ci-7"})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			ack := pull.AckBody{Token: d.Token, Status: 200, Latency: "12ms", Response: "ok"}
			if d.Key == "evt_pull_retry" && d.Attempt == 1 {
				ack = pull.AckBody{Token: d.Token, Error: "dial tcp 127.0.0.1:3000: connection refused", Latency: "3ms"}
			}
			got, err := c.Ack(ctx, d.ID, ack)
			if err != nil {
				t.Fatal(err)
			}
			acked[d.Key] = append(acked[d.Key], got.Outcome)
		}
	}
	if fmt.Sprint(acked) != "map[evt_pull_ok:[delivered] evt_pull_retry:[retry delivered]]" {
		t.Fatalf("acked %v: want evt_pull_ok delivered, evt_pull_retry retried then delivered", acked)
	}
	page, err := gw.Admin().Events(ctx, admin.EventFilter{Source: "stripe", Key: "evt_pull_retry"})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("the retried event: %+v %v", page, err)
	}
	id := page.Events[0].ID
	// The worker records the second ack's outcome in its next commit.
	if !testenv.WaitFor(10*time.Second, func() bool { s, _ := gw.Store().Stats(ctx); return s.Delivered == 2 }) {
		s, _ := gw.Store().Stats(ctx)
		t.Fatalf("stats %+v: want both events delivered", s)
	}

	browser, _ := newBrowser(t, exe)
	step, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()
	ui := gw.APIURL + "/ui/"
	row := `tr[data-destination="laptop"]`
	if err := chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`section[data-source="stripe"]`))); err != nil {
		t.Fatal(err)
	}
	shots := screenshotDir(t)
	for _, lang := range []struct{ code, kind, retry, delivered string }{
		{"en", "Pull: its consumers take its deliveries", "retry", "delivered"},
		{"pt-BR", "Pull: seus consumidores retiram as entregas", "nova tentativa", "entregue"},
	} {
		// The day's counts ride the writer's commits about once a second.
		var text string
		if !testenv.WaitFor(10*time.Second, func() bool {
			chromedp.Do(step, chromedp.Navigate(ui+"destinations?lang="+lang.code), chromedp.WaitVisible(chromedp.CSS(row)))
			text, _ = chromedp.Run(step, chromedp.Text(chromedp.CSS(row)))
			return strings.Contains(text, "2 ✓ · 1 ↻ · 0 ✗")
		}) {
			t.Fatalf("%s: the pull destination's row says %q: want its day's 2 delivered and 1 retry", lang.code, text)
		}
		if !strings.Contains(text, lang.kind) || !strings.Contains(text, "POST /v1/destinations/laptop/pull") {
			t.Fatalf("%s: the pull destination's row says %q: want what it is and where it is pulled", lang.code, text)
		}
		saveShot(t, step, shots, "pull-destination-"+lang.code+".png")

		attempts := `.delivery[data-destination="laptop"] tr.attempt`
		if err := chromedp.Do(step, chromedp.Navigate(fmt.Sprintf("%sevents/%d?lang=%s", ui, id, lang.code)),
			chromedp.WaitVisible(chromedp.CSS(attempts))); err != nil {
			t.Fatalf("%s: the pull destination's attempts: %v", lang.code, err)
		}
		rows, _ := chromedp.Run(step, chromedp.Evaluate[[]string](`[...document.querySelectorAll('`+attempts+`')].map(r => r.innerText)`))
		if len(rows) != 2 {
			t.Fatalf("%s: %d attempts shown, want 2: %q", lang.code, len(rows), rows)
		}
		first, second := strings.ToLower(rows[0]), strings.ToLower(rows[1])
		if !strings.Contains(first, lang.retry) || !strings.Contains(first, "consumer dev/ci-7") || !strings.Contains(first, "connection refused") {
			t.Fatalf("%s: the first attempt reads %q: want a retry, the consumer's name and its error", lang.code, rows[0])
		}
		if !strings.Contains(second, lang.delivered) || !strings.Contains(second, "consumer dev/ci-7, 12ms") || !strings.Contains(second, "200") {
			t.Fatalf("%s: the second attempt reads %q: want delivered (200), the consumer's name and latency", lang.code, rows[1])
		}
		saveShot(t, step, shots, "pull-destination-attempts-"+lang.code+".png")
	}
}
