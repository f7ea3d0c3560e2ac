package oncehook_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
	"github.com/oncehook/oncehook/store"
)

// tenantObjectsGateway starts a gateway on storeURL with the operator's
// token, a tenant's token (acme) and a shared destination (app). It
// gives back the store the gateway opened (the real one, for a test to
// close under it) and storedNames, which reads what that database holds
// through a store of its own.
func tenantObjectsGateway(t *testing.T, storeURL string) (gw *apiGateway, opened *store.Store, storedNames func(kind string) []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + storeURL + `
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: acme, token: ` + acmeToken + `, tenant: acme}
destinations:
  - {name: app, url: "http://127.0.0.1:9/"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	all := kinds.All()
	opened = new(store.Store)
	gw, err := startFromFile(t, path, sourcesKey, func(o *oncehook.Options) {
		o.Kinds.Stores = slices.Clone(all.Stores)
		for i, k := range o.Kinds.Stores {
			o.Kinds.Stores[i].Open = func(ctx context.Context, url string, oo store.OpenOptions) (store.Store, error) {
				st, err := k.Open(ctx, url, oo)
				*opened = st
				return st, err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	storedNames = func(kind string) []string {
		t.Helper()
		i := slices.IndexFunc(all.Stores, func(k store.Kind) bool {
			return slices.ContainsFunc(k.Schemes, func(s string) bool { return strings.HasPrefix(storeURL, s+"://") })
		})
		st, err := all.Stores[i].Open(context.Background(), storeURL, store.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		objs, err := st.ListObjects(context.Background(), kind)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, o := range objs {
			names = append(names, o.Name)
		}
		return names
	}
	return gw, opened, storedNames
}

func TestATenantsObjectWhileTheStoreIsDownSQLite(t *testing.T) {
	testATenantsObjectWhileTheStoreIsDown(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestATenantsObjectWhileTheStoreIsDownPostgres(t *testing.T) {
	testATenantsObjectWhileTheStoreIsDown(t, testenv.Postgres(t))
}

// A tenant's object is created only once the store has said that its
// name holds nothing of an earlier owner's (nameHoldsData): while the
// store cannot answer (its database closed under the gateway), the create
// is the objects API's 503 with Retry-After (invariant 1's answer),
// nothing is stored and nothing is served, whichever token asks.
func testATenantsObjectWhileTheStoreIsDown(t *testing.T, storeURL string) {
	gw, opened, storedNames := tenantObjectsGateway(t, storeURL)
	// One made while the store answers: what the reader must find.
	if a := call(t, "POST", gw.api+"/v1/sources", acmeToken, `{"name": "acme-before", "preset": "stripe", "secrets": ["s"]}`); a.status != 201 {
		t.Fatalf("a tenant's source with the store up: %d %s", a.status, a.body)
	}
	if err := (*opened).Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ token, path, body string }{
		{acmeToken, "/v1/sources", `{"name": "acme-src", "preset": "stripe", "secrets": ["s"], "destinations": ["app"]}`},
		{sourcesOps, "/v1/sources", `{"name": "acme-src", "tenant": "acme", "preset": "stripe", "secrets": ["s"]}`},
		{acmeToken, "/v1/destinations", `{"name": "acme-app", "url": "https://acme.example/hook"}`},
		{sourcesOps, "/v1/destinations", `{"name": "acme-app", "tenant": "acme", "url": "https://acme.example/hook"}`},
	} {
		a := call(t, "POST", gw.api+c.path, c.token, c.body)
		if a.status != 503 || a.json["reason"] != "unavailable" || a.header.Get("Retry-After") == "" {
			t.Errorf("POST %s %s with the store closed: %d %s", c.path, c.body, a.status, a.body)
		}
	}
	leftNothing(t, gw, storedNames, "acme-src", "acme-app", "acme-before")
}

func TestHostileTenantThroughTheObjectsAPISQLite(t *testing.T) {
	testHostileTenantThroughTheObjectsAPI(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestHostileTenantThroughTheObjectsAPIPostgres(t *testing.T) {
	testHostileTenantThroughTheObjectsAPI(t, testenv.Postgres(t))
}

// Hostile bytes as an object's tenant (the operator's token gives one):
// a NUL, bytes that are not UTF-8, CR/LF, a tenant just under the body's
// bound are each a 400 naming the field tenant; a tenant of 1 MB is over
// the objects API's body bound (413). Nothing of any is stored or served.
func testHostileTenantThroughTheObjectsAPI(t *testing.T, storeURL string) {
	gw, _, storedNames := tenantObjectsGateway(t, storeURL)
	quoted := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	for _, c := range []struct {
		what, tenant string // tenant as the JSON body carries it
		status       int
	}{
		{"NUL", quoted("ac\x00me"), 400},
		{"escaped NUL", `"ac\u0000me"`, 400},
		{"not UTF-8", "\"ac\xff\xfeme\"", 400},
		{"CR/LF", quoted("acme\r\nX-Injected: 1"), 400},
		{"60 KB", quoted(strings.Repeat("a", 60<<10)), 400},
		{"1 MB", quoted(strings.Repeat("a", 1<<20)), 413},
	} {
		for _, o := range []struct{ path, body string }{
			{"/v1/sources", `{"name": "hostile-src", "tenant": ` + c.tenant + `, "preset": "stripe", "secrets": ["s"]}`},
			{"/v1/destinations", `{"name": "hostile-app", "tenant": ` + c.tenant + `, "url": "https://acme.example/hook"}`},
		} {
			a := call(t, "POST", gw.api+o.path, sourcesOps, o.body)
			if a.status != c.status || (c.status == 400 && a.json["field"] != "tenant") {
				t.Errorf("POST %s, tenant %s: %d %.300s", o.path, c.what, a.status, a.body)
			}
		}
	}
	leftNothing(t, gw, storedNames, "hostile-src", "hostile-app")
}

// leftNothing checks that refused creates of source and destination left
// nothing: neither is served (the API's 404, intake's 404), and once gw
// has stopped its store holds no destination and no source but stored
// (the sources made before).
func leftNothing(t *testing.T, gw *apiGateway, storedNames func(kind string) []string, source, destination string, stored ...string) {
	t.Helper()
	for _, p := range []string{"/v1/sources/" + source, "/v1/destinations/" + destination} {
		if a := call(t, "GET", gw.api+p, sourcesOps, ""); a.status != 404 {
			t.Errorf("GET %s after the refused creates: %d %.300s", p, a.status, a.body)
		}
	}
	if a := call(t, "POST", gw.intake+"/in/"+source, "", `{}`); a.status != 404 {
		t.Errorf("intake serves the refused source: %d %.300s", a.status, a.body)
	}
	gw.stop()
	if got := storedNames(store.ObjectSource); !slices.Equal(got, append([]string{}, stored...)) {
		t.Errorf("sources stored: %q, want %q", got, stored)
	}
	if got := storedNames(store.ObjectDestination); len(got) != 0 {
		t.Errorf("destinations stored: %q", got)
	}
}
