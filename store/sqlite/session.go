package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/oncehook/oncehook/store"
)

// CreateSession implements store.Sessions.
func (s *Store) CreateSession(ctx context.Context, ss store.Session) error {
	tx, done, err := s.begin(ctx, "create session")
	if err != nil {
		return err
	}
	defer done()
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, ms(ss.CreatedAt)); err != nil {
		return unavailable("forget sessions", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id_hash, token, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		ss.IDHash, ss.Token, ss.CSRF, ms(ss.CreatedAt), ms(ss.ExpiresAt)); err != nil {
		return failed("create session", err)
	}
	if err := tx.Commit(); err != nil {
		return unavailable("commit", err)
	}
	return nil
}

// Session implements store.Sessions.
func (s *Store) Session(ctx context.Context, idHash string, now time.Time) (store.Session, error) {
	ss := store.Session{IDHash: idHash}
	var created, expires int64
	err := s.read.QueryRowContext(ctx, `SELECT token, csrf, created_at, expires_at FROM sessions WHERE id_hash = ? AND expires_at > ?`,
		idHash, ms(now)).Scan(&ss.Token, &ss.CSRF, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return ss, store.ErrNotFound
	}
	if err != nil {
		return ss, unavailable("read session", err)
	}
	ss.CreatedAt, ss.ExpiresAt = fromMS(created), fromMS(expires)
	return ss, nil
}

// DeleteSession implements store.Sessions.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	_, err := s.execWrite(ctx, "end session", `DELETE FROM sessions WHERE id_hash = ?`, idHash)
	return err
}
