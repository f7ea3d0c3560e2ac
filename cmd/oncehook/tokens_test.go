package main_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tokens create|ls|show|rm (#45), the binary against a running gateway:
// create prints the value once, and the value works for its tenant; ls
// and show print fingerprints, never a value; rm revokes it (401 next);
// the file's token is refused naming the file, and a tenant's token
// cannot make another tenant's.
func TestTokensCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(path, []byte(`listen: 127.0.0.1:0
store: "sqlite://./events.db"
api:
  listen: 127.0.0.1:0
  tokens: [{name: ops, token: `+objectsToken+`}, {name: globex, token: globex-cli-token-0123, tenant: globex}]
sources:
  - {name: filed, preset: stripe, secrets: [whsec_filed]}
  - {name: globex-outbox, tenant: globex, outbox: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, dir, "--config", path)
	api := p.apiURL(t)
	env := []string{"ONCEHOOK_API=" + api, "ONCEHOOK_API_TOKEN=" + objectsToken}
	run := func(args ...string) (string, bool) {
		t.Helper()
		return oncehook(t, dir, env, args...)
	}
	status := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, api+"/v1/sources", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		code, _ := roundTrip(req)
		return code
	}

	out, ok := run("tokens", "create", "globex-pub", "--tenant", "globex", "--publish", "globex-outbox")
	_, after, _ := strings.Cut(out, "value: ")
	value, _, _ := strings.Cut(after, "\n")
	if !ok || !strings.Contains(out, "token globex-pub created (publish to globex-outbox)") || !strings.HasPrefix(value, "ohk_") ||
		!strings.Contains(out, "only time it is shown") {
		t.Fatalf("tokens create (ok=%v):\n%s", ok, out)
	}
	if s := status(value); s != 403 { // a publisher reaches no list
		t.Fatalf("the publisher on /v1/sources: %d", s)
	}
	out, ok = run("tokens", "create", "globex-ci", "--tenant", "globex")
	_, after, _ = strings.Cut(out, "value: ")
	ci, _, _ := strings.Cut(after, "\n")
	if !ok || status(ci) != 200 {
		t.Fatalf("tokens create globex-ci (ok=%v):\n%s", ok, out)
	}
	out, ok = run("tokens", "ls")
	if !ok || !strings.Contains(out, "globex-pub") || !strings.Contains(out, "api") || !strings.Contains(out, "file") ||
		!strings.Contains(out, "sha256:") || strings.Contains(out, value) || strings.Contains(out, objectsToken) {
		t.Fatalf("tokens ls (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("tokens", "show", "globex-pub", "--json"); !ok || !strings.Contains(out, `"fingerprint"`) || strings.Contains(out, value) {
		t.Fatalf("tokens show --json (ok=%v):\n%s", ok, out)
	}
	if out, ok = oncehook(t, dir, []string{"ONCEHOOK_API=" + api, "ONCEHOOK_API_TOKEN=globex-cli-token-0123"}, "tokens", "create", "x", "--tenant", "acme"); ok ||
		!strings.Contains(out, "token refused: tenant:") {
		t.Fatalf("globex makes acme's token (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("tokens", "rm", "ops"); ok || !strings.Contains(out, "config file "+path) {
		t.Fatalf("tokens rm of the file's (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("tokens", "rm", "globex-ci"); !ok || !strings.Contains(out, "token globex-ci revoked") {
		t.Fatalf("tokens rm (ok=%v):\n%s", ok, out)
	}
	if s := status(ci); s != 401 {
		t.Fatalf("globex-ci after its rm: %d", s)
	}
}
