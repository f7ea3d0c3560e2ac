package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/config"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestUnsetEnvironmentVariableIsAnError(t *testing.T) {
	_, err := config.Parse([]byte(config.Sample), env(map[string]string{"GITHUB_WEBHOOK_SECRET": "gh", "ONCEHOOK_API_TOKEN": "0123456789abcdef0123"}))
	if err == nil || !strings.Contains(err.Error(), "STRIPE_WEBHOOK_SECRET") {
		t.Fatalf("err = %v, want one naming STRIPE_WEBHOOK_SECRET", err)
	}
}

func TestDurationsAndSizes(t *testing.T) {
	cfg, err := config.Parse([]byte(`max_body_size: 512KiB
sources: [{name: s, preset: stripe, secrets: [x], window: 1d12h}]`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxBodySize != 512<<10 || time.Duration(cfg.Sources[0].Window) != 36*time.Hour {
		t.Fatalf("size %d window %s", cfg.MaxBodySize, time.Duration(cfg.Sources[0].Window))
	}
}

func TestDemoIsValid(t *testing.T) {
	cfg := config.Demo("127.0.0.1:9999")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Destinations[0].URL != "http://127.0.0.1:9999/_demo/sink" {
		t.Fatalf("demo sink at %s", cfg.Destinations[0].URL)
	}
}

// An expanded value stays the text it was, whatever YAML would make of it.
func TestExpandedValuesStayText(t *testing.T) {
	for _, secret := range []string{"123", "true", "a: b", "x # y", "[1]", "'q'", "${NOT_A_REF}"} {
		cfg, err := config.Parse([]byte("sources:\n  - name: s\n    preset: stripe\n    secrets: [\"${S}\"]\n    window: ${W}  # ${IN_A_COMMENT}\n"),
			env(map[string]string{"S": secret, "W": "2h"}))
		if err != nil {
			t.Fatalf("secret %q: %v", secret, err)
		}
		if got := cfg.Sources[0].Secrets[0]; got != secret {
			t.Errorf("secret %q came out as %q", secret, got)
		}
		if time.Duration(cfg.Sources[0].Window) != 2*time.Hour {
			t.Errorf("window %s", time.Duration(cfg.Sources[0].Window))
		}
	}
}

// A misspelled field is named by its path, and it is the only error: the
// preset it should have set is not also reported missing.
func TestMisspelledFieldIsTheOnlyError(t *testing.T) {
	_, err := config.Parse([]byte(`
sources:
  - name: s
    presett: stripe
    secrets: [x]
destinations:
  - name: app
    url: http://127.0.0.1:9000
    retry: {max_atempts: 3}
`), env(nil))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{"sources[0].presett: unknown field (line 4); did you mean preset?", "destinations[0].retry.max_atempts: unknown field"} {
		if !strings.Contains(msg, want) {
			t.Errorf("err = %q, want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "preset: required") || strings.Count(msg, "\n") > 1 {
		t.Errorf("spurious errors beside the misspellings: %q", msg)
	}
}

func TestEmptyConfigSaysSo(t *testing.T) {
	for _, text := range []string{"", "\n\n", "# only a comment\n", "~"} {
		if _, err := config.Parse([]byte(text), env(nil)); !errors.Is(err, config.ErrEmpty) {
			t.Errorf("%q: err = %v, want ErrEmpty", text, err)
		}
	}
}

// Environment references work the way a shell's do, and every other $ is
// an error naming the field: a secret never silently becomes the literal
// text "${NOPE:-default}".
func TestEnvironmentReferences(t *testing.T) {
	vars := env(map[string]string{"SET": "s3cret", "EMPTY": ""})
	secret := func(ref string) (string, error) {
		cfg, err := config.Parse([]byte("sources:\n  - name: s\n    preset: stripe\n    secrets: ['"+ref+"']\n"), vars)
		if err != nil {
			return "", err
		}
		return cfg.Sources[0].Secrets[0], nil
	}
	good := map[string]string{
		"${SET}":          "s3cret",
		"$SET":            "s3cret",
		"pre-${SET}-post": "pre-s3cret-post",
		"${NOPE:-dflt}":   "dflt",
		"${EMPTY:-dflt}":  "dflt",
		"${NOPE-dflt}":    "dflt",
		"x${EMPTY-dflt}x": "xx",
		"a$$b":            "a$b",
		"${SET:-ignored}": "s3cret",
		"$SET.$SET":       "s3cret.s3cret",
	}
	for ref, want := range good {
		got, err := secret(ref)
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", ref, got, err, want)
		}
	}
	for _, ref := range []string{"${NOPE}", "$NOPE", "${SET:?msg}", "${SET:+x}", "${1}", "${", "a$", "pa$5word", "${ SET }"} {
		if got, err := secret(ref); err == nil || !strings.Contains(err.Error(), "sources[0].secrets[0]") {
			t.Errorf("%s = %q, %v; want an error naming sources[0].secrets[0]", ref, got, err)
		}
	}
	// A number from the environment still reads as a number.
	cfg, err := config.Parse([]byte("delivery: {concurrency: '${N}'}\nsources: [{name: s, preset: stripe, secrets: [x]}]\n"), env(map[string]string{"N": "8"}))
	if err != nil || cfg.Delivery.Concurrency != 8 {
		t.Fatalf("concurrency from the environment: %v %v", cfg, err)
	}
}

func TestDurationsMustMakeSense(t *testing.T) {
	for _, c := range []struct{ field, value string }{
		{"tolerance", "0s"}, {"tolerance", "-5s"}, {"window", "0"}, {"window", "213504d"}, {"window", "9999999h"}, {"window", "1d-30h"},
	} {
		_, err := config.Parse([]byte("sources: [{name: s, preset: stripe, secrets: [x], "+c.field+": "+c.value+"}]"), env(nil))
		if err == nil || !strings.Contains(err.Error(), "sources[0]."+c.field) {
			t.Errorf("%s: %s accepted or not named: %v", c.field, c.value, err)
		}
	}
}

// Invariant 1 needs a file: an empty or in-memory SQLite path would answer
// 200 for events stored nowhere.
func TestSQLiteStoreMustBeAFile(t *testing.T) {
	for _, store := range []string{"sqlite://", "sqlite://${DB_PATH}", "sqlite://:memory:", "sqlite://file::memory:?cache=shared", "sqlite://file:x.db?mode=memory"} {
		_, err := parseWithKinds([]byte("store: '"+store+"'\nsources: [{name: s, preset: stripe, secrets: [x]}]"), env(map[string]string{"DB_PATH": ""}))
		if err == nil || !strings.Contains(err.Error(), "store:") {
			t.Errorf("store %s: err = %v, want a config error on store", store, err)
		}
	}
}

func TestWarnings(t *testing.T) {
	cfg, err := config.Parse([]byte(`sqlite: {synchronous: "OFF"}
sources: [{name: lonely, preset: stripe, secrets: [x]}]`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "synchronous: OFF") || !strings.Contains(w, "lonely") {
		t.Fatalf("warnings: %q", w)
	}
}

// A whatsapp source without verify_token cannot pass the GET check Meta
// makes before it registers the URL, and verify_token on another preset
// does nothing: validate says both before a provider finds out.
func TestVerifyTokenWarnings(t *testing.T) {
	cfg, err := config.Parse([]byte(`sources:
  - {name: wa, preset: whatsapp, secrets: [x], destinations: [app]}
  - {name: mp, preset: mercadopago, secrets: [x], verify_token: vt, destinations: [app]}
  - {name: wa2, preset: whatsapp, secrets: [x], verify_token: vt, destinations: [app]}
destinations: [{name: app, url: "http://x"}]`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "sources[0] (wa) has no verify_token") || !strings.Contains(w, "sources[1].verify_token: only the whatsapp preset") || strings.Contains(w, "sources[2]") {
		t.Fatalf("warnings: %q", w)
	}
}

// On a preset that splits batches, on_missing_key: reject refuses a whole
// batch for one update without an id: validate says so.
func TestRejectingKeylessEventsOfABatchIsAWarning(t *testing.T) {
	cfg, err := config.Parse([]byte(`sources:
  - {name: wa, preset: whatsapp, secrets: [x], verify_token: vt, on_missing_key: reject, destinations: [app]}
  - {name: st, preset: stripe, secrets: [x], on_missing_key: reject, destinations: [app]}
destinations: [{name: app, url: "http://x"}]`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "sources[0].on_missing_key: reject: a whatsapp batch") || strings.Contains(w, "sources[1]") {
		t.Fatalf("warnings: %q", w)
	}
}

func TestValidateRedactsADestinationURL(t *testing.T) {
	_, err := config.Parse([]byte(`
sources: [{name: s, preset: stripe, secrets: [x], destinations: [d]}]
destinations: [{name: d, url: "ftp://u:s3cretPW@h/x?token=s3cretTK"}]`), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "destinations[0].url") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("err %v: want destinations[0].url named, without its secrets", err)
	}
}

func TestRedactHidesCredentials(t *testing.T) {
	cases := map[string]string{
		"postgres://oncehook:s3cret@db:5432/x?sslmode=require": "postgres://oncehook:xxxxx@db:5432/x?sslmode=require",
		"postgres://db/x?user=u&password=s3cret":               "postgres://db/x?user=u&password=xxxxx",
		// Found from outside: a destination's query holds its API key
		// under any name, and validate printed it whole.
		"https://u:s3cret@crm.example/hook?api_key=s3cret&x=1": "https://u:xxxxx@crm.example/hook?api_key=xxxxx&x=xxxxx",
		"ftp://u:s3cret@h/x?token=s3cret":                      "ftp://u:xxxxx@h/x?token=xxxxx",
		"redis://:s3cret@cache:6379/0":                         "redis://:xxxxx@cache:6379/0",
		"redis://cache:6379/0":                                 "redis://cache:6379/0",
		"sqlite://./oncehook.db":                               "sqlite://./oncehook.db",
	}
	for in, want := range cases {
		if got := config.Redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestTLSNeedsBothFilesThatLoad(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	_, err := config.Parse([]byte("sources: [{name: s, preset: stripe, secrets: [x]}]\nmetrics: {listen: nine}\n"), env)
	if err == nil || !strings.Contains(err.Error(), "metrics.listen") || !strings.Contains(err.Error(), "(line 2)") {
		t.Errorf("metrics.listen: nine: %v, want the field and its line", err)
	}
	for _, tlsLine := range []string{"tls: {cert_file: a.pem}", "tls: {cert_file: /nope/a.pem, key_file: /nope/b.pem}"} {
		_, err := config.Parse([]byte("sources: [{name: s, preset: stripe, secrets: [x]}]\n"+tlsLine+"\n"), env)
		if err == nil || !strings.Contains(err.Error(), "tls") {
			t.Errorf("%s: %v, want a tls error", tlsLine, err)
		}
	}
}

// A destination's (or the alerts') headers go with every request: a name
// or a value that HTTP cannot carry made every attempt fail in the client
// ("invalid header field value"), the breaker hold the destination, and
// nothing ever reach it. The config says so instead, naming the field.
func TestHeadersNoRequestCanCarryAreRefused(t *testing.T) {
	const base = "sources: [{name: s, outbox: true, destinations: [d]}]\n"
	for _, c := range []struct{ text, field string }{
		{`destinations: [{name: d, url: "http://127.0.0.1:9/", headers: {X-Env: "prod\r\nX-Evil: 1"}}]`, "destinations[0].headers"},
		{`destinations: [{name: d, url: "http://127.0.0.1:9/", headers: {X-Env: "a\u0000b"}}]`, "destinations[0].headers"},
		{`destinations: [{name: d, url: "http://127.0.0.1:9/", headers: {"X Env": "prod"}}]`, "destinations[0].headers"},
		{`destinations: [{name: d, url: "http://127.0.0.1:9/", headers: {"": "prod"}}]`, "destinations[0].headers"},
		{`destinations: [{name: d, publish: {nats: {url: "nats://127.0.0.1:4222", subject: x}}, headers: {X-Env: "a\nb"}}]`, "destinations[0].headers"},
		{"destinations: [{name: d, url: \"http://127.0.0.1:9/\"}]\nalerts: {url: \"http://127.0.0.1:9/\", headers: {Authorization: \"Bearer x\\n\"}}", "alerts.headers"},
	} {
		_, err := config.Parse([]byte(base+c.text), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err = %v, want an error naming %s", c.text, err, c.field)
		}
	}
	if _, err := config.Parse([]byte(base+`destinations: [{name: d, url: "http://127.0.0.1:9/", headers: {X-Env: "prod;\tcafé"}}]`), env(nil)); err != nil {
		t.Fatalf("a header HTTP can carry: %v", err)
	}
}

// An alert channel's fields are checked by their form, each error naming
// its field; the password comes from the environment as any field does.
func TestAlertChannelsFields(t *testing.T) {
	const base = "sources: [{name: s, outbox: true, destinations: [d]}]\ndestinations: [{name: d, url: \"http://127.0.0.1:9/\"}]\n"
	for _, c := range []struct{ text, field string }{
		{`alerts: {channels: [{name: "a b", kind: slack, url: "https://x/"}]}`, "alerts.channels[0].name"},
		{`alerts: {url: "https://x/", channels: [{name: url, kind: slack, url: "https://x/"}]}`, "alerts.channels[0].name"},
		{`alerts: {channels: [{name: a, url: "https://x/"}]}`, "alerts.channels[0].kind"},
		{`alerts: {channels: [{name: a, kind: slack, url: "ftp://x/"}]}`, "alerts.channels[0].url"},
		{`alerts: {channels: [{name: a, kind: json, url: "https://x/", headers: {"X Y": z}}]}`, "alerts.channels[0].headers"},
		{`alerts: {channels: [{name: a, kind: email, smtp: {host: "h:25", from: a@b.c, to: [d@e.f]}}]}`, "alerts.channels[0].smtp.host"},
		{`alerts: {channels: [{name: a, kind: email, smtp: {host: h, port: 70000, from: a@b.c, to: [d@e.f]}}]}`, "alerts.channels[0].smtp.port"},
		{`alerts: {channels: [{name: a, kind: email, smtp: {host: h, from: "not an address", to: [d@e.f]}}]}`, "alerts.channels[0].smtp.from"},
		{`alerts: {channels: [{name: a, kind: email, smtp: {host: h, from: a@b.c, to: [d@e.f, "nope"]}}]}`, "alerts.channels[0].smtp.to[1]"},
		{`alerts: {channels: [{name: a, kind: email, smtp: {host: h, password: x, from: a@b.c, to: [d@e.f]}}]}`, "alerts.channels[0].smtp.username"},
		{`alerts: {channels: [{name: a, kind: email, smtp: {host: h, username: u, password: "${NOPE}", from: a@b.c, to: [d@e.f]}}]}`, "alerts.channels[0].smtp.password"},
	} {
		_, err := config.Parse([]byte(base+c.text), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err = %v, want an error naming %s", c.text, err, c.field)
		}
	}
	cfg, err := config.Parse([]byte(base+`alerts: {channels: [{name: ops, kind: email, smtp: {host: smtp.example.com, username: u, password: "${SMTP_PASSWORD}", from: "oncehook <a@b.c>", to: [d@e.f], starttls: true}}]}`),
		env(map[string]string{"SMTP_PASSWORD": "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Alerts.Channels[0].SMTP; s.Password != "s3cret" || s.StartTLS == nil || !*s.StartTLS {
		t.Fatalf("smtp = %+v", s)
	}
}

// A name is at most MaxNameLen characters, as long as the operator's
// filters take: a longer one could never be listed by name.
func TestNamesAreBounded(t *testing.T) {
	for _, n := range []int{1, config.MaxNameLen} {
		name := strings.Repeat("s", n)
		if _, err := config.Parse([]byte("sources: [{name: "+name+", outbox: true, destinations: [d]}]\ndestinations: [{name: d, url: \"http://127.0.0.1:9/\"}]\n"), env(nil)); err != nil {
			t.Errorf("a name of %d characters: %v", n, err)
		}
	}
	long := strings.Repeat("s", config.MaxNameLen+1)
	for text, field := range map[string]string{
		"sources: [{name: " + long + ", outbox: true, destinations: [d]}]\ndestinations: [{name: d, url: \"http://127.0.0.1:9/\"}]\n":            "sources[0].name",
		"sources: [{name: s, outbox: true, destinations: [" + long + "]}]\ndestinations: [{name: " + long + ", url: \"http://127.0.0.1:9/\"}]\n": "destinations[0].name",
	} {
		_, err := config.Parse([]byte(text), env(nil))
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "at most 200") {
			t.Errorf("a name of %d characters: %v, want an error naming %s", len(long), err, field)
		}
	}
}

// A tenant's source routes to its own tenant's destinations or to shared
// ones; a shared source to shared ones; a tenant's token publishes to and
// pulls from its own; a tenant's name is a name.
func TestTenantsKeepToTheirOwn(t *testing.T) {
	const d = "destinations: [{name: shared, url: \"http://127.0.0.1:9/\"}, {name: a-d, tenant: a, url: \"http://a.example.com:9/\"}, {name: b-d, tenant: b, url: \"http://b.example.com:9/\"}, {name: b-pull, tenant: b, pull: {}}]\n"
	const tok = "api: {tokens: [{name: t, token: 0123456789abcdef0123, tenant: a, %s}]}\n"
	for _, text := range []string{
		"sources: [{name: s, tenant: a, outbox: true, destinations: [a-d, shared]}]\n" + d,
		"sources: [{name: s, outbox: true, destinations: [shared]}]\n" + d,
		"sources: [{name: s, tenant: a, outbox: true, destinations: [a-d]}]\n" + fmt.Sprintf(tok, "publish: [s]") + d,
	} {
		if _, err := config.Parse([]byte(text), env(nil)); err != nil {
			t.Errorf("%s: %v", text, err)
		}
	}
	for text, want := range map[string]string{
		"sources: [{name: s, tenant: a, outbox: true, destinations: [b-d]}]\n" + d:                                                 `sources[0].destinations[0]: destination "b-d" is tenant b's, not a's`,
		"sources: [{name: s, outbox: true, destinations: [a-d]}]\n" + d:                                                            `sources[0].destinations[0]: destination "a-d" is tenant a's: a source of no tenant routes to shared destinations only`,
		"sources: [{name: s, tenant: \"a b\", outbox: true, destinations: [shared]}]\n" + d:                                        `sources[0].tenant: "a b": want letters`,
		"sources: [{name: s, tenant: b, outbox: true, destinations: [b-d]}]\n" + fmt.Sprintf(tok, "publish: [s]") + d:              `api.tokens[0].publish[0]: source "s" is not tenant a's`,
		"sources: [{name: s, tenant: b, outbox: true, destinations: [b-d]}]\n" + fmt.Sprintf(tok, "pull: [b-pull]") + d:            `api.tokens[0].pull[0]: destination "b-pull" is not tenant a's`,
		"sources: [{name: s, outbox: true, destinations: [shared]}]\n" + strings.Replace(d, "tenant: a,", "tenant: \"a\\nb\",", 1): `destinations[1].tenant:`,
		"tenants: [{name: a, rate: 10/s}, {name: a}]\nsources: [{name: s, outbox: true, destinations: [shared]}]\n" + d:            `tenants[1].name`,
		"tenants: [{name: a, rate: 0/s}]\nsources: [{name: s, outbox: true, destinations: [shared]}]\n" + d:                        `want a count per unit`,
	} {
		_, err := config.Parse([]byte(text), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", text, err, want)
		}
	}
}

// EnvRef tells apply which values are one variable and nothing else (a
// secret export wrote, kept as stored when the variable is unset): text
// around a reference, a default, or a name that is not one is not.
func TestEnvRef(t *testing.T) {
	for s, want := range map[string]string{"${A}": "A", "$A_1": "A_1", "${_x9}": "_x9"} {
		if got, ok := config.EnvRef(s); !ok || got != want {
			t.Errorf("EnvRef(%q) = %q, %v; want %q", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "A", "$", "${}", "${1A}", "$1", "${A:-x}", "${A}x", "x${A}", "$$A", "${A B}", "${A\x00}", "${A}\n"} {
		if got, ok := config.EnvRef(s); ok {
			t.Errorf("EnvRef(%q) = %q, true; want none", s, got)
		}
	}
}

// A tenant's destination at a literal address that is not public, or at
// localhost, is refused at its url (a name is left to the dial: nothing
// is resolved here); tenant_egress.allow lets it through, and is checked
// entry by entry; the operator's destinations are not restricted.
func TestATenantsDestinationIsPublicUnlessAllowed(t *testing.T) {
	const src = "sources: [{name: s, tenant: a, outbox: true, destinations: [d]}]\n"
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254", "10.1.2.3", "[fd00::1]", "0.0.0.0", "100.64.0.1"} {
		text := src + "destinations: [{name: d, tenant: a, url: \"http://" + host + ":8080/hook?api_key=SECRET\"}]\n"
		_, err := config.Parse([]byte(text), env(nil))
		if err == nil || !strings.Contains(err.Error(), "destinations[0].url: ") ||
			!strings.Contains(err.Error(), "tenant destinations reach public addresses only (tenant_egress.allow lets them reach others)") ||
			strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v", host, err)
		}
		if _, err := config.Parse([]byte("tenant_egress: {allow: [\"0.0.0.0/0\", \"::/0\"]}\n"+text), env(nil)); err != nil {
			t.Errorf("%s, all allowed: %v", host, err)
		}
		if _, err := config.Parse([]byte("sources: [{name: s, outbox: true, destinations: [d]}]\ndestinations: [{name: d, url: \"http://"+host+":8080/\"}]\n"), env(nil)); err != nil {
			t.Errorf("%s, the operator's: %v", host, err)
		}
	}
	for _, host := range []string{"hooks.example.com", "127.0.0.1.example.com", "8.8.8.8"} {
		if _, err := config.Parse([]byte(src+"destinations: [{name: d, tenant: a, url: \"https://"+host+"/\"}]\n"), env(nil)); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := config.Parse([]byte("tenant_egress: {allow: [\"10.1.2.0/24\"]}\n"+src+"destinations: [{name: d, tenant: a, url: \"http://10.1.2.3/\"}]\n"), env(nil)); err != nil {
		t.Errorf("allowed 10.1.2.0/24: %v", err)
	}
	for _, bad := range []string{"10.1.2.0/33", "example.com", "\x00", "10.0.0.0/8\r\nx"} {
		text := fmt.Sprintf("tenant_egress: {allow: [\"10.0.0.0/8\", %q]}\n", bad) + src + "destinations: [{name: d, tenant: a, url: \"https://hooks.example.com/\"}]\n"
		if _, err := config.Parse([]byte(text), env(nil)); err == nil || !strings.Contains(err.Error(), "tenant_egress.allow[1]: ") || !strings.Contains(err.Error(), "want an address or a CIDR prefix") {
			t.Errorf("allow %q: %v", bad, err)
		}
	}
}
