package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/setup"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// A source created with the dashboard's form in a browser, in English
// and then in Portuguese (after a refused name, shown beside its input):
// each create lands on the intake URL and the provider's steps in the
// page's language, the created source takes a signed webhook, and no page
// breaks its Content-Security-Policy.
func TestSourceFormInABrowser(t *testing.T) {
	exe := chromium(t)
	app := testenv.NewSink(t)
	gw := oncehooktest.StartWith(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens: [{name: ops, token: `+token+`}]
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - {name: app, url: `+app.URL+`}
`, oncehook.Options{Getenv: func(name string) string {
		if name == "ONCEHOOK_SECRET_KEYS" {
			return formsKey
		}
		return ""
	}})
	ctx, _ := newBrowser(t, exe)
	var mu sync.Mutex
	var problems []string
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			// The refused form's page is a 400, as the API's answer: the
			// browser logs it as a resource that failed to load.
			if (m.Type == chromedp.ConsoleError || m.IsException()) && !strings.Contains(m.String(), "status of 400") {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	step, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	shots := screenshotDir(t)
	ui := gw.APIURL + "/ui/"
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(step, actions...); err != nil {
			body, _ := chromedp.Run(step, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("%s: %v: %.500s", what, err, body)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(step, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}

	do("sign in", chromedp.Navigate(ui+"?lang=en"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`section[data-source="stripe"]`)))
	if got := text(`section[data-source="stripe"] [data-test="managed-by-file"]`); got != "managed by the config file" {
		t.Fatalf("the file's source says %q", got)
	}

	// English: New source, filled, created, and its setup page.
	do("new source", chromedp.Click(chromedp.ID("new-source")), chromedp.WaitVisible(chromedp.ID("object-form")),
		chromedp.SendKeys(chromedp.ID("f-name"), "shop-hotmart"), chromedp.SetValue(chromedp.ID("f-preset"), "hotmart"),
		chromedp.SendKeys(chromedp.ID("f-secret"), acmeHottok), chromedp.Click(chromedp.CSS(`input[name="destination"][value="app"]`)))
	saveShot(t, step, shots, "source-form-en.png")
	do("create", chromedp.Click(chromedp.ID("f-submit")), chromedp.WaitVisible(chromedp.ID("setup-steps")))
	saveShot(t, step, shots, "source-setup-en.png")
	if v, _ := chromedp.Run(step, chromedp.Value(chromedp.ID("intake-url"))); v != gw.URL+"/in/shop-hotmart" {
		t.Fatalf("the intake URL reads %q", v)
	}
	if got := text("#setup-steps"); !strings.Contains(got, setup.Steps("hotmart", setup.EN)[0]) || !strings.Contains(text("#created"), "Source shop-hotmart created.") {
		t.Fatalf("the setup steps read %q", got)
	}
	req := testenv.SignedRequest(t, gw.URL+"/in/shop-hotmart", "hotmart", acmeHottok,
		[]byte(`{"id":"9d2-approved","event":"PURCHASE_APPROVED","version":"2.0.0","data":{}}`), "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !testenv.WaitFor(10*time.Second, func() bool { return len(app.Deliveries()) == 1 }) {
		t.Fatalf("a signed webhook to the new source: %d, %d delivered", resp.StatusCode, len(app.Deliveries()))
	}

	// Portuguese: a name the API refuses, beside its input; then mended.
	do("nova origem", chromedp.Navigate(ui+"sources/new?lang=pt-BR"), chromedp.WaitVisible(chromedp.ID("object-form")),
		chromedp.SendKeys(chromedp.ID("f-name"), "loja stripe"), chromedp.SetValue(chromedp.ID("f-preset"), "stripe"),
		chromedp.SendKeys(chromedp.ID("f-secret"), "whsec_loja"), chromedp.Click(chromedp.ID("f-submit")),
		chromedp.WaitVisible(chromedp.ID("refused")))
	if got := text("#refused h2"); got != "Não salvo" {
		t.Fatalf("the refusal's heading reads %q", got)
	}
	if got := text(`.field-error[data-field="name"]`); !strings.Contains(got, "loja stripe") {
		t.Fatalf("the name's error reads %q", got)
	}
	saveShot(t, step, shots, "source-form-refused-pt.png")
	do("criar", chromedp.SetValue(chromedp.ID("f-name"), "loja-stripe"), chromedp.SendKeys(chromedp.ID("f-secret"), "whsec_loja"),
		chromedp.Click(chromedp.ID("f-submit")), chromedp.WaitVisible(chromedp.ID("setup-steps")))
	saveShot(t, step, shots, "source-setup-pt.png")
	if got := text("#setup-steps"); !strings.Contains(got, setup.Steps("stripe", setup.PTBR)[0]) || !strings.Contains(text("#created"), "Origem loja-stripe criada.") {
		t.Fatalf("os passos dizem %q", got)
	}

	// The overview: the API's sources offer their forms, the file's says
	// whose it is.
	do("overview", chromedp.Navigate(ui+"?lang=en"), chromedp.WaitVisible(chromedp.CSS(`section[data-source="loja-stripe"] [data-test="object-actions"]`)))
	saveShot(t, step, shots, "overview-forms-en.png")
	time.Sleep(200 * time.Millisecond) // the console's last messages
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("the browser reported errors (CSP violations among them): %q", problems)
	}
}
