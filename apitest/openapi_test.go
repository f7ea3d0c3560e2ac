// Package apitest holds docs/openapi.yaml to the running gateway: every
// route the API serves is in the spec and every operation in the spec is
// served, and real answers, errors included, validate against the spec's
// schemas. A module of its own, so that the validator's dependencies never
// become oncehook's.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

const token = "ops-token-0123456789"

// operations are the spec's "METHOD /path"s.
func operations(t *testing.T, spec []byte) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, ops := range doc.Paths {
		for method := range ops {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// api.Routes is admin's table of actions (admin.Actions): an action added
// to the table without its path in the spec fails here.
func TestSpecNamesEveryRouteAndNoOther(t *testing.T) {
	spec, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served := append(api.Routes(), effect.Routes()...)
	served = append(served, oncehook.PublishRoute, pull.PullRoute, pull.AckRoute)
	served = append(served, oncehook.SourceRoutes()...)
	served = append(served, oncehook.TokenRoutes()...)
	served = append(served, oncehook.HealthRoutes()...)
	sort.Strings(served)
	inSpec := operations(t, spec)
	for _, r := range served {
		if !slices.Contains(inSpec, r) {
			t.Errorf("the API serves %s, which docs/openapi.yaml does not describe", r)
		}
	}
	for _, op := range inSpec {
		if !slices.Contains(served, op) {
			t.Errorf("docs/openapi.yaml describes %s, which the API does not serve", op)
		}
	}
}

// Every operation, called on a gateway holding delivered, dead, ordered and
// filtered events and effects in each state: each answer (and request)
// validates against the spec.
func TestRealAnswersMatchTheSpec(t *testing.T) {
	spec, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("the spec: %v", errs)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		t.Fatalf("the spec is not valid OpenAPI: %v", errs)
	}

	app := testenv.NewSink(t)
	failing := testenv.NewSink(t)
	failing.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusGone) }
	dir := t.TempDir()
	cfgYAML := `
store: sqlite://` + dir + `/oncehook.db
api: {tokens: [{name: ops, token: ` + token + `}]}
sources:
  - {name: hooks, preset: generic, unsigned: true, key: ["json:id"], type: ["json:type"],
     destinations: [app, {name: gone, types: ["order.*"]}]}
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], order: {entity: "json:order", version: "json:v", mode: fifo}, destinations: [gone]}
  - {name: orders, outbox: true}
  - {name: dev, preset: generic, unsigned: true, key: ["json:id"], destinations: [laptop]}
destinations:
  - {name: laptop, pull: {}}
  - {name: app, url: ` + app.URL + `}
  - {name: gone, url: ` + failing.URL + `, retry: {max_attempts: 1}}
alerts: {interval: 100ms, dead_letters: 1}
`
	// The file is there for POST /v1/reload to read again.
	configFile := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(configFile, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := func(name string) string {
		if name == "ONCEHOOK_SECRET_KEYS" {
			return "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
		}
		return ""
	}
	gw := oncehooktest.StartWith(t, cfgYAML, oncehook.Options{ConfigFile: configFile, Getenv: keys})
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(gw.URL+path, "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	post("/in/hooks", `{"id":"e1","type":"order.paid"}`)
	post("/in/hooks", `{"id":"e2","type":"user.created"}`)
	post("/in/shop", `{"id":"s1","order":"o1","v":1}`)
	post("/in/shop", `{"id":"s2","order":"o1","v":2}`)
	if !testenv.WaitFor(10*time.Second, func() bool { return len(app.ByKey()) == 2 && len(failing.ByKey()) >= 2 }) {
		t.Fatalf("delivered %v and %v", app.ByKey(), failing.ByKey())
	}

	called := map[string]bool{}
	call := func(op, path, body string, want int) []byte {
		t.Helper()
		method, pattern, _ := strings.Cut(op, " ")
		called[op] = true
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(context.Background(), method, gw.APIURL+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		// The validator reads both bodies again.
		vreq, _ := http.NewRequest(method, "http://127.0.0.1:8081"+path, strings.NewReader(body))
		vreq.Header = req.Header.Clone()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if ok, errs := v.ValidateHttpRequestResponse(vreq, resp); !ok {
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Message+": "+e.Reason)
			}
			t.Errorf("%s (%s) answered %d %s:\n  %s", op, pattern, resp.StatusCode, b, strings.Join(msgs, "\n  "))
		}
		return b
	}
	call("GET /livez", "/livez", "", 200)
	call("GET /healthz", "/healthz", "", 200)
	call("GET /readyz", "/readyz", "", 200)
	call("GET /v1/sources", "/v1/sources", "", 200)
	call("GET /v1/stats", "/v1/stats?granularity=1h", "", 200)
	call("GET /v1/events", "/v1/events?source=hooks", "", 200)
	call("GET /v1/events", "/v1/events?source=nope", "", 404) // neither configured nor stored
	call("GET /v1/stats", "/v1/stats?source=nope", "", 404)
	call("GET /v1/dead-letters", "/v1/dead-letters?source=nope", "", 404)
	call("GET /v1/events/{id}", "/v1/events/1", "", 200)
	call("GET /v1/events/{id}", "/v1/events/3", "", 200) // ordered, dead: order in the answer
	call("GET /v1/events/{id}", "/v1/events/999999", "", 404)
	call("POST /v1/events/{id}/replay", "/v1/events/2/replay", "", 200)
	call("POST /v1/events/{id}/deliver", "/v1/events/2/deliver", `{"destination":"gone"}`, 200)
	call("POST /v1/events/{id}/skip", "/v1/events/4/skip", `{"destination":"gone"}`, 200)
	call("POST /v1/sources/{name}/order/reset", "/v1/sources/shop/order/reset", `{"entity":"o1","destination":"gone"}`, 200)
	call("POST /v1/events/replay", "/v1/events/replay", `{"source":"hooks","dry_run":true}`, 200)
	call("POST /v1/events/deliver", "/v1/events/deliver", `{"source":"hooks","destination":"gone","dry_run":true}`, 200)
	call("POST /v1/events/deliver", "/v1/events/deliver", `{"source":"hooks","where":"{\"body\":{\"id\":1}}","destination":"gone"}`, 200)
	call("POST /v1/events/deliver", "/v1/events/deliver", `{"source":"hooks","destination":"nope"}`, 404)
	call("POST /v1/events/deliver", "/v1/events/deliver", `{"source":"hooks"}`, 400)
	call("GET /v1/dead-letters", "/v1/dead-letters", "", 200)
	call("POST /v1/dead-letters/retry", "/v1/dead-letters/retry", `{"destination":"gone","dry_run":true}`, 200)
	call("DELETE /v1/dead-letters", "/v1/dead-letters?destination=gone&dry_run=true", "", 200)
	call("GET /v1/destinations", "/v1/destinations", "", 200)
	call("POST /v1/destinations/{name}/pause", "/v1/destinations/app/pause", "", 200)
	call("POST /v1/destinations/{name}/resume", "/v1/destinations/app/resume", "", 200)
	call("POST /v1/destinations/{name}/breaker/open", "/v1/destinations/app/breaker/open", "", 200)
	call("POST /v1/destinations/{name}/breaker/close", "/v1/destinations/app/breaker/close", "", 200)
	post("/in/dev", `{"id":"d1","type":"x"}`)
	pulled := call("POST /v1/destinations/{name}/pull", "/v1/destinations/laptop/pull", `{"max":10,"lease":"30s","wait":"10s"}`, 200)
	var got struct {
		Deliveries []struct{ ID, Token string }
	}
	if err := json.Unmarshal(pulled, &got); err != nil || len(got.Deliveries) != 1 {
		t.Fatalf("pulled %s: %v", pulled, err)
	}
	d := got.Deliveries[0]
	call("POST /v1/deliveries/{id}/ack", "/v1/deliveries/"+d.ID+"/ack", `{"token":"wrong","status":200}`, 409)
	call("POST /v1/deliveries/{id}/ack", "/v1/deliveries/"+d.ID+"/ack", `{"token":"`+d.Token+`","status":200,"latency":"3ms"}`, 200)
	call("POST /v1/deliveries/{id}/ack", "/v1/deliveries/"+d.ID+"/ack", `{"token":"`+d.Token+`","status":200}`, 409)
	call("POST /v1/destinations/{name}/pull", "/v1/destinations/nope/pull", `{}`, 404)
	call("POST /v1/destinations/{name}/pull", "/v1/destinations/laptop/pull", `{"lease":"soon"}`, 400)
	// gone's dead letters open an issue at the alerts' next check.
	var issues struct{ Issues []struct{ ID int64 } }
	if !testenv.WaitFor(10*time.Second, func() bool {
		b := call("GET /v1/alerts/issues", "/v1/alerts/issues?state=open", "", 200)
		return json.Unmarshal(b, &issues) == nil && len(issues.Issues) > 0
	}) {
		t.Fatal("no alert issue opened for gone's dead letters")
	}
	issue := fmt.Sprint(issues.Issues[0].ID)
	call("GET /v1/alerts/issues", "/v1/alerts/issues?limit=1", "", 200)
	call("GET /v1/alerts/issues", "/v1/alerts/issues?state=closed", "", 400)
	call("GET /v1/alerts/issues/{id}", "/v1/alerts/issues/"+issue, "", 200)
	call("GET /v1/alerts/issues/{id}", "/v1/alerts/issues/999999", "", 404)
	call("POST /v1/alerts/issues/{id}/acknowledge", "/v1/alerts/issues/"+issue+"/acknowledge", "", 200)
	call("POST /v1/alerts/issues/{id}/resolve", "/v1/alerts/issues/"+issue+"/resolve", "", 200)
	call("POST /v1/alerts/issues/{id}/acknowledge", "/v1/alerts/issues/"+issue+"/acknowledge", "", 409)
	call("POST /v1/alerts/issues/{id}/resolve", "/v1/alerts/issues/999999/resolve", "", 404)
	// Sources through the API: created (with a secret, the gateway has a
	// key), read, refused, changed, the file's refused, deleted.
	created := call("POST /v1/sources", "/v1/sources", `{"name":"acme","preset":"stripe","secrets":["whsec_acme"],"destinations":["app"]}`, 201)
	if strings.Contains(string(created), "whsec_acme") {
		t.Fatalf("the answer shows the secret: %s", created)
	}
	call("POST /v1/sources", "/v1/sources", `{"name":"acme2","preset":"strpe"}`, 400)
	call("POST /v1/sources", "/v1/sources", `{"name":"hooks","preset":"stripe"}`, 409)
	call("GET /v1/sources/{name}", "/v1/sources/acme", "", 200)
	call("GET /v1/sources/{name}", "/v1/sources/hooks", "", 200)
	call("GET /v1/sources/{name}", "/v1/sources/nope", "", 404)
	call("PATCH /v1/sources/{name}", "/v1/sources/acme", `{"window":"2h"}`, 200)
	call("PATCH /v1/sources/{name}", "/v1/sources/acme", `{"destinations":["nope"]}`, 400)
	call("PATCH /v1/sources/{name}", "/v1/sources/hooks", `{"window":"2h"}`, 409)
	call("DELETE /v1/sources/{name}", "/v1/sources/hooks", "", 409)
	call("DELETE /v1/sources/{name}", "/v1/sources/acme", "", 204)
	call("DELETE /v1/sources/{name}", "/v1/sources/acme", "", 404)
	call("POST /v1/destinations", "/v1/destinations", `{"name":"crm","url":"https://crm.example.com/hooks","headers":{"Authorization":"Bearer crm-secret"}}`, 201)
	call("POST /v1/destinations", "/v1/destinations", `{"name":"crm2","url":"ftp://x"}`, 400)
	call("POST /v1/destinations", "/v1/destinations", `{"name":"app","url":"https://x.example.com"}`, 409)
	call("GET /v1/destinations/{name}", "/v1/destinations/crm", "", 200)
	call("GET /v1/destinations/{name}", "/v1/destinations/nope", "", 404)
	call("POST /v1/sources", "/v1/sources", `{"name":"crm-feed","preset":"generic","unsigned":true,"key":"json:id","destinations":["crm"]}`, 201)
	call("PATCH /v1/destinations/{name}", "/v1/destinations/crm", `{"timeout":"5s"}`, 200)
	call("PATCH /v1/destinations/{name}", "/v1/destinations/crm", `{"timeout":"5s"}`, 200)
	call("DELETE /v1/destinations/{name}", "/v1/destinations/crm", "", 409) // crm-feed routes to it
	call("DELETE /v1/sources/{name}", "/v1/sources/crm-feed", "", 204)
	call("DELETE /v1/destinations/{name}", "/v1/destinations/crm", "", 204)
	call("POST /v1/tokens", "/v1/tokens", `{"name":"ci","read_only":true}`, 201)
	call("POST /v1/tokens", "/v1/tokens", `{"name":"ci"}`, 409)
	call("POST /v1/tokens", "/v1/tokens", `{"name":"bad name"}`, 400)
	call("GET /v1/tokens", "/v1/tokens", "", 200)
	call("GET /v1/tokens/{name}", "/v1/tokens/ci", "", 200)
	call("GET /v1/tokens/{name}", "/v1/tokens/nope", "", 404)
	call("DELETE /v1/tokens/{name}", "/v1/tokens/ops", "", 409)
	call("DELETE /v1/tokens/{name}", "/v1/tokens/ci", "", 204)
	call("DELETE /v1/tokens/{name}", "/v1/tokens/ci", "", 404)
	call("GET /v1/audit", "/v1/audit?limit=5", "", 200)
	call("GET /v1/doctor", "/v1/doctor", "", 200)
	call("POST /v1/reload", "/v1/reload", "", 200)
	os.WriteFile(configFile, []byte("sources: [{name: x}]\n"), 0o600)
	call("POST /v1/reload", "/v1/reload", "", 400) // refused: no preset

	claim := func(key string) string {
		b := call("POST /v1/effects/{key}/claim", "/v1/effects/"+key+"/claim", `{"lease":"30s"}`, 201)
		i := bytes.Index(b, []byte(`"token":"`))
		if i < 0 {
			t.Fatalf("claim answer %s", b)
		}
		tok, _, _ := strings.Cut(string(b[i+len(`"token":"`):]), `"`)
		return tok
	}
	tok := claim("invoice:1")
	call("POST /v1/effects/{key}/claim", "/v1/effects/invoice:1/claim", `{}`, 409) // busy
	call("POST /v1/effects/{key}/renew", "/v1/effects/invoice:1/renew", fmt.Sprintf(`{"token":%q,"lease":"1m"}`, tok), 200)
	call("POST /v1/effects/{key}/complete", "/v1/effects/invoice:1/complete", fmt.Sprintf(`{"token":%q,"result":{"id":"in_1"}}`, tok), 200)
	call("POST /v1/effects/{key}/claim", "/v1/effects/invoice:1/claim", `{}`, 200) // already done
	call("POST /v1/effects/{key}/release", "/v1/effects/invoice:2/release", fmt.Sprintf(`{"token":%q}`, claim("invoice:2")), 200)
	call("POST /v1/effects/{key}/fail", "/v1/effects/invoice:3/fail", fmt.Sprintf(`{"token":%q,"error":"card declined"}`, claim("invoice:3")), 200)
	call("POST /v1/effects/{key}/claim", "/v1/effects/invoice:3/claim", `{}`, 409) // failed
	call("POST /v1/effects/{key}/reset", "/v1/effects/invoice:3/reset", "", 200)
	call("GET /v1/effects/{key}", "/v1/effects/invoice:1", "", 200)
	call("GET /v1/effects", "/v1/effects?limit=10", "", 200)
	call("GET /v1/effects", "/v1/effects?bogus=1", "", 400)

	// The outbox over HTTP (the operator's token may publish): new,
	// duplicate (spelt bare and quoted), a key the draft does not allow,
	// no key, a reconciliation pass (republished, and new), not an outbox
	// source.
	publish := func(path, key string, want int) {
		t.Helper()
		op := "POST /v1/publish/{source}"
		called[op] = true
		body := `{"event_name":"Purchase","event_id":"ord_1"}`
		req, _ := http.NewRequest(http.MethodPost, gw.APIURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
		vreq, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8081"+path, strings.NewReader(body))
		vreq.Header = req.Header.Clone()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if ok, errs := v.ValidateHttpRequestResponse(vreq, resp); !ok {
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Message+": "+e.Reason)
			}
			t.Errorf("%s answered %d %s:\n  %s", op, resp.StatusCode, b, strings.Join(msgs, "\n  "))
		}
	}
	publish("/v1/publish/orders", "ord_1", 202)
	publish("/v1/publish/orders", "ord_1", 200)
	publish("/v1/publish/orders", `"ord_1"`, 200)
	publish("/v1/publish/orders", `"ord_1`, 400)
	publish("/v1/publish/orders", "", 422)
	publish("/v1/publish/orders?reconcile=true", "ord_1", 200) // republished
	publish("/v1/publish/orders?reconcile=true", "ord_2", 202) // never published: stored
	publish("/v1/publish/hooks", "ord_1", 404)

	spec2 := operations(t, spec)
	for _, op := range spec2 {
		if !called[op] {
			t.Errorf("%s was not called: the test checks every operation's answer", op)
		}
	}
}
