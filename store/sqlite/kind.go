package sqlite

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/oncehook/oncehook/store"
)

// Kind is SQLite as a store kind: store: sqlite://path/to/file.db.
func Kind() store.Kind {
	return store.Kind{
		Name: "sqlite", Schemes: []string{"sqlite"}, Example: "sqlite://path",
		Check: checkURL,
		// One writer (SQLite has one), lingering 300µs under load for
		// bigger commits: 35% → 41% of bare net/http on the bench machine.
		Writer: store.Writer{Writers: 1, Linger: 300 * time.Microsecond},
		Open: func(ctx context.Context, url string, o store.OpenOptions) (store.Store, error) {
			return Open(ctx, Path(url), Options{Synchronous: o.Synchronous})
		},
	}
}

// Path is the file of a sqlite:// URL.
func Path(url string) string { return strings.TrimPrefix(url, "sqlite://") }

// checkURL refuses a URL that names no file: an empty path or an
// in-memory database would answer 200 for events stored nowhere
// (invariant 1).
func checkURL(url string) error {
	if p := Path(url); p == "" || p == ":memory:" || strings.HasPrefix(p, "file::memory:") || strings.Contains(p, "mode=memory") {
		return errors.New("want sqlite://path/to/file.db (an empty path or an in-memory database is not durable: every 200 would be a lie)")
	}
	return nil
}
