package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/oncehook/oncehook/store"
)

// NextSlot implements store.Flow in one statement, on the one writer: the
// upsert's WHERE leaves a slot beyond the horizon untaken.
func (s *Store) NextSlot(ctx context.Context, destination string, now time.Time, interval, horizon time.Duration) (time.Time, bool, error) {
	tx, done, err := s.begin(ctx, "next slot")
	if err != nil {
		return time.Time{}, false, err
	}
	defer done()
	defer tx.Rollback()
	var next int64
	err = tx.QueryRowContext(ctx, `INSERT INTO rate_slots (destination, next_at) VALUES (?1, ?2 + ?3)
		ON CONFLICT (destination) DO UPDATE SET
			next_at = (CASE WHEN next_at > ?2 + ?5 + ?3 THEN ?2 ELSE max(next_at, ?2) END) + ?3
		WHERE (CASE WHEN next_at > ?2 + ?5 + ?3 THEN ?2 ELSE max(next_at, ?2) END) <= ?2 + ?4
		RETURNING next_at`, destination, ms(now), interval.Milliseconds(), horizon.Milliseconds(), store.MaxSlotAhead.Milliseconds()).Scan(&next)
	taken := err == nil
	if !taken && !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, unavailable("next slot", err)
	}
	if !taken { // the next free slot is the cursor
		if err := tx.QueryRowContext(ctx, `SELECT next_at FROM rate_slots WHERE destination = ?`, destination).Scan(&next); err != nil {
			return time.Time{}, false, unavailable("next slot", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return time.Time{}, false, unavailable("next slot", err)
	}
	if taken {
		return fromMS(next - interval.Milliseconds()), true, nil
	}
	return fromMS(next), false, nil
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
	n, err := s.execWrite(ctx, "probe breaker", `UPDATE breakers SET state = 'half_open', until = ? WHERE destination = ? AND until <= ?`, ms(deadline), destination, ms(now))
	return n > 0, err
}

// CloseBreaker implements store.Flow.
func (s *Store) CloseBreaker(ctx context.Context, destination string, now time.Time, a store.AuditEntry) error {
	_, err := s.change(ctx, false, a, now, func(tx *sql.Tx) (int, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM breakers WHERE destination = ? AND (state = 'half_open' OR ?)`, destination, a.Action != "")
		if err != nil {
			return 0, unavailable("close breaker", err)
		}
		n, _ := res.RowsAffected()
		return int(n), nil
	})
	return err
}
