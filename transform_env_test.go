package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
)

// partnerScript is a Hookdeck-style script that signs its requests with a secret from process.env: the
// API key in Authorization and, where no credential header's name would tell it is one, in X-Partner-Key
// and the body. An event that asks throws with the key in its message.
const partnerScript = `addHandler("transform", (request, context) => {
  if (request.body.id === "evt_throw") throw new Error("partner refused key " + process.env.API_KEY);
  request.headers["authorization"] = "Bearer " + process.env.API_KEY;
  request.headers["x-partner-key"] = process.env.API_KEY;
  request.headers["x-region"] = process.env.REGION;
  request.body = { order: request.body.id, signed_with: process.env.API_KEY };
  return request;
});
`

// Found from outside (#41, item 7): a Hookdeck-style script that reads its secret from process.env passed
// validate and dead-lettered every delivery. Through a real gateway and a real HTTP destination, the
// script reads the values its destination's transform.env names and delivers them; and the secret is
// shown nowhere oncehook shows a delivery: not in the dead letter of a script that throws with it, nor in
// a destination's answer that quotes it, nor in the dashboard's preview of what the script sends, in the
// API or on its pages.
func TestAScriptReadsItsSecretFromProcessEnvAndShowsItNowhere(t *testing.T) {
	const key = "pk_live_7Hq2Zt9wXe"
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get("Idempotency-Key") == "stripe:evt_echo" {
			// An API that quotes what it refused, the key among it.
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"key %s is not allowed for region %s"}`, r.Header.Get("X-Partner-Key"), r.Header.Get("X-Region"))
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	gw := startGateway(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [%q], destinations: [partner]}
destinations:
  - name: partner
    url: %s/orders
    retry: {max_attempts: 1}
    transform:
      inline: %q
      env:
        API_KEY: %s
        REGION: eu
`, stripeSecret, sink.URL, partnerScript, key))
	for _, id := range []string{"evt_ok", "evt_echo", "evt_throw"} {
		if a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent(id), "")); a.Status != 200 {
			t.Fatalf("%s: %d %+v", id, a.Status, a.Error)
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool { st := stats(t, gw); return st.Delivered == 1 && st.Dead == 2 }) {
		t.Fatalf("stats %+v, want one delivered and two dead", stats(t, gw))
	}
	var ok testenv.Delivery
	for _, d := range sink.Deliveries() {
		if d.Key == "stripe:evt_ok" {
			ok = d
		}
	}
	if ok.Header.Get("Authorization") != "Bearer "+key || ok.Header.Get("X-Partner-Key") != key || ok.Header.Get("X-Region") != "eu" ||
		string(ok.Body) != `{"order":"evt_ok","signed_with":"`+key+`"}` {
		t.Fatalf("the destination got %v %s, want the key from process.env", ok.Header, ok.Body)
	}

	page, err := gw.Admin().Events(context.Background(), admin.EventFilter{Source: "stripe"})
	if err != nil || len(page.Events) != 3 {
		t.Fatalf("events: %+v %v", page, err)
	}
	shown := map[string]string{"the dead letters (API)": apiGet(t, gw, "/v1/dead-letters"),
		"the dead letters' page": dashboardGet(t, gw, "/ui/dead-letters")}
	for _, e := range page.Events {
		shown[e.Key+" (API)"] = apiGet(t, gw, fmt.Sprintf("/v1/events/%d", e.ID))
		shown[e.Key+"'s page"] = dashboardGet(t, gw, fmt.Sprintf("/ui/events/%d", e.ID))
	}
	for where, text := range shown {
		if strings.Contains(text, key) || strings.Contains(text, "pk_live") {
			t.Errorf("%s shows the env's secret:\n%s", where, text)
		}
	}
	// What is not secret stays: the script's error and line, and the answer's words.
	for where, want := range map[string]string{
		"evt_throw (API)": "partner refused key xxxxx", "evt_echo (API)": "is not allowed for region eu",
		"evt_ok's page": "signed_with", "the dead letters (API)": "destinations.partner.transform.inline:2:",
	} {
		if !strings.Contains(shown[where], want) {
			t.Errorf("%s lacks %q:\n%s", where, want, shown[where])
		}
	}
}

// A destination's env takes its values from the gateway's environment with ${NAME}, as every value of
// the config; a script that reads a name its env does not set is the config's error, naming the field, the
// script's line and the name, and so is refused by validate (LoadConfig), at start and by a reload.
func TestTransformEnvComesFromTheEnvironmentAndAnUnsetNameIsRefused(t *testing.T) {
	const text = `
store: sqlite://./oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_x], destinations: [partner]}
destinations:
  - name: partner
    url: http://127.0.0.1:1/orders
    transform:
      inline: 'addHandler("transform", (r) => { r.headers["x-key"] = process.env.API_KEY; return r; })'
      env: {API_KEY: "${PARTNER_KEY}"}
`
	env := map[string]string{"PARTNER_KEY": "pk_from_the_environment"}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	cfg, err := oncehook.ParseConfig([]byte(text), lookup, kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := oncehook.Transformations(cfg, kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	defer scripts["partner"].Close()
	if got := cfg.Destinations[0].Transform.Env["API_KEY"]; got != "pk_from_the_environment" {
		t.Fatalf("env API_KEY = %q", got)
	}

	_, err = oncehook.ParseConfig([]byte(strings.Replace(text, "process.env.API_KEY", "process.env.PARTNER_TOKEN", 1)), lookup, kinds.All())
	if err == nil || !strings.Contains(err.Error(), "destinations[0].transform: destinations.partner.transform.inline:1:") ||
		!strings.Contains(err.Error(), "process.env.PARTNER_TOKEN is read but not set: the destination's transform.env sets only API_KEY") {
		t.Fatalf("a script reading an unset name: %v", err)
	}
	if strings.Contains(fmt.Sprint(err), "pk_from") {
		t.Errorf("the error shows a value: %v", err)
	}
	delete(env, "PARTNER_KEY")
	if _, err := oncehook.ParseConfig([]byte(text), lookup, kinds.All()); err == nil || !strings.Contains(err.Error(), "environment variable PARTNER_KEY is not set") {
		t.Fatalf("an unset environment variable: %v", err)
	}
}
