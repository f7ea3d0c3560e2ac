package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/oncehook/oncehook/store"
)

var _ store.Flow = (*Store)(nil)

// TakeRate implements store.Flow, in one write transaction.
func (s *Store) TakeRate(ctx context.Context, destination string, window time.Time, limit, want int) (int, error) {
	if want <= 0 || limit <= 0 {
		return 0, nil
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, unavailable("take rate", err)
	}
	defer tx.Rollback()
	var used int
	err = tx.QueryRowContext(ctx, `SELECT used FROM rate_windows WHERE destination = ? AND window_start = ?`, destination, ms(window)).Scan(&used)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, unavailable("take rate", err)
	}
	grant := min(want, limit-used)
	if grant <= 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO rate_windows (destination, window_start, used) VALUES (?, ?, ?)
		ON CONFLICT (destination, window_start) DO UPDATE SET used = used + excluded.used`, destination, ms(window), grant); err != nil {
		return 0, unavailable("take rate", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, unavailable("take rate", err)
	}
	return grant, nil
}

// SweepRates implements store.Flow.
func (s *Store) SweepRates(ctx context.Context, before time.Time) error {
	if _, err := s.write.ExecContext(ctx, `DELETE FROM rate_windows WHERE window_start < ?`, ms(before)); err != nil {
		return unavailable("sweep rates", err)
	}
	return nil
}

// Breakers implements store.Flow.
func (s *Store) Breakers(ctx context.Context) (map[string]store.Breaker, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT destination, state, opened_at, until, opens, reason FROM breakers`)
	if err != nil {
		return nil, unavailable("read breakers", err)
	}
	defer rows.Close()
	out := map[string]store.Breaker{}
	for rows.Next() {
		var b store.Breaker
		var opened, until int64
		if err := rows.Scan(&b.Destination, &b.State, &opened, &until, &b.Opens, &b.Reason); err != nil {
			return nil, unavailable("read breakers", err)
		}
		b.OpenedAt, b.Until = fromMS(opened), fromMS(until)
		out[b.Destination] = b
	}
	return out, rows.Err()
}

// OpenBreaker implements store.Flow. A breaker half-open (its probe
// failed) opens again; one open already stays as it is.
func (s *Store) OpenBreaker(ctx context.Context, b store.Breaker, a store.AuditEntry) (store.Breaker, bool, error) {
	n, err := s.change(ctx, false, a, b.OpenedAt, func(tx *sql.Tx) (int, error) {
		res, err := tx.ExecContext(ctx, `INSERT INTO breakers (destination, state, opened_at, until, opens, reason) VALUES (?, 'open', ?, ?, ?, ?)
			ON CONFLICT (destination) DO UPDATE SET state = 'open', opened_at = excluded.opened_at, until = excluded.until,
				opens = excluded.opens, reason = excluded.reason WHERE breakers.state = 'half_open' OR ?`,
			b.Destination, ms(b.OpenedAt), ms(b.Until), b.Opens, b.Reason, a.Action != "")
		if err != nil {
			return 0, unavailable("open breaker", err)
		}
		n, _ := res.RowsAffected()
		return int(n), nil
	})
	if err != nil {
		return b, false, err
	}
	stored, err := s.breaker(ctx, b.Destination)
	return stored, n > 0, err
}

func (s *Store) breaker(ctx context.Context, destination string) (store.Breaker, error) {
	b := store.Breaker{Destination: destination}
	var opened, until int64
	err := s.write.QueryRowContext(ctx, `SELECT state, opened_at, until, opens, reason FROM breakers WHERE destination = ?`, destination).
		Scan(&b.State, &opened, &until, &b.Opens, &b.Reason)
	if errors.Is(err, sql.ErrNoRows) {
		return b, nil
	}
	if err != nil {
		return b, unavailable("read breaker", err)
	}
	b.OpenedAt, b.Until = fromMS(opened), fromMS(until)
	return b, nil
}

// ProbeBreaker implements store.Flow.
func (s *Store) ProbeBreaker(ctx context.Context, destination string, now, deadline time.Time) (bool, error) {
	res, err := s.write.ExecContext(ctx, `UPDATE breakers SET state = 'half_open', until = ? WHERE destination = ? AND until <= ?`, ms(deadline), destination, ms(now))
	if err != nil {
		return false, unavailable("probe breaker", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// CloseBreaker implements store.Flow.
func (s *Store) CloseBreaker(ctx context.Context, destination string, now time.Time, a store.AuditEntry) error {
	_, err := s.change(ctx, false, a, now, func(tx *sql.Tx) (int, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM breakers WHERE destination = ?`, destination)
		if err != nil {
			return 0, unavailable("close breaker", err)
		}
		n, _ := res.RowsAffected()
		return int(n), nil
	})
	return err
}
