package oncehook_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
	"github.com/oncehook/oncehook/store"
)

func TestADeletedNameStaysItsTenantsSQLite(t *testing.T) {
	testADeletedNameStaysItsTenants(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestADeletedNameStaysItsTenantsPostgres(t *testing.T) {
	testADeletedNameStaysItsTenants(t, testenv.Postgres(t))
}

// A deleted source, destination or token leaves a tombstone (#45): a
// tenant's views tell history apart by name, so a name another tenant
// deleted is not another's to take. The tester's two cases: globex's
// revoked token globex-old, and its deleted destination globex-fail, are
// 409 to acme (the body of any name taken), and acme's audit shows
// nothing of globex's. globex creates its own names again (versions go
// on; If-Match of the old one is 412); the operator's deleted name is
// held against every tenant, and the operator's own. A tombstone is a
// name nobody has to GET, PATCH, DELETE and the lists, on both replicas,
// and to export. Concurrent creates over one tombstone: one wins.
func testADeletedNameStaysItsTenants(t *testing.T, storeURL string) {
	sink := testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: "` + storeURL + `"
tenant_egress: {allow: ["127.0.0.0/8"]}
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: acme, token: ` + acmeToken + `, tenant: acme}
    - {name: globex, token: ` + globexToken + `, tenant: globex}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	poll := func(o *oncehook.Options) { o.ObjectsPoll = 200 * time.Millisecond }
	a, err := startFromFile(t, path, sourcesKey, poll)
	if err != nil {
		t.Fatal(err)
	}
	b, err := startFromFile(t, path, sourcesKey, poll)
	if err != nil {
		t.Fatal(err)
	}
	must := func(r apiAnswer, status int, what string) apiAnswer {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		return r
	}
	gone := func(gw *apiGateway, path string) bool {
		return call(t, "GET", gw.api+path, sourcesOps, "").status == 404
	}

	// The tester's first case: globex's token globex-old makes history,
	// and is revoked.
	old := must(call(t, "POST", a.api+"/v1/tokens", globexToken, `{"name": "globex-old"}`), 201, "globex makes globex-old")
	value, _ := old.json["token"].(string)
	must(call(t, "POST", a.api+"/v1/destinations", value, `{"name": "globex-secret-dest", "url": "`+sink.URL+`"}`), 201, "globex-old makes a destination")
	if !testenv.WaitFor(objectsBound, func() bool {
		return !gone(b, "/v1/destinations/globex-secret-dest") && !gone(b, "/v1/tokens/globex-old")
	}) {
		t.Fatal("b does not take globex's token")
	}
	must(call(t, "DELETE", a.api+"/v1/tokens/globex-old", globexToken, ""), 204, "globex revokes globex-old")
	if !testenv.WaitFor(objectsBound, func() bool { return gone(b, "/v1/tokens/globex-old") }) {
		t.Fatal("b still has the revoked token")
	}
	for _, gw := range []*apiGateway{a, b} {
		r := must(call(t, "POST", gw.api+"/v1/tokens", acmeToken, `{"name": "globex-old"}`), 409, "acme takes globex's revoked token's name")
		if r.json["error"] != "token globex-old already exists: choose another name" {
			t.Errorf("acme takes globex-old: %s", r.body)
		}
		must(call(t, "POST", gw.api+"/v1/tokens", sourcesOps, `{"name": "globex-old", "tenant": "acme"}`), 409, "ops makes acme a token of globex's revoked name")
	}
	if r := call(t, "GET", a.api+"/v1/audit", acmeToken, ""); r.status != 200 || strings.Contains(string(r.body), "globex") {
		t.Errorf("acme's audit: %d %s", r.status, r.body)
	}
	list := call(t, "GET", b.api+"/v1/tokens", sourcesOps, "")
	if slices.Contains(namesOf(t, string(list.body), "name"), "globex-old") {
		t.Errorf("the tokens list shows the revoked token: %s", list.body)
	}
	again := must(call(t, "POST", b.api+"/v1/tokens", globexToken, `{"name": "globex-old"}`), 201, "globex makes globex-old again")
	if again.json["version"] != float64(3) {
		t.Errorf("globex-old made again: version %v, want 3 (create, revoke, create): %s", again.json["version"], again.body)
	}
	if r := call(t, "GET", a.api+"/v1/sources", value, ""); r.status != 401 {
		t.Errorf("the revoked value after its name is made again: %d", r.status)
	}

	// The tester's second case: globex's destination globex-fail,
	// deleted.
	must(call(t, "POST", a.api+"/v1/destinations", globexToken, `{"name": "globex-fail", "url": "`+sink.URL+`/globex-path"}`), 201, "globex makes globex-fail")
	if !testenv.WaitFor(objectsBound, func() bool { return !gone(b, "/v1/destinations/globex-fail") }) {
		t.Fatal("b does not take globex-fail")
	}
	must(call(t, "DELETE", a.api+"/v1/destinations/globex-fail", globexToken, ""), 204, "globex deletes globex-fail")
	if !testenv.WaitFor(objectsBound, func() bool { return gone(b, "/v1/destinations/globex-fail") }) {
		t.Fatal("b still has the deleted destination")
	}
	nobodys := func(gw *apiGateway, method, name, token, body string) apiAnswer {
		return call(t, method, gw.api+"/v1/destinations/"+name, token, body)
	}
	for _, gw := range []*apiGateway{a, b} {
		taken := must(call(t, "POST", gw.api+"/v1/destinations", acmeToken, `{"name": "globex-fail", "url": "`+sink.URL+`"}`), 409, "acme takes globex-fail")
		other := call(t, "POST", gw.api+"/v1/destinations", acmeToken, `{"name": "globex-secret-dest", "url": "`+sink.URL+`"}`)
		if strings.ReplaceAll(string(taken.body), "globex-fail", "X") != strings.ReplaceAll(string(other.body), "globex-secret-dest", "X") {
			t.Errorf("a deleted name's 409 differs from a live one's: %s / %s", taken.body, other.body)
		}
		// A tombstone answers as a name nobody has, to its own tenant too.
		for _, token := range []string{globexToken, sourcesOps} {
			for _, m := range []struct{ method, body string }{{"GET", ""}, {"PATCH", `{"timeout": "5s"}`}, {"DELETE", ""}} {
				got, none := nobodys(gw, m.method, "globex-fail", token, m.body), nobodys(gw, m.method, "nobody-s", token, m.body)
				if got.status != 404 || strings.ReplaceAll(string(got.body), "globex-fail", "X") != strings.ReplaceAll(string(none.body), "nobody-s", "X") {
					t.Errorf("%s of the tombstone: %d %s (a name nobody has: %s)", m.method, got.status, got.body, none.body)
				}
			}
		}
		if l := call(t, "GET", gw.api+"/v1/destinations", sourcesOps, ""); strings.Contains(string(l.body), "globex-fail") {
			t.Errorf("the destinations list shows the tombstone: %s", l.body)
		}
	}
	if r := call(t, "GET", a.api+"/v1/audit", acmeToken, ""); strings.Contains(string(r.body), "globex") {
		t.Errorf("acme's audit: %s", r.body)
	}
	// globex's own name: made again, its versions going on.
	re := must(call(t, "POST", b.api+"/v1/destinations", globexToken, `{"name": "globex-fail", "url": "`+sink.URL+`"}`), 201, "globex makes globex-fail again")
	if re.json["version"] != float64(3) || re.header.Get("ETag") != `"3"` {
		t.Errorf("globex-fail made again: %s %s", re.header.Get("ETag"), re.body)
	}
	must(call(t, "PATCH", b.api+"/v1/destinations/globex-fail", globexToken, `{"timeout": "5s"}`, "If-Match", `"1"`), 412, "PATCH at the deleted object's version")
	if !testenv.WaitFor(objectsBound, func() bool { return !gone(a, "/v1/destinations/globex-fail") }) {
		t.Fatal("a does not take the destination made again")
	}
	if r := call(t, "GET", a.api+"/v1/audit", globexToken, ""); !strings.Contains(string(r.body), "destination_delete") || strings.Count(string(r.body), `"destination_create"`) < 3 {
		t.Errorf("globex's audit of its destinations: %s", r.body)
	}

	// The operator's deleted name is held against every tenant; the
	// operator makes it again.
	must(call(t, "POST", a.api+"/v1/sources", sourcesOps, `{"name": "ops-old", "preset": "stripe", "secrets": ["s"]}`), 201, "ops makes ops-old")
	must(call(t, "DELETE", a.api+"/v1/sources/ops-old", sourcesOps, ""), 204, "ops deletes ops-old")
	must(call(t, "POST", a.api+"/v1/sources", acmeToken, `{"name": "ops-old", "preset": "stripe", "secrets": ["s"]}`), 409, "acme takes the operator's deleted name")
	must(call(t, "POST", a.api+"/v1/sources", sourcesOps, `{"name": "ops-old", "tenant": "acme", "preset": "stripe", "secrets": ["s"]}`), 409, "ops gives acme its deleted name")
	if r := call(t, "POST", a.intake+"/in/ops-old", "", `{}`); r.status != 404 {
		t.Errorf("intake serves the deleted source: %d", r.status)
	}
	must(call(t, "POST", a.api+"/v1/sources", sourcesOps, `{"name": "ops-old", "preset": "stripe", "secrets": ["s"]}`), 201, "ops makes ops-old again")

	// Concurrent creates over one tombstone, on both replicas: one wins.
	must(call(t, "POST", a.api+"/v1/destinations", globexToken, `{"name": "race", "url": "`+sink.URL+`"}`), 201, "globex makes race")
	must(call(t, "DELETE", a.api+"/v1/destinations/race", globexToken, ""), 204, "globex deletes race")
	if !testenv.WaitFor(objectsBound, func() bool { return gone(b, "/v1/destinations/race") }) {
		t.Fatal("b still has race")
	}
	var won, lost atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		gw := []*apiGateway{a, b}[i%2]
		wg.Go(func() {
			switch r := call(t, "POST", gw.api+"/v1/destinations", globexToken, `{"name": "race", "url": "`+sink.URL+`"}`); r.status {
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
		t.Errorf("concurrent creates over a tombstone: %d won, %d lost", won.Load(), lost.Load())
	}

	// Deleted for good: gone after a restart, and from export.
	must(call(t, "DELETE", a.api+"/v1/destinations/globex-secret-dest", globexToken, ""), 204, "globex deletes globex-secret-dest")
	a.stop()
	b.stop()
	a, err = startFromFile(t, path, sourcesKey, poll)
	if err != nil {
		t.Fatal(err)
	}
	if !gone(a, "/v1/destinations/globex-secret-dest") || gone(a, "/v1/destinations/race") {
		t.Error("after a restart: the deleted destination is back, or the live one gone")
	}
	must(call(t, "POST", a.api+"/v1/destinations", acmeToken, `{"name": "globex-secret-dest", "url": "`+sink.URL+`"}`), 409, "acme takes globex's deleted name after a restart")
	a.stop()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, dests, err := oncehook.StoredObjects(context.Background(), cfg, st, func(k string) string {
		if k == "ONCEHOOK_SECRET_KEYS" {
			return sourcesKey
		}
		return ""
	})
	var names []string
	for _, d := range dests {
		names = append(names, d.Name)
	}
	if err != nil || !slices.Equal(names, []string{"globex-fail", "race"}) {
		t.Errorf("exported destinations: %q (%v)", names, err)
	}
}

// openStore opens the store at url with the gateway's own kinds.
func openStore(url string) (store.Store, error) {
	all := kinds.All()
	i := slices.IndexFunc(all.Stores, func(k store.Kind) bool {
		return slices.ContainsFunc(k.Schemes, func(s string) bool { return strings.HasPrefix(url, s+"://") })
	})
	return all.Stores[i].Open(context.Background(), url, store.OpenOptions{})
}
