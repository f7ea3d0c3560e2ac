package config_test

import (
	"strings"
	"testing"

	"github.com/oncehook/oncehook/config"
)

// A config written before a rename reads as before, and says the new
// name: users upgrade without their config failing, and learn it once.
func TestOldNamesAreReadWithAWarning(t *testing.T) {
	cfg, err := config.Parse([]byte(`sources:
  - {name: stripe, preset: stripe, secrets: [whsec_x], order: {mode: stale}}
apis: [{name: pay, prefix: /pay, upstream: "http://x"}]
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Upstreams) != 1 || cfg.Upstreams[0].Name != "pay" {
		t.Fatalf("apis: read as upstreams %+v", cfg.Upstreams)
	}
	if mode := cfg.Sources[0].Order.Mode; mode != "latest" {
		t.Fatalf("order mode stale read as %q, want latest", mode)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "apis: is now called upstreams:") || !strings.Contains(w, "sources[0].order.mode: stale is now called latest") {
		t.Fatalf("warnings %q: want both renames named", w)
	}

	// An error in a section under its old name names the field as the
	// file writes it, and its line (it said upstreams[0].prefix, a field
	// the file has nowhere); a field of another section keeps its name.
	for text, want := range map[string][]string{
		`apis: [{name: pay, prefix: pay, upstream: "http://x"}]`:                                                             {"apis[0].prefix", "(line 1)"},
		"apis:\n  - {name: pay, prefix: /pay, upstream: \"http://x\"}\n  - {name: pay, prefix: /p2, upstream: \"http://x\"}": {"apis[1].name", "(line 3)"},
		"apis:\n  - {name: pay, prefix: /pay, upstream: \"http://x\", upstrem: y}":                                           {"apis[0].upstrem: unknown field (line 2)"},
		"apis: [{name: pay, prefix: /pay, upstream: \"http://x\"}]\nsources: [{name: s, preset: stripe, secrets: [x], upstreams: 1}]": {
			"sources[0].upstreams: unknown field"},
	} {
		_, err = config.Parse([]byte(text), env(nil))
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err %v: want %q", text, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "upstreams[") {
			t.Errorf("%s: err %v names a field the file does not have", text, err)
		}
	}

	// Both names at once is ambiguous: refused, naming both.
	_, err = config.Parse([]byte(`upstreams: [{name: a, prefix: /a, upstream: "http://x"}]
apis: [{name: b, prefix: /b, upstream: "http://x"}]
`), env(nil))
	if err == nil || !strings.Contains(err.Error(), "keep upstreams only") {
		t.Fatalf("err %v: want apis and upstreams refused together", err)
	}
}
