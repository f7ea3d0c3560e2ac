package admin_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/store/sqlite"
)

// BenchmarkTenantCalls measures a tenant's list and show calls against
// a config of 10,000 sources and 10,000 destinations, 100 tenants of 100
// each: what the tenant's token asks on every page of the dashboard. A
// tenant's reach is read from one index built at the config's swap, so
// neither call should grow with the other tenants' objects.
func BenchmarkTenantCalls(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "events.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	const n, tenants = 10000, 100
	sources := make([]admin.Source, n)
	dests := make([]admin.Destination, n)
	for i := range n {
		t := fmt.Sprintf("t%03d", i%tenants)
		sources[i] = admin.Source{Name: fmt.Sprintf("src-%05d", i), Tenant: t}
		dests[i] = admin.Destination{Name: fmt.Sprintf("dst-%05d", i), Tenant: t}
	}
	svc, err := admin.New(admin.Options{Store: st, Sources: sources, Destinations: dests})
	if err != nil {
		b.Fatal(err)
	}
	op := svc.Tenant("t042")
	b.Run("sources", func(b *testing.B) {
		for b.Loop() {
			v, err := op.Sources(ctx)
			if err != nil || len(v) != n/tenants {
				b.Fatal(len(v), err)
			}
		}
	})
	b.Run("destinations", func(b *testing.B) {
		for b.Loop() {
			v, err := op.Destinations(ctx)
			if err != nil || len(v) != n/tenants {
				b.Fatal(len(v), err)
			}
		}
	})
	// What each config swap pays for the index (SetCatalog builds it).
	b.Run("swap", func(b *testing.B) {
		for b.Loop() {
			svc.SetCatalog(sources, dests)
		}
	})
	b.Run("events_of_a_source", func(b *testing.B) {
		for b.Loop() {
			if _, err := op.Events(ctx, admin.EventFilter{Source: "src-09942"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
