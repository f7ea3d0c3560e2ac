package oncehook_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
)

func TestTokensThroughTheAPISQLite(t *testing.T) {
	db := filepath.Join(t.TempDir(), "oncehook.db")
	testTokensThroughTheAPI(t, "sqlite://"+db, func(t *testing.T, value string) {
		for _, f := range []string{db, db + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if strings.Contains(string(b), value) {
				t.Errorf("%s holds a token's value", f)
			}
		}
	})
}

func TestTokensThroughTheAPIPostgres(t *testing.T) {
	pg := testenv.Postgres(t)
	testTokensThroughTheAPI(t, pg, func(t *testing.T, value string) {
		conn, err := pgx.Connect(context.Background(), pg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for _, table := range []string{"objects", "audit"} {
			var n int
			if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` x WHERE x::text LIKE '%' || $1 || '%'`, value).Scan(&n); err != nil || n != 0 {
				t.Errorf("%s: %d rows hold a token's value (%v)", table, n, err)
			}
		}
	})
}

// Tokens created through the API (#45): the operator's token makes one
// for a tenant, whose value is answered once and kept nowhere (absent
// from the store, every later answer and the audit); the other replica
// takes it within the objects' bound, and it reaches its tenant's objects
// only; a tenant's token makes its own tenant's, with no more than its
// tenant's sources; the file's tokens are listed without values and
// refused a delete; hostile names and tenants are refused by field with
// nothing stored; of concurrent creates of one name on two replicas
// exactly one wins; a revoke is 401 on the other replica within the
// bound, and ends a dashboard session of the token; a reload of the
// file keeps the API's tokens.
func testTokensThroughTheAPI(t *testing.T, storeURL string, absent func(*testing.T, string)) {
	sink := testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: "` + storeURL + `"
tenant_egress: {allow: ["127.0.0.0/8"]}
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: reader, token: ` + sourcesReader + `, read_only: true}
    - {name: acme, token: ` + acmeToken + `, tenant: acme}
    - {name: globex, token: ` + globexToken + `, tenant: globex}
sources:
  - {name: shared, preset: stripe, secrets: [whsec_shared_secret], destinations: [app]}
  - {name: acme-src, tenant: acme, preset: stripe, secrets: [whsec_acme_file_secret], destinations: [acme-app]}
  - {name: acme-outbox, tenant: acme, outbox: true, destinations: [acme-app]}
  - {name: globex-outbox, tenant: globex, outbox: true, destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
  - {name: acme-app, tenant: acme, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	poll := func(o *oncehook.Options) {
		o.ObjectsPoll = 200 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := startFromFile(t, path, sourcesKey, poll)
	if err != nil {
		t.Fatal(err)
	}
	b, err := startFromFile(t, path, sourcesKey, poll)
	if err != nil {
		t.Fatal(err)
	}

	// The operator makes a token for acme; b takes it within the bound.
	c := call(t, "POST", a.api+"/v1/tokens", sourcesOps, `{"name": "acme-ci", "tenant": "acme"}`)
	value, _ := c.json["token"].(string)
	if c.status != 201 || !strings.HasPrefix(value, "ohk_") || len(value) != 4+43 || c.json["tenant"] != "acme" || c.json["managed_by"] != "api" ||
		c.json["created_by"] != "token:ops" || !strings.HasPrefix(fmt.Sprint(c.json["fingerprint"]), "sha256:") || c.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create acme-ci: %d %s", c.status, c.body)
	}
	start := time.Now()
	// (Asked by the operator's token: a wrong token's every 401 counts
	// toward the limit that answers 429.)
	if !testenv.WaitFor(objectsBound, func() bool { return call(t, "GET", b.api+"/v1/tokens/acme-ci", sourcesOps, "").status == 200 }) {
		t.Fatal("b does not take the token a created")
	}
	t.Logf("a created token reached the other replica in %s", time.Since(start))
	for _, gw := range []*apiGateway{a, b} {
		sources := call(t, "GET", gw.api+"/v1/sources", value, "")
		if got := strings.Join(namesOf(t, string(sources.body), "name"), " "); got != "acme-outbox acme-src" {
			t.Errorf("acme-ci's sources: %s", sources.body)
		}
	}
	if r := call(t, "POST", b.api+"/v1/sources", value, `{"name": "acme-more", "preset": "stripe", "secrets": ["`+acmeSecret1+`"], "destinations": ["acme-app"]}`); r.status != 201 || r.json["created_by"] != "token:acme-ci" ||
		!strings.Contains(string(r.body), `"tenant":"acme"`) {
		t.Fatalf("acme-ci creates a source: %d %s", r.status, r.body)
	}

	// A tenant's token: its own tenant's tokens, with its own sources.
	if r := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "acme-x", "tenant": "globex"}`); r.status != 400 || r.json["field"] != "tenant" {
		t.Errorf("acme makes globex's token: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "acme-x", "tenant": ""}`); r.status != 400 || r.json["field"] != "tenant" {
		t.Errorf("acme makes a tenantless token: %d %s", r.status, r.body)
	}
	others := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "acme-x", "publish": ["globex-outbox"]}`)
	none := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "acme-x", "publish": ["nobody-has-this"]}`)
	if others.status != 400 || others.json["field"] != "publish[0]" || strings.ReplaceAll(string(others.body), "globex-outbox", "nobody-has-this") != string(none.body) {
		t.Errorf("acme publishes to globex's outbox: %d %s (to none: %s)", others.status, others.body, none.body)
	}
	if r := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "acme-x", "publish": ["shared"]}`); r.status != 400 || r.json["field"] != "publish[0]" {
		t.Errorf("acme publishes to a shared source: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "acme-x", "pull": ["app"]}`); r.status != 400 || r.json["field"] != "pull[0]" {
		t.Errorf("acme pulls from a shared destination: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", a.api+"/v1/tokens", sourcesOps, `{"name": "x", "publish": ["shared"]}`); r.status != 400 || r.json["field"] != "publish[0]" ||
		!strings.Contains(string(r.body), "not an outbox source") {
		t.Errorf("a publisher of a source that is no outbox: %d %s", r.status, r.body)
	}
	pub := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "acme-pub", "publish": ["acme-outbox"]}`)
	pubValue, _ := pub.json["token"].(string)
	if pub.status != 201 || pub.json["tenant"] != "acme" || pub.json["created_by"] != "token:acme" {
		t.Fatalf("acme makes its publisher: %d %s", pub.status, pub.body)
	}
	for _, token := range []string{sourcesReader, pubValue} {
		if r := call(t, "POST", a.api+"/v1/tokens", token, `{"name": "y"}`); r.status != 403 {
			t.Errorf("a read-only or publishing token makes a token: %d %s", r.status, r.body)
		}
	}

	// What each sees: the file's and the API's, never a value.
	list := call(t, "GET", a.api+"/v1/tokens", sourcesOps, "")
	if got := strings.Join(namesOf(t, string(list.body), "name"), " "); list.status != 200 || got != "acme acme-ci acme-pub globex ops reader" {
		t.Errorf("the operator's list: %d %s", list.status, list.body)
	}
	if got := strings.Join(namesOf(t, string(call(t, "GET", a.api+"/v1/tokens", acmeToken, "").body), "name"), " "); got != "acme acme-ci acme-pub" {
		t.Errorf("acme's list: %s", got)
	}
	if r := call(t, "GET", a.api+"/v1/tokens/ops", sourcesReader, ""); r.status != 200 || r.json["managed_by"] != "file" {
		t.Errorf("the file's token shown: %d %s", r.status, r.body)
	}
	shown := []apiAnswer{list, call(t, "GET", b.api+"/v1/tokens/acme-ci", acmeToken, ""), call(t, "GET", a.api+"/v1/audit", sourcesOps, ""),
		call(t, "GET", a.api+"/v1/audit", acmeToken, "")}
	for _, r := range shown {
		for _, v := range []string{value, pubValue, sourcesOps, acmeToken, sourcesReader} {
			if strings.Contains(string(r.body), v) {
				t.Errorf("an answer holds a token's value: %s", r.body)
			}
		}
	}
	if !strings.Contains(string(shown[3].body), "token_create") {
		t.Errorf("acme's audit lacks its tokens: %s", shown[3].body)
	}
	absent(t, value)
	absent(t, pubValue)
	if l := logs.String(); !strings.Contains(l, "acme-ci") || strings.Contains(l, value) || strings.Contains(l, pubValue) {
		t.Errorf("the logs name acme-ci, and hold no token's value: %s", l)
	}

	// The file's names are the file's.
	if r := call(t, "POST", a.api+"/v1/tokens", sourcesOps, `{"name": "reader"}`); r.status != 409 || r.json["reason"] != "managed_by_file" || !strings.Contains(string(r.body), path) {
		t.Errorf("a token named as the file's: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", a.api+"/v1/tokens/reader", sourcesOps, ""); r.status != 409 || r.json["reason"] != "managed_by_file" {
		t.Errorf("the file's token deleted: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", a.api+"/v1/tokens", acmeToken, `{"name": "globex"}`); r.status != 409 || strings.Contains(string(r.body), "file") {
		t.Errorf("acme takes globex's name: %d %s", r.status, r.body)
	}

	// Hostile bytes: refused by field, nothing stored.
	before := string(call(t, "GET", a.api+"/v1/tokens", sourcesOps, "").body)
	for _, bad := range []string{`a\u0000b`, "a\xffb", `a\r\nX-Injected: 1`, strings.Repeat("x", 60<<10)} {
		for _, field := range []string{"name", "tenant"} {
			body := `{"name": "` + bad + `"}`
			if field == "tenant" {
				body = `{"name": "ok", "tenant": "` + bad + `"}`
			}
			if r := call(t, "POST", a.api+"/v1/tokens", sourcesOps, body); r.status != 400 || r.json["field"] != field {
				t.Errorf("%s %.30q: %d %.200s", field, bad, r.status, r.body)
			}
		}
	}
	if r := call(t, "POST", a.api+"/v1/tokens", sourcesOps, `{"name": "`+strings.Repeat("x", 1<<20)+`"}`); r.status != 413 {
		t.Errorf("1 MB: %d %.200s", r.status, r.body)
	}
	if r := call(t, "POST", a.api+"/v1/tokens", sourcesOps, `{"name": "z", "token": "mine-0123456789abcdef"}`); r.status != 400 || r.json["field"] != "token" {
		t.Errorf("a value given: %d %s", r.status, r.body)
	}
	if after := string(call(t, "GET", a.api+"/v1/tokens", sourcesOps, "").body); after != before {
		t.Errorf("refused tokens were stored: %s", after)
	}

	// Concurrent creates of one name on both replicas: one wins.
	var won, lost atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		gw := []*apiGateway{a, b}[i%2]
		wg.Go(func() {
			switch r := call(t, "POST", gw.api+"/v1/tokens", sourcesOps, `{"name": "race"}`); r.status {
			case 201:
				won.Add(1)
			case 409:
				lost.Add(1)
			default:
				t.Errorf("race: %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 7 {
		t.Errorf("concurrent creates: %d won, %d lost", won.Load(), lost.Load())
	}

	// A reload of the file keeps the API's tokens.
	if r := call(t, "POST", a.api+"/v1/reload", sourcesOps, ""); r.status != 200 {
		t.Fatalf("reload: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", a.api+"/v1/sources", value, ""); r.status != 200 {
		t.Fatalf("acme-ci after a reload: %d %s", r.status, r.body)
	}

	// Revoked: 401 on the other replica within the bound, and its
	// dashboard session ends.
	jar := dashboardSession(t, b.api, value)
	if body, status := getWith(t, jar, b.api+"/ui/"); status != 200 || !strings.Contains(body, "acme-src") {
		t.Fatalf("acme-ci's dashboard: %d", status)
	}
	if r := call(t, "DELETE", a.api+"/v1/tokens/acme-ci", globexToken, ""); r.status != 404 {
		t.Errorf("globex deletes acme's token: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", a.api+"/v1/tokens/acme-ci", acmeToken, ""); r.status != 204 {
		t.Fatalf("acme revokes acme-ci: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", a.api+"/v1/sources", value, ""); r.status != 401 {
		t.Errorf("acme-ci on a after its revoke: %d", r.status)
	}
	start = time.Now()
	if !testenv.WaitFor(objectsBound, func() bool { return call(t, "GET", b.api+"/v1/tokens/acme-ci", sourcesOps, "").status == 404 }) {
		t.Fatal("b still has the token a revoked")
	}
	t.Logf("a revoke reached the other replica in %s", time.Since(start))
	if r := call(t, "GET", b.api+"/v1/sources", value, ""); r.status != 401 {
		t.Errorf("acme-ci on b after its revoke: %d %s", r.status, r.body)
	}
	if body, _ := getWith(t, jar, b.api+"/ui/"); strings.Contains(body, "acme-src") || !strings.Contains(body, `name="token"`) {
		t.Errorf("the revoked token's dashboard session goes on: %.300s", body)
	}
	if r := call(t, "GET", a.api+"/v1/tokens/acme-ci", sourcesOps, ""); r.status != 404 {
		t.Errorf("acme-ci after its revoke: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", a.api+"/v1/audit", sourcesOps, ""); !strings.Contains(string(r.body), "token_delete") || !strings.Contains(string(r.body), "token:acme") {
		t.Errorf("the revoke's audit: %s", r.body)
	}

	// A restart reads the stored tokens: acme-pub is taken (a publisher:
	// 403 on a list, not 401), acme-ci stays revoked.
	a.stop()
	a, err = startFromFile(t, path, sourcesKey, poll)
	if err != nil {
		t.Fatal(err)
	}
	if r := call(t, "GET", a.api+"/v1/sources", pubValue, ""); r.status != 403 {
		t.Errorf("acme-pub after a restart: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", a.api+"/v1/sources", value, ""); r.status != 401 {
		t.Errorf("acme-ci after a restart: %d %s", r.status, r.body)
	}
}
