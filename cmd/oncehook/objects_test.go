package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
)

const (
	objectsToken  = "objects-cli-token-0123"
	objectsKey    = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	acmeFirstCLI  = "whsec_acme_cli_first_41"
	acmeSecondCLI = "whsec_acme_cli_second_42"
)

// sources and destinations create|ls|show|update|rm (#45), the binary
// against a running gateway: a source created from a YAML file takes
// signed webhooks at the intake URL create prints; ls marks it api and
// the file's file; show and --json never print its secret, only its
// fingerprint; an update rotates the secret (the new one is accepted,
// the old one not) and a stale --if-version is refused; rm ends its
// intake (404). The file's source is refused naming the file, an invalid
// field is named as the file names it, and without --api the command
// says where it works.
func TestSourcesAndDestinationsCommandsSQLite(t *testing.T) {
	testSourcesAndDestinationsCommands(t, "sqlite://./events.db")
}

func TestSourcesAndDestinationsCommandsPostgres(t *testing.T) {
	testSourcesAndDestinationsCommands(t, testenv.Postgres(t))
}

func testSourcesAndDestinationsCommands(t *testing.T, storeURL string) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	path := filepath.Join(dir, "oncehook.yaml")
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("oncehook.yaml", `listen: 127.0.0.1:0
store: "`+storeURL+`"
api:
  listen: 127.0.0.1:0
  tokens: [{name: ops, token: `+objectsToken+`}, {name: globex, token: globex-cli-token-0123, tenant: globex}]
sources:
  - {name: filed, preset: stripe, secrets: [whsec_filed], destinations: [app]}
destinations:
  - {name: app, url: "`+sink.URL+`", retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}}
`)
	t.Setenv("ONCEHOOK_SECRET_KEYS", objectsKey)
	p := startProcess(t, dir, "--config", path)
	env := []string{"ONCEHOOK_API=" + p.apiURL(t), "ONCEHOOK_API_TOKEN=" + objectsToken, "ONCEHOOK_SECRET_KEYS="}
	run := func(args ...string) (string, bool) {
		t.Helper()
		return oncehook(t, dir, env, args...)
	}
	intake := p.URL + "/in/acme-stripe"
	send := func(secret, id string) int {
		t.Helper()
		code, _ := roundTrip(testenv.SignedRequest(t, intake, "stripe", secret, []byte(`{"id":"`+id+`","object":"event"}`), ""))
		return code
	}

	acme := write("acme.yaml", "# a customer's Stripe account\nname: acme-stripe\npreset: stripe\nsecrets: ["+acmeFirstCLI+"]\ndestinations: [app]\n")
	out, ok := run("sources", "create", "-f", acme)
	if !ok || !strings.Contains(out, "source acme-stripe created (version 1)") || !strings.Contains(out, "intake URL: "+intake) ||
		!strings.Contains(out, "next:") || strings.Contains(out, acmeFirstCLI) {
		t.Fatalf("sources create (ok=%v):\n%s", ok, out)
	}
	if code := send(acmeFirstCLI, "evt_cli_1"); code != 200 {
		t.Fatalf("a signed webhook at the intake URL create printed: %d", code)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return sink.ByKey()["acme-stripe:evt_cli_1"] == 1 }) {
		t.Fatalf("not delivered: %v", sink.ByKey())
	}

	// ls: both, each marked; in a table and as JSON.
	out, ok = run("sources", "ls")
	if !ok || !hasRow(out, "acme-stripe", "api", "stripe", "http", "app") || !hasRow(out, "filed", "file", "stripe") {
		t.Fatalf("sources ls (ok=%v):\n%s", ok, out)
	}
	// On the store directly (--config), the API's are listed too.
	out, ok = oncehook(t, dir, []string{"ONCEHOOK_API=", "ONCEHOOK_API_TOKEN="}, "sources", "ls", "--config", path)
	if !ok || !hasRow(out, "acme-stripe", "api", "stripe") || !hasRow(out, "filed", "file") {
		t.Fatalf("sources ls --config (ok=%v):\n%s", ok, out)
	}
	out, ok = run("sources", "ls", "--json")
	var list []struct{ Name, ManagedBy string }
	if err := json.Unmarshal([]byte(strings.ReplaceAll(out, "managed_by", "managedby")), &list); !ok || err != nil || len(list) != 2 ||
		list[0].Name != "filed" || list[0].ManagedBy != "file" || list[1].Name != "acme-stripe" || list[1].ManagedBy != "api" {
		t.Fatalf("sources ls --json (ok=%v, %v): %+v\n%s", ok, err, list, out)
	}

	// show: the fingerprint, never the secret.
	out, ok = run("sources", "show", "acme-stripe")
	if !ok || !strings.Contains(out, "managed by  api") || !strings.Contains(out, "version     1") || !strings.Contains(out, "sha256:") ||
		!strings.Contains(out, intake) || strings.Contains(out, acmeFirstCLI) {
		t.Fatalf("sources show (ok=%v):\n%s", ok, out)
	}
	out, ok = run("sources", "show", "acme-stripe", "--json")
	var v api.ObjectView
	if err := json.Unmarshal([]byte(out), &v); !ok || err != nil || v.Version != 1 || v.IntakeURL != intake || !strings.Contains(out, "sha256:") || strings.Contains(out, acmeFirstCLI) {
		t.Fatalf("sources show --json (ok=%v, %v):\n%s", ok, err, out)
	}

	// update: the secret rotated; the old one no longer signs.
	patch := write("rotate.json", `{"secrets": ["`+acmeSecondCLI+`"]}`)
	if out, ok = run("sources", "update", "acme-stripe", "-f", patch, "--if-version", "1"); !ok || !strings.Contains(out, "source acme-stripe updated: version 2") {
		t.Fatalf("sources update (ok=%v):\n%s", ok, out)
	}
	if code := send(acmeSecondCLI, "evt_cli_2"); code != 200 {
		t.Fatalf("signed with the new secret: %d", code)
	}
	if code := send(acmeFirstCLI, "evt_cli_3"); code != 401 {
		t.Fatalf("signed with the old secret, no longer listed: %d", code)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return sink.ByKey()["acme-stripe:evt_cli_2"] == 1 }) {
		t.Fatalf("not delivered: %v", sink.ByKey())
	}
	if out, ok = run("sources", "update", "acme-stripe", "-f", patch, "--if-version", "1"); ok || !strings.Contains(out, "at version 2, not 1") {
		t.Fatalf("a stale --if-version (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("sources", "show", "acme-stripe"); !ok || strings.Contains(out, acmeSecondCLI) || !strings.Contains(out, "version     2") {
		t.Fatalf("show after the rotation (ok=%v):\n%s", ok, out)
	}

	// The file's source, an invalid field, and no API.
	for _, args := range [][]string{{"sources", "update", "filed", "-f", patch}, {"sources", "rm", "filed"}} {
		if out, ok = run(args...); ok || !strings.Contains(out, "source filed is defined in the config file "+path) {
			t.Errorf("oncehook %s (ok=%v): want a refusal naming the file:\n%s", strings.Join(args, " "), ok, out)
		}
	}
	bad := write("bad.yaml", "name: bad\npreset: strpe\ndestinations: [app]\n")
	if out, ok = run("sources", "create", "-f", bad); ok || !strings.Contains(out, "source refused: preset: ") || strings.Contains(out, "--preset") {
		t.Errorf("an invalid preset (ok=%v):\n%s", ok, out)
	}
	two := write("two.yaml", "name: bad\npreset: stripe\nwindw: 1h\ndestinations: [nope]\n")
	if out, ok = run("sources", "create", "-f", two); ok || !strings.Contains(out, "windw") {
		t.Errorf("a misspelt field (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("sources", "create", "-f", write("list.yaml", "- name: x\n")); ok || !strings.Contains(out, "want one object") {
		t.Errorf("a list, not an object (ok=%v):\n%s", ok, out)
	}
	if out, ok = oncehook(t, dir, []string{"ONCEHOOK_API=", "ONCEHOOK_API_TOKEN="}, "sources", "create", "-f", acme); ok || !strings.Contains(out, "--api URL --token T") {
		t.Errorf("create without --api (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("sources", "rm"); ok || !strings.Contains(out, "usage: oncehook sources rm NAME") {
		t.Errorf("rm without a name (ok=%v):\n%s", ok, out)
	}

	// A destination: created, listed as the API's, read, removed.
	hooks := write("hooks.yaml", "name: hooks\nurl: \""+sink.URL+"/hooks\"\nsecret: whsec_ZGVzdGluYXRpb24tc2lnbmluZy1rZXk=\n")
	if out, ok = run("destinations", "create", "-f", hooks); !ok || !strings.Contains(out, "destination hooks created (version 1)") || strings.Contains(out, "whsec_ZGVzdGluYXRpb24tc2lnbmluZy1rZXk=") {
		t.Fatalf("destinations create (ok=%v):\n%s", ok, out)
	}
	// update -f - reads the patch from stdin.
	cmd := exec.Command(binary, "destinations", "update", "hooks", "-f", "-", "--if-version", "1")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, append(os.Environ(), env...), strings.NewReader("timeout: 5s\n")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "destination hooks updated: version 2") {
		t.Fatalf("destinations update -f - (%v):\n%s", err, b)
	}
	if out, ok = run("destinations", "ls"); !ok || !hasRow(out, "hooks", "api") || !hasRow(out, "app", "file") {
		t.Fatalf("destinations ls (ok=%v):\n%s", ok, out)
	}
	if out, ok = oncehook(t, dir, []string{"ONCEHOOK_API=", "ONCEHOOK_API_TOKEN="}, "destinations", "ls", "--config", path); !ok || !hasRow(out, "hooks", "api") {
		t.Fatalf("destinations ls --config (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("destinations", "show", "hooks", "--json"); !ok || !strings.Contains(out, `"managed_by": "api"`) || !strings.Contains(out, "sha256:") || strings.Contains(out, "whsec_ZGVzdGluYXRpb24tc2lnbmluZy1rZXk=") {
		t.Fatalf("destinations show --json (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("destinations", "rm", "app"); ok || !strings.Contains(out, "defined in the config file") {
		t.Errorf("rm of the file's destination (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("destinations", "rm", "hooks", "--json"); !ok || !strings.Contains(out, `"deleted": true`) {
		t.Fatalf("destinations rm --json (ok=%v):\n%s", ok, out)
	}

	// A tenant's token: its own objects only, the others as none.
	globex := []string{"ONCEHOOK_API=" + p.apiURL(t), "ONCEHOOK_API_TOKEN=globex-cli-token-0123", "ONCEHOOK_SECRET_KEYS="}
	gx := func(args ...string) (string, bool) {
		t.Helper()
		return oncehook(t, dir, globex, args...)
	}
	if out, ok = gx("sources", "create", "-f", write("globex.yaml", "name: globex-stripe\npreset: stripe\nsecrets: [whsec_globex_cli]\ndestinations: [app]\n")); !ok ||
		!strings.Contains(out, "source globex-stripe created") {
		t.Fatalf("globex creates its source (ok=%v):\n%s", ok, out)
	}
	if out, ok = gx("sources", "ls"); !ok || !hasRow(out, "globex-stripe", "api") || strings.Contains(out, "acme-stripe") || strings.Contains(out, "filed") {
		t.Fatalf("globex's sources ls (ok=%v):\n%s", ok, out)
	}
	if out, ok = run("sources", "show", "globex-stripe", "--json"); !ok || !strings.Contains(out, `"tenant": "globex"`) {
		t.Fatalf("the operator sees globex's source, with its tenant (ok=%v):\n%s", ok, out)
	}
	for _, args := range [][]string{{"sources", "show", "acme-stripe"}, {"sources", "rm", "filed"}, {"events", "ls", "--source", "acme-stripe"}, {"destinations", "show", "hooks"}} {
		if out, ok = gx(args...); ok || !strings.Contains(out, "acme-stripe") && !strings.Contains(out, "filed") && !strings.Contains(out, "hooks") ||
			strings.Contains(out, "known") || strings.Contains(out, "config file") {
			t.Errorf("globex: oncehook %s (ok=%v): want the refusal of a name nobody has:\n%s", strings.Join(args, " "), ok, out)
		}
	}
	if out, ok = gx("reload"); ok || !strings.Contains(out, "tenant") {
		t.Errorf("globex reloads (ok=%v):\n%s", ok, out)
	}
	if out, ok = gx("sources", "rm", "globex-stripe"); !ok {
		t.Fatalf("globex removes its source (ok=%v):\n%s", ok, out)
	}

	// rm: the intake answers 404; the name is gone from ls.
	if out, ok = run("sources", "rm", "acme-stripe"); !ok || !strings.Contains(out, "source acme-stripe deleted") {
		t.Fatalf("sources rm (ok=%v):\n%s", ok, out)
	}
	if code := send(acmeSecondCLI, "evt_cli_4"); code != 404 {
		t.Fatalf("the intake of a deleted source: %d", code)
	}
	if out, ok = run("sources", "show", "acme-stripe"); ok || !strings.Contains(out, "no source acme-stripe") {
		t.Fatalf("show of a deleted source (ok=%v):\n%s", ok, out)
	}
	// No secret reached the gateway's log either.
	if log := p.stderr.String(); strings.Contains(log, acmeFirstCLI) || strings.Contains(log, acmeSecondCLI) || strings.Contains(log, "whsec_ZGVzdGluYXRpb24tc2lnbmluZy1rZXk=") {
		t.Fatalf("a secret in the gateway's log:\n%s", log)
	}
}

// hasRow reports whether a line of a table starts with name and holds
// each of cells as a column.
func hasRow(table, name string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != name {
			continue
		}
		all := true
		for _, c := range cells {
			all = all && strings.Contains(" "+strings.Join(f[1:], " ")+" ", " "+c+" ")
		}
		if all {
			return true
		}
	}
	return false
}
