package postgres

import (
	"context"

	"github.com/oncehook/oncehook/store"
)

// Kind is PostgreSQL as a store kind: store: postgres://... (several
// replicas share it).
func Kind() store.Kind {
	return store.Kind{
		Name: "postgres", Schemes: []string{"postgres", "postgresql"}, Example: "postgres://...",
		// Two writers: two transactions overlap one's commit with the
		// other's work (measured: 1 writer 11.8k events/s, 2: 11.4k, 4:
		// 9.6k, 8: 8.9k on the 2-core bench machine, where fewer writers
		// make bigger batches; with the database on another host, overlap
		// matters more). Lingering did not gain.
		Writer: store.Writer{Writers: 2},
		Shared: true,
		Open: func(ctx context.Context, url string, o store.OpenOptions) (store.Store, error) {
			return Open(ctx, url, Options{Logger: o.Logger, Horizon: o.Horizon})
		},
	}
}
