package oncehook_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
	"github.com/oncehook/oncehook/store"
)

// hogScript is the tester's (#45): it grows an array until something
// stops it.
const hogScript = `"addHandler(\"transform\", (request) => { const a = []; while (true) { a.push(\"x\".repeat(4096) + a.length) } })"`

func TestATenantsTokenMayNotRaiseTheGatewaysBoundsSQLite(t *testing.T) {
	testATenantsTokenMayNotRaiseTheGatewaysBounds(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestATenantsTokenMayNotRaiseTheGatewaysBoundsPostgres(t *testing.T) {
	testATenantsTokenMayNotRaiseTheGatewaysBounds(t, testenv.Postgres(t))
}

// A tenant's destination shares the worker's slots, its lease and the
// CPU and memory scripts run in with every other tenant's: a tenant's
// token may not set a destination's timeout, concurrency, retries or a
// transformation's bounds past the defaults, at create or PATCH (400
// naming the field, the bound and who may set more); nothing refused is
// stored. The operator's token may, for a tenant's destination too, and
// the tenant's later change that keeps what the operator set is taken.
func testATenantsTokenMayNotRaiseTheGatewaysBounds(t *testing.T, storeURL string) {
	gw, _, storedNames := tenantObjectsGateway(t, storeURL)
	const url = `"url": "https://acme.example/hook"`
	if a := call(t, "POST", gw.api+"/v1/destinations", acmeToken, `{"name": "acme-ok", `+url+`, "timeout": "10s", "retry": {"max_attempts": 12}, "transform": {"inline": `+hogScript+`, "timeout": "50ms", "max_memory": "64MiB", "max_output": "4MiB"}}`); a.status != 201 {
		t.Fatalf("acme's destination at the bounds: %d %s", a.status, a.body)
	}
	transform := func(field string) string {
		return `"transform": {"inline": ` + hogScript + `, ` + field + `}`
	}
	stored := []string{"acme-ok"}
	for i, c := range []struct {
		field, over, bound, reset string
	}{
		{"timeout", `"timeout": "30s"`, "10s", `{"timeout": null}`},
		{"concurrency", `"concurrency": 64`, "48", `{"concurrency": null}`},
		{"retry.max_attempts", `"retry": {"max_attempts": 1000}`, "12", `{"retry": null}`},
		{"transform.timeout", transform(`"timeout": "30s"`), "50ms", `{"transform": {"timeout": null}}`},
		{"transform.max_memory", transform(`"max_memory": "64GiB"`), "64MiB", `{"transform": {"max_memory": null}}`},
		{"transform.max_output", transform(`"max_output": "1GiB"`), "4MiB", `{"transform": {"max_output": null}}`},
	} {
		refused := func(what string, a apiAnswer) {
			t.Helper()
			if a.status != 400 || a.json["reason"] != "invalid" || a.json["field"] != c.field ||
				!strings.Contains(string(a.body), "above what a tenant's token may set, "+c.bound) ||
				!strings.Contains(string(a.body), "the operator may set more, in the config file or with a token of no tenant") {
				t.Errorf("%s %s: %d %s", what, c.over, a.status, a.body)
			}
		}
		refused("acme creates", call(t, "POST", gw.api+"/v1/destinations", acmeToken, `{"name": "acme-over", `+url+`, `+c.over+`}`))
		refused("acme changes", call(t, "PATCH", gw.api+"/v1/destinations/acme-ok", acmeToken, `{`+c.over+`}`))

		// The operator may, for acme too; acme's change of something
		// else keeps it.
		name := "ops-made-" + strconv.Itoa(i)
		if a := call(t, "POST", gw.api+"/v1/destinations", sourcesOps, `{"name": "`+name+`", "tenant": "acme", `+url+`, `+c.over+`}`); a.status != 201 {
			t.Errorf("the operator makes acme's destination with %s: %d %s", c.over, a.status, a.body)
		}
		stored = append(stored, name)
		if a := call(t, "PATCH", gw.api+"/v1/destinations/"+name, acmeToken, `{"url": "https://acme.example/other"}`); a.status != 200 {
			t.Errorf("acme changes the url of the operator's %s: %d %s", c.over, a.status, a.body)
		}
		if a := call(t, "PATCH", gw.api+"/v1/destinations/acme-ok", sourcesOps, `{`+c.over+`}`); a.status != 200 {
			t.Errorf("the operator changes acme's destination to %s: %d %s", c.over, a.status, a.body)
		}
		if a := call(t, "PATCH", gw.api+"/v1/destinations/acme-ok", sourcesOps, c.reset); a.status != 200 {
			t.Errorf("the operator resets %s: %d %s", c.reset, a.status, a.body)
		}
	}
	// The tester's body: each bound named.
	a := call(t, "POST", gw.api+"/v1/destinations", acmeToken, `{"name": "acme-over", `+url+`, "transform": {"inline": `+hogScript+`, "timeout": "30s", "max_memory": "64GiB", "max_output": "1GiB"}}`)
	var fields []string
	errs, _ := a.json["errors"].([]any)
	for _, e := range errs {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	if a.status != 400 || !slices.Equal(fields, []string{"transform.timeout", "transform.max_memory", "transform.max_output"}) {
		t.Errorf("the tester's destination: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", gw.api+"/v1/destinations/acme-over", sourcesOps, ""); a.status != 404 {
		t.Errorf("the refused destination is served: %d %s", a.status, a.body)
	}
	gw.stop()
	got := storedNames(store.ObjectDestination)
	slices.Sort(got)
	slices.Sort(stored)
	if !slices.Equal(got, stored) {
		t.Errorf("destinations stored: %q, want %q", got, stored)
	}
}

func TestAnObjectsBodyIsKeptAsSentOrRefusedSQLite(t *testing.T) {
	testAnObjectsBodyIsKeptAsSentOrRefused(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestAnObjectsBodyIsKeptAsSentOrRefusedPostgres(t *testing.T) {
	testAnObjectsBodyIsKeptAsSentOrRefused(t, testenv.Postgres(t))
}

// A body whose strings Go's decoder would not keep as sent (bytes that
// are not UTF-8, an escaped half of a UTF-16 pair) is refused, 400
// naming the field, at the sources', destinations' and tokens' creates
// and PATCHes, whoever asks; nothing of it is stored. A whole pair, and
// an escaped backslash before "u", are text as any other. A body that is
// not a JSON object says which object's fields it wants.
func testAnObjectsBodyIsKeptAsSentOrRefused(t *testing.T, storeURL string) {
	gw, _, storedNames := tenantObjectsGateway(t, storeURL)
	const notUTF8, lone = "not UTF-8", "UTF-16 pair"
	for _, c := range []struct {
		method, path, body, field, fault string
	}{
		{"POST", "/v1/sources", "{\"name\": \"bad-src\", \"preset\": \"stripe\", \"secrets\": [\"whsec_\xff\xfe\"]}", "secrets[0]", notUTF8},
		{"POST", "/v1/sources", `{"name": "bad-src", "preset": "stripe", "secrets": ["whsec_\ud800"]}`, "secrets[0]", lone},
		{"POST", "/v1/sources", `{"name": "bad-src", "preset": "stripe", "secrets": ["ok", "whsec_\udc00x"]}`, "secrets[1]", lone},
		{"POST", "/v1/sources", `{"name": "bad-src", "preset": "stripe", "secrets": ["whsec_\ud83dx"]}`, "secrets[0]", lone},
		{"POST", "/v1/destinations", `{"name": "bad-app", "url": "https://acme.example/hook", "headers": {"X-A": "\uDBFF"}}`, "headers.X-A", lone},
		{"POST", "/v1/destinations", "{\"name\": \"bad-app\", \"url\": \"https://acme.example/hook\", \"headers\": {\"X-\xff\": \"v\"}}", "headers", notUTF8},
		{"POST", "/v1/destinations", "{\"name\": \"bad-app\xc0\", \"url\": \"https://acme.example/hook\"}", "name", notUTF8},
		{"PATCH", "/v1/sources/good-src", "{\"secrets\": [\"\xff\"]}", "secrets[0]", notUTF8},
		{"PATCH", "/v1/sources/good-src", `{"secrets": ["\ud800\ud800"]}`, "secrets[0]", lone},
		{"POST", "/v1/tokens", `{"name": "bad-tok\udfff"}`, "name", lone},
		{"POST", "/v1/tokens", "{\"name\": \"bad-tok\xff\"}", "name", notUTF8},
		{"POST", "/v1/tokens", "{\"name\": \"bad-tok\", \"publish\": [\"\xfe\"]}", "publish[0]", notUTF8},
	} {
		if c.path == "/v1/sources/good-src" {
			if a := call(t, "POST", gw.api+"/v1/sources", acmeToken, `{"name": "good-src", "preset": "stripe", "secrets": ["whsec_\ud83d\ude00"]}`); a.status != 201 && a.status != 409 {
				t.Fatalf("a source with a whole UTF-16 pair: %d %s", a.status, a.body)
			}
		}
		for _, token := range []string{acmeToken, sourcesOps} {
			a := call(t, c.method, gw.api+c.path, token, c.body)
			if a.status != 400 || a.json["reason"] != "invalid" || a.json["field"] != c.field || !strings.Contains(a.json["error"].(string), c.fault) {
				t.Errorf("%s %s %q: %d %s", c.method, c.path, c.body, a.status, a.body)
			}
		}
	}
	if a := call(t, "POST", gw.api+"/v1/sources", acmeToken, `{"name": "esc-src", "preset": "stripe", "secrets": ["whsec_\\ud800"]}`); a.status != 201 {
		t.Errorf("a secret with a backslash before u: %d %s", a.status, a.body)
	}
	for _, c := range []struct{ path, want string }{
		{"/v1/tokens", "want a JSON object of a token's fields"},
		{"/v1/sources", "want a JSON object of a source's fields"},
		{"/v1/destinations", "want a JSON object of a destination's fields"},
	} {
		if a := call(t, "POST", gw.api+c.path, sourcesOps, `["not", "an object"]`); a.status != 400 || !strings.HasPrefix(a.json["error"].(string), c.want) {
			t.Errorf("POST %s with an array: %d %s", c.path, a.status, a.body)
		}
	}
	if a := call(t, "GET", gw.api+"/v1/tokens/bad-tok", sourcesOps, ""); a.status != 404 {
		t.Errorf("the refused token: %d %s", a.status, a.body)
	}
	gw.stop()
	got := storedNames(store.ObjectSource)
	slices.Sort(got)
	if !slices.Equal(got, []string{"esc-src", "good-src"}) {
		t.Errorf("sources stored: %q", got)
	}
	if got := storedNames(store.ObjectDestination); len(got) != 0 {
		t.Errorf("destinations stored: %q", got)
	}
	if got := storedNames(store.ObjectToken); len(got) != 0 {
		t.Errorf("tokens stored: %q", got)
	}
}

func TestATenantsHungryScriptFailsOnlyItsOwnEventsSQLite(t *testing.T) {
	testATenantsHungryScriptFailsOnlyItsOwnEvents(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestATenantsHungryScriptFailsOnlyItsOwnEventsPostgres(t *testing.T) {
	testATenantsHungryScriptFailsOnlyItsOwnEvents(t, testenv.Postgres(t))
}

// The tester's script (#45) under the bounds a tenant's token gets: each
// run stops at the memory or time bound within moments, not 30 s and
// gigabytes later, and another tenant's events are delivered meanwhile
// (invariant 21: a script fails only its own event).
func testATenantsHungryScriptFailsOnlyItsOwnEvents(t *testing.T, storeURL string) {
	hungry, other := testenv.NewSink(t), testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + storeURL + `
tenant_egress: {allow: ["127.0.0.1/32"]}
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: acme, token: ` + acmeToken + `, tenant: acme}
    - {name: globex, token: ` + globexToken + `, tenant: globex}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	api := gw.api
	for _, c := range []struct{ token, path, body string }{
		{acmeToken, "/v1/destinations", `{"name": "acme-app", "url": "` + hungry.URL + `", "transform": {"inline": ` + hogScript + `}}`},
		{acmeToken, "/v1/sources", `{"name": "acme-in", "outbox": true, "destinations": ["acme-app"]}`},
		{globexToken, "/v1/destinations", `{"name": "globex-app", "url": "` + other.URL + `"}`},
		{globexToken, "/v1/sources", `{"name": "globex-in", "outbox": true, "destinations": ["globex-app"]}`},
	} {
		if a := call(t, "POST", api+c.path, c.token, c.body); a.status != 201 {
			t.Fatalf("POST %s %s: %d %s", c.path, c.body, a.status, a.body)
		}
	}
	start := time.Now()
	for i := range 2 {
		if a := call(t, "POST", api+"/v1/publish/acme-in", acmeToken, `{"n": 1}`, "Idempotency-Key", "hog-"+strconv.Itoa(i), "Content-Type", "application/json"); a.status != 202 {
			t.Fatalf("acme publishes: %d %s", a.status, a.body)
		}
	}
	const others = 20
	for i := range others {
		if a := call(t, "POST", api+"/v1/publish/globex-in", globexToken, `{"n": 1}`, "Idempotency-Key", "ord-"+strconv.Itoa(i), "Content-Type", "application/json"); a.status != 202 {
			t.Fatalf("globex publishes: %d %s", a.status, a.body)
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(other.Deliveries()) >= others }) {
		t.Fatalf("globex's events beside acme's script: %d of %d delivered", len(other.Deliveries()), others)
	}
	t.Logf("globex's %d events delivered in %s", others, time.Since(start).Round(time.Millisecond))
	var dead apiAnswer
	if !testenv.WaitFor(10*time.Second, func() bool {
		dead = call(t, "GET", api+"/v1/events?source=acme-in&state=dead", acmeToken, "")
		events, _ := dead.json["events"].([]any)
		return len(events) == 2
	}) {
		t.Fatalf("acme's events, want both dead (a script's failure is final): %s", dead.body)
	}
	took := time.Since(start)
	t.Logf("acme's two events dead (a run of its script each) in %s", took.Round(time.Millisecond))
	if took > 8*time.Second {
		t.Errorf("acme's script ran for %s: the bounds did not stop it", took)
	}
	id := strconv.FormatInt(eventIDOf(t, api, acmeToken, "acme-in"), 10)
	event := call(t, "GET", api+"/v1/events/"+id, acmeToken, "")
	if body := string(event.body); !strings.Contains(body, "transform") || !(strings.Contains(body, "time limit") || strings.Contains(body, "memory")) {
		t.Errorf("acme's event, want a run stopped by a bound: %.2000s", body)
	}
	if n := len(hungry.Deliveries()); n != 0 {
		t.Errorf("acme's destination got %d requests", n)
	}
}

func TestTheOperatorRaisesATenantsBoundsSQLite(t *testing.T) {
	testTheOperatorRaisesATenantsBounds(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestTheOperatorRaisesATenantsBoundsPostgres(t *testing.T) {
	testTheOperatorRaisesATenantsBounds(t, testenv.Postgres(t))
}

// The file's tenants: [{name, limits}] raises what that tenant's token may
// set, and no other tenant's; a bound it leaves out stays the default.
// A negative limit is the file's error.
func testTheOperatorRaisesATenantsBounds(t *testing.T, storeURL string) {
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + storeURL + `
tenants:
  - {name: acme, limits: {retry: {max_attempts: 20}, transform: {max_memory: 256MiB}}}
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: acme, token: ` + acmeToken + `, tenant: acme}
    - {name: globex, token: ` + globexToken + `, tenant: globex}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	const url = `"url": "https://acme.example/hook"`
	for i, c := range []struct {
		token, set string
		status     int
		field      string
	}{
		{acmeToken, `"transform": {"inline": ` + hogScript + `, "max_memory": "256MiB"}, "retry": {"max_attempts": 20}`, 201, ""},
		{acmeToken, `"transform": {"inline": ` + hogScript + `, "max_memory": "257MiB"}`, 400, "transform.max_memory"},
		{acmeToken, `"retry": {"max_attempts": 21}`, 400, "retry.max_attempts"},
		{acmeToken, `"transform": {"inline": ` + hogScript + `, "timeout": "51ms"}`, 400, "transform.timeout"},
		{globexToken, `"transform": {"inline": ` + hogScript + `, "max_memory": "256MiB"}`, 400, "transform.max_memory"},
	} {
		a := call(t, "POST", gw.api+"/v1/destinations", c.token, `{"name": "d-`+strconv.Itoa(i)+`", `+url+`, `+c.set+`}`)
		if a.status != c.status || (c.field != "" && a.json["field"] != c.field) {
			t.Errorf("%s: %d %s", c.set, a.status, a.body)
		}
		if i == 1 && !strings.Contains(string(a.body), "257MiB is above what a tenant's token may set, 256MiB") ||
			i == 4 && !strings.Contains(string(a.body), "raise tenant globex's bound (tenants: [{name: globex, limits: {transform: {max_memory: ...}}}])") {
			t.Errorf("%s: %s", c.set, a.body)
		}
	}
	gw.stop()
	bad := strings.Replace(yaml, "max_attempts: 20", "max_attempts: -1", 1)
	if _, err := oncehook.ParseConfig([]byte(bad), func(string) (string, bool) { return "", false }, kinds.All()); err == nil || !strings.Contains(err.Error(), "tenants[0].limits: cannot be negative") {
		t.Errorf("a negative limit: %v", err)
	}
}
