package tenant_test

import (
	"slices"
	"testing"

	"github.com/oncehook/oncehook/internal/tenant"
)

// TestIndex answers whose a name is, apart for sources and destinations
// (one name may be both, of different tenants), and tells a shared
// object from none.
func TestIndex(t *testing.T) {
	x := tenant.NewIndex(
		[]tenant.Object{{Name: "a", Tenant: "acme"}, {Name: "shared"}, {Name: "b", Tenant: "acme"}, {Name: "g", Tenant: "globex"}},
		[]tenant.Object{{Name: "a", Tenant: "globex"}, {Name: "d"}})
	for _, c := range []struct {
		kind, name, tenant string
		ok                 bool
	}{
		{tenant.Source, "a", "acme", true},
		{tenant.Destination, "a", "globex", true},
		{tenant.Source, "shared", "", true},
		{tenant.Destination, "d", "", true},
		{tenant.Source, "d", "", false},
		{tenant.Destination, "nobody", "", false},
	} {
		if got, ok := x.Of(c.kind, c.name); got != c.tenant || ok != c.ok {
			t.Errorf("Of(%s, %s) = %q, %v; want %q, %v", c.kind, c.name, got, ok, c.tenant, c.ok)
		}
	}
	if !x.Owns("acme", tenant.Source, "a") || x.Owns("acme", tenant.Destination, "a") || x.Owns("", tenant.Source, "nobody") {
		t.Error("Owns disagrees with Of")
	}
	if got := x.SourcesOf("acme"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("SourcesOf(acme) = %q", got)
	}
	if got := x.SourcesOf("initech"); got == nil || len(got) != 0 {
		t.Errorf("SourcesOf(initech) = %#v, want an empty list", got)
	}
	got := x.SourcesOf("acme")
	got[0] = "changed"
	if x.SourcesOf("acme")[0] != "a" {
		t.Error("a caller's change reached the index")
	}
}
