package oncehook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
)

// objectsBound is the bound this test holds every replica to: a change
// taken through the API on one replica is served by every other within
// it (README, "Sources and destinations from your own backend"). The
// measured figures are far below it (a p50 of tens of milliseconds, a
// max under 2 s on a loaded machine: BENCHMARKS.md); it is wide for a
// shared machine under the race detector.
const objectsBound = 5 * time.Second

// Three replicas on one PostgreSQL, under continuous signed traffic to a
// source of the file's on each: N sources created through replica A are
// each served (200, not 404) by B and C within the bound, a rotated
// secret is honoured and the old one refused by both within it, a delete
// answers 404 on both within it, and no request to the file's source
// fails meanwhile. The replicas' poll is an hour: what is measured is
// NOTIFY. Their listening connections killed (pg_terminate_backend),
// changes made while they reconnect are applied at their reconnect. A
// fourth replica without the key the secrets are sealed with keeps
// serving what it had and says so on /readyz, until what is stored opens
// again.
func TestEveryReplicaAppliesAStoredChange(t *testing.T) {
	sink := testenv.NewSink(t)
	app := fmt.Sprintf("objwatch_%d", time.Now().UnixNano())
	pg := testenv.Postgres(t) + "&application_name=" + app
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: "` + pg + `"
api: {tokens: [{name: ops, token: ` + sourcesOps + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	hour := func(o *oncehook.Options) {
		o.ObjectsPoll = time.Hour
	}
	var gws []*apiGateway
	for range 3 {
		gw, err := startFromFile(t, path, sourcesKey, hour)
		if err != nil {
			t.Fatal(err)
		}
		gws = append(gws, gw)
	}
	a, others := gws[0], gws[1:]
	lacking, err := startFromFile(t, path, sourcesOtherKey, hour)
	if err != nil {
		t.Fatal(err)
	}

	// Continuous traffic to the file's source on every replica.
	ctx, stop := context.WithCancel(context.Background())
	var sent, failed atomic.Int64
	var traffic sync.WaitGroup
	for i, gw := range append(slices.Clone(gws), lacking) {
		traffic.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				s := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/filed", "stripe", "whsec_file_secret", stripeEvent(fmt.Sprintf("evt_filed_%d_%d", i, n)), "")).Status
				sent.Add(1)
				if s != 200 {
					failed.Add(1)
					t.Errorf("filed on replica %d: %d", i, s)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	defer func() { stop(); traffic.Wait() }()

	probe := func(gw *apiGateway, source, secret string) int {
		id := fmt.Sprintf("evt_probe_%d", time.Now().UnixNano())
		return do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/"+source, "stripe", secret, stripeEvent(id), "")).Status
	}
	// until is how long, from now, until every one of others answers
	// want for source signed with secret; past objectsBound, the test
	// fails.
	until := func(what, source, secret string, want int) time.Duration {
		t.Helper()
		start := time.Now()
		var wg sync.WaitGroup
		took := make([]time.Duration, len(others))
		for i, gw := range others {
			wg.Go(func() {
				for probe(gw, source, secret) != want {
					if time.Since(start) > objectsBound {
						took[i] = -1
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				took[i] = time.Since(start)
			})
		}
		wg.Wait()
		if slices.Contains(took, -1) {
			t.Fatalf("%s: not %d on every replica within %s: %v", what, want, objectsBound, took)
		}
		return slices.Max(took)
	}
	sourceJSON := func(name, secret string) string {
		return `{"name": "` + name + `", "preset": "stripe", "secrets": ["` + secret + `"], "destinations": ["app"]}`
	}

	const n = 100
	var creates, rotations, deletes []time.Duration
	for i := range n {
		name := fmt.Sprintf("tenant-%03d", i)
		if r := call(t, "POST", a.api+"/v1/sources", sourcesOps, sourceJSON(name, acmeSecret1)); r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		creates = append(creates, until("create "+name, name, acmeSecret1, 200))
	}
	// Its detail names the first object that does not open, and counts
	// the rest.
	if !testenv.WaitFor(objectsBound, func() bool {
		why := fmt.Sprint(readyObjects(t, lacking)["error"])
		return strings.Contains(why, "tenant-000 (created through the API, version 1): secrets[0]: ") && strings.HasSuffix(why, "(and 99 more)")
	}) {
		t.Fatalf("the replica without the key does not say, on /readyz, that it cannot apply what is stored: %v", readyObjects(t, lacking))
	}
	if r := call(t, "GET", lacking.api+"/v1/doctor", sourcesOps, ""); r.status != 200 || !strings.Contains(string(r.body), `"objects_not_applied"`) {
		t.Errorf("the doctor of the replica without the key: %d %s", r.status, r.body)
	}
	if s := probe(lacking, "tenant-000", acmeSecret1); s != 404 {
		t.Errorf("the replica without the key answers a source it could not apply: %d", s)
	}
	for i := range 20 {
		name := fmt.Sprintf("tenant-%03d", i)
		if r := call(t, "PATCH", a.api+"/v1/sources/"+name, sourcesOps, `{"secrets": ["`+acmeSecret2+`"]}`); r.status != 200 {
			t.Fatalf("rotate %s: %d %s", name, r.status, r.body)
		}
		took := until("the old secret of "+name, name, acmeSecret1, 401)
		if s := probe(others[0], name, acmeSecret2); s != 200 {
			t.Fatalf("the new secret of %s: %d", name, s)
		}
		rotations = append(rotations, took)
	}
	for i := 80; i < n; i++ {
		name := fmt.Sprintf("tenant-%03d", i)
		if r := call(t, "DELETE", a.api+"/v1/sources/"+name, sourcesOps, ""); r.status != 204 {
			t.Fatalf("delete %s: %d %s", name, r.status, r.body)
		}
		deletes = append(deletes, until("delete "+name, name, acmeSecret1, 404))
	}

	// The listening connections killed; changes made before they are
	// back: tenant-079 deleted by SQL in the same statement (committed
	// before any reconnects, and announcing nothing), and 5 creates.
	killed := terminateListeners(t, pg, app, "tenant-079")
	if killed < 4 {
		t.Fatalf("terminated %d listening connections, want one a replica", killed)
	}
	for i := n; i < n+5; i++ {
		name := fmt.Sprintf("tenant-%03d", i)
		if r := call(t, "POST", a.api+"/v1/sources", sourcesOps, sourceJSON(name, acmeSecret1)); r.status != 201 {
			t.Fatalf("create %s while the listeners reconnect: %d %s", name, r.status, r.body)
		}
	}
	down := listening(t, app) == 0 // still reconnecting: the creates were made while none listened
	recovered := until("the changes made while the listeners were down", fmt.Sprintf("tenant-%03d", n+4), acmeSecret1, 200)
	until("the delete no notification announced", "tenant-079", acmeSecret2, 404)

	// What the lacking replica could not open goes: it catches up.
	for i := range n + 5 {
		if i >= 80 && i < n {
			continue
		}
		if r := call(t, "DELETE", a.api+"/v1/sources/"+fmt.Sprintf("tenant-%03d", i), sourcesOps, ""); r.status != 204 && (i != 79 || r.status != 404) {
			t.Fatalf("delete tenant-%03d: %d %s", i, r.status, r.body)
		}
	}
	if !testenv.WaitFor(objectsBound, func() bool { return readyObjects(t, lacking) == nil }) {
		t.Fatalf("the replica without the key still says it is behind once nothing sealed is stored: %v", readyObjects(t, lacking))
	}
	stop()
	traffic.Wait()
	if sent.Load() < 100 || failed.Load() > 0 {
		t.Fatalf("traffic to the file's source: %d sent, %d failed", sent.Load(), failed.Load())
	}
	t.Logf("every replica serves a change within: create p50 %s max %s (%d); rotation p50 %s max %s (%d); delete p50 %s max %s (%d); after pg_terminate_backend of %d listeners (5 creates made while none listened: %v), %s; %d requests to the file's source meanwhile, none failed",
		p50(creates), slices.Max(creates), len(creates), p50(rotations), slices.Max(rotations), len(rotations),
		p50(deletes), slices.Max(deletes), len(deletes), killed, down, recovered, sent.Load())
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Microsecond)
}

// readyObjects is /readyz's "objects" detail of gw (nil: none), checking
// that it stays ready.
func readyObjects(t *testing.T, gw *apiGateway) map[string]any {
	t.Helper()
	r := call(t, "GET", gw.intake+"/readyz", "", "")
	if r.status != 200 {
		t.Fatalf("/readyz: %d %s", r.status, r.body)
	}
	var body struct {
		Objects map[string]any `json:"objects"`
	}
	json.Unmarshal(r.body, &body)
	if body.Objects != nil && !strings.Contains(fmt.Sprint(body.Objects["error"]), "secrets") {
		t.Errorf("/readyz's objects detail does not name what failed: %s", r.body)
	}
	return body.Objects
}

// listening is how many connections of application name app LISTEN for
// object changes.
func listening(t *testing.T, app string) int {
	return pgCount(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query = 'LISTEN oncehook_objects'`, app)
}

// terminateListeners ends, with pg_terminate_backend, the connections of
// application name app that LISTEN for object changes, and in the same
// statement deletes the source deleted from the store at pg (by SQL: no
// NOTIFY); it returns how many it ended.
func terminateListeners(t *testing.T, pg, app, deleted string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, d int
	err = conn.QueryRow(ctx, `WITH k AS (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND query = 'LISTEN oncehook_objects'),
		d AS (DELETE FROM objects WHERE kind = 'source' AND name = $2 RETURNING 1)
		SELECT (SELECT count(*) FROM k), (SELECT count(*) FROM d)`, app, deleted).Scan(&n, &d)
	if err != nil || d != 1 {
		t.Fatalf("terminate and delete: %v, %d deleted", err, d)
	}
	return n
}

// pgCount is the count query answers, on the test's server.
func pgCount(t *testing.T, query, app string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testenv.PostgresBase())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, query, app).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Two gateways on one SQLite file (not the rule there, but allowed), with
// no NOTIFY: the poll of the objects' mark alone brings a source created
// on one to the other, and its delete, within the poll and a little.
func TestTheObjectsPollAppliesAChangeOnSQLite(t *testing.T) {
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.yaml")
	yaml := `store: "sqlite://` + filepath.Join(dir, "oncehook.db") + `"
api: {tokens: [{name: ops, token: ` + sourcesOps + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
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
	send := func(gw *apiGateway) int {
		id := fmt.Sprintf("evt_poll_%d", time.Now().UnixNano())
		return do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/acme-stripe", "stripe", acmeSecret1, stripeEvent(id), "")).Status
	}
	if r := call(t, "POST", a.api+"/v1/sources", sourcesOps, `{"name": "acme-stripe", "preset": "stripe", "secrets": ["`+acmeSecret1+`"], "destinations": ["app"]}`); r.status != 201 {
		t.Fatalf("create on a: %d %s", r.status, r.body)
	}
	start := time.Now()
	if !testenv.WaitFor(objectsBound, func() bool { return send(b) == 200 }) {
		t.Fatal("b does not serve the source a created")
	}
	created := time.Since(start)
	if r := call(t, "DELETE", a.api+"/v1/sources/acme-stripe", sourcesOps, ""); r.status != 204 {
		t.Fatalf("delete on a: %d %s", r.status, r.body)
	}
	start = time.Now()
	if !testenv.WaitFor(objectsBound, func() bool { return send(b) == 404 }) {
		t.Fatal("b still serves the source a deleted")
	}
	deleted := time.Since(start)

	// Deleted and created again between two polls, with another secret:
	// its version goes on from the deleted one's tombstone (create,
	// delete, create). b reads it anew: the new secret is taken, the old
	// refused.
	sendWith := func(gw *apiGateway, secret string) int {
		id := fmt.Sprintf("evt_poll_%d", time.Now().UnixNano())
		return do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/acme-stripe", "stripe", secret, stripeEvent(id), "")).Status
	}
	made := call(t, "POST", a.api+"/v1/sources", sourcesOps, `{"name": "acme-stripe", "preset": "stripe", "secrets": ["`+acmeSecret1+`"], "destinations": ["app"]}`)
	if made.status != 201 {
		t.Fatalf("create on a: %d %s", made.status, made.body)
	}
	if !testenv.WaitFor(objectsBound, func() bool { return send(b) == 200 }) {
		t.Fatal("b does not serve the source a created again")
	}
	if r := call(t, "DELETE", a.api+"/v1/sources/acme-stripe", sourcesOps, ""); r.status != 204 {
		t.Fatalf("delete on a: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", a.api+"/v1/sources", sourcesOps, `{"name": "acme-stripe", "preset": "stripe", "secrets": ["`+acmeSecret2+`"], "destinations": ["app"]}`); r.status != 201 || r.json["version"] != made.json["version"].(float64)+2 {
		t.Fatalf("create again on a: %d %s", r.status, r.body)
	}
	if !testenv.WaitFor(objectsBound, func() bool { return sendWith(b, acmeSecret2) == 200 }) {
		t.Fatal("b does not take the secret of the source a deleted and created again")
	}
	if s := sendWith(b, acmeSecret1); s != 401 {
		t.Fatalf("b takes the secret of the source deleted before: %d", s)
	}
	t.Logf("polled every 200 ms: created served in %s, deleted in %s", created, deleted)
}
