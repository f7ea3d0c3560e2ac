package oncehook_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/egress"
	"github.com/oncehook/oncehook/internal/testenv"
)

func TestATenantsDestinationReachesPublicAddressesOnlySQLite(t *testing.T) {
	testTenantEgress(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestATenantsDestinationReachesPublicAddressesOnlyPostgres(t *testing.T) {
	testTenantEgress(t, testenv.Postgres(t))
}

// internalName is a name of this machine that resolves to an address
// that is not public (its host name: to 127.0.0.1 or 127.0.1.1 here, to
// a container's private address in one), with that address; the test is
// skipped where there is none. A literal address is refused before any
// dial, so the dial's own check is reached through a name.
func internalName(t *testing.T) (string, internalAddr) {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no host name: %v", err)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip4", host)
	if err != nil || len(addrs) == 0 || egress.Class(addrs[0]) == "" {
		t.Skipf("the host name %q resolves to no internal address here (%v %v)", host, addrs, err)
	}
	a := addrs[0].Unmap()
	return host, internalAddr{a.String(), egress.Class(a)}
}

// internalAddr is an address that is not public, and its class.
type internalAddr struct{ addr, class string }

// A tenant's destination never reaches an internal service (#45): one
// at a literal loopback address, or at localhost, is refused when it is
// created (400 at its url, as validate says it); one at a name that
// resolves to an internal address is created, and each attempt fails at
// the dial, the service never called, the attempt saying why (retried as
// any connection failure); tenant_egress.allow lets it through; the
// operator's destination at loopback is delivered all along. A tenant's
// token makes no queue destination (its broker is dialed from the
// gateway's network by a client the guard does not hold).
func testTenantEgress(t *testing.T, storeURL string) {
	host, internal := internalName(t)
	var calls atomic.Int64
	ln, err := net.Listen("tcp", net.JoinHostPort(internal.addr, "0"))
	if err != nil {
		t.Skipf("listen at %s: %v", internal.addr, err)
	}
	service := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "internal service's answer")
	}))
	service.Listener.Close()
	service.Listener = ln
	service.Start()
	defer service.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	sink := testenv.NewSink(t)

	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + storeURL + `
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: acme, token: ` + acmeToken + `, tenant: acme}
sources:
  - {name: ops-in, outbox: true, destinations: [ops-app]}
destinations:
  - {name: ops-app, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	api := gw.api

	// Refused when created: literal addresses, localhost.
	for _, u := range []string{"http://127.0.0.1:" + port + "/hook", "http://localhost:" + port + "/hook", "http://[::ffff:127.0.0.1]:" + port + "/hook", "http://169.254.169.254/latest/meta-data/"} {
		a := call(t, "POST", api+"/v1/destinations", acmeToken, `{"name": "acme-lo", "url": "`+u+`"}`)
		if a.status != 400 || a.json["field"] != "url" || !strings.Contains(string(a.body), "tenant destinations reach public addresses only (tenant_egress.allow lets them reach others)") {
			t.Fatalf("acme's destination at %s: %d %s", u, a.status, a.body)
		}
	}
	if a := call(t, "POST", api+"/v1/destinations", sourcesOps, `{"name": "acme-lo", "tenant": "acme", "url": "http://127.0.0.1:`+port+`/hook"}`); a.status != 400 || a.json["field"] != "url" {
		t.Fatalf("the operator's token making acme's destination at loopback: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/destinations", acmeToken, `{"name": "acme-q", "publish": {"nats": {"url": "nats://127.0.0.1:4222", "subject": "x"}}}`); a.status != 400 || a.json["field"] != "publish" ||
		!strings.Contains(string(a.body), "a tenant's token makes url: and pull: destinations only") {
		t.Fatalf("acme's queue destination: %d %s", a.status, a.body)
	}

	// A name: created; refused at each dial. (Made by the operator for
	// acme: a tenant's token may not set retry.max_attempts past its
	// bound, and the attempts must go on until the reload below.)
	named := "http://" + host + ":" + port + "/hook"
	if a := call(t, "POST", api+"/v1/destinations", sourcesOps, `{"name": "acme-app", "tenant": "acme", "url": "`+named+`", "retry": {"max_attempts": 1000, "base_delay": "100ms", "max_delay": "300ms"}, "breaker": {"off": true}}`); a.status != 201 {
		t.Fatalf("acme's destination at %s: %d %s", named, a.status, a.body)
	}
	// Nor made so by a change.
	if a := call(t, "PATCH", api+"/v1/destinations/acme-app", acmeToken, `{"url": "http://10.1.2.3/hook"}`); a.status != 400 || a.json["field"] != "url" ||
		!strings.Contains(string(a.body), "10.1.2.3 is private; tenant destinations reach public addresses only") {
		t.Fatalf("acme's destination changed to a private address: %d %s", a.status, a.body)
	}
	if a := call(t, "PATCH", api+"/v1/destinations/acme-app", acmeToken, `{"url": null, "publish": {"nats": {"url": "nats://127.0.0.1:4222", "subject": "x"}}}`); a.status != 400 || a.json["field"] != "publish" {
		t.Fatalf("acme's destination changed to a queue: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/sources", acmeToken, `{"name": "acme-in", "outbox": true, "destinations": ["acme-app"]}`); a.status != 201 {
		t.Fatalf("acme's source: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/publish/acme-in", acmeToken, `{"n": 1}`, "Idempotency-Key", "ord-1", "Content-Type", "application/json"); a.status != 202 {
		t.Fatalf("acme publishes: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", api+"/v1/publish/ops-in", sourcesOps, `{"n": 1}`, "Idempotency-Key", "ord-1", "Content-Type", "application/json"); a.status != 202 {
		t.Fatalf("ops publishes: %d %s", a.status, a.body)
	}
	want := "address refused: " + internal.addr + " is " + internal.class + "; tenant destinations reach public addresses only"
	id := strconv.FormatInt(eventIDOf(t, api, acmeToken, "acme-in"), 10)
	var event apiAnswer
	if !testenv.WaitFor(10*time.Second, func() bool {
		event = call(t, "GET", api+"/v1/events/"+id, acmeToken, "")
		return strings.Contains(string(event.body), want) && strings.Count(string(event.body), `"attempts":`) > 0
	}) {
		t.Fatalf("acme's event, want an attempt saying %q: %.2000s", want, event.body)
	}
	if strings.Contains(string(event.body), "internal service's answer") || strings.Contains(string(event.body), `"state":"dead"`) {
		t.Fatalf("acme's event: %.2000s", event.body)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatalf("the operator's destination at loopback: %d delivered", len(sink.Deliveries()))
	}
	time.Sleep(300 * time.Millisecond) // attempts go on: none reaches it
	if n := calls.Load(); n != 0 {
		t.Fatalf("the internal service was called %d times", n)
	}

	// Allowed by the operator: the next attempt is delivered.
	allow := "tenant_egress: {allow: [\"" + internal.addr + "/32\"]}\n"
	if err := os.WriteFile(path, []byte(allow+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := call(t, "POST", api+"/v1/reload", sourcesOps, ""); a.status != 200 {
		t.Fatalf("reload: %d %s", a.status, a.body)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return calls.Load() == 1 }) {
		t.Fatalf("allowed, the service was called %d times", calls.Load())
	}
	if !testenv.WaitFor(5*time.Second, func() bool {
		event = call(t, "GET", api+"/v1/events/"+id, acmeToken, "")
		return strings.Contains(string(event.body), `"state":"delivered"`)
	}) {
		t.Fatalf("acme's event once allowed: %.2000s", event.body)
	}
}
