package main_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

const capiScript = `addHandler("transform", (request, context) => {
  const p = request.body;
  if (p.kind === "boom") throw new Error("no order in " + context.key);
  console.log("order", p.order);
  request.headers["x-event-id"] = context.key;
  request.body = { data: [{ event_name: "Purchase", event_id: p.order, event_time: Math.floor(Date.now() / 1000) }] };
  return request;
});
`

// oncehook transform test prints what a destination's transformation would
// send, for an event in a file or a stored one, with the time and memory
// the run took; a script's error exits non-zero naming its file and line.
func TestTransformTestPrintsWhatWouldBeSent(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "capi.js")
	if err := os.WriteFile(script, []byte(capiScript), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`store: sqlite://%s/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [%s], destinations: [capi]}
destinations:
  - name: capi
    url: "http://127.0.0.1:1/v19.0/1/events?access_token=secret-token-123"
    headers: {Authorization: "Bearer secret-token-456"}
    retry: {max_attempts: 1}
    transform: %s
`, dir, secret, script)
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	event := filepath.Join(dir, "event.json")
	if err := os.WriteFile(event, []byte(`{"order":"o_42","kind":"ok"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, ok := oncehook(t, dir, nil, "transform", "test", "--config", cfg, "--destination", "capi", "--event", event, "--key", "evt_file")
	for _, want := range []string{"destination capi, script " + script, "took ", "memory: ", "console: order o_42",
		"POST http://127.0.0.1:1/v19.0/1/events?access_token=", "X-Event-Id: evt_file", "Idempotency-Key: stripe:evt_file",
		`{"data":[{"event_name":"Purchase","event_id":"o_42","event_time":`, "sent digest sha256:"} {
		if !ok || !strings.Contains(out, want) {
			t.Errorf("transform test --event: ok=%v, output lacks %q:\n%s", ok, want, out)
		}
	}
	if strings.Contains(out, "secret-token") {
		t.Errorf("a credential was printed:\n%s", out)
	}

	// A stored event, by id.
	gw := oncehooktest.Start(t, yaml)
	req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(`{"id":"evt_stored","order":"o_7"}`), "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST: %v %v", resp, err)
	}
	resp.Body.Close()
	gw.Stop()
	out, ok = oncehook(t, dir, nil, "transform", "test", "--config", cfg, "--destination", "capi", "--id", "1")
	if !ok || !strings.Contains(out, `"event_id":"o_7"`) || !strings.Contains(out, "X-Event-Id: evt_stored") {
		t.Errorf("transform test --id 1: ok=%v\n%s", ok, out)
	}

	// The script's error: non-zero, with its file and line.
	if err := os.WriteFile(event, []byte(`{"order":"o_1","kind":"boom"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, ok = oncehook(t, dir, nil, "transform", "test", "--config", cfg, "--destination", "capi", "--event", event)
	if ok || !strings.Contains(out, script+":3:") || !strings.Contains(out, "Error: no order in test") {
		t.Errorf("a throwing script: ok=%v\n%s", ok, out)
	}
}

// A script that sets a header its destination's transport reserves (a
// NATS destination's Nats-Rollup) runs, and transform test shows what
// would be sent without it, says which header it dropped and why, and
// exits non-zero, so a check before deploying catches it.
func TestTransformTestSaysWhichHeadersItDropped(t *testing.T) {
	dir := t.TempDir()
	yaml := fmt.Sprintf(`store: sqlite://%s/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [%s], destinations: [bus]}
destinations:
  - name: bus
    publish: {nats: {url: "nats://127.0.0.1:4222", subject: "orders.{source}"}}
    transform:
      inline: 'addHandler("transform", (r) => { r.headers["nats-rollup"] = "sub"; r.headers["idempotency-key"] = "mine"; r.headers["x-tenant"] = "acme"; return r; })'
`, dir, secret)
	cfg := filepath.Join(dir, "oncehook.yaml")
	event := filepath.Join(dir, "event.json")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(event, []byte(`{"id":"evt_1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, ok := oncehook(t, dir, nil, "transform", "test", "--config", cfg, "--destination", "bus", "--event", event, "--key", "evt_1")
	for _, want := range []string{"X-Tenant: acme", "Idempotency-Key: stripe:evt_1",
		"dropped: Idempotency-Key (oncehook's: the key the destination dedupes on)",
		"dropped: Nats-Rollup (JetStream's: it reads Nats-* headers as controls of the publish",
		"the script sets Idempotency-Key, Nats-Rollup, not its to set"} {
		if ok || !strings.Contains(out, want) {
			t.Errorf("ok=%v, want it to fail with %q:\n%s", ok, want, out)
		}
	}
	if strings.Contains(out, "Nats-Rollup: sub") || strings.Contains(out, "Idempotency-Key: mine") {
		t.Errorf("a dropped header is shown as sent:\n%s", out)
	}
}

// Found from outside (#41, item 7): a Hookdeck-style script reading its
// secret from process.env passed validate and dead-lettered every
// delivery. A script reading a name its destination's transform.env does
// not set is refused by validate and by transform test, naming the name
// and the script's line; one whose env sets it (from the gateway's
// environment, with ${NAME}) runs, and transform test shows what it would
// send with the value masked.
func TestValidateAndTransformTestRefuseAScriptReadingAnUnsetEnvName(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "partner.js")
	if err := os.WriteFile(script, []byte("addHandler(\"transform\", (request) => {\n  request.headers[\"x-partner-key\"] = process.env.API_KEY;\n  request.body = { signed_with: process.env.API_KEY };\n  return request;\n});\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	event := filepath.Join(dir, "event.json")
	if err := os.WriteFile(event, []byte(`{"id":"evt_1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(env string) string {
		cfg := filepath.Join(dir, "oncehook.yaml")
		yaml := fmt.Sprintf(`store: sqlite://%s/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [%s], destinations: [partner]}
destinations:
  - name: partner
    url: "http://127.0.0.1:1/orders"
    transform: {file: %s%s}
`, dir, secret, script, env)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const key = "pk_live_from_env_77"
	environ := []string{"PARTNER_KEY=" + key}
	for name, env := range map[string]string{"no env": "", "another name": ", env: {API_TOKEN: \"${PARTNER_KEY}\"}"} {
		cfg := write(env)
		out, ok := oncehook(t, dir, environ, "validate", "--config", cfg)
		if ok || !strings.Contains(out, "destinations[0].transform: "+script+":2:") || !strings.Contains(out, "process.env.API_KEY is read but not set") {
			t.Errorf("%s: validate: ok=%v\n%s", name, ok, out)
		}
		out, ok = oncehook(t, dir, environ, "transform", "test", "--config", cfg, "--destination", "partner", "--event", event)
		if ok || !strings.Contains(out, "process.env.API_KEY is read but not set") {
			t.Errorf("%s: transform test: ok=%v\n%s", name, ok, out)
		}
		if strings.Contains(out, key) {
			t.Errorf("%s: the value is shown:\n%s", name, out)
		}
	}
	cfg := write(", env: {API_KEY: \"${PARTNER_KEY}\"}")
	if out, ok := oncehook(t, dir, environ, "validate", "--config", cfg); !ok {
		t.Fatalf("validate: %s", out)
	}
	for _, args := range [][]string{nil, {"--json"}} {
		out, ok := oncehook(t, dir, environ, append([]string{"transform", "test", "--config", cfg, "--destination", "partner", "--event", event}, args...)...)
		if !ok || !strings.Contains(out, "xxxxx") || strings.Contains(out, key) || !strings.Contains(out, "signed_with") {
			t.Errorf("transform test %v: ok=%v, want it to run with the value masked:\n%s", args, ok, out)
		}
	}
}
