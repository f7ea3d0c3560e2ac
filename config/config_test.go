package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/config"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestSampleParsesWithItsSecretsSet(t *testing.T) {
	cfg, err := config.Parse([]byte(config.Sample), env(map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_x", "GITHUB_WEBHOOK_SECRET": "gh"}))
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

func TestUnsetEnvironmentVariableIsAnError(t *testing.T) {
	_, err := config.Parse([]byte(config.Sample), env(map[string]string{"GITHUB_WEBHOOK_SECRET": "gh"}))
	if err == nil || !strings.Contains(err.Error(), "STRIPE_WEBHOOK_SECRET") {
		t.Fatalf("err = %v, want one naming STRIPE_WEBHOOK_SECRET", err)
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
		{`sources: [{name: s, preset: stripe, secrets: [x]}]
destinations: [{name: app, url: "ftp://x"}]`, "destinations[0].url"},
		{`sources: [{name: s, preset: stripe, secrets: [x]}]
destinations: [{name: app, url: "http://x", secret: "whsec_!!"}]`, "destinations[0].secret"},
		{`sources: [{name: s, preset: stripe, secrets: [x], windw: 1h}]`, "field windw not found"},
		{`sources: [{name: s, preset: stripe, secrets: [x], window: 3x}]`, "duration"},
		{`max_body_size: lots
sources: [{name: s, preset: stripe, secrets: [x]}]`, "size"},
		{`store: mysql://x
sources: [{name: s, preset: stripe, secrets: [x]}]`, "store"},
		{`sources: [{name: a, preset: stripe, secrets: [x]}, {name: a, preset: stripe, secrets: [x]}]`, "sources[1].name"},
	}
	for _, c := range cases {
		_, err := config.Parse([]byte(c.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config:\n%s\nerr = %v, want it to mention %q", c.yaml, err, c.want)
		}
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
