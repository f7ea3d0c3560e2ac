package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// The Alerts page in a browser: a destination failing opens an issue,
// shown with its timeline; Acknowledge marks it acknowledged (audited),
// and Resolve, in pt-BR, moves it to the recently resolved with who
// resolved it.
func TestAlertIssuesInABrowser(t *testing.T) {
	exe := chromium(t)
	app := testenv.NewSink(t)
	app.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusBadGateway) }
	gw := oncehooktest.Start(t, `
store: sqlite://`+t.TempDir()+`/oncehook.db
api:
  tokens: [{name: ops, token: `+token+`}]
alerts: {interval: 100ms, oldest_pending: 300ms}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - {name: app, url: `+app.URL+`, retry: {max_attempts: 1000, base_delay: 100ms, max_delay: 200ms}, breaker: {off: true}}
`)
	post(t, gw.URL+"/in/stripe", `{"id":"evt_alerting","object":"event"}`)
	opened := func() bool {
		req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/v1/alerts/issues?state=open", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var page struct{ Issues []struct{ ID int64 } }
		return json.NewDecoder(resp.Body).Decode(&page) == nil && len(page.Issues) > 0
	}
	if !testenv.WaitFor(10*time.Second, opened) {
		t.Fatal("no issue opened for the failing destination")
	}

	ctx, _ := newBrowser(t, exe)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ui := gw.APIURL + "/ui/"
	if err := chromedp.Do(step, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`section[data-source="stripe"]`)),
		chromedp.Navigate(ui+"alerts?lang=en"), chromedp.WaitVisible(chromedp.CSS("section.issue"))); err != nil {
		t.Fatal(err)
	}
	text, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS("section.issue")))
	if !strings.Contains(text, "Open") || !strings.Contains(text, "Oldest pending") || !strings.Contains(text, "Destination app") || !strings.Contains(text, "opened") {
		t.Fatalf("the open issue reads %q", text)
	}
	shots := screenshotDir(t)
	saveShot(t, step, shots, "alerts-open.png")

	if err := chromedp.Do(step, chromedp.Click(chromedp.CSS("section.issue button.acknowledge")),
		chromedp.WaitVisible(chromedp.CSS(".flash"))); err != nil {
		t.Fatal(err)
	}
	text, _ = chromedp.Run(step, chromedp.Text(chromedp.CSS("main")))
	if !strings.Contains(text, "Acknowledged: its channels are told nothing more") || !strings.Contains(text, "acknowledged by") {
		t.Fatalf("after Acknowledge the page reads %q", text)
	}
	if n, _ := chromedp.Run(step, chromedp.Evaluate[int](`document.querySelectorAll('section.issue button.acknowledge').length`)); n != 0 {
		t.Fatalf("an acknowledged issue still offers Acknowledge (%d buttons)", n)
	}
	saveShot(t, step, shots, "alerts-acknowledged.png")

	if err := chromedp.Do(step, chromedp.Navigate(ui+"alerts?lang=pt-BR"), chromedp.WaitVisible(chromedp.CSS("section.issue")),
		chromedp.Click(chromedp.CSS("section.issue button.resolve")), chromedp.WaitVisible(chromedp.ID("resolved"))); err != nil {
		t.Fatal(err)
	}
	text, _ = chromedp.Run(step, chromedp.Text(chromedp.CSS("main")))
	if !strings.Contains(text, "Resolvido: os canais foram avisados") || !strings.Contains(text, "Resolvidos recentemente") {
		t.Fatalf("after Resolver the page reads %q", text)
	}
	if row, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS("#resolved tbody tr"))); !strings.Contains(row, "ops") || !strings.Contains(row, "Pendente mais antiga") {
		t.Fatalf("the resolved issue's row reads %q: want who resolved it", row)
	}
	saveShot(t, step, shots, "alerts-resolved-pt.png")
}
