package store

import (
	"context"
	"log/slog"
	"time"
)

// A Kind is one backend, registered by the build that has it (the
// binary's: package kinds), as River's drivers are passed to its client:
// the root package opens a store only through a Kind, so a library user's
// build holds only the backends it names. A new backend is its package, a
// Kind, and one registration line.
type Kind struct {
	// Name names the backend for people: sqlite, postgres.
	Name string
	// Schemes are the schemes of the store URLs it opens (store:
	// postgres://... and postgresql://... are one kind's).
	Schemes []string
	// Example is a URL of its, for messages: sqlite://path.
	Example string
	// Check says what is wrong with a URL of one of its schemes (nil:
	// nothing), where the config is read: what would open and yet break a
	// promise (an in-memory SQLite database is not durable) is refused
	// there, not found later.
	Check func(url string) error
	// Writer is how the group committer runs on it.
	Writer Writer
	// Shared says several gateways may serve one database (PostgreSQL),
	// so what they must agree on beyond the commit is kept in it: a pull
	// consumer's lease (Pulls), which costs a write per pull. One process
	// serves a SQLite file, and keeps those leases in memory.
	Shared bool
	// Open opens the store at url, applying its pending migrations.
	Open func(ctx context.Context, url string, o OpenOptions) (Store, error)
}

// Writer is how the group committer runs on a backend: how many
// transactions may commit at once, and how long the writer lingers for a
// bigger batch under load.
type Writer struct {
	Writers int
	Linger  time.Duration
}

// OpenOptions are what a Kind's Open takes beyond the URL.
type OpenOptions struct {
	// Logger names the store (nil: discarded).
	Logger *slog.Logger
	// Horizon is the longest window of the sources: how far ahead a
	// body may be due to go (PostgreSQL makes its day partitions so far).
	Horizon time.Duration
	// Synchronous is the config's sqlite.synchronous (SQLite's pragma);
	// other backends ignore it.
	Synchronous string
}

// A Front is a layer in front of a store's claims (Redis, redis:), which
// answers a commit's known duplicates without a trip to the store and is
// never the only barrier. It is registered as a Kind is.
type Front struct {
	// Name names it for people: redis.
	Name string
	// Check says what is wrong with its URL (nil: nothing).
	Check func(url string) error
	// Open puts the layer at url in front of inner. A layer that cannot
	// be reached at start is not an error: it misses until it is back.
	Open func(url string, inner Store, o FrontOptions) (Store, error)
}

// FrontOptions are what a Front's Open takes beyond the URL.
type FrontOptions struct {
	Logger *slog.Logger
	// OnHit and OnError are told of each hit and each failed call, for
	// metrics.
	OnHit   func(n int)
	OnError func(op string, err error)
}
