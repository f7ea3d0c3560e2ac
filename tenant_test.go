package oncehook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

const (
	acmeToken       = "acme-token-0123456789"
	acmeReaderToken = "acme-reader-token-0123456789"
	globexToken     = "globex-token-0123456789"
)

func TestTenantsSeeOnlyTheirOwnSQLite(t *testing.T) {
	testTenantsSeeOnlyTheirOwn(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestTenantsSeeOnlyTheirOwnPostgres(t *testing.T) {
	testTenantsSeeOnlyTheirOwn(t, testenv.Postgres(t))
}

// Tenants (#45): a tenant's token reaches its tenant's sources and
// destinations (the file's and the API's), their events, dead letters,
// stats, doctor, alerts and audit, and nothing else: another tenant's
// object, or a shared one, is answered as one there is none of (the same
// 404 as a name nobody has, never naming what exists). It creates its own
// tenant's objects only, routes them to its own destinations or shared
// ones, and reloads nothing. Its effects ledger keys are its own. The operator's token sees everything, each
// object with its tenant.
func testTenantsSeeOnlyTheirOwn(t *testing.T, storeURL string) {
	sink := testenv.NewSink(t)
	// What each destination answers: the shared one's answer (an
	// operator's service) is the operator's to read, not a tenant's.
	sink.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/shared" {
			io.WriteString(w, "SHARED-ANSWER")
			return
		}
		io.WriteString(w, "TENANT-ANSWER")
	}
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	// The tenants' destinations are this test's local sink: allowed
	// (tenant_egress), as a development gateway's would be.
	yaml := `store: ` + storeURL + `
tenant_egress: {allow: ["127.0.0.0/8"]}
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: reader, token: ` + sourcesReader + `, read_only: true}
    - {name: acme, token: ` + acmeToken + `, tenant: acme}
    - {name: acme-reader, token: ` + acmeReaderToken + `, tenant: acme, read_only: true}
    - {name: globex, token: ` + globexToken + `, tenant: globex}
sources:
  - {name: shared, preset: stripe, secrets: [whsec_shared_secret], destinations: [app]}
  - {name: acme-file, tenant: acme, preset: stripe, secrets: [whsec_acme_file_secret], destinations: [acme-app]}
  - {name: globex-outbox, tenant: globex, outbox: true, destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `/shared"}
  - {name: acme-app, tenant: acme, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	api := gw.api

	// Objects: a tenant's token makes its own tenant's.
	a := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "acme-api", "preset": "stripe", "secrets": ["`+acmeSecret1+`"], "destinations": ["acme-app", "app"]}`)
	if a.status != 201 || a.json["created_by"] != "token:acme" || !strings.Contains(string(a.body), `"tenant":"acme"`) {
		t.Fatalf("acme creates its source: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "acme-x", "tenant": "globex", "preset": "stripe", "secrets": ["s"]}`); a.status != 400 || a.json["field"] != "tenant" {
		t.Fatalf("acme creates globex's source: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/destinations", sourcesOps, `{"name": "globex-app", "tenant": "globex", "url": "`+sink.URL+`"}`); a.status != 201 {
		t.Fatalf("ops creates globex's destination: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/sources", globexToken, `{"name": "globex-src", "preset": "stripe", "secrets": ["`+acmeSecret2+`"], "destinations": ["globex-app"]}`); a.status != 201 {
		t.Fatalf("globex creates its source: %d %s", a.status, a.body)
	}
	// A route to another's destination reads as one to a name nobody has.
	toOthers := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "acme-y", "preset": "stripe", "secrets": ["s"], "destinations": ["globex-app"]}`)
	toNone := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "acme-y", "preset": "stripe", "secrets": ["s"], "destinations": ["globex-nope"]}`)
	if toOthers.status != 400 || toOthers.json["field"] != "destinations[0]" || strings.Contains(string(toOthers.body), "tenant") ||
		strings.ReplaceAll(string(toOthers.body), "globex-app", "globex-nope") != string(toNone.body) {
		t.Fatalf("a route to globex's destination: %d %s (to none: %s)", toOthers.status, toOthers.body, toNone.body)
	}
	// The operator's shared source cannot route to a tenant's destination.
	if a := call(t, "POST", api+"/v1/sources", sourcesOps, `{"name": "shared-2", "preset": "stripe", "secrets": ["s"], "destinations": ["acme-app"]}`); a.status != 400 ||
		!strings.Contains(string(a.body), "shared destinations only") {
		t.Fatalf("a shared source routed to acme's destination: %d %s", a.status, a.body)
	}
	// A name another tenant has is taken, without saying whose.
	if a := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "globex-src", "preset": "stripe", "secrets": ["s"]}`); a.status != 409 || strings.Contains(string(a.body), "globex-app") ||
		strings.Contains(string(a.body), "tenant") {
		t.Fatalf("acme takes globex's name: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/sources", acmeReaderToken, `{"name": "acme-z", "preset": "stripe", "secrets": ["s"]}`); a.status != 403 {
		t.Fatalf("a tenant's read-only token creates: %d %s", a.status, a.body)
	}

	// Traffic to each tenant's sources and the shared one.
	send := func(source, secret, id string) {
		t.Helper()
		if s := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/"+source, "stripe", secret, stripeEvent(id), "")).Status; s != 200 {
			t.Fatalf("%s: %d", source, s)
		}
	}
	send("shared", "whsec_shared_secret", "evt_shared")
	send("acme-file", "whsec_acme_file_secret", "evt_acme_file")
	send("acme-api", acmeSecret1, "evt_acme_api")
	send("globex-src", acmeSecret2, "evt_globex")
	if a := call(t, "POST", api+"/v1/publish/globex-outbox", acmeToken, `{"n": 1}`, "Idempotency-Key", "ord-1"); a.status != 404 {
		t.Fatalf("acme publishes to globex's outbox: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/publish/globex-outbox", globexToken, `{"n": 1}`, "Idempotency-Key", "ord-1", "Content-Type", "application/json"); a.status != 202 {
		t.Fatalf("globex publishes to its outbox: %d %s", a.status, a.body)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 6 }) {
		t.Fatalf("delivered: %v", sink.ByKey())
	}

	// acme's event went to its own destination and to the shared one: acme
	// reads its own destination's answer, not the shared one's (nor an
	// error naming its URL); the operator reads both.
	acmeEventID := eventIDOf(t, api, sourcesOps, "acme-api")
	if !testenv.WaitFor(10*time.Second, func() bool {
		b := string(call(t, "GET", api+fmt.Sprintf("/v1/events/%d", acmeEventID), sourcesOps, "").body)
		return strings.Contains(b, "SHARED-ANSWER") && strings.Contains(b, "TENANT-ANSWER")
	}) {
		t.Fatal("the operator does not see both destinations' answers")
	}
	for _, token := range []string{acmeToken, acmeReaderToken} {
		a := call(t, "GET", api+fmt.Sprintf("/v1/events/%d", acmeEventID), token, "")
		if a.status != 200 || strings.Contains(string(a.body), "SHARED-ANSWER") || strings.Contains(string(a.body), "/shared") ||
			!strings.Contains(string(a.body), "TENANT-ANSWER") || !strings.Contains(string(a.body), `"destination":"app"`) {
			t.Fatalf("acme's view of its event delivered to the shared destination: %d %s", a.status, a.body)
		}
	}

	list := func(token, path string) string {
		t.Helper()
		a := call(t, "GET", api+path, token, "")
		if a.status != 200 {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		return string(a.body)
	}
	// What each token sees of the lists.
	for _, c := range []struct {
		token              string
		sources, dests     string
		events, notInLists []string
	}{
		{acmeToken, "acme-api acme-file", "acme-app", []string{"acme-api", "acme-file"}, []string{"globex", "shared"}},
		{acmeReaderToken, "acme-api acme-file", "acme-app", []string{"acme-api", "acme-file"}, []string{"globex", "shared"}},
		{globexToken, "globex-outbox globex-src", "globex-app", []string{"globex-outbox", "globex-src"}, []string{"acme", "shared"}},
		{sourcesReader, "acme-api acme-file globex-outbox globex-src shared", "acme-app app globex-app", []string{"acme-api", "acme-file", "globex-outbox", "globex-src", "shared"}, nil},
	} {
		sources := list(c.token, "/v1/sources")
		if got := strings.Join(namesOf(t, sources, "name"), " "); got != c.sources {
			t.Errorf("%s: sources %s, want %s", c.token, got, c.sources)
		}
		if got := strings.Join(namesOf(t, list(c.token, "/v1/destinations"), "name"), " "); got != c.dests {
			t.Errorf("%s: destinations %s, want %s", c.token, got, c.dests)
		}
		events := list(c.token, "/v1/events")
		if got := strings.Join(uniq(namesOf(t, events, "source")), " "); got != strings.Join(c.events, " ") {
			t.Errorf("%s: events of %s, want %s", c.token, got, c.events)
		}
		stats := list(c.token, "/v1/stats")
		doctor := list(c.token, "/v1/doctor")
		audit := list(c.token, "/v1/audit")
		for _, body := range []string{sources, list(c.token, "/v1/destinations"), events, stats, doctor, audit, list(c.token, "/v1/dead-letters"), list(c.token, "/v1/alerts/issues"),
			list(c.token, "/v1/tokens")} {
			for _, no := range c.notInLists {
				if strings.Contains(body, no) {
					t.Errorf("%s sees %s: %s", c.token, no, body)
				}
			}
		}
	}
	if a := call(t, "GET", api+"/v1/sources", sourcesOps, ""); !strings.Contains(string(a.body), `"tenant":"globex"`) {
		t.Fatalf("the operator's list names each object's tenant: %s", a.body)
	}
	if a := call(t, "GET", api+"/v1/audit", acmeToken, ""); !strings.Contains(string(a.body), "source_create") || !strings.Contains(string(a.body), "token:acme") {
		t.Fatalf("acme's audit shows its own changes: %s", a.body)
	}

	// Another tenant's object, or a shared one, answers as one nobody has.
	globexEvent := eventIDOf(t, api, sourcesOps, "globex-src")
	sharedEvent := eventIDOf(t, api, sourcesOps, "shared")
	acmeEvent := eventIDOf(t, api, sourcesOps, "acme-api")
	for _, c := range []struct{ method, path, name, body string }{
		{"GET", "/v1/sources/%s", "globex-src", ""},
		{"GET", "/v1/sources/%s", "shared", ""},
		{"GET", "/v1/destinations/%s", "app", ""},
		{"PATCH", "/v1/sources/%s", "globex-src", `{"window": "1h"}`},
		{"DELETE", "/v1/sources/%s", "globex-src", ""},
		{"DELETE", "/v1/destinations/%s", "globex-app", ""},
		{"GET", "/v1/events?source=%s", "globex-src", ""},
		{"GET", "/v1/events/%s", fmt.Sprint(globexEvent), ""},
		{"GET", "/v1/events/%s", fmt.Sprint(sharedEvent), ""},
		{"POST", "/v1/events/%s/replay", fmt.Sprint(globexEvent), ""},
		{"POST", "/v1/events/%s/skip", fmt.Sprint(globexEvent), `{"destination": "app"}`},
		{"POST", fmt.Sprintf("/v1/events/%d/deliver", acmeEvent), "globex-app", `{"destination": "%s"}`},
		{"POST", "/v1/events/replay", "globex-src", `{"source": "%s", "dry_run": true}`},
		{"POST", "/v1/events/deliver", "globex-app", `{"all": true, "destination": "%s", "dry_run": true}`},
		{"GET", "/v1/dead-letters?destination=%s", "globex-app", ""},
		{"POST", "/v1/dead-letters/retry", "globex-src", `{"source": "%s", "dry_run": true}`},
		{"POST", "/v1/destinations/%s/pause", "globex-app", ""},
		{"POST", "/v1/destinations/%s/breaker/open", "app", ""},
		{"GET", "/v1/stats?source=%s", "globex-src", ""},
		{"GET", "/v1/doctor?source=%s", "shared", ""},
		{"GET", "/v1/tokens/%s", "globex", ""},
		{"GET", "/v1/tokens/%s", "ops", ""},
		{"DELETE", "/v1/tokens/%s", "globex", ""},
		{"DELETE", "/v1/tokens/%s", "reader", ""},
	} {
		nobody := "nobody-has-this"
		if _, err := fmt.Sscan(c.name, new(int64)); err == nil {
			nobody = "999999999"
		}
		fill := func(s, name string) string {
			if strings.Contains(s, "%s") {
				return fmt.Sprintf(s, name)
			}
			return s
		}
		got := call(t, c.method, api+fill(c.path, c.name), acmeToken, fill(c.body, c.name))
		want := call(t, c.method, api+fill(c.path, nobody), acmeToken, fill(c.body, nobody))
		if got.status != 404 || want.status != 404 || strings.ReplaceAll(string(got.body), c.name, nobody) != string(want.body) {
			t.Errorf("acme %s %s: %d %s; one nobody has: %d %s", c.method, fill(c.path, c.name), got.status, got.body, want.status, want.body)
		}
	}
	// What is nobody's object is the operator's.
	if a := call(t, "POST", api+"/v1/reload", acmeToken, ""); a.status != 403 {
		t.Fatalf("acme reloads: %d %s", a.status, a.body)
	}
	// The effects ledger: each tenant's keys are its own.
	claim := call(t, "POST", api+"/v1/effects/order-1/claim", acmeToken, `{"lease": "30s"}`)
	if claim.status != 201 {
		t.Fatalf("acme claims order-1: %d %s", claim.status, claim.body)
	}
	if a := call(t, "POST", api+"/v1/effects/order-1/complete", acmeToken, `{"token": "`+claim.json["token"].(string)+`", "result": {"charge": "ch_acme"}}`); a.status != 200 {
		t.Fatalf("acme completes order-1: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/effects/order-1/claim", acmeToken, `{}`); a.status != 200 || !strings.Contains(string(a.body), "ch_acme") {
		t.Fatalf("acme claims order-1 again: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/effects/order-1/claim", globexToken, `{}`); a.status != 201 || strings.Contains(string(a.body), "ch_acme") {
		t.Fatalf("globex's order-1 is answered acme's: %d %s", a.status, a.body)
	}
	for token, want := range map[string]string{acmeToken: `"key":"order-1","state":"done"`, globexToken: `"key":"order-1","state":"pending"`} {
		if a := call(t, "GET", api+"/v1/effects", token, ""); a.status != 200 || strings.Count(string(a.body), `"key"`) != 1 || !strings.Contains(string(a.body), want) {
			t.Errorf("the effects listed to %s: %d %s", token, a.status, a.body)
		}
		if a := call(t, "GET", api+"/v1/effects/order-1", token, ""); a.status != 200 || !strings.Contains(string(a.body), want) {
			t.Errorf("order-1 shown to %s: %d %s", token, a.status, a.body)
		}
	}
	if a := call(t, "GET", api+"/v1/effects/order-1", sourcesOps, ""); a.status != 404 {
		t.Errorf("the operator's order-1 is a tenant's: %d %s", a.status, a.body)
	}
	failed := call(t, "POST", api+"/v1/effects/order-2/claim", acmeToken, `{}`)
	if a := call(t, "POST", api+"/v1/effects/order-2/fail", acmeToken, `{"token": "`+failed.json["token"].(string)+`", "error": "card declined"}`); a.status != 200 {
		t.Fatalf("acme fails order-2: %d %s", a.status, a.body)
	}
	// Its own: acted on.
	if a := call(t, "POST", api+"/v1/events/replay", acmeToken, `{"all": true, "dry_run": true}`); a.status != 200 || a.json["count"] != 3.0 {
		t.Fatalf("acme's replay of all counts its own deliveries (acme-file's one, acme-api's two): %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/destinations/acme-app/pause", acmeToken, ""); a.status != 200 {
		t.Fatalf("acme pauses its destination: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/destinations/acme-app/resume", acmeToken, ""); a.status != 200 {
		t.Fatalf("acme resumes its destination: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+fmt.Sprintf("/v1/events/%d/replay", acmeEvent), acmeToken, ""); a.status != 200 {
		t.Fatalf("acme replays its event: %d %s", a.status, a.body)
	}
	if a := call(t, "PATCH", api+"/v1/sources/acme-api", acmeToken, `{"tenant": "globex"}`); a.status != 400 || a.json["field"] != "tenant" {
		t.Fatalf("acme gives its source away: %d %s", a.status, a.body)
	}
	if a := call(t, "DELETE", api+"/v1/sources/acme-api", acmeToken, ""); a.status != 204 {
		t.Fatalf("acme deletes its source: %d %s", a.status, a.body)
	}
	// A deleted name is not another tenant's to take: it would read,
	// replay and deliver its events by name (found by a tester: globex
	// read and replayed acme's event so). Its own tenant makes it again
	// (its own events), and deletes it again.
	if a := call(t, "POST", api+"/v1/sources", globexToken, `{"name": "acme-api", "preset": "stripe", "secrets": ["s"]}`); a.status != 409 || a.json["error"] != "source acme-api already exists: choose another name" {
		t.Fatalf("a tenant takes a deleted source's name, its events stored: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "acme-api", "preset": "stripe", "secrets": ["s"]}`); a.status != 201 {
		t.Fatalf("acme makes its deleted source again: %d %s", a.status, a.body)
	}
	if a := call(t, "DELETE", api+"/v1/sources/acme-api", acmeToken, ""); a.status != 204 {
		t.Fatalf("acme deletes its source again: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", api+fmt.Sprintf("/v1/events/%d", acmeEvent), globexToken, ""); a.status != 404 {
		t.Fatalf("globex reads acme's old event: %d %s", a.status, a.body)
	}
	// A destination's held deliveries likewise.
	if a := call(t, "POST", api+"/v1/destinations", acmeToken, `{"name": "acme-held", "url": "http://127.0.0.1:1/never", "retry": {"base_delay": "1h", "max_delay": "1h"}}`); a.status != 201 {
		t.Fatalf("acme creates a destination: %d %s", a.status, a.body)
	}
	if a := call(t, "PATCH", api+"/v1/sources/acme-file", acmeToken, `{}`); a.status != 409 {
		t.Fatalf("acme-file is the file's: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "acme-h", "preset": "stripe", "secrets": ["whsec_h"], "destinations": ["acme-held"]}`); a.status != 201 {
		t.Fatalf("acme creates a source: %d %s", a.status, a.body)
	}
	send("acme-h", "whsec_h", "evt_held")
	call(t, "DELETE", api+"/v1/sources/acme-h", acmeToken, "")
	if a := call(t, "DELETE", api+"/v1/destinations/acme-held", acmeToken, ""); a.status != 204 {
		t.Fatalf("acme deletes its destination: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/destinations", globexToken, `{"name": "acme-held", "url": "`+sink.URL+`/stolen"}`); a.status != 409 {
		t.Fatalf("globex takes a name whose deliveries are held: %d %s", a.status, a.body)
	}
	// The operator's deliver keeps a tenant's destination to its tenant's
	// events, as a route does.
	if a := call(t, "POST", api+fmt.Sprintf("/v1/events/%d/deliver", sharedEvent), sourcesOps, `{"destination": "globex-app"}`); a.status != 400 || a.json["field"] != "destination" {
		t.Fatalf("the operator delivers a shared event to globex's destination: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/events/deliver", sourcesOps, `{"all": true, "destination": "globex-app", "dry_run": true}`); a.status != 200 || a.json["count"] != 1.0 || a.json["already"] != 1.0 {
		t.Fatalf("the operator's bulk delivery to globex's destination finds globex's two events only (its outbox's, and globex-src's, delivered there already): %d %s", a.status, a.body)
	}

	// The dashboard, signed in with acme's token, shows acme's only.
	jar := dashboardSession(t, api, acmeToken)
	for _, page := range []string{"/ui/", "/ui/events", "/ui/destinations", "/ui/dead-letters", "/ui/audit", "/ui/alerts"} {
		body, status := getWith(t, jar, api+page)
		if status != 200 || !strings.Contains(body, "acme") && page != "/ui/dead-letters" && page != "/ui/alerts" {
			t.Errorf("acme's %s: %d", page, status)
		}
		for _, no := range []string{"globex", ">shared<", "/in/shared"} {
			if strings.Contains(body, no) {
				t.Errorf("acme's %s shows %s", page, no)
			}
		}
	}
	if _, status := getWith(t, jar, api+fmt.Sprintf("/ui/events/%d", globexEvent)); status != 404 {
		t.Errorf("acme's dashboard shows globex's event: %d", status)
	}
	if body, status := getWith(t, jar, api+"/ui/effects"); status != 200 || !strings.Contains(body, "order-2") || strings.Contains(body, "tenant:") {
		t.Errorf("acme's dashboard shows its effects as it named them: %d", status)
	}
	if a := call(t, "POST", api+"/v1/effects/order-2/reset", globexToken, ""); a.status != 404 {
		t.Errorf("globex resets acme's order-2: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/effects/order-2/reset", acmeToken, ""); a.status != 200 {
		t.Errorf("acme resets its order-2: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", api+"/v1/effects/order-2", acmeToken, ""); !strings.Contains(string(a.body), `"state":"pending"`) && !strings.Contains(string(a.body), `"state":"expired"`) {
		t.Errorf("order-2 after acme's reset: %s", a.body)
	}
}

// namesOf are the values of field of every object in a JSON answer (its
// first list), sorted.
func namesOf(t *testing.T, body, field string) []string {
	t.Helper()
	var out []string
	for _, part := range strings.Split(body, `"`+field+`":"`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	slices.Sort(out)
	return out
}

func uniq(s []string) []string { return slices.Compact(s) }

// eventIDOf is the id of the newest event of source, as token lists it.
func eventIDOf(t *testing.T, api, token, source string) int64 {
	t.Helper()
	a := call(t, "GET", api+"/v1/events?source="+url.QueryEscape(source), token, "")
	events, _ := a.json["events"].([]any)
	if a.status != 200 || len(events) == 0 {
		t.Fatalf("events of %s: %d %s", source, a.status, a.body)
	}
	return int64(events[0].(map[string]any)["id"].(float64))
}

// dashboardSession signs in to the dashboard at api with token.
func dashboardSession(t *testing.T, api, token string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodPost, api+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", api)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

// getWith is a page's body and status, got by c.
func getWith(t *testing.T, c *http.Client, url string) (string, int) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// A tenant's rate (tenants[].rate) bounds the requests intake takes for
// all its sources together, over the values a user sets: past it, 429
// with a Retry-After of one request's worth of the rate, nothing stored;
// another tenant's sources, and the shared ones, are not held by it.
func TestATenantsRateBoundsItsSourcesTogether(t *testing.T) {
	for _, c := range []struct {
		rate       string
		retryAfter string
	}{{"3/m", "20"}, {"10/h", "360"}, {"2/s", "1"}} {
		t.Run(c.rate, func(t *testing.T) {
			sink := testenv.NewSink(t)
			gw := startGateway(t, `
store: sqlite://$DIR/oncehook.db
tenants: [{name: acme, rate: "`+c.rate+`"}, {name: globex}]
sources:
  - {name: acme-a, tenant: acme, preset: stripe, secrets: [whsec_a], destinations: [app]}
  - {name: acme-b, tenant: acme, preset: stripe, secrets: [whsec_b], destinations: [app]}
  - {name: globex, tenant: globex, preset: stripe, secrets: [whsec_g], destinations: [app]}
  - {name: shared, preset: stripe, secrets: [whsec_s], destinations: [app]}
  - {name: acme-outbox, tenant: acme, outbox: true, destinations: [app]}
destinations: [{name: app, url: "`+sink.URL+`"}]
api: {tokens: [{name: ops, token: `+sourcesOps+`}]}
`)
			n := 0
			type reply struct {
				Status     int
				RetryAfter string
				Body       []byte
			}
			send := func(source, secret string) reply {
				t.Helper()
				n++
				resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/"+source, "stripe", secret, stripeEvent(fmt.Sprintf("evt_%d", n)), ""))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return reply{resp.StatusCode, resp.Header.Get("Retry-After"), b}
			}
			burst, _ := strconv.Atoi(strings.Split(c.rate, "/")[0])
			accepted := 0
			for i := range burst + 3 {
				source, secret := "acme-a", "whsec_a"
				if i%2 == 1 {
					source, secret = "acme-b", "whsec_b"
				}
				resp := send(source, secret)
				switch {
				case resp.Status == 200:
					accepted++
				case resp.Status != 429 || resp.RetryAfter != c.retryAfter || !strings.Contains(string(resp.Body), "rate_limited"):
					t.Fatalf("request %d past the rate: %d, Retry-After %q, %s", i, resp.Status, resp.RetryAfter, resp.Body)
				}
			}
			if accepted != burst {
				t.Fatalf("acme's sources took %d requests at once, want its rate's %d", accepted, burst)
			}
			// A publish to its outbox is one of its requests too.
			if a := call(t, "POST", gw.APIURL+"/v1/publish/acme-outbox", sourcesOps, `{"n": 1}`, "Idempotency-Key", "ord-1"); a.status != 429 ||
				a.header.Get("Retry-After") != c.retryAfter {
				t.Fatalf("a publish to acme's outbox past its rate: %d %s", a.status, a.body)
			}
			for range 5 {
				if s := send("globex", "whsec_g").Status; s != 200 {
					t.Fatalf("globex held by acme's rate: %d", s)
				}
				if s := send("shared", "whsec_s").Status; s != 200 {
					t.Fatalf("a shared source held by acme's rate: %d", s)
				}
			}
			if c.rate == "2/s" {
				time.Sleep(600 * time.Millisecond) // one request's worth of 2/s came back
				if s := send("acme-b", "whsec_b").Status; s != 200 {
					t.Fatalf("acme after its rate came back: %d", s)
				}
				accepted++
			}
			if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == accepted+10 }) || len(sink.Deliveries()) != accepted+10 {
				t.Fatalf("delivered %d, want the %d accepted only", len(sink.Deliveries()), accepted+10)
			}
		})
	}
}
