package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/oncehook/oncehook/store"
)

// HandOut implements store.Pulls: one transaction for a pull's batch.
func (s *Store) HandOut(ctx context.Context, hs []store.HandOut) ([]bool, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	tx, done, err := s.begin(ctx, "hand out")
	if err != nil {
		return nil, err
	}
	defer done()
	defer tx.Rollback()
	held := make([]bool, len(hs))
	for i, h := range hs {
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET lease_token = ?, lease_expires_at = ?, next_attempt_at = ?
			WHERE id = ? AND lease_token = ? AND state = 'pending'`,
			h.ConsumerToken, ms(h.Expires), ms(h.Expires), h.DeliveryID, h.Token)
		if err != nil {
			return nil, unavailable("hand out", err)
		}
		n, _ := res.RowsAffected()
		held[i] = n == 1
	}
	if err := tx.Commit(); err != nil {
		return nil, unavailable("hand out", err)
	}
	return held, nil
}

// Leased implements store.Pulls.
func (s *Store) Leased(ctx context.Context, id int64) (store.LeasedDelivery, error) {
	d := store.LeasedDelivery{ID: id}
	var token sql.NullString
	var expires sql.NullInt64
	var received int64
	err := s.read.QueryRowContext(ctx, `SELECT d.event_id, d.destination, d.attempts, d.lease_token, d.lease_expires_at,
			d.order_entity IS NOT NULL, e.source, e.key, e.type, e.received_at
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = ? AND d.state = 'pending'`, id).
		Scan(&d.EventID, &d.Destination, &d.Attempt, &token, &expires, &d.Ordered, &d.Source, &d.Key, &d.Type, &received)
	if errors.Is(err, sql.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, unavailable("read a lease", err)
	}
	d.LeaseToken, d.ReceivedAt = token.String, fromMS(received)
	if expires.Valid {
		d.LeaseExpiresAt = fromMS(expires.Int64)
	}
	return d, nil
}
