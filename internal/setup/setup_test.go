package setup

import (
	"slices"
	"testing"

	"github.com/oncehook/oncehook/provider"
)

// TestEveryPresetHasSteps: a preset added without its steps would show
// the generic ones after a create; each language has as many steps as
// the other, and none is empty.
func TestEveryPresetHasSteps(t *testing.T) {
	for _, p := range provider.Names() {
		if p == "generic" {
			continue
		}
		if !slices.Contains(Presets(), p) {
			t.Errorf("preset %s has no setup steps", p)
		}
	}
	for _, p := range append(Presets(), "", "generic", "nosuch") {
		en, pt := Steps(p, EN), Steps(p, PTBR)
		if len(en) == 0 || len(en) != len(pt) {
			t.Errorf("%q: %d steps in en, %d in pt-BR", p, len(en), len(pt))
		}
		for i := range en {
			if en[i] == "" || pt[i] == "" || en[i] == pt[i] {
				t.Errorf("%q step %d: en %q, pt-BR %q", p, i, en[i], pt[i])
			}
		}
	}
	if Steps("hotmart", PTBR)[0] == Steps("stripe", PTBR)[0] {
		t.Error("hotmart's steps are stripe's")
	}
}
