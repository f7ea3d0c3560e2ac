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

	// An error in a section under its old name still names its line.
	_, err = config.Parse([]byte(`apis: [{name: pay, prefix: pay, upstream: "http://x"}]`), env(nil))
	if err == nil || !strings.Contains(err.Error(), "upstreams[0].prefix") || !strings.Contains(err.Error(), "(line 1)") {
		t.Fatalf("err %v: want upstreams[0].prefix at line 1", err)
	}

	// Both names at once is ambiguous: refused, naming both.
	_, err = config.Parse([]byte(`upstreams: [{name: a, prefix: /a, upstream: "http://x"}]
apis: [{name: b, prefix: /b, upstream: "http://x"}]
`), env(nil))
	if err == nil || !strings.Contains(err.Error(), "keep upstreams only") {
		t.Fatalf("err %v: want apis and upstreams refused together", err)
	}
}
