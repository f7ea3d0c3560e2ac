package store

import (
	"context"
	"time"
)

// Sessions keeps the dashboard's sign-ins, so that every replica accepts a
// session any of them made and a logout (or an expiry) ends it everywhere.
// The cookie holds a random id; the store holds only its digest (IDHash),
// so a copy of the database lets nobody in. It is part of Store.
type Sessions interface {
	// CreateSession stores s (and forgets sessions that have expired).
	CreateSession(ctx context.Context, s Session) error
	// Session returns the session whose id hashes to idHash, or ErrNotFound
	// when there is none or it expired at now.
	Session(ctx context.Context, idHash string, now time.Time) (Session, error)
	// DeleteSession ends a session; ending one that does not exist is not
	// an error.
	DeleteSession(ctx context.Context, idHash string) error
}

// Session is one sign-in to the dashboard.
type Session struct {
	IDHash    string // hex SHA-256 of the cookie's id
	Token     string // the API token's name and a digest of its value (apiauth.SessionToken; never the value): what it may do is the config's
	CSRF      string // this session's CSRF token
	CreatedAt time.Time
	ExpiresAt time.Time
}
