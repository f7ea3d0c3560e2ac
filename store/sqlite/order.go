package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/oncehook/oncehook/store"
)

// The ordered path's statements, prepared once on the writer (see
// statements): parsed on every step, they were a fifth of its CPU.
const (
	candidatesSQL = `SELECT id, destination, order_entity, order_version, order_mode, order_deliver_stale FROM deliveries
		WHERE state = 'pending' AND order_entity IS NOT NULL AND next_attempt_at <= ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
		AND destination NOT IN (SELECT value FROM json_each(?))
		ORDER BY next_attempt_at LIMIT ?`
	entitySQL = `SELECT version, version_text, inflight_until FROM order_heads WHERE destination = ? AND entity = ?`
	// The fifo head: an attempted delivery first (see store.OrderGroup).
	headSQL = `SELECT id, next_attempt_at, attempts > 0, order_version FROM deliveries
			WHERE destination = ? AND order_entity = ? AND state = 'pending' ORDER BY attempts = 0, order_version, id LIMIT 1`
	parkSQL         = `UPDATE deliveries SET next_attempt_at = ?, order_waiting = 1 WHERE id = ?`
	markStaleSQL    = `UPDATE deliveries SET state = 'stale', order_waiting = 0, updated_at = ?, last_error = ? WHERE id = ?`
	leaseOrderedSQL = `UPDATE deliveries SET lease_token = ?, lease_expires_at = ?, next_attempt_at = ?, updated_at = ?,
				attempts = attempts + 1, order_waiting = 0
			WHERE id = ? RETURNING event_id, attempts`
	holdEntitySQL = `INSERT INTO order_heads (destination, entity, inflight_id, inflight_until) VALUES (?, ?, ?, ?)
			ON CONFLICT (destination, entity) DO UPDATE SET inflight_id = excluded.inflight_id, inflight_until = excluded.inflight_until`
	orderedOutcomeSQL = `SELECT d.destination, d.order_entity, d.order_version, d.order_text, d.state, e.expires_at
			FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = ? AND d.order_entity IS NOT NULL`
	freeEntitySQL = `UPDATE order_heads SET
				inflight_id = CASE WHEN inflight_id = ? THEN NULL ELSE inflight_id END,
				inflight_until = CASE WHEN inflight_id = ? THEN NULL ELSE inflight_until END,
				version_text = CASE WHEN ? AND (version IS NULL OR ? > version) THEN ? ELSE version_text END,
				version = CASE WHEN ? AND (version IS NULL OR ? > version) THEN ? ELSE version END,
				expires_at = CASE WHEN ? THEN MAX(expires_at, ?) ELSE expires_at END
			WHERE destination = ? AND entity = ?`
	// The deliveries of a new ordered event: handed off (leased) when its
	// entity is free, or waiting behind the delivery in flight.
	handOffOrderedSQL = `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at, lease_token, lease_expires_at, attempts,
			order_entity, order_version, order_text, order_mode, order_deliver_stale) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)`
	insertWaitingSQL = `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at, order_waiting,
			order_entity, order_version, order_text, order_mode, order_deliver_stale) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?)`
	wakeOlderSQL = `UPDATE deliveries SET next_attempt_at = MIN(next_attempt_at, updated_at), order_waiting = 0
			WHERE destination = ? AND order_entity = ? AND state = 'pending' AND order_waiting = 1 AND order_version < ?`
	wakeSQL = `UPDATE deliveries SET next_attempt_at = MIN(next_attempt_at, updated_at), order_waiting = 0 WHERE id = (
			SELECT id FROM deliveries WHERE destination = ? AND order_entity = ? AND state = 'pending' AND order_waiting = 1
			ORDER BY order_version, id LIMIT 1)`
)

// orderSQL lists them, for prepare.
var orderSQL = []string{wakeOlderSQL, handOffOrderedSQL, insertWaitingSQL, candidatesSQL, entitySQL, headSQL, parkSQL, markStaleSQL, leaseOrderedSQL, holdEntitySQL, orderedOutcomeSQL, freeEntitySQL, wakeSQL}

// order is the prepared statement q, in tx.
func (s *Store) order(ctx context.Context, tx *sql.Tx, q string) *sql.Stmt {
	return tx.StmtContext(ctx, s.stmt.order[q])
}

// claimOrdered creates an ordered event's delivery to dest, deciding at
// once what the lease step would: handed off (leased to the caller, and
// returned) when the entity is free, has nothing pending before it and is
// not past the event's version; waiting when a delivery of the entity is in
// flight (its outcome wakes it); else pending, due now, for the step. With
// many entities most events find theirs free: they cost no second commit.
func (s *Store) claimOrdered(ctx context.Context, tx *sql.Tx, e store.NewEvent, id int64, dest string, l store.Lease, token string) (_ *store.LeasedDelivery, due bool, err error) {
	key := store.OrderKey(e.Source, e.Order.Entity)
	version, text := store.StoredVersion(e.Order, id)
	received := ms(e.ReceivedAt)
	var delivered, inflight sql.NullInt64
	var deliveredText sql.NullString
	err = s.order(ctx, tx, entitySQL).QueryRowContext(ctx, dest, key).Scan(&delivered, &deliveredText, &inflight)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, false, unavailable("read entity", err)
	}
	now := ms(l.Now)
	if inflight.Valid && inflight.Int64 > now {
		_, err := s.order(ctx, tx, insertWaitingSQL).ExecContext(ctx, id, dest, inflight.Int64, received, key, version, text, string(e.Order.Mode), e.Order.DeliverStale)
		if err != nil {
			return nil, false, failed("create delivery", err)
		}
		return nil, false, nil // its entity's outcome wakes it
	}
	var first, firstDue, firstVersion int64
	var attempted bool
	err = s.order(ctx, tx, headSQL).QueryRowContext(ctx, dest, key).Scan(&first, &firstDue, &attempted, &firstVersion)
	pending := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, false, unavailable("read entity", err)
	}
	if pending || delivered.Valid && version < delivered.Int64 {
		// Something of the entity is pending (fifo order, or a parked
		// one), or the event is stale: the step decides.
		if _, err := tx.StmtContext(ctx, s.stmt.insertDelivery).ExecContext(ctx, id, dest, received, received, key, version, text, string(e.Order.Mode), e.Order.DeliverStale); err != nil {
			return nil, false, failed("create delivery", err)
		}
		return nil, true, nil
	}
	expires := ms(l.Now.Add(l.For))
	res, err := s.order(ctx, tx, handOffOrderedSQL).ExecContext(ctx, id, dest, expires, now, token, expires, key, version, text, string(e.Order.Mode), e.Order.DeliverStale)
	if err != nil {
		return nil, false, failed("create delivery", err)
	}
	did, err := res.LastInsertId()
	if err != nil {
		return nil, false, failed("create delivery", err)
	}
	if _, err := s.order(ctx, tx, holdEntitySQL).ExecContext(ctx, dest, key, did, expires); err != nil {
		return nil, false, failed("hold entity", err)
	}
	return &store.LeasedDelivery{ID: did, EventID: id, Source: e.Source, Key: e.Key, Destination: dest, Attempt: 1,
		Type: e.Type, Entity: e.Order.Entity, ContentType: e.ContentType, Header: e.Header, ReceivedAt: fromMS(received),
		LeaseToken: token, LeaseExpiresAt: fromMS(expires), Ordered: true, Trace: e.Trace}, false, nil
}

// leaseOrdered is the ordered lease step (see store/order.go), in the
// commit's transaction: SQLite's one writer decides, so reading the groups
// and writing the plan need no lock of their own.
func (s *Store) leaseOrdered(ctx context.Context, tx *sql.Tx, l store.Lease, limit int, token, shard string) ([]store.LeasedDelivery, error) {
	var leased []store.LeasedDelivery
	// A step that marks stale wakes the entity's next waiting delivery:
	// look again (a few times) so that it goes in this commit.
	for range 4 {
		more, wake, err := s.orderStep(ctx, tx, l, limit-len(leased), token, shard)
		if err != nil {
			return nil, err
		}
		leased = append(leased, more...)
		if !wake || len(leased) >= limit {
			break
		}
	}
	return leased, nil
}

// orderStep plans and applies one ordered lease step; wake reports that
// it woke deliveries that are due now.
func (s *Store) orderStep(ctx context.Context, tx *sql.Tx, l store.Lease, limit int, token, shard string) (_ []store.LeasedDelivery, wake bool, err error) {
	now := l.Now
	rows, err := s.order(ctx, tx, candidatesSQL).QueryContext(ctx, ms(now), ms(now), jsonList(l.Held), 4*limit+16)
	if err != nil {
		return nil, false, unavailable("lease ordered deliveries", err)
	}
	var cands []store.OrderCandidate
	for rows.Next() {
		var c store.OrderCandidate
		var mode string
		if err := rows.Scan(&c.ID, &c.Destination, &c.Entity, &c.Version, &mode, &c.DeliverStale); err != nil {
			rows.Close()
			return nil, false, unavailable("lease ordered deliveries", err)
		}
		c.Mode = store.OrderMode(mode)
		cands = append(cands, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, false, unavailable("lease ordered deliveries", err)
	}
	if len(cands) == 0 {
		return nil, false, nil
	}
	groups := map[store.OrderGroupKey]store.OrderGroup{}
	for _, c := range cands {
		k := store.OrderGroupKey{Destination: c.Destination, Entity: c.Entity}
		if _, ok := groups[k]; ok {
			continue
		}
		var g store.OrderGroup
		var version, inflight sql.NullInt64
		var text sql.NullString
		err := s.order(ctx, tx, entitySQL).QueryRowContext(ctx,
			k.Destination, k.Entity).Scan(&version, &text, &inflight)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, false, unavailable("read entity", err)
		}
		g.Delivered, g.HasDelivered, g.DeliveredText = version.Int64, version.Valid, text.String
		if inflight.Valid {
			g.InflightUntil = fromMS(inflight.Int64)
		}
		var due int64
		err = s.order(ctx, tx, headSQL).QueryRowContext(ctx,
			k.Destination, k.Entity).Scan(&g.FirstID, &due, &g.FirstAttempted, &g.FirstVersion)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, false, unavailable("read entity", err)
		}
		g.FirstDue = fromMS(due)
		groups[k] = g
	}
	expires := now.Add(l.For)
	plan := store.PlanOrder(now, expires, limit, cands, groups)
	for _, p := range plan.Park {
		if _, err := s.order(ctx, tx, parkSQL).ExecContext(ctx, ms(p.Until), p.ID); err != nil {
			return nil, false, failed("park ordered delivery", err)
		}
	}
	stale := map[string]int64{}
	for _, m := range plan.Stale {
		if _, err := s.order(ctx, tx, markStaleSQL).ExecContext(ctx,
			ms(now), store.StaleReason(m), m.ID); err != nil {
			return nil, false, failed("mark stale", err)
		}
		source, _ := store.SplitOrderKey(m.Entity)
		stale[source]++
	}
	if len(stale) > 0 {
		var deltas []store.StatDelta
		for source, n := range stale {
			deltas = append(deltas, store.StatDelta{Hour: now.UTC().Truncate(time.Hour), Scope: store.ScopeSource, Name: source,
				Metric: store.StaleMetric, Value: n})
		}
		if err := addStats(ctx, tx.StmtContext(ctx, s.stmt.addStat), shard, deltas); err != nil {
			return nil, false, err
		}
	}
	load := tx.StmtContext(ctx, s.stmt.loadEvent)
	var leased []store.LeasedDelivery
	for _, p := range plan.Lease {
		d := store.LeasedDelivery{ID: p.ID, Destination: p.Destination, LeaseToken: token, LeaseExpiresAt: fromMS(ms(expires)),
			Ordered: true, Stale: p.Stale, CurrentVersion: p.Current}
		_, d.Entity = store.SplitOrderKey(p.Entity) // the plan has it as stored: source/entity
		err := s.order(ctx, tx, leaseOrderedSQL).QueryRowContext(ctx, token, ms(expires), ms(expires), ms(now), p.ID).Scan(&d.EventID, &d.Attempt)
		if err != nil {
			return nil, false, failed("lease ordered delivery", err)
		}
		if _, err := s.order(ctx, tx, holdEntitySQL).ExecContext(ctx,
			p.Destination, p.Entity, p.ID, ms(expires)); err != nil {
			return nil, false, failed("hold entity", err)
		}
		var received int64
		var header string
		if err := load.QueryRowContext(ctx, d.EventID).Scan(&d.Source, &d.Key, &d.ContentType, &header, &d.Body, &received, &d.Trace, &d.Type); err != nil {
			return nil, false, unavailable("load event", err)
		}
		d.Header = store.DecodeHeader(header)
		d.ReceivedAt = fromMS(received)
		leased = append(leased, d)
	}
	for _, k := range plan.Wake {
		// What waits below the delivered version is stale too: wake it
		// all, for the next step to mark at once, and the next one after.
		if _, err := s.order(ctx, tx, wakeOlderSQL).ExecContext(ctx, k.Destination, k.Entity, groups[k].Delivered); err != nil {
			return nil, false, failed("wake entity", err)
		}
		if _, err := s.wakeNext(ctx, tx, k.Destination, k.Entity); err != nil {
			return nil, false, err
		}
	}
	return leased, len(plan.Wake) > 0, nil
}

// completeOrdered frees the entities of ordered outcomes: the delivery in
// flight is no longer, a delivered version raises the entity's, and the
// entity's lowest waiting delivery is due at once.
func (s *Store) completeOrdered(ctx context.Context, tx *sql.Tx, outcomes []store.Outcome) (woke bool, err error) {
	var ids []int64
	for _, o := range outcomes {
		if o.Ordered {
			ids = append(ids, o.DeliveryID)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		var dest, entity, state string
		var version int64
		var text sql.NullString
		var expires int64
		err := s.order(ctx, tx, orderedOutcomeSQL).QueryRowContext(ctx, id).
			Scan(&dest, &entity, &version, &text, &state, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			continue // replayed out of order, or swept
		}
		if err != nil {
			return false, unavailable("free entity", err)
		}
		if _, err := s.order(ctx, tx, freeEntitySQL).ExecContext(ctx,
			id, id, state == string(store.Delivered), version, text, state == string(store.Delivered), version, version,
			state == string(store.Delivered), expires, dest, entity); err != nil {
			return false, failed("free entity", err)
		}
		w, err := s.wakeNext(ctx, tx, dest, entity)
		if err != nil {
			return false, err
		}
		woke = woke || w
	}
	return woke, nil
}

// wakeNext makes the entity's lowest waiting delivery due: at when it was
// last due of its own (updated_at: its arrival, or its last outcome),
// which is past on any clock.
func (s *Store) wakeNext(ctx context.Context, tx *sql.Tx, dest, entity string) (bool, error) {
	res, err := s.order(ctx, tx, wakeSQL).ExecContext(ctx, dest, entity)
	if err != nil {
		return false, failed("wake entity", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// sweepOrderHeads deletes what is kept of entities whose last delivered
// event's window is over and that have nothing pending.
func (s *Store) sweepOrderHeads(ctx context.Context, now time.Time, limit int) (int, error) {
	return s.execWrite(ctx, "sweep entities", `DELETE FROM order_heads WHERE rowid IN (
		SELECT h.rowid FROM order_heads h WHERE h.expires_at < ? AND (h.inflight_until IS NULL OR h.inflight_until < ?)
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.destination = h.destination AND d.order_entity = h.entity AND d.state = 'pending')
		LIMIT ?)`, ms(now), ms(now), limit)
}

// SkipDelivery implements store.Admin.
func (s *Store) SkipDelivery(ctx context.Context, eventID int64, destination string, now time.Time, a store.AuditEntry) (int, error) {
	return s.change(ctx, false, a, now, func(tx *sql.Tx) (int, error) {
		var id int64
		var entity sql.NullString
		var leased bool
		err := tx.QueryRowContext(ctx, `SELECT id, order_entity, `+leasedNow+` FROM deliveries WHERE event_id = ? AND destination = ? AND state = 'pending'`,
			ms(now), eventID, destination).Scan(&id, &entity, &leased)
		if errors.Is(err, sql.ErrNoRows) {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM events WHERE id = ?`, eventID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return 0, fmt.Errorf("event %d: %w", eventID, store.ErrNotFound)
			}
			return 0, nil
		}
		if err != nil {
			return 0, unavailable("skip delivery", err)
		}
		if leased {
			return 0, fmt.Errorf("event %d to %s: %w", eventID, destination, store.ErrInFlight)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'dead', order_waiting = 0, lease_token = NULL, lease_expires_at = NULL,
			last_error = ?, updated_at = ? WHERE id = ?`, store.SkippedReason, ms(now), id); err != nil {
			return 0, unavailable("skip delivery", err)
		}
		if entity.Valid {
			if _, err := s.wakeNext(ctx, tx, destination, entity.String); err != nil {
				return 0, err
			}
		}
		return 1, nil
	})
}

// ResetOrder implements store.Admin.
func (s *Store) ResetOrder(ctx context.Context, source, entity, destination string, now time.Time, a store.AuditEntry) (int, error) {
	return s.change(ctx, false, a, now, func(tx *sql.Tx) (int, error) {
		res, err := tx.ExecContext(ctx, `UPDATE order_heads SET version = NULL, version_text = NULL
			WHERE entity = ? AND (? = '' OR destination = ?) AND version IS NOT NULL`,
			store.OrderKey(source, entity), destination, destination)
		if err != nil {
			return 0, unavailable("reset order", err)
		}
		n, _ := res.RowsAffected()
		return int(n), nil
	})
}
