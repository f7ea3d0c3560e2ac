package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
)

// Found from outside (#41, item 13): a destination whose answer quotes the
// URL it was called at (an API that says which request it refused) had
// its API key shown in the event's attempts, in the API, the CLI and the
// dashboard, though the URL itself is shown masked. The answer and the
// error are kept without what the URL and the credential headers carry,
// in any form the answer quotes them, so no place that shows them can.
func TestAnAnswerThatQuotesTheDestinationsSecretsShowsNone(t *testing.T) {
	const key, token = "S3CRET-api-key/42", "tok-0123456789"
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		status := http.StatusInternalServerError
		if n > 1 {
			status = http.StatusUnauthorized
		}
		w.WriteHeader(status)
		// The raw query, the key as JSON writes it, and the header.
		fmt.Fprintf(w, `{"error":"refused %s","args":{"api_key":%q},"auth":%q}`, r.URL.RequestURI(), r.URL.Query().Get("api_key"), r.Header.Get("Authorization"))
	}
	gw := startGateway(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [%q], destinations: [crm]}
destinations:
  - name: crm
    url: "%s/hook?api_key=%s&team=7"
    headers: {Authorization: "Bearer %s"}
    retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}
`, stripeSecret, sink.URL, url.QueryEscape(key), token))
	if a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent("evt_echo"), "")); a.Status != 200 {
		t.Fatalf("%d %+v", a.Status, a.Error)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return stats(t, gw).Dead == 1 }) {
		t.Fatalf("the delivery did not go dead: %+v", stats(t, gw))
	}
	if d := sink.Deliveries(); len(d) != 2 || !strings.Contains(d[0].Header.Get("Authorization"), token) {
		t.Fatalf("the destination got %d requests", len(d))
	}
	page, err := gw.Admin().Events(context.Background(), admin.EventFilter{Source: "stripe"})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("events: %+v %v", page, err)
	}
	id := page.Events[0].ID
	detail, err := gw.Admin().Event(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{
		"the event (API)":        apiGet(t, gw, fmt.Sprintf("/v1/events/%d", id)),
		"the dead letters (API)": apiGet(t, gw, "/v1/dead-letters"),
		"the event (service)":    fmt.Sprintf("%+v", detail),
		"the event's page":       dashboardGet(t, gw, fmt.Sprintf("/ui/events/%d", id)),
		"the dead letters' page": dashboardGet(t, gw, "/ui/dead-letters"),
	}
	escaped := url.QueryEscape(key)
	for where, text := range shown {
		for _, secret := range []string{key, escaped, "S3CRET", token} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows the destination's secret %q:\n%s", where, secret, text)
			}
		}
	}
	// What is not secret stays, so the answer still says what went wrong.
	if s := shown["the event (API)"]; !strings.Contains(s, `refused /hook?api_key=xxxxx\u0026team=xxxxx`) && !strings.Contains(s, "refused /hook?api_key=xxxxx&team=xxxxx") {
		t.Errorf("the attempts' answers: %s", s)
	}
}

// dashboardGet signs in to gw's dashboard with its API token
// (dashboardSession) and returns the page at path.
func dashboardGet(t *testing.T, gw *gateway, path string) string {
	t.Helper()
	b, status := getWith(t, dashboardSession(t, gw.APIURL, gw.APIToken), gw.APIURL+path)
	if status != 200 || !strings.Contains(b, "<html") {
		t.Fatalf("GET %s: %d %.300s", path, status, b)
	}
	return b
}
