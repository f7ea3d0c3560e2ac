package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/config"
)

// manyConfig is n sources, each routing to a destination of its own, a
// tenant's pair every tenantEvery (0: none).
func manyConfig(tb testing.TB, n, tenantEvery int) *config.Config {
	tb.Helper()
	var s, d strings.Builder
	for i := range n {
		tenant := ""
		if tenantEvery > 0 && i%tenantEvery == 0 {
			tenant = fmt.Sprintf(", tenant: t%d", i)
		}
		fmt.Fprintf(&s, "  - {name: s%05d, preset: stripe, secrets: [whsec_x], destinations: [d%05d]%s}\n", i, i, tenant)
		fmt.Fprintf(&d, "  - {name: d%05d, url: \"http://hooks.example.com:9/d%05d\"%s}\n", i, i, tenant)
	}
	c, err := config.Parse([]byte("sources:\n"+s.String()+"destinations:\n"+d.String()), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Every change through the API checks the whole config: the check must
// grow with the objects, not with their square (a route's destination
// was searched for in the list: 330 ms a check at 10,000 of each).
func BenchmarkValidateMany(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("objects=%d", 2*n), func(b *testing.B) {
			c := manyConfig(b, n, 10)
			b.ResetTimer()
			for b.Loop() {
				if err := c.Validate(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Among many, a route to another tenant's destination is refused by name,
// and a tenant's to its own or a shared one taken.
func TestARouteToAnotherTenantsDestinationIsRefusedAmongMany(t *testing.T) {
	for _, n := range []int{10, 1000} {
		c := manyConfig(t, n, 10)
		if err := c.Validate(); err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		// s00001 (no tenant) to d00000 (tenant t0's); s00000 (t0's) to d00001 (shared).
		c.Sources[1].Destinations[0].Name = "d00000"
		c.Sources[0].Destinations[0].Name = "d00001"
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), `sources[1].destinations[0]: destination "d00000" is tenant t0's`) {
			t.Fatalf("%d: %v, want sources[1]'s route to t0's destination refused", n, err)
		}
		if strings.Contains(err.Error(), "sources[0]") {
			t.Fatalf("%d: %v: t0's source routes to a shared destination", n, err)
		}
	}
}
