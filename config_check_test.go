package oncehook_test

// The config's checks that need its parts (a source's preset, its order's
// rules, a filter, intake's limits), with the config's own: ParseConfig
// reports them all at once, each with its field and line.

import (
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/kinds"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestSampleParsesWithItsSecretsSet(t *testing.T) {
	cfg, err := oncehook.ParseConfig([]byte(config.Sample), env(map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_x", "GITHUB_WEBHOOK_SECRET": "gh", "ONCEHOOK_API_TOKEN": "0123456789abcdef0123"}), kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sources[0].Secrets[0] != "whsec_x" {
		t.Fatalf("secret not expanded: %v", cfg.Sources[0].Secrets)
	}
	if time.Duration(cfg.Sources[0].Window) != 4*24*time.Hour {
		t.Fatalf("stripe window %s, want the preset's 4 days", time.Duration(cfg.Sources[0].Window))
	}
	if time.Duration(cfg.Delivery.Lease) != 40*time.Second || cfg.MaxBodySize != 5<<20 {
		t.Fatalf("defaults: lease %s, max body %d", time.Duration(cfg.Delivery.Lease), cfg.MaxBodySize)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{`sources: [{name: s, preset: stripe, secrets: [""], destinations: [app]}]
destinations: [{name: app, url: "http://x"}]`, "sources[0]"},
		{`sources: [{name: s, preset: nope, secrets: [x]}]`, "unknown preset"},
		{`sources: [{name: s, preset: stripe, secrets: [x], destinations: [ghost]}]`, "sources[0].destinations[0]"},
		{`sources: [{name: s, preset: stripe, secrets: [x], on_missing_key: drop}]`, "sources[0].on_missing_key"},
		{`sources: [{name: s, preset: generic, secrets: [x]}]`, "key is required"},
		// A preset that signs, without a secret; a secret or a signature
		// header no request can carry (#45: the API reads them by this check).
		{`sources: [{name: s, preset: stripe}]`, "sources[0].secrets: required: preset stripe verifies"},
		{`sources: [{name: s, preset: stripe, secrets: ["whsec_a\0b"]}]`, "sources[0].secrets[0]: holds a NUL byte"},
		{`sources: [{name: s, preset: whatsapp, secrets: [x], verify_token: "t\0"}]`, "sources[0].verify_token: holds a NUL byte"},
		{`sources: [{name: s, preset: generic, key: [json:id], secrets: [x], signature: {header: "X-Sig\r\nX: 1"}}]`, `sources[0].signature.header: "X-Sig\r\nX: 1": not a header name`},
		{`sources: [{name: s, preset: generic, key: [json:id], secrets: [x], signature: {header: "X-Sig\0"}}]`, `sources[0].signature.header: "X-Sig\x00": not a header name`},
		{`sources: [{name: s, preset: generic, key: [json:id], secrets: [x], signature: {header: "X Sig"}}]`, `sources[0].signature.header: "X Sig": not a header name`},
		{`sources: [{name: s, preset: generic, key: [json:id], secrets: [x], signature: {header: "X-Sig:"}}]`, `sources[0].signature.header: "X-Sig:": not a header name`},
		{`sources: [{name: s, preset: stripe, secrets: [x]}]
destinations: [{name: app, url: "ftp://x"}]`, "destinations[0].url"},
		{`sources: [{name: s, preset: stripe, secrets: [x]}]
destinations: [{name: app, url: "http://x", secret: "whsec_!!"}]`, "destinations[0].secret"},
		{`sources: [{name: s, preset: stripe, secrets: [x], windw: 1h}]`, "sources[0].windw: unknown field"},
		{`sources: [{name: s, preset: stripe, secrets: [x], window: 3x}]`, "duration"},
		{`max_body_size: lots
sources: [{name: s, preset: stripe, secrets: [x]}]`, "size"},
		{`store: mysql://x
sources: [{name: s, preset: stripe, secrets: [x]}]`, "store"},
		{`sources: [{name: a, preset: stripe, secrets: [x]}, {name: a, preset: stripe, secrets: [x]}]`, "sources[1].name"},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {not_started: [200]}}]`, "upstreams[0].idempotency.not_started"},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {client_headers: ["X Key"]}}]`, "upstreams[0].idempotency.client_headers"},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {client_cookies: ["a;b"]}}]`, "upstreams[0].idempotency.client_cookies"},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {lease: 1ns}}]`, "upstreams[0].idempotency.lease: 1ns: want at least 1s"},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {lease: 999ms}}]`, "upstreams[0].idempotency.lease: 999ms: want at least 1s"},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {lease: 2h}}]`, "upstreams[0].idempotency.lease: 2h0m0s: at most effects.max_lease (1h0m0s)"},
		{`effects: {max_lease: 10m}
upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {lease: 11m}}]`, "upstreams[0].idempotency.lease: 11m0s: at most effects.max_lease (10m0s)"},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {single_tenant: true, client_headers: [X-Api-Key]}}]`, "single_tenant"},
		// A method is matched as a client sends it (POST): a lowercase one
		// matched no request, and the API ran without its keys.
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {methods: [post, patch], require_key: true}}]`, `upstreams[0].idempotency.methods[0]: "post": methods are case-sensitive; did you mean POST?`},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {methods: [POST, Patch]}}]`, `upstreams[0].idempotency.methods[1]: "Patch": methods are case-sensitive; did you mean PATCH?`},
		{`upstreams: [{name: p, prefix: /p, upstream: "http://x", idempotency: {methods: ["PO ST"]}}]`, `upstreams[0].idempotency.methods[0]: "PO ST": not a method`},
		{`sources: [{name: o, outbox: true, secrets: [x]}]`, "sources[0].secrets"},
		{`sources: [{name: o, outbox: true, preset: stripe}]`, "sources[0].preset"},
		{`sources: [{name: o, outbox: true, on_missing_key: accept}]`, "sources[0].on_missing_key"},
		{`sources: [{name: o, outbox: true, consume: {nats: {url: "nats://x", stream: S}}, key: ["json:id"]}]`, "sources[0].outbox"},
		{`sources: [{name: o, outbox: true}, {name: s, preset: stripe, secrets: [x]}]
api: {tokens: [{name: shop, token: 0123456789abcdef, publish: [s]}]}`, "api.tokens[0].publish[0]"},
		{`sources: [{name: o, outbox: true}]
api: {tokens: [{name: shop, token: 0123456789abcdef, publish: [ghost]}]}`, "api.tokens[0].publish[0]"},
		{`sources: [{name: o, outbox: true}]
api: {tokens: [{name: shop, token: 0123456789abcdef, read_only: true, publish: [o]}]}`, "api.tokens[0].publish"},
		// Retry rules (#46): each item, and a status in both lists.
		{`sources: [{name: o, outbox: true, destinations: [d]}]
destinations: [{name: d, url: "http://x", retry_on: [5xx, 6xx]}]`, `destinations[0].retry_on[1]: "6xx": want statuses from 100 to 599`},
		{`sources: [{name: o, outbox: true, destinations: [d]}]
destinations: [{name: d, url: "http://x", retry_on: [503], final_on: [503]}]`, "destinations[0].final_on: 503 is in retry_on too"},
		{`sources: [{name: o, outbox: true, destinations: [d]}]
destinations: [{name: d, publish: {nats: {url: "nats://127.0.0.1:4222", subject: x}}, final_on: [5xx]}]`, "destinations[0].retry_on: a queue destination"},
		{`sources: [{name: o, outbox: true, destinations: [d]}]
destinations: [{name: d, pull: {}, standard_webhooks_abort: true}]`, "destinations[0].standard_webhooks_abort"},
		// Alert channels (#46): each kind checks its own block.
		{`sources: [{name: o, outbox: true}]
alerts: {channels: [{name: a, kind: pager, url: "http://x"}]}`, `alerts.channels[0].kind: "pager": want discord, email, json, slack, teams`},
		{`sources: [{name: o, outbox: true}]
alerts: {channels: [{name: a, kind: slack}]}`, "alerts.channels[0].url: required for a slack channel"},
	}
	for _, c := range cases {
		_, err := oncehook.ParseConfig([]byte(c.yaml), env(nil), kinds.All())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config:\n%s\nerr = %v, want it to mention %q", c.yaml, err, c.want)
		}
	}
}

func TestSettingsThatMustFitTogether(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{`sources: [{name: s, preset: stripe, secrets: [x], destinations: [app, app]}]
destinations: [{name: app, url: "http://x"}]`, "sources[0].destinations[1]"},
		{`delivery: {lease: 12s}
sources: [{name: s, preset: stripe, secrets: [x], destinations: [app]}]
destinations: [{name: app, url: "http://x", timeout: 10s}]`, "delivery.lease"},
		{`max_body_size: 10MiB
max_inflight_bytes: 5MiB
sources: [{name: s, preset: stripe, secrets: [x]}]`, "max_inflight_bytes"},
		// Below the default body limit (5 MiB), which receive owns.
		{`max_inflight_bytes: 1MiB
sources: [{name: s, preset: stripe, secrets: [x]}]`, "max_inflight_bytes"},
		{`trusted_proxies: [10.0.0.0/33]
sources: [{name: s, preset: stripe, secrets: [x]}]`, "trusted_proxies"},
	}
	for _, c := range cases {
		_, err := oncehook.ParseConfig([]byte(c.yaml), env(nil), kinds.All())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config:\n%s\nerr = %v, want it to name %q", c.yaml, err, c.want)
		}
	}
	cfg, err := oncehook.ParseConfig([]byte(`delivery: {lease: 15s}
trusted_proxies: [10.0.0.0/8, 192.168.1.1]
sources: [{name: s, preset: stripe, secrets: [x], destinations: [app]}]
destinations: [{name: app, url: "http://x", timeout: 10s}]`), env(nil), kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := cfg.TrustedProxyPrefixes(); len(p) != 2 || p[1].Bits() != 32 {
		t.Fatalf("trusted proxies %v", p)
	}
}

// Found from outside: validate's advice and reports. Every error comes at
// once, each with its field and line; an unknown preset is a .preset error
// with a suggestion; a source whose preset failed gets no echo about its
// window; the lease advice is a lease that validates.
func TestValidateReportsEveryErrorWithItsLine(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	_, err := oncehook.ParseConfig([]byte(`store: ${NOPE_STORE}
sources:
  - {name: a, preset: strpe, secrets: [x], destinations: [app]}
  - name: gh
    preset: github
    secrets: []
  - {name: c, preset: stripe, secrets: ["${NOPE_SECRET}"]}
destinations:
  - name: app
    url: "ftp://h/x"
    timeout: 9s
delivery:
  lease: 10s
`), env, kinds.All())
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"store: ", "NOPE_STORE", "(line 1)",
		`sources[0].preset: unknown preset "strpe"; did you mean stripe?`, "(line 3)",
		"sources[1].secrets: required", "(line 6)",
		"sources[2].secrets[0]: ", "NOPE_SECRET", "(line 7)",
		"destinations[0].url: ", "(line 10)",
		"delivery.lease: 10s does not cover destinations[0]'s timeout (9s) plus its margin (5s, or a fifth of a lease under 25s)", "use at least 12s", "(line 13)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "window") {
		t.Errorf("a source whose preset failed also reported its window:\n%s", msg)
	}
	// The advice validates.
	if _, err := oncehook.ParseConfig([]byte(`sources: [{name: s, preset: stripe, secrets: [x], destinations: [app]}]
destinations: [{name: app, url: "http://h", timeout: 9s}]
delivery: {lease: 12s}
`), env, kinds.All()); err != nil {
		t.Fatalf("the advised lease: %v", err)
	}
	if _, err := oncehook.ParseConfig([]byte(`sources: [{name: s, preset: stripe, secrets: [x], destinations: [app]}]
destinations: [{name: app, url: "http://h", timeout: 9s}]
delivery: {lease: 11s}
`), env, kinds.All()); err == nil || !strings.Contains(err.Error(), "use at least 12s") {
		t.Fatalf("a lease of 11s for 9s: %v", err)
	}
}

// A source's destination is a plain name or {name, types, filter}; the
// check compiles every filter and names the path of a bad one.
func TestRoutedDestinations(t *testing.T) {
	cfg, err := oncehook.ParseConfig([]byte(`
sources:
  - name: stripe
    preset: stripe
    secrets: [x]
    destinations:
      - {name: billing, types: ["invoice.*", "customer.subscription.*"]}
      - name: fraud
        filter: {body: {type: {$startsWith: "charge.dispute."}, data: {object: {amount: {$gte: 10000}}}}}
      - audit
destinations: [{name: billing, url: "http://x"}, {name: fraud, url: "http://x"}, {name: audit, url: "http://x"}]
`), env(nil), kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Sources[0].Destinations
	if len(d) != 3 || d[0].Name != "billing" || len(d[0].Types) != 2 || d[1].Filter == nil || d[2].Name != "audit" || d[2].Routed() {
		t.Fatalf("destinations %+v", d)
	}
	for _, c := range []struct{ yaml, want string }{
		{`[{name: app, types: ["in*voice"]}]`, "sources[0].destinations[0].types"},
		{`[{name: app, filter: {body: {amount: {$gte: [1]}}}}]`, "sources[0].destinations[0].filter: body.amount.$gte"},
		{`[{name: app, filter: {bodee: {}}}]`, "bodee: want body"},
		{`[{name: app, tpyes: ["a"]}]`, "did you mean types"},
		{`[{name: nope}]`, `no destination named "nope"`},
	} {
		_, err := oncehook.ParseConfig([]byte(`sources: [{name: s, preset: stripe, secrets: [x], destinations: `+c.yaml+`}]
destinations: [{name: app, url: "http://x"}]`), env(nil), kinds.All())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.yaml, err, c.want)
		}
	}
}

// Order per entity: a preset's entity and version fill what is left out,
// a preset without one needs entity:, and every field is checked.
func TestOrderDefaultsAndErrors(t *testing.T) {
	cfg, err := oncehook.ParseConfig([]byte(`sources:
  - {name: stripe, preset: stripe, secrets: [whsec_x], order: {}}
  - {name: shop, preset: shopify, secrets: [s], order: {mode: fifo, version: arrival}}
  - {name: hot, preset: hotmart, secrets: [h], order: {on_stale: deliver}}
`), env(nil), kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Order{
		{Entity: "json:data.object.id", Version: "json:created", Mode: "latest", OnStale: "hold", VersionUnit: "unix"},
		{Entity: "json:id", Version: "arrival", Mode: "fifo", OnStale: "hold"},
		{Entity: "json:data.purchase.transaction", Version: "arrival", Mode: "latest", OnStale: "deliver"},
	}
	for i, w := range want {
		if got := *cfg.Sources[i].Order; got != w {
			t.Errorf("%s: order %+v, want %+v", cfg.Sources[i].Name, got, w)
		}
	}
	for yaml, field := range map[string]string{
		`{name: gh, preset: github, secrets: [g], order: {}}`:                          "sources[0].order.entity",
		`{name: s, preset: stripe, secrets: [w], order: {mode: lifo}}`:                 "sources[0].order.mode",
		`{name: s, preset: stripe, secrets: [w], order: {on_stale: drop}}`:             "sources[0].order.on_stale",
		`{name: s, preset: stripe, secrets: [w], order: {entity: "id"}}`:               "sources[0].order",
		`{name: s, preset: stripe, secrets: [w], order: {version: "body:updated_at"}}`: "sources[0].order",
		`{name: s, preset: stripe, secrets: [w], order: {version_unit: seconds}}`:      "version_unit",
		`{name: s, preset: stripe, secrets: [w], order: {max_ahead: 0s}}`:              "must be positive",
	} {
		_, err := oncehook.ParseConfig([]byte("sources:\n  - "+yaml+"\n"), env(nil), kinds.All())
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", yaml, err, field)
		}
	}
}

// Every error in one run, whatever their classes: a field of the wrong
// type (a rate), a misspelled field, an unset variable, a field given
// twice, and what validation finds in the rest, each reported once.
// Before, a wrong-typed rate hid the six others, and an unset variable in
// a destination's filter hid that the destination was listed twice. The
// lease's advice is one rule: 30s of timeout need 35s, whatever the lease.
func TestValidateReportsEveryClassOfErrorAtOnce(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	_, err := oncehook.ParseConfig([]byte(`sources:
  - name: shop
    preset: stripe
    secrets: [x]
    destinations: [app, {name: app, filter: {body: {kind: "${NOPE_KIND}"}}}]
  - {name: gh, preset: github, secrets: [y], windw: 1h}
  - {name: shop, preset: stripe, secrets: [z], on_missing_key: maybe}
destinations:
  - name: app
    url: "http://h"
    rate: 10/x
    timeout: 30s
  - {name: api, url: "ftp://h", concurrency: lots}
  - {name: hook, url: "http://h", timeout: 1s, timeout: 2s}
delivery:
  lease: 10s
`), env, kinds.All())
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	want := []string{
		`destinations[0].rate: "10/x": the unit is s, m or h (line 11)`,
		`sources[0].destinations[1].filter.body.kind: `, "NOPE_KIND", "(line 5)",
		`sources[0].destinations[1]: "app" is listed twice`,
		"sources[1].windw: unknown field (line 6)",
		`sources[2].name: "shop" is used twice (line 7)`,
		`sources[2].on_missing_key: "maybe": want accept or reject (line 7)`,
		`destinations[1].url: "ftp://h": want an http:// or https:// URL (line 13)`,
		`destinations[1].concurrency: "lots": want a whole number (line 13)`,
		"destinations[2].timeout: given twice (line 14)",
		"delivery.lease: 10s does not cover destinations[0]'s timeout (30s) plus its margin (5s, or a fifth of a lease under 25s)", "use at least 35s (line 16)",
		"delivery.lease: 10s does not cover destinations[1]'s timeout (10s)", "use at least 13s",
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("errors lack %q", w)
		}
	}
	if lines := strings.Split(msg, "\n"); len(lines) != 11 {
		t.Errorf("%d errors, want 11 (one each, no echo):\n%s", len(lines), msg)
	}
	if t.Failed() {
		t.Logf("errors:\n%s", msg)
	}
	// The advice validates, and a second less does not.
	for lease, ok := range map[string]bool{"35s": true, "34s": false} {
		_, err := oncehook.ParseConfig([]byte(`sources: [{name: s, preset: stripe, secrets: [x], destinations: [app]}]
destinations: [{name: app, url: "http://h", timeout: 30s}]
delivery: {lease: `+lease+`}
`), env, kinds.All())
		if (err == nil) != ok {
			t.Errorf("lease %s for a 30s timeout: %v", lease, err)
		}
	}
}

// An outbox source needs no preset, secret nor key rule: generic,
// unsigned, keyed by the caller's Idempotency-Key, and a publish without
// a key is refused (it could not be told from its retry).
func TestOutboxSourceNeedsNoPresetNorSecret(t *testing.T) {
	cfg, err := oncehook.ParseConfig([]byte(`sources:
  - name: orders
    outbox: true
    destinations: [capi]
destinations: [{name: capi, url: "http://x"}]
api:
  tokens:
    - {name: shop, token: "0123456789abcdef", publish: [orders]}
`), env(nil), kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Sources[0]
	if s.Preset != "generic" || !s.Unsigned || s.OnMissingKey != "reject" || len(s.Key) != 1 || s.Key[0] != "header:Idempotency-Key" {
		t.Fatalf("outbox source %+v: want generic, unsigned, reject, keyed by Idempotency-Key", s)
	}
	if s.HTTP() || !strings.Contains(s.Elsewhere(), "outbox") {
		t.Fatalf("outbox source: HTTP %v, elsewhere %q", s.HTTP(), s.Elsewhere())
	}
	if got := cfg.API.Tokens[0].Publish; len(got) != 1 || got[0] != "orders" {
		t.Fatalf("token publish %v", got)
	}
}

// TestAnEmptySecretIsReportedOnce: the config's own check and the preset
// both know an empty secret; the operator reads it once, at its field.
func TestAnEmptySecretIsReportedOnce(t *testing.T) {
	for _, preset := range []string{"stripe", "github", "slack", "standard-webhooks"} {
		_, err := oncehook.ParseConfig([]byte(`sources: [{name: s, preset: `+preset+`, secrets: [x, ""], destinations: [app]}]
destinations: [{name: app, url: "http://x"}]`), env(nil), kinds.All())
		if err == nil || strings.Count(err.Error(), "secrets[1]") != 1 || !strings.Contains(err.Error(), "sources[0].secrets[1]: empty") {
			t.Errorf("%s: err = %v, want sources[0].secrets[1]: empty, once", preset, err)
		}
	}
}

// A pull destination has no url and no publish; its timeout defaults to
// a minute (which leaves the other destinations' lease as it was); a token's pull: names pull
// destinations only, and such a token does nothing else.
func TestPullDestinationAndItsTokens(t *testing.T) {
	cfg, err := oncehook.ParseConfig([]byte(`sources: [{name: s, preset: generic, unsigned: true, key: ["json:id"], destinations: [laptop]}]
destinations: [{name: laptop, pull: {}}, {name: app, url: "http://x"}]
api:
  tokens:
    - {name: dev, token: "0123456789abcdef", pull: [laptop]}
`), env(nil), kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Destinations[0]; d.Kind() != "pull" || time.Duration(d.Timeout) != time.Minute {
		t.Fatalf("pull destination %+v", d)
	}
	// The lease follows the HTTP destination's 10s timeout, as it did
	// before there were pull destinations: a pull destination's attempt
	// holds its own lease (its consumer's, in the store).
	if l := time.Duration(cfg.Delivery.Lease); l != 40*time.Second {
		t.Fatalf("delivery lease %s, want 40s (app's 10s timeout + 30s), not raised by laptop's minute", l)
	}
	for bad, want := range map[string]string{
		`destinations: [{name: laptop, pull: {}, url: "http://x"}]`:                                                                           "destinations[0].pull",
		`destinations: [{name: laptop, url: "http://x"}]` + "\napi: {tokens: [{name: d, token: 0123456789abcdef, pull: [laptop]}]}":           `api.tokens[0].pull[0]: destination "laptop" is not a pull destination`,
		`destinations: [{name: laptop, pull: {}}]` + "\napi: {tokens: [{name: d, token: 0123456789abcdef, pull: [nope]}]}":                    `no destination named "nope"`,
		`destinations: [{name: laptop, pull: {}}]` + "\napi: {tokens: [{name: d, token: 0123456789abcdef, read_only: true, pull: [laptop]}]}": "api.tokens[0].pull",
	} {
		_, err := oncehook.ParseConfig([]byte("sources: [{name: s, preset: generic, unsigned: true, key: ['json:id'], destinations: [laptop]}]\n"+bad+"\n"), env(nil), kinds.All())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bad, err, want)
		}
	}
}
