package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

// HandOut implements store.Pulls: one statement for a pull's batch.
func (s *Store) HandOut(ctx context.Context, hs []store.HandOut) ([]bool, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(hs))
	tokens := make([]string, len(hs))
	consumers := make([]string, len(hs))
	expires := make([]time.Time, len(hs))
	for i, h := range hs {
		ids[i], tokens[i], consumers[i], expires[i] = h.DeliveryID, h.Token, h.ConsumerToken, s.toDB(h.Expires)
	}
	rows, err := s.pool.Query(ctx, `UPDATE deliveries d SET lease_token = h.consumer, lease_expires_at = h.expires, next_attempt_at = h.expires
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS h(id, token, consumer, expires, n)
		WHERE d.id = h.id AND d.lease_token = h.token AND d.state = 'pending'
		RETURNING h.n`, ids, tokens, consumers, expires)
	if err != nil {
		return nil, unavailable("hand out", err)
	}
	moved, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, unavailable("hand out", err)
	}
	held := make([]bool, len(hs))
	for _, n := range moved {
		held[n-1] = true
	}
	return held, nil
}

// Leased implements store.Pulls.
func (s *Store) Leased(ctx context.Context, id int64) (store.LeasedDelivery, error) {
	d := store.LeasedDelivery{ID: id}
	var token *string
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `SELECT d.event_id, d.destination, d.attempts, d.lease_token, d.lease_expires_at,
			d.order_entity IS NOT NULL, e.source, e.key, e.type, e.received_at
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = $1 AND d.state = 'pending'`, id).
		Scan(&d.EventID, &d.Destination, &d.Attempt, &token, &expires, &d.Ordered, &d.Source, &d.Key, &d.Type, &d.ReceivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, unavailable("read a lease", err)
	}
	d.ReceivedAt = s.fromDB(d.ReceivedAt)
	if token != nil {
		d.LeaseToken = *token
	}
	if expires != nil {
		d.LeaseExpiresAt = s.fromDB(*expires)
	}
	return d, nil
}
