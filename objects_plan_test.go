package oncehook_test

import (
	"slices"
	"testing"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/secretbox"
)

// ObjectPatch, apply's plan: a field the file leaves out goes back to
// its default (null), but a secret's field stays as stored, and so does a
// field apply was told to keep (its variable unset); a secret is compared
// by fingerprint, so the same one is no change and another is, named by
// its field only.
func TestObjectPatchKeepsSecretsTheFileLeavesOut(t *testing.T) {
	fp := func(s string) map[string]any { return map[string]any{"fingerprint": secretbox.Fingerprint(s)} }
	stored := map[string]any{"name": "acme", "preset": "stripe", "secrets": []any{fp("whsec_a")}, "window": "1h",
		"destinations": []any{"app"}, "public_url": "https://x/in/acme"}
	cases := []struct {
		name    string
		desired map[string]any
		kept    []string
		nulls   []string
		changed []string
	}{
		{"the same, its secret in clear", map[string]any{"name": "acme", "preset": "stripe", "secrets": []any{"whsec_a"}, "window": "1h", "destinations": []any{"app"}, "public_url": "https://x/in/acme"},
			nil, nil, nil},
		{"another secret", map[string]any{"name": "acme", "preset": "stripe", "secrets": []any{"whsec_b"}, "window": "1h", "destinations": []any{"app"}, "public_url": "https://x/in/acme"},
			nil, nil, []string{"secrets"}},
		{"secrets and window left out", map[string]any{"name": "acme", "preset": "stripe", "destinations": []any{"app"}, "public_url": "https://x/in/acme"},
			nil, []string{"window"}, []string{"window"}},
		{"a field kept", map[string]any{"name": "acme", "preset": "stripe", "window": "1h", "destinations": []any{"app", "crm"}},
			[]string{"public_url"}, nil, []string{"destinations"}},
	}
	for _, c := range cases {
		patch, changed := oncehook.ObjectPatch("source", stored, c.desired, func(f string) bool { return slices.Contains(c.kept, f) })
		var nulls []string
		for k, v := range patch {
			if v == nil {
				nulls = append(nulls, k)
			}
		}
		slices.Sort(nulls)
		if !slices.Equal(nulls, c.nulls) || !slices.Equal(changed, c.changed) {
			t.Errorf("%s: nulls %q, changed %q; want %q, %q (patch %v)", c.name, nulls, changed, c.nulls, c.changed, patch)
		}
		if _, ok := patch["secrets"]; ok && c.desired["secrets"] == nil {
			t.Errorf("%s: the patch sets secrets the file left out: %v", c.name, patch)
		}
	}
}
