package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

var _ store.Flow = (*Store)(nil)

// TakeRate implements store.Flow: the window's row lock serializes
// replicas, and each gets what was left.
func (s *Store) TakeRate(ctx context.Context, destination string, window time.Time, limit, want int) (int, error) {
	if want <= 0 || limit <= 0 {
		return 0, nil
	}
	var granted int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var used int
		err := tx.QueryRow(ctx, `INSERT INTO rate_windows (destination, window_start, used) VALUES ($1, $2, 0)
			ON CONFLICT (destination, window_start) DO UPDATE SET used = rate_windows.used
			RETURNING used`, destination, window).Scan(&used)
		if err != nil {
			return err
		}
		granted = max(min(want, limit-used), 0)
		if granted == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE rate_windows SET used = used + $3 WHERE destination = $1 AND window_start = $2`, destination, window, granted)
		return err
	})
	if err != nil {
		return 0, unavailable("take rate", err)
	}
	return granted, nil
}

// SweepRates implements store.Flow.
func (s *Store) SweepRates(ctx context.Context, before time.Time) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM rate_windows WHERE window_start < $1`, before); err != nil {
		return unavailable("sweep rates", err)
	}
	return nil
}

// Breakers implements store.Flow.
func (s *Store) Breakers(ctx context.Context) (map[string]store.Breaker, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination, state, opened_at, until, opens, reason FROM breakers`)
	if err != nil {
		return nil, unavailable("read breakers", err)
	}
	list, err := pgx.CollectRows(rows, scanBreaker)
	if err != nil {
		return nil, unavailable("read breakers", err)
	}
	out := map[string]store.Breaker{}
	for _, b := range list {
		b.OpenedAt, b.Until = s.fromDB(b.OpenedAt), s.fromDB(b.Until)
		out[b.Destination] = b
	}
	return out, nil
}

func scanBreaker(row pgx.CollectableRow) (store.Breaker, error) {
	var b store.Breaker
	err := row.Scan(&b.Destination, &b.State, &b.OpenedAt, &b.Until, &b.Opens, &b.Reason)
	return b, err
}

// OpenBreaker implements store.Flow. A breaker half-open (its probe
// failed) opens again; one open already stays as it is.
func (s *Store) OpenBreaker(ctx context.Context, b store.Breaker, a store.AuditEntry) (store.Breaker, bool, error) {
	if a.At.IsZero() {
		a.At = b.OpenedAt
	}
	opened, err := s.change(ctx, false, a, func(tx pgx.Tx) (int, error) {
		tag, err := tx.Exec(ctx, `INSERT INTO breakers (destination, state, opened_at, until, opens, reason) VALUES ($1, 'open', $2, $3, $4, $5)
			ON CONFLICT (destination) DO UPDATE SET state = 'open', opened_at = excluded.opened_at, until = excluded.until,
				opens = excluded.opens, reason = excluded.reason WHERE breakers.state = 'half_open' OR $6`,
			b.Destination, s.toDB(b.OpenedAt), s.toDB(b.Until), b.Opens, b.Reason, a.Action != "")
		return int(tag.RowsAffected()), err
	})
	if err != nil {
		return b, false, err
	}
	rows, err := s.pool.Query(ctx, `SELECT destination, state, opened_at, until, opens, reason FROM breakers WHERE destination = $1`, b.Destination)
	if err != nil {
		return b, false, unavailable("read breaker", err)
	}
	stored, err := pgx.CollectExactlyOneRow(rows, scanBreaker)
	if err != nil {
		return b, false, unavailable("read breaker", err)
	}
	stored.OpenedAt, stored.Until = s.fromDB(stored.OpenedAt), s.fromDB(stored.Until)
	return stored, opened > 0, nil
}

// ProbeBreaker implements store.Flow.
func (s *Store) ProbeBreaker(ctx context.Context, destination string, now, deadline time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE breakers SET state = 'half_open', until = $3 WHERE destination = $1 AND until <= $2`, destination, s.toDB(now), s.toDB(deadline))
	if err != nil {
		return false, unavailable("probe breaker", err)
	}
	return tag.RowsAffected() > 0, nil
}

// CloseBreaker implements store.Flow.
func (s *Store) CloseBreaker(ctx context.Context, destination string, now time.Time, a store.AuditEntry) error {
	if a.At.IsZero() {
		a.At = now
	}
	_, err := s.change(ctx, false, a, func(tx pgx.Tx) (int, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM breakers WHERE destination = $1`, destination)
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() > 0 {
			_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", notifyChannel)
		}
		return int(tag.RowsAffected()), err
	})
	return err
}
