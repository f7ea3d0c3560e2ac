package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

// CreateSession implements store.Sessions. Times are kept on the
// database's clock, as leases are, so replicas with skewed clocks agree
// on when a session ends.
func (s *Store) CreateSession(ctx context.Context, ss store.Session) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, s.toDB(ss.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO sessions (id_hash, token, csrf, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
			ss.IDHash, ss.Token, ss.CSRF, s.toDB(ss.CreatedAt), s.toDB(ss.ExpiresAt))
		return err
	})
	if err != nil {
		return unavailable("create session", err)
	}
	return nil
}

// Session implements store.Sessions.
func (s *Store) Session(ctx context.Context, idHash string, now time.Time) (store.Session, error) {
	ss := store.Session{IDHash: idHash}
	err := s.pool.QueryRow(ctx, `SELECT token, csrf, created_at, expires_at FROM sessions WHERE id_hash = $1 AND expires_at > $2`,
		idHash, s.toDB(now)).Scan(&ss.Token, &ss.CSRF, &ss.CreatedAt, &ss.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ss, store.ErrNotFound
	}
	if err != nil {
		return ss, unavailable("read session", err)
	}
	ss.CreatedAt, ss.ExpiresAt = s.fromDB(ss.CreatedAt), s.fromDB(ss.ExpiresAt)
	return ss, nil
}

// DeleteSession implements store.Sessions.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id_hash = $1`, idHash); err != nil {
		return unavailable("end session", err)
	}
	return nil
}
