package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
)

const (
	applySecret     = "whsec_apply_acme_7731"
	applyHookSecret = "whsec_ZGVzdGluYXRpb24tc2lnbmluZy1rZXk="
	applyBearer     = "Bearer apply-token-5521"
)

// export and apply (#45), the binary against a running gateway: apply
// creates a file's destination and source (a signed webhook flows), a
// second apply reports every one unchanged and changes nothing (versions
// and the audit log as they were), a change reports its fields (and
// --dry-run reports it without making it); the config file's source is
// refused with the gateway's 409 and the exit is not 0; an invalid
// object stops the apply there (the ones before it applied, the ones
// after not tried); hostile bytes are refused and printed escaped.
// export writes every secret as ${VARIABLE} with its fingerprint and no
// secret; applying it with the variables unset keeps the secrets, and
// after every object is deleted, applying it with them set brings the
// objects back, taking signed webhooks and delivering (a transformation
// holding a $ comes back as it was).
func TestExportAndApplySQLite(t *testing.T) { testExportAndApply(t, "sqlite://./events.db") }

func TestExportAndApplyPostgres(t *testing.T) { testExportAndApply(t, testenv.Postgres(t)) }

func testExportAndApply(t *testing.T, storeURL string) {
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
  tokens: [{name: ops, token: `+objectsToken+`}]
sources:
  - {name: filed, preset: stripe, secrets: [whsec_filed], destinations: [app]}
destinations:
  - {name: app, url: "`+sink.URL+`", retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}}
`)
	t.Setenv("ONCEHOOK_SECRET_KEYS", objectsKey)
	p := startProcess(t, dir, "--config", path)
	apiURL := p.apiURL(t)
	base := []string{"ONCEHOOK_API=" + apiURL, "ONCEHOOK_API_TOKEN=" + objectsToken, "ONCEHOOK_SECRET_KEYS="}
	run := func(env []string, args ...string) (string, bool) {
		t.Helper()
		return oncehook(t, dir, append(base, env...), args...)
	}
	c := api.NewClient(apiURL, objectsToken, nil)
	ctx := context.Background()
	intake := p.URL + "/in/acme-stripe"
	send := func(secret, id string) int {
		t.Helper()
		code, _ := roundTrip(testenv.SignedRequest(t, intake, "stripe", secret, []byte(`{"id":"`+id+`","object":"event"}`), ""))
		return code
	}
	delivered := func(path, key string) *testenv.Delivery {
		t.Helper()
		var found *testenv.Delivery
		testenv.WaitFor(10*time.Second, func() bool {
			for _, d := range sink.Deliveries() {
				if d.Path == path && d.Key == key {
					found = &d
					return true
				}
			}
			return false
		})
		if found == nil {
			t.Fatalf("%s not delivered to %s: %v", key, path, sink.ByKey())
		}
		return found
	}
	versions := func() (int64, int64) {
		t.Helper()
		s, err := c.Source(ctx, "acme-stripe")
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Destination(ctx, "hooks")
		if err != nil {
			t.Fatal(err)
		}
		return s.Version, d.Version
	}
	auditCount := func() int {
		t.Helper()
		page, err := c.Audit(ctx, "", 500)
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Entries)
	}
	env := []string{"ACME_SECRET=" + applySecret, "HOOKS_BEARER=" + applyBearer}

	// The transformation holds a template literal: its $ is written $$
	// in the file, as in the config file.
	objects := `# a customer's objects
destinations:
  - name: hooks
    url: "` + sink.URL + `/hooks"
    secret: ` + applyHookSecret + `
    headers: {Authorization: "${HOOKS_BEARER}"}
    retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}
    transform:
      inline: 'addHandler("transform", (request) => { request.body.tag = ` + "`é ✓ $${1+1}`" + `; return request; })'
sources:
  - name: acme-stripe
    preset: stripe
    secrets: ["${ACME_SECRET}"]
    destinations: [app, hooks]
`
	file := write("objects.yaml", objects)
	out, ok := run(env, "apply", "-f", file)
	if !ok || !hasRow(out, "destination", "hooks", "created", "(version", "1)") || !hasRow(out, "source", "acme-stripe", "created") ||
		!strings.Contains(out, "applied: 2 created, 0 updated, 0 unchanged") {
		t.Fatalf("apply (ok=%v):\n%s", ok, out)
	}
	if code := send(applySecret, "evt_apply_1"); code != 200 {
		t.Fatalf("a signed webhook to the applied source: %d", code)
	}
	d := delivered("/hooks", "acme-stripe:evt_apply_1")
	if !strings.Contains(string(d.Body), `"tag":"é ✓ 2"`) || d.Header.Get("Authorization") != applyBearer {
		t.Fatalf("the applied destination's delivery: %s %v", d.Body, d.Header)
	}
	delivered("/", "acme-stripe:evt_apply_1")

	// Again: every one unchanged, nothing written.
	audits := auditCount()
	sv, dv := versions()
	out, ok = run(env, "apply", "-f", file)
	if !ok || !hasRow(out, "destination", "hooks", "unchanged") || !hasRow(out, "source", "acme-stripe", "unchanged") ||
		!strings.Contains(out, "applied: 0 created, 0 updated, 2 unchanged") {
		t.Fatalf("a second apply (ok=%v):\n%s", ok, out)
	}
	if s2, d2 := versions(); s2 != sv || d2 != dv || auditCount() != audits {
		t.Fatalf("a second apply changed something: versions %d,%d -> %d,%d; audit %d -> %d", sv, dv, s2, d2, audits, auditCount())
	}

	// A change: --dry-run says it and makes none; apply makes it.
	changedText := strings.Replace(strings.Replace(objects, "max_attempts: 3, base_delay: 10ms, max_delay: 20ms}\n    transform",
		"max_attempts: 5, base_delay: 10ms, max_delay: 20ms}\n    transform", 1), "destinations: [app, hooks]", "destinations: [hooks]", 1)
	changed := write("changed.yaml", changedText)
	out, ok = run(env, "apply", "-f", changed, "--dry-run")
	if !ok || !hasRow(out, "destination", "hooks", "would", "update:", "retry.max_attempts") || !hasRow(out, "source", "acme-stripe", "would", "update:", "destinations") ||
		!strings.Contains(out, "nothing changed") {
		t.Fatalf("apply --dry-run (ok=%v):\n%s", ok, out)
	}
	if s2, d2 := versions(); s2 != sv || d2 != dv {
		t.Fatalf("--dry-run changed the versions: %d,%d -> %d,%d", sv, dv, s2, d2)
	}
	out, ok = run(env, "apply", "-f", changed)
	if !ok || !hasRow(out, "destination", "hooks", "updated", "(version", "2):", "retry.max_attempts") || !hasRow(out, "source", "acme-stripe", "updated", "(version", "2):", "destinations") ||
		strings.Contains(out, "secrets") {
		t.Fatalf("apply of a change (ok=%v):\n%s", ok, out)
	}
	// A new secret is a change of secrets, by name only.
	out, ok = run([]string{"ACME_SECRET=whsec_apply_rotated", "HOOKS_BEARER=" + applyBearer}, "apply", "-f", changed)
	if !ok || !hasRow(out, "source", "acme-stripe", "updated", "(version", "3):", "secrets") || strings.Contains(out, "whsec_apply_rotated") {
		t.Fatalf("apply of a new secret (ok=%v):\n%s", ok, out)
	}
	if out, ok = run(env, "apply", "-f", changed); !ok || !hasRow(out, "source", "acme-stripe", "updated", "secrets") {
		t.Fatalf("apply of the secret back (ok=%v):\n%s", ok, out)
	}

	// The config file's source: refused with the gateway's words, the
	// rest applied, the exit not 0.
	withFiled := write("filed.yaml", changedText+"  - {name: filed, preset: stripe, secrets: [whsec_other], destinations: [app]}\n")
	if out, ok = run(env, "apply", "-f", withFiled); ok || !hasRow(out, "source", "filed", "refused:") ||
		!strings.Contains(out, "source filed is defined in the config file "+path) || !hasRow(out, "source", "acme-stripe", "unchanged") ||
		!strings.Contains(out, "1 refused") {
		t.Fatalf("apply of the file's source (ok=%v):\n%s", ok, out)
	}

	// An invalid object stops the apply there.
	stops := write("stops.yaml", `sources:
  - {name: first-ok, preset: stripe, secrets: [whsec_first], destinations: [{name: app, filter: {body: {note: "a\0b\r\n\u202e $$x \xe9 ${NOPE-}"}}}]}
  - {name: second-bad, preset: strpe, destinations: [app]}
  - {name: third-untried, preset: stripe, secrets: [whsec_third], destinations: [app]}
`)
	out, ok = run(env, "apply", "-f", stops)
	if ok || !hasRow(out, "source", "first-ok", "created") || !hasRow(out, "source", "second-bad", "failed:") || !strings.Contains(out, "preset: ") ||
		strings.Contains(out, "third-untried") || !strings.Contains(out, "apply stopped at source second-bad") {
		t.Fatalf("apply of an invalid object (ok=%v):\n%s", ok, out)
	}
	if _, err := c.Source(ctx, "third-untried"); err == nil {
		t.Fatal("the object after the invalid one was applied")
	}

	// Hostile bytes: refused by the API's check, printed escaped.
	for _, name := range []string{`"evil\r\nX-Injected: 1"`, `"nul\0name"`, `"esc\e[31mred"`, strings.Repeat("n", 5000)} {
		hostile := write("hostile.yaml", "sources:\n  - {name: "+name+", preset: stripe, secrets: [x], destinations: [app]}\n")
		out, ok = run(env, "apply", "-f", hostile)
		if ok || !strings.Contains(out, "failed:") || !strings.Contains(out, "name") || strings.ContainsAny(out, "\x00\x1b\r") {
			t.Errorf("apply of the name %.40s (ok=%v):\n%q", name, ok, out)
		}
	}
	if out, ok = run(env, "apply", "-f", write("bad-utf8.yaml", "sources:\n  - {name: \"a\xff\", preset: stripe}\n")); ok || !strings.Contains(out, "bad-utf8.yaml") {
		t.Errorf("apply of a file that is not UTF-8 (ok=%v):\n%q", ok, out)
	}
	if out, ok = run(env, "apply", "-f", write("config.yaml", "listen: :8080\nsources: []\n")); ok || !strings.Contains(out, "apply takes sources: and destinations: only") {
		t.Errorf("apply of a whole config file (ok=%v):\n%s", ok, out)
	}
	// The variables unset, the objects stored: their secrets are kept.
	if out, ok = run(nil, "apply", "-f", changed); !ok || !strings.Contains(out, "0 created, 0 updated, 2 unchanged") {
		t.Errorf("apply with the variables unset, the objects stored (ok=%v):\n%s", ok, out)
	}

	// export: every secret as a variable, with its fingerprint; none in
	// clear; the $ of the transformation doubled.
	backup := filepath.Join(dir, "backup.yaml")
	if out, ok = run(nil, "export", "-o", backup); !ok || !strings.Contains(out, "exported 3 objects to "+backup) {
		t.Fatalf("export (ok=%v):\n%s", ok, out)
	}
	text, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"${SOURCE_ACME_STRIPE_SECRETS_0} # secret sha256:", "${DESTINATION_HOOKS_SECRET} # secret sha256:",
		"${DESTINATION_HOOKS_HEADERS_AUTHORIZATION} # secret sha256:", "`é ✓ $${1+1}`", "name: first-ok"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("export lacks %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{applySecret, applyHookSecret, applyBearer, "whsec_first", "name: filed", "url: " + sink.URL + "\n"} {
		if strings.Contains(string(text), secret) {
			t.Errorf("export holds %q:\n%s", secret, text)
		}
	}
	if out, ok = run(nil, "export"); !ok || !strings.Contains(out, "name: acme-stripe") || !strings.Contains(out, "${SOURCE_ACME_STRIPE_SECRETS_0}") {
		t.Errorf("export to stdout (ok=%v):\n%s", ok, out)
	}

	// On the store directly (--config), the same objects, with the key
	// that opens their secrets to take the fingerprints; without it, a
	// refusal that says how to set one.
	body := func(export string) string { return export[strings.Index(export, "destinations:"):] }
	out, ok = run([]string{"ONCEHOOK_API=", "ONCEHOOK_SECRET_KEYS=" + objectsKey}, "export", "--config", path)
	if !ok || !strings.Contains(out, "oncehook export of the store of "+path) || body(out) != body(string(text)) {
		t.Fatalf("export --config (ok=%v), want what the API's export wrote:\n%s", ok, out)
	}
	if out, ok = run([]string{"ONCEHOOK_API="}, "export", "--config", path); ok || !strings.Contains(out, "ONCEHOOK_SECRET_KEYS") {
		t.Fatalf("export --config without the key (ok=%v):\n%s", ok, out)
	}

	// Applied back with no variable set: nothing changes (the secrets
	// are kept, not overwritten).
	audits = auditCount()
	if out, ok = run(nil, "apply", "-f", backup); !ok || !strings.Contains(out, "0 created, 0 updated, 3 unchanged") {
		t.Fatalf("apply of the export, no variable set (ok=%v):\n%s", ok, out)
	}
	if auditCount() != audits {
		t.Fatal("applying the export back wrote to the audit log")
	}
	if code := send(applySecret, "evt_apply_2"); code != 200 {
		t.Fatalf("the secret after applying the export back: %d", code)
	}
	delivered("/hooks", "acme-stripe:evt_apply_2")

	// Hostile bytes in a field (NUL, CR/LF, a bidi override, a literal
	// $) are stored as given, and come back so from the export.
	before, err := c.Source(ctx, "first-ok")
	if err != nil {
		t.Fatal(err)
	}
	note := "a\x00b\r\n\u202e $x é "
	if got := fmt.Sprint(before.Spec["destinations"]); !strings.Contains(got, note) {
		t.Fatalf("first-ok's filter as applied: %q, want %q in it", got, note)
	}

	// Every object deleted; restored from the export, the secrets from
	// the environment.
	for _, args := range [][]string{{"sources", "rm", "acme-stripe"}, {"sources", "rm", "first-ok"}, {"destinations", "rm", "hooks"}} {
		if out, ok = run(nil, args...); !ok {
			t.Fatalf("%v (ok=%v):\n%s", args, ok, out)
		}
	}
	if code := send(applySecret, "evt_apply_3"); code != 404 {
		t.Fatalf("the deleted source's intake: %d", code)
	}
	if out, ok = run(nil, "apply", "-f", backup); ok || !strings.Contains(out, "$DESTINATION_HOOKS_HEADERS_AUTHORIZATION is not set") {
		t.Fatalf("a restore without the secrets (ok=%v):\n%s", ok, out)
	}
	restore := []string{"SOURCE_ACME_STRIPE_SECRETS_0=" + applySecret, "DESTINATION_HOOKS_SECRET=" + applyHookSecret,
		"DESTINATION_HOOKS_HEADERS_AUTHORIZATION=" + applyBearer, "SOURCE_FIRST_OK_SECRETS_0=whsec_first"}
	if out, ok = run(restore, "apply", "-f", backup); !ok || !strings.Contains(out, "3 created") {
		t.Fatalf("the restore (ok=%v):\n%s", ok, out)
	}
	if code := send(applySecret, "evt_apply_4"); code != 200 {
		t.Fatalf("a signed webhook to the restored source: %d", code)
	}
	if after, err := c.Source(ctx, "first-ok"); err != nil || !reflect.DeepEqual(after.Spec["destinations"], before.Spec["destinations"]) {
		t.Fatalf("first-ok restored: %v %q, want %q", err, after.Spec["destinations"], before.Spec["destinations"])
	}
	d = delivered("/hooks", "acme-stripe:evt_apply_4")
	if !strings.Contains(string(d.Body), `"tag":"é ✓ 2"`) || d.Header.Get("Authorization") != applyBearer {
		t.Fatalf("the restored destination's delivery: %s %v", d.Body, d.Header)
	}

	// --prune deletes what the file does not name (never the file's).
	if out, ok = run(env, "apply", "-f", file, "--prune", "--dry-run"); !ok || !hasRow(out, "source", "first-ok", "would", "delete") {
		t.Fatalf("apply --prune --dry-run (ok=%v):\n%s", ok, out)
	}
	if _, err := c.Source(ctx, "first-ok"); err != nil {
		t.Fatalf("--dry-run deleted: %v", err)
	}
	if out, ok = run(env, "apply", "-f", file, "--prune"); !ok || !hasRow(out, "source", "first-ok", "deleted") || strings.Contains(out, "filed") ||
		!strings.Contains(out, "1 deleted") {
		t.Fatalf("apply --prune (ok=%v):\n%s", ok, out)
	}
	if _, err := c.Source(ctx, "first-ok"); err == nil {
		t.Fatal("--prune left first-ok")
	}
	var list []map[string]any
	out, _ = run(nil, "sources", "ls", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 {
		t.Fatalf("sources after --prune (%v):\n%s", err, out)
	}
	if log := p.stderr.String(); strings.Contains(log, applySecret) || strings.Contains(log, applyBearer) {
		t.Fatalf("a secret in the gateway's log:\n%s", log)
	}
}
