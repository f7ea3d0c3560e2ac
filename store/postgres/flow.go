package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

// NextSlot implements store.Flow in one statement: the row lock of the
// destination's slot serializes replicas, and the upsert's WHERE leaves a
// slot beyond the horizon untaken.
func (s *Store) NextSlot(ctx context.Context, destination string, now time.Time, interval, horizon time.Duration) (time.Time, bool, error) {
	var next time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO rate_slots AS r (destination, next_at) VALUES ($1, $2::timestamptz + $3::interval)
		ON CONFLICT (destination) DO UPDATE SET
			next_at = (CASE WHEN r.next_at > $2::timestamptz + $5::interval + $3::interval THEN $2::timestamptz ELSE GREATEST(r.next_at, $2::timestamptz) END) + $3::interval
		WHERE (CASE WHEN r.next_at > $2::timestamptz + $5::interval + $3::interval THEN $2::timestamptz ELSE GREATEST(r.next_at, $2::timestamptz) END) <= $2::timestamptz + $4::interval
		RETURNING next_at - $3::interval`, destination, s.toDB(now), interval, horizon, store.MaxSlotAhead).Scan(&next)
	if err == nil {
		return s.fromDB(next), true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, unavailable("next slot", err)
	}
	// Not taken: the next free slot is the cursor.
	if err := s.pool.QueryRow(ctx, `SELECT next_at FROM rate_slots WHERE destination = $1`, destination).Scan(&next); err != nil {
		return time.Time{}, false, unavailable("next slot", err)
	}
	return s.fromDB(next), false, nil
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
		tag, err := tx.Exec(ctx, `DELETE FROM breakers WHERE destination = $1 AND (state = 'half_open' OR $2)`, destination, a.Action != "")
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
