package oncehook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
)

const (
	sourcesOps    = "ops-token-0123456789"
	sourcesReader = "reader-token-0123456789"
	// Two 32-byte keys in standard base64.
	sourcesKey      = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	sourcesOtherKey = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
	acmeSecret1     = "whsec_acme_first_secret_42"
	acmeSecret2     = "whsec_acme_second_secret_43"
)

// apiGateway is a gateway served from a config file, restartable on the
// same store.
type apiGateway struct {
	intake, api string
	stop        func()
}

func startFromFile(t *testing.T, path, keys string, with ...func(*oncehook.Options)) (*apiGateway, error) {
	t.Helper()
	cfg, err := oncehook.LoadConfig(path, kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	env := func(name string) string {
		if name == "ONCEHOOK_SECRET_KEYS" {
			return keys
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := oncehook.Options{Kinds: kinds.All(), ConfigFile: path, Getenv: env, ShutdownTimeout: 5 * time.Second}
	for _, f := range with {
		f(&opts)
	}
	gw, err := oncehook.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	apiLn, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, ln, apiLn) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return &apiGateway{intake: "http://" + ln.Addr().String(), api: "http://" + apiLn.Addr().String(), stop: stop}, nil
}

type apiAnswer struct {
	status int
	body   []byte
	header http.Header
	json   map[string]any
}

func call(t *testing.T, method, url, token, body string, header ...string) apiAnswer {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := apiAnswer{status: resp.StatusCode, body: raw, header: resp.Header}
	json.Unmarshal(raw, &a.json)
	return a
}

func TestSourcesThroughTheAPISQLite(t *testing.T) {
	dir := t.TempDir()
	testSourcesThroughTheAPI(t, "sqlite://"+filepath.Join(dir, "oncehook.db"), dir)
}

func TestSourcesThroughTheAPIPostgres(t *testing.T) {
	t.Parallel()
	testSourcesThroughTheAPI(t, testenv.Postgres(t), "")
}

// A source created through the API (#45): checked by the file's check,
// its errors naming its fields as validate names them; served at once at
// the intake URL its answer gives; its secret rotated by a PATCH; kept
// across a reload of the file and a restart; removed by a DELETE (404 at
// intake). The file's sources are the file's (409 naming it); secrets
// need a key, and are never in an answer, nor in clear in the database.
func testSourcesThroughTheAPI(t *testing.T, storeURL, sqliteDir string) {
	sink := testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + storeURL + `
api:
  tokens:
    - {name: ops, token: ` + sourcesOps + `}
    - {name: reader, token: ` + sourcesReader + `, read_only: true}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `", retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	acme := `{"name": "acme-stripe", "preset": "stripe", "secrets": ["` + acmeSecret1 + `"], "destinations": ["app"]}`

	// Without a key, a source with secrets is refused, saying how to set one.
	gw, err := startFromFile(t, path, "")
	if err != nil {
		t.Fatal(err)
	}
	if a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, acme); a.status != 400 || a.json["field"] != "secrets[0]" || !strings.Contains(string(a.body), "ONCEHOOK_SECRET_KEYS") {
		t.Fatalf("a secret without a key: %d %s", a.status, a.body)
	}
	gw.stop()

	gw, err = startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	if a := call(t, "POST", gw.api+"/v1/sources", sourcesReader, acme); a.status != 403 {
		t.Fatalf("a read-only token creates: %d %s", a.status, a.body)
	}
	a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, acme)
	if a.status != 201 || a.json["intake_url"] != gw.intake+"/in/acme-stripe" || a.json["version"] != 1.0 || a.header.Get("ETag") != `"1"` || a.json["managed_by"] != "api" || a.json["created_by"] != "token:ops" {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	if bytes.Contains(a.body, []byte(acmeSecret1)) || !strings.Contains(string(a.body), `"fingerprint":"sha256:`) {
		t.Fatalf("the answer shows the secret, or not its fingerprint: %s", a.body)
	}
	send := func(secret, id string) int {
		t.Helper()
		return do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/acme-stripe", "stripe", secret, stripeEvent(id), "")).Status
	}
	if s := send(acmeSecret1, "evt_api_1"); s != 200 {
		t.Fatalf("a signed webhook to the new source: %d", s)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return sink.ByKey()["acme-stripe:evt_api_1"] == 1 }) {
		t.Fatalf("not delivered: %v", sink.ByKey())
	}

	// Refused as the file's check refuses it, field by field.
	bad := call(t, "POST", gw.api+"/v1/sources", sourcesOps, `{"name": "bad", "preset": "stripe", "secrets": ["x"], "destinations": ["nope"], "windw": "1h"}`)
	if bad.status != 400 || bad.json["field"] != "windw" || !strings.Contains(string(bad.body), "did you mean window?") {
		t.Fatalf("a misspelt field: %d %s", bad.status, bad.body)
	}
	bad = call(t, "POST", gw.api+"/v1/sources", sourcesOps, `{"name": "bad", "preset": "stripe", "secrets": ["x"], "destinations": ["nope"]}`)
	if bad.status != 400 || bad.json["field"] != "destinations[0]" || bad.json["error"] != `destinations[0]: no destination named "nope"` {
		t.Fatalf("a route to nothing: %d %s", bad.status, bad.body)
	}
	bad = call(t, "POST", gw.api+"/v1/sources", sourcesOps, `{"name": "bad", "preset": "strpe", "destinations": ["app"]}`)
	if bad.status != 400 || bad.json["field"] != "preset" || !strings.Contains(string(bad.body), "stripe") {
		t.Fatalf("a misspelt preset: %d %s", bad.status, bad.body)
	}
	for _, body := range []string{``, `[]`, `{"name": 1}`, `{"name": "a b"}`, `{"name": "x"} {}`, "{\"name\": \"\u0000\"}", `{"name": "bad\"", "preset": "stripe"}`} {
		if a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, body); a.status != 400 {
			t.Fatalf("%q: %d %s", body, a.status, a.body)
		}
	}

	// The file's and the taken names.
	for _, m := range []string{"POST", "PATCH", "DELETE"} {
		url, body := gw.api+"/v1/sources/filed", `{"secrets": ["y"]}`
		if m == "POST" {
			url, body = gw.api+"/v1/sources", `{"name": "filed", "preset": "stripe", "secrets": ["y"]}`
		}
		if a := call(t, m, url, sourcesOps, body); a.status != 409 || !strings.Contains(string(a.body), path) {
			t.Fatalf("%s of the file's source: %d %s", m, a.status, a.body)
		}
	}
	if a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, acme); a.status != 409 {
		t.Fatalf("a name taken: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", gw.api+"/v1/sources/filed", sourcesReader, ""); a.status != 200 || a.json["managed_by"] != "file" || a.json["config"] != path {
		t.Fatalf("the file's source: %d %s", a.status, a.body)
	}

	// The secret rotated: the old one is refused, the new one taken; a
	// change against an old version is refused.
	up := call(t, "PATCH", gw.api+"/v1/sources/acme-stripe", sourcesOps, `{"secrets": ["`+acmeSecret2+`"]}`, "If-Match", `"1"`)
	if up.status != 200 || up.json["version"] != 2.0 || bytes.Contains(up.body, []byte(acmeSecret2)) || up.json["updated_by"] != "token:ops" {
		t.Fatalf("rotate: %d %s", up.status, up.body)
	}
	if a := call(t, "PATCH", gw.api+"/v1/sources/acme-stripe", sourcesOps, `{"window": "2h"}`, "If-Match", `"1"`); a.status != 412 {
		t.Fatalf("a change against version 1: %d %s", a.status, a.body)
	}
	if a := call(t, "PATCH", gw.api+"/v1/sources/acme-stripe", sourcesOps, `{"name": "other"}`); a.status != 400 || a.json["field"] != "name" {
		t.Fatalf("a rename: %d %s", a.status, a.body)
	}
	if a := call(t, "PATCH", gw.api+"/v1/sources/acme-stripe", sourcesOps, `{"destinations": ["gone"]}`); a.status != 400 || a.json["field"] != "destinations[0]" {
		t.Fatalf("a route to nothing: %d %s", a.status, a.body)
	}
	if s := send(acmeSecret1, "evt_api_2"); s != 401 {
		t.Fatalf("the old secret after the rotation: %d", s)
	}
	if s := send(acmeSecret2, "evt_api_3"); s != 200 {
		t.Fatalf("the new secret: %d", s)
	}

	// A reload of the file keeps it; so does a restart.
	if a := call(t, "POST", gw.api+"/v1/reload", sourcesOps, ""); a.status != 200 {
		t.Fatalf("reload: %d %s", a.status, a.body)
	}
	if s := send(acmeSecret2, "evt_api_4"); s != 200 {
		t.Fatalf("after a reload: %d", s)
	}
	gw.stop()
	if _, err := startFromFile(t, path, sourcesOtherKey); err == nil || !strings.Contains(err.Error(), "acme-stripe") || !strings.Contains(err.Error(), "not among the configured") {
		t.Fatalf("a restart with another key: %v", err)
	}
	if _, err := startFromFile(t, path, ""); err == nil || !strings.Contains(err.Error(), "ONCEHOOK_SECRET_KEYS") {
		t.Fatalf("a restart without a key: %v", err)
	}
	gw, err = startFromFile(t, path, sourcesOtherKey+","+sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	if a := call(t, "GET", gw.api+"/v1/sources/acme-stripe", sourcesReader, ""); a.status != 200 || a.json["version"] != 2.0 || a.json["intake_url"] != gw.intake+"/in/acme-stripe" {
		t.Fatalf("after a restart: %d %s", a.status, a.body)
	}
	if s := send(acmeSecret2, "evt_api_5"); s != 200 {
		t.Fatalf("after a restart: %d", s)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.ByKey()) == 4 }) {
		t.Fatalf("delivered %v", sink.ByKey())
	}
	sink.CheckEachOnce(t)

	if a := call(t, "DELETE", gw.api+"/v1/sources/acme-stripe", sourcesOps, ""); a.status != 204 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if s := send(acmeSecret2, "evt_api_6"); s != 404 {
		t.Fatalf("after the delete: %d", s)
	}
	if a := call(t, "GET", gw.api+"/v1/sources/acme-stripe", sourcesReader, ""); a.status != 404 {
		t.Fatalf("read after the delete: %d %s", a.status, a.body)
	}
	audit := call(t, "GET", gw.api+"/v1/audit", sourcesReader, "")
	for _, want := range []string{"source_create", "source_update", "source_delete"} {
		if !strings.Contains(string(audit.body), want) {
			t.Fatalf("the audit log has no %s: %s", want, audit.body)
		}
	}
	gw.stop()

	if sqliteDir != "" {
		files, _ := filepath.Glob(filepath.Join(sqliteDir, "*"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, s := range []string{acmeSecret1, acmeSecret2} {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s holds a secret in clear", f)
				}
			}
		}
		if len(files) == 0 {
			t.Fatal("no database file to read")
		}
	}
}

// Two replicas on one PostgreSQL, neither watching the store
// (ObjectsPoll < 0): a source created on one reaches the other at its
// reload of the file; a file that names a
// source the API created is refused at its reload, naming both.
func TestAnAPISourceReachesAnotherReplicaAtItsReload(t *testing.T) {
	sink := testenv.NewSink(t)
	pg := testenv.Postgres(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + pg + `
api: {tokens: [{name: ops, token: ` + sourcesOps + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := startFromFile(t, path, sourcesKey, noWatch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := startFromFile(t, path, sourcesKey, noWatch)
	if err != nil {
		t.Fatal(err)
	}
	acme := `{"name": "acme-stripe", "preset": "stripe", "secrets": ["` + acmeSecret1 + `"], "destinations": ["app"]}`
	if r := call(t, "POST", a.api+"/v1/sources", sourcesOps, acme); r.status != 201 {
		t.Fatalf("create on a: %d %s", r.status, r.body)
	}
	send := func(gw *apiGateway, id string) int {
		return do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/acme-stripe", "stripe", acmeSecret1, stripeEvent(id), "")).Status
	}
	if s := send(b, "evt_r_1"); s != 404 {
		t.Fatalf("b before its reload: %d", s)
	}
	if r := call(t, "POST", b.api+"/v1/reload", sourcesOps, ""); r.status != 200 || !strings.Contains(string(r.body), "source acme-stripe added") {
		t.Fatalf("reload b: %d %s", r.status, r.body)
	}
	if s := send(b, "evt_r_2"); s != 200 {
		t.Fatalf("b after its reload: %d", s)
	}
	if r := call(t, "GET", b.api+"/v1/sources/acme-stripe", sourcesOps, ""); r.status != 200 || r.json["version"] != 1.0 {
		t.Fatalf("read on b: %d %s", r.status, r.body)
	}
	clash := strings.Replace(yaml, "sources:\n", "sources:\n  - {name: acme-stripe, preset: stripe, secrets: [whsec_x], destinations: [app]}\n", 1)
	if err := os.WriteFile(path, []byte(clash), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := call(t, "POST", a.api+"/v1/reload", sourcesOps, ""); r.status != 400 || !strings.Contains(string(r.body), "source acme-stripe: defined in the config file") {
		t.Fatalf("a file that names the API's source: %d %s", r.status, r.body)
	}
	if s := send(a, "evt_r_3"); s != 200 {
		t.Fatalf("a after the refused reload: %d", s)
	}
}

// A destination created through the API (#45): its signing secret and
// its headers' values sealed at rest and shown as fingerprints; a source
// created through the API routes to it and its events arrive signed, with
// the headers; it cannot be removed while a source routes to it; it
// survives a restart. Its transformation is inline: the API reads no file.
func TestDestinationsThroughTheAPI(t *testing.T) {
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.yaml")
	yaml := `store: sqlite://` + filepath.Join(dir, "oncehook.db") + `
api: {tokens: [{name: ops, token: ` + sourcesOps + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `/app"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	const signing, bearer = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "Bearer acme-crm-token-77"
	dest := `{"name": "acme-crm", "url": "` + sink.URL + `/crm?api_key=crm-query-key-42", "secret": "` + signing + `", "headers": {"Authorization": "` + bearer + `", "X-Tenant": "acme"},
	  "retry": {"max_attempts": 3, "base_delay": "10ms", "max_delay": "20ms"}}`
	a := call(t, "POST", gw.api+"/v1/destinations", sourcesOps, dest)
	if a.status != 201 || a.json["intake_url"] != nil || bytes.Contains(a.body, []byte(signing)) || bytes.Contains(a.body, []byte("acme-crm-token")) || bytes.Contains(a.body, []byte(`"acme"`)) ||
		bytes.Contains(a.body, []byte("crm-query-key")) || !bytes.Contains(a.body, []byte("/crm?api_key=xxxxx")) {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	// The URL's query is a credential as the file's is: masked as every
	// URL shown is, to a read-only token too; delivered with it.
	if a := call(t, "GET", gw.api+"/v1/destinations/acme-crm", sourcesOps, ""); a.status != 200 || bytes.Contains(a.body, []byte("crm-query-key")) {
		t.Fatalf("read back: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", gw.api+"/v1/destinations", sourcesOps, `{"name": "x", "url": "ftp://nope"}`); a.status != 400 || a.json["field"] != "url" {
		t.Fatalf("a bad url: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", gw.api+"/v1/destinations", sourcesOps, `{"name": "x", "url": "https://example.com", "transform": "/etc/passwd"}`); a.status != 400 || a.json["field"] != "transform" {
		t.Fatalf("a transformation's file: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", gw.api+"/v1/destinations", sourcesOps, `{"name": "app", "url": "https://example.com"}`); a.status != 409 || !strings.Contains(string(a.body), path) {
		t.Fatalf("the file's destination: %d %s", a.status, a.body)
	}
	src := `{"name": "acme-stripe", "preset": "stripe", "secrets": ["` + acmeSecret1 + `"], "destinations": ["acme-crm"]}`
	if a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, src); a.status != 201 {
		t.Fatalf("a source to it: %d %s", a.status, a.body)
	}
	send := func(id string) int {
		return do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/acme-stripe", "stripe", acmeSecret1, stripeEvent(id), "")).Status
	}
	if s := send("evt_d_1"); s != 200 {
		t.Fatalf("send: %d", s)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatal("not delivered")
	}
	d := sink.Deliveries()[0]
	if d.Path != "/crm" {
		t.Fatalf("delivered to %s", d.Path)
	}
	if d.Header.Get("Authorization") != bearer || d.Header.Get("X-Tenant") != "acme" || !strings.HasPrefix(d.Header.Get("Webhook-Signature"), "v1,") {
		t.Fatalf("delivered with %v", d.Header)
	}
	if a := call(t, "DELETE", gw.api+"/v1/destinations/acme-crm", sourcesOps, ""); a.status != 409 || !strings.Contains(string(a.body), "acme-crm is routed to by source acme-stripe") {
		t.Fatalf("delete while routed to: %d %s", a.status, a.body)
	}
	if a := call(t, "PATCH", gw.api+"/v1/destinations/acme-crm", sourcesOps, `{"headers": {"X-Tenant": null}}`); a.status != 200 || a.json["version"] != 2.0 {
		t.Fatalf("patch: %d %s", a.status, a.body)
	}
	gw.stop()
	gw, err = startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	if s := send("evt_d_2"); s != 200 {
		t.Fatalf("send after a restart: %d", s)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 2 }) {
		t.Fatal("not delivered after a restart")
	}
	if d := sink.Deliveries()[1]; d.Header.Get("Authorization") != bearer || d.Header.Get("X-Tenant") != "" {
		t.Fatalf("delivered after the patch with %v", d.Header)
	}
	if a := call(t, "DELETE", gw.api+"/v1/sources/acme-stripe", sourcesOps, ""); a.status != 204 {
		t.Fatalf("delete the source: %d %s", a.status, a.body)
	}
	if a := call(t, "DELETE", gw.api+"/v1/destinations/acme-crm", sourcesOps, ""); a.status != 204 {
		t.Fatalf("delete the destination: %d %s", a.status, a.body)
	}
	gw.stop()
	files, _ := filepath.Glob(filepath.Join(dir, "oncehook.db*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range []string{signing, "acme-crm-token-77", acmeSecret1} { // the URL's query is kept to be sent: not a sealed field
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a secret in clear", f)
			}
		}
	}
}

func TestHostileBytesThroughTheSourcesAPISQLite(t *testing.T) {
	testHostileBytesThroughTheSourcesAPI(t, "sqlite://"+filepath.Join(t.TempDir(), "oncehook.db"))
}

func TestHostileBytesThroughTheSourcesAPIPostgres(t *testing.T) {
	testHostileBytesThroughTheSourcesAPI(t, testenv.Postgres(t))
}

// Hostile bytes through every kind of field that reaches the store (a
// name, a rule, a URL, a secret, a filter's value, an unknown field's
// name): each source is created or refused (400), never a 5xx, and one
// created reads back as it was given.
func testHostileBytesThroughTheSourcesAPI(t *testing.T, storeURL string) {
	sink := testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + storeURL + `
api: {tokens: [{name: ops, token: ` + sourcesOps + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	hostile := []string{"\u0000", "a\u0000b", "\ufffd\ufeff", "'; DROP TABLE objects; --", "\u202e\u200b", strings.Repeat("é", 3000), "${HOME}", "\r\nX-Injected: 1", "\\\"", "ohsb1:AAAA"}
	for i, h := range hostile {
		q, _ := json.Marshal(h)
		for j, body := range []string{
			`{"name": ` + string(q) + `, "preset": "stripe", "secrets": ["s"]}`,
			`{"name": "h%d", "preset": "generic", "unsigned": true, "key": ["json:` + strings.Trim(string(q), `"`) + `"], "destinations": ["app"]}`,
			`{"name": "h%d", "preset": "stripe", "secrets": [` + string(q) + `], "destinations": ["app"]}`,
			`{"name": "h%d", "preset": "stripe", "secrets": ["s"], "public_url": ` + string(q) + `}`,
			`{"name": "h%d", "preset": "stripe", "secrets": ["s"], "destinations": [{"name": "app", "filter": {"body": {"x": ` + string(q) + `}}}]}`,
			`{"name": "h%d", ` + string(q) + `: 1}`,
		} {
			name := "h" + strings.Repeat("x", i) + "-" + string(rune('a'+j))
			body = strings.ReplaceAll(body, `"h%d"`, `"`+name+`"`)
			a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, body)
			switch a.status {
			case 400:
				if a.json["reason"] != "invalid" {
					t.Errorf("%q: 400 %s", body, a.body)
				}
			case 201:
				got := call(t, "GET", gw.api+"/v1/sources/"+name, sourcesOps, "")
				var sent map[string]any
				json.Unmarshal([]byte(body), &sent)
				spec, _ := got.json["spec"].(map[string]any)
				delete(sent, "secrets") // answered as fingerprints
				delete(spec, "secrets")
				if got.status != 200 || spec == nil || !equalJSON(spec, sent) {
					t.Errorf("%.200q: read back %d %.300s", body, got.status, got.body)
				}
			default:
				t.Errorf("%.200q: %d %.300s", body, a.status, a.body)
			}
		}
	}
	gw.stop()
	if _, err := startFromFile(t, path, sourcesKey); err != nil {
		t.Fatalf("a restart on what was stored: %v", err)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// A replica whose copy is behind another's change (a create, an update;
// it does not watch the store here, so that it is behind) is told so by
// the store, 409, and reads what is stored at once: the
// caller's next read and retry there see it, and it serves it.
func TestAReplicaBehindAnotherReadsWhatIsStored(t *testing.T) {
	sink := testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: ` + testenv.Postgres(t) + `
api: {tokens: [{name: ops, token: ` + sourcesOps + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := startFromFile(t, path, sourcesKey, noWatch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := startFromFile(t, path, sourcesKey, noWatch)
	if err != nil {
		t.Fatal(err)
	}
	acme := `{"name": "acme-stripe", "preset": "stripe", "secrets": ["` + acmeSecret1 + `"], "destinations": ["app"]}`
	if r := call(t, "POST", a.api+"/v1/sources", sourcesOps, acme); r.status != 201 {
		t.Fatalf("create on a: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", b.api+"/v1/sources", sourcesOps, acme); r.status != 409 || r.json["reason"] != "exists" || !strings.Contains(string(r.body), "another replica") {
		t.Fatalf("the same create on b: %d %s", r.status, r.body)
	}
	if s := do(t, http.DefaultClient, testenv.SignedRequest(t, b.intake+"/in/acme-stripe", "stripe", acmeSecret1, stripeEvent("evt_b_1"), "")).Status; s != 200 {
		t.Fatalf("b serves it after the conflict: %d", s)
	}
	if r := call(t, "PATCH", a.api+"/v1/sources/acme-stripe", sourcesOps, `{"window": "2h"}`); r.status != 200 {
		t.Fatalf("update on a: %d %s", r.status, r.body)
	}
	if r := call(t, "PATCH", b.api+"/v1/sources/acme-stripe", sourcesOps, `{"window": "3h"}`); r.status != 409 || r.json["reason"] != "version_conflict" {
		t.Fatalf("a stale update on b: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", b.api+"/v1/sources/acme-stripe", sourcesOps, ""); r.status != 200 || r.json["version"] != 2.0 {
		t.Fatalf("b after the conflict: %d %s", r.status, r.body)
	}
	if r := call(t, "PATCH", b.api+"/v1/sources/acme-stripe", sourcesOps, `{"window": "3h"}`, "If-Match", `"2"`); r.status != 200 || r.json["version"] != 3.0 {
		t.Fatalf("the retry on b: %d %s", r.status, r.body)
	}
}

// noWatch is a gateway that does not apply other replicas' changes until
// its reload (or a 409): to test that path.
func noWatch(o *oncehook.Options) { o.ObjectsPoll = -1 }

// What the file's check refuses, the API refuses naming the same field,
// as the object's own: a signature header no request can carry (CR/LF,
// NUL, a space, a colon, a byte past ASCII), a secret holding a NUL; and
// a PATCH that unsets a preset's secrets ({"secrets": null}) names
// secrets and says what to give, where it answered a 400 naming no field.
func TestRefusedObjectFieldsAreNamed(t *testing.T) {
	sink := testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: sqlite://` + filepath.Join(filepath.Dir(path), "oncehook.db") + `
api: {tokens: [{name: ops, token: ` + sourcesOps + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [whsec_file_secret], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what, method, url, body, field, says string) {
		t.Helper()
		a := call(t, method, url, sourcesOps, body)
		if a.status != 400 || a.json["field"] != field || !strings.Contains(fmt.Sprint(a.json["error"]), says) {
			t.Errorf("%s: %d %s, want 400 naming %s and saying %q", what, a.status, a.body, field, says)
		}
	}
	for _, h := range []string{"X-Sig\r\nX-Injected: 1", "X-Sig\u0000", "X Sig", "X-Sig:", "X-Sïg", "\n"} {
		q, _ := json.Marshal(h)
		refused(fmt.Sprintf("signature.header %q", h), "POST", gw.api+"/v1/sources",
			`{"name": "sig", "preset": "generic", "key": ["json:id"], "secrets": ["k"], "signature": {"header": `+string(q)+`}, "destinations": ["app"]}`,
			"signature.header", "not a header name")
	}
	refused("a secret holding a NUL", "POST", gw.api+"/v1/sources",
		`{"name": "nul", "preset": "stripe", "secrets": ["whsec_a\u0000b"], "destinations": ["app"]}`, "secrets[0]", "NUL")
	refused("a second secret holding a NUL", "POST", gw.api+"/v1/sources",
		`{"name": "nul", "preset": "stripe", "secrets": ["whsec_a", "\u0000"], "destinations": ["app"]}`, "secrets[1]", "NUL")
	// A header name that is one passes.
	if a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, `{"name": "sig", "preset": "generic", "key": ["json:id"], "secrets": ["k"], "signature": {"header": "X-Acme-Sig_1"}, "destinations": ["app"]}`); a.status != 201 {
		t.Fatalf("a valid signature.header: %d %s", a.status, a.body)
	}

	if a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, `{"name": "acme-stripe", "preset": "stripe", "secrets": ["`+acmeSecret1+`"], "destinations": ["app"]}`); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	for _, body := range []string{`{"secrets": null}`, `{"secrets": []}`} {
		refused("PATCH "+body, "PATCH", gw.api+"/v1/sources/acme-stripe", body, "secrets", "give")
	}
	// The source is as it was: version 1, its secret still signs.
	if a := call(t, "GET", gw.api+"/v1/sources/acme-stripe", sourcesOps, ""); a.status != 200 || fmt.Sprint(a.json["version"]) != "1" {
		t.Fatalf("after the refused patches: %d %s", a.status, a.body)
	}
}

// A gateway whose sources all come through the API starts from a file
// with none (a token of the API is enough: the store may hold sources
// made by one), takes a source created through the API, and starts
// again with it; a file with neither a source nor a token is still
// refused, saying what it needs.
func TestAGatewayOfAPISourcesOnlyNeedsNoneInTheFile(t *testing.T) {
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tokens := range []string{`[]`} {
		write("store: sqlite://" + filepath.Join(dir, "o.db") + "\napi: {tokens: " + tokens + "}\n")
		if _, err := oncehook.LoadConfig(path, kinds.All()); err == nil || !strings.Contains(err.Error(), "api.tokens token to create sources with") {
			t.Fatalf("no source and tokens %s: %v", tokens, err)
		}
	}
	write("store: sqlite://" + filepath.Join(dir, "o.db") + "\napi: {tokens: [{name: ops, token: " + sourcesOps + "}]}\n")
	gw, err := startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatal(err)
	}
	if a := call(t, "POST", gw.api+"/v1/destinations", sourcesOps, `{"name": "app", "url": "`+sink.URL+`"}`); a.status != 201 {
		t.Fatalf("create a destination: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", gw.api+"/v1/sources", sourcesOps, `{"name": "acme-stripe", "preset": "stripe", "secrets": ["`+acmeSecret1+`"], "destinations": ["app"]}`); a.status != 201 {
		t.Fatalf("create a source: %d %s", a.status, a.body)
	}
	gw.stop()
	gw, err = startFromFile(t, path, sourcesKey)
	if err != nil {
		t.Fatalf("restart with the API's source only: %v", err)
	}
	if s := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.intake+"/in/acme-stripe", "stripe", acmeSecret1, stripeEvent("evt_only_api"), "")).Status; s != 200 {
		t.Fatalf("the API's source after a restart: %d", s)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return sink.ByKey()["acme-stripe:evt_only_api"] == 1 }) {
		t.Fatalf("not delivered: %v", sink.ByKey())
	}
}
