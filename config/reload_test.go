package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/config"
)

func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const running = `
listen: 127.0.0.1:8080
store: sqlite://./a.db
delivery: {lease: 40s}
api: {tokens: [{name: ops, token: ops-token-0123456789}]}
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_old], destinations: [app]}
destinations:
  - {name: app, url: "http://127.0.0.1:9000", timeout: 5s}
`

// What a running gateway takes of a new config: its sources, destinations
// and tokens, each change named; what is bound at start keeps its running
// value, named as waiting for a restart.
func TestReloadTakesWhatCanChangeAndNamesWhatWaits(t *testing.T) {
	old := parse(t, running)
	next := parse(t, strings.NewReplacer(
		"listen: 127.0.0.1:8080", "listen: 127.0.0.1:9090",
		"sqlite://./a.db", "sqlite://./b.db",
		"[whsec_old]", "[whsec_old, whsec_new]",
		"destinations: [app]}", "destinations: [app, audit]}",
		`timeout: 5s}`, "timeout: 5s}\n  - {name: audit, url: \"http://127.0.0.1:9001\"}",
	).Replace(running))
	r, err := config.Reload(old, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Config.Listen != "127.0.0.1:8080" || r.Config.Store != "sqlite://./a.db" {
		t.Errorf("listen %s, store %s: want the running ones kept", r.Config.Listen, r.Config.Store)
	}
	if !slices.Equal(r.Restart, []string{"listen", "store"}) {
		t.Errorf("restart %q, want listen and store", r.Restart)
	}
	if !slices.Equal(r.Changed, []string{"source stripe changed", "destination audit added"}) {
		t.Errorf("changed %q", r.Changed)
	}
	if got := r.Config.Sources[0].Secrets; !slices.Equal(got, []string{"whsec_old", "whsec_new"}) || len(r.Config.Destinations) != 2 {
		t.Errorf("secrets %q, %d destinations: want the new ones taken", got, len(r.Config.Destinations))
	}
	if r, err := config.Reload(old, parse(t, running), nil); err != nil || len(r.Changed) != 0 || len(r.Restart) != 0 {
		t.Errorf("the same config again: %+v %v, want nothing changed", r, err)
	}
}

// A new destination whose timeout outlives the running delivery lease is
// refused: the lease is bound at start, and an attempt longer than its
// lease would be made twice at once.
func TestReloadRefusesATimeoutTheRunningLeaseCannotHold(t *testing.T) {
	old := parse(t, running)
	next := parse(t, strings.NewReplacer("delivery: {lease: 40s}", "delivery: {lease: 2m}", "timeout: 5s", "timeout: 60s").Replace(running))
	if _, err := config.Reload(old, next, nil); err == nil || !strings.Contains(err.Error(), "delivery.lease") {
		t.Fatalf("reload with a 60s timeout under the running 40s lease: %v, want the lease named", err)
	}
}

// body_retention, wrong, is named with its path and line, as every field
// is; past the window it is a warning: bodies go with their keys anyway.
func TestBodyRetentionIsValidated(t *testing.T) {
	for text, want := range map[string]string{
		"body_retention: 0s":   `sources[0].body_retention: duration "0s" must be positive`,
		"body_retention: soon": `sources[0].body_retention: duration "soon"`,
	} {
		_, err := config.Parse([]byte("store: sqlite://./a.db\nsources:\n  - name: stripe\n    preset: stripe\n    secrets: [x]\n    "+text+"\n"),
			func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(line 6)") {
			t.Errorf("%s: %v, want %q at line 6", text, err, want)
		}
	}
	cfg := parse(t, "store: sqlite://./a.db\nsources:\n  - {name: stripe, preset: stripe, secrets: [x], window: 1d, body_retention: 2d}\n")
	if w := strings.Join(cfg.Warnings(), "\n"); !strings.Contains(w, "sources[0].body_retention (48h0m0s) is not shorter than its window (24h0m0s)") {
		t.Errorf("warnings %q: want body_retention past the window named", w)
	}
}

// A source's name is part of every key it claims (and of each delivery's
// Idempotency-Key), so a source renamed by a reload starts with no keys: a
// provider's resend of an event the old name took is a new event under the
// new one, delivered again under another Idempotency-Key. The reload says so
// where it names the change; it said only "source stripe removed", and the
// resend was delivered twice without a word.
func TestReloadSaysARemovedSourcesKeysGoWithIt(t *testing.T) {
	old := parse(t, running)
	next := parse(t, strings.Replace(running, "{name: stripe,", "{name: stripe_v2,", 1))
	r, err := config.Reload(old, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(r.Changed, "\n")
	if !strings.Contains(text, "source stripe_v2 added") || !strings.Contains(text, "source stripe removed") {
		t.Fatalf("changed %q", r.Changed)
	}
	if !strings.Contains(text, "keys") || !strings.Contains(text, "new event") {
		t.Errorf("changed %q: want the removed source's line to say its keys go with it", r.Changed)
	}
}

// objects.poll: at least 100ms, a positive duration, read as written;
// a change to it waits for a restart (the poll is started once).
func TestObjectsPoll(t *testing.T) {
	for text, want := range map[string]time.Duration{"": 0, "objects: {poll: 100ms}": 100 * time.Millisecond,
		"objects: {poll: 10s}": 10 * time.Second, "objects: {poll: 1d}": 24 * time.Hour} {
		if got := time.Duration(parse(t, running+text+"\n").Objects.Poll); got != want {
			t.Errorf("%q: poll %s, want %s", text, got, want)
		}
	}
	for text, want := range map[string]string{
		"objects: {poll: 99ms}": "objects.poll: 99ms is under 100ms",
		"objects: {poll: 1ns}":  "objects.poll: 1ns is under 100ms",
		"objects: {poll: 0s}":   `objects.poll: duration "0s" must be positive`,
		"objects: {poll: -5s}":  `objects.poll: duration "-5s" must be positive`,
		"objects: {poll: soon}": "objects.poll",
		"objects: {pol: 1s}":    "objects.pol",
	} {
		_, err := config.Parse([]byte(running+text+"\n"), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	r, err := config.Reload(parse(t, running), parse(t, running+"objects: {poll: 1s}\n"), nil)
	if err != nil || !slices.Equal(r.Restart, []string{"objects"}) || r.Config.Objects.Poll != 0 {
		t.Errorf("a reload changing objects.poll: %+v %v, want it named as waiting for a restart, the running value kept", r, err)
	}
}

// tenant_egress is taken at a reload, and said to have changed.
func TestTenantEgressIsTakenAtAReload(t *testing.T) {
	const base = "sources: [{name: s, outbox: true, destinations: [d]}]\ndestinations: [{name: d, url: \"http://127.0.0.1:9/\"}]\n"
	old, err := config.Parse([]byte(base), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	next, err := config.Parse([]byte("tenant_egress: {allow: [10.0.5.0/24]}\n"+base), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	r, err := config.Reload(old, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Changed, []string{"tenant_egress changed"}) || len(r.Restart) != 0 || !slices.Equal(r.Config.TenantEgress.Allow, []string{"10.0.5.0/24"}) {
		t.Fatalf("changed %v, restart %v, allow %v", r.Changed, r.Restart, r.Config.TenantEgress.Allow)
	}
}
