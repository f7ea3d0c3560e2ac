package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

// orderLock names the advisory lock of the ordered lease step (see
// schemaLock): one replica at a time plans it, so that two replicas never
// both find an entity free. A replica that finds it taken skips the step;
// the holder leases for everyone.
const orderLock = "ordered"

// leaseOrdered runs the ordered lease step (see store/order.go) in a
// transaction of its own, under orderLock taken without waiting: reading
// the entities and writing the plan are then decided by one replica, and
// an outcome of another replica that frees an entity meanwhile is seen at
// the next step. The step never waits for a lock an outcome holds, and an
// outcome never waits for orderLock, so the two cannot deadlock.
func (s *Store) leaseOrdered(ctx context.Context, l store.Lease, now, expires time.Time, limit int, token, shard string) ([]store.LeasedDelivery, error) {
	var leased []store.LeasedDelivery
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		leased = leased[:0]
		var mine bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock("+schemaLock+")", orderLock).Scan(&mine); err != nil || !mine {
			return err
		}
		for range 4 {
			more, wake, err := s.orderStep(ctx, tx, l, now, expires, limit-len(leased), token, shard)
			if err != nil {
				return err
			}
			leased = append(leased, more...)
			if !wake || len(leased) >= limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("lease ordered deliveries", err)
	}
	return leased, nil
}

// orderStep is one ordered lease step, in the transaction leaseOrdered
// holds orderLock in. It returns what it leased, and whether it woke an
// entity's waiting deliveries (the caller then steps again, to mark or
// lease them at once).
func (s *Store) orderStep(ctx context.Context, tx pgx.Tx, l store.Lease, now, expires time.Time, limit int, token, shard string) ([]store.LeasedDelivery, bool, error) {
	// 1. The ordered deliveries due now, not leased, not held.
	cands, err := orderCandidates(ctx, tx, l.Held, now, limit)
	if err != nil || len(cands) == 0 {
		return nil, false, err
	}
	// 2. Their entities, locked and then read: the groups the plan reads,
	// less the candidates of an entity another transaction holds.
	cands, groups, err := s.orderGroups(ctx, tx, cands)
	if err != nil {
		return nil, false, err
	}
	// 3. The plan, the same on every backend.
	plan := store.PlanOrder(now, expires, limit, cands, groups)
	// 4. Park, mark stale, lease and wake, in one batch; read the leased.
	batch := &pgx.Batch{}
	queueParked(batch, plan.Park)
	queueStale(batch, plan.Stale, now, shard)
	if len(plan.Lease) > 0 {
		queueOrderedLeases(batch, plan.Lease, token, expires, now)
	}
	queueWakes(batch, plan.Wake, groups)
	leasedAt := -1 // the leases' statement, when there is one: before the wakes' two each
	if len(plan.Lease) > 0 {
		leasedAt = batch.Len() - 1 - 2*len(plan.Wake)
	}
	leased, err := s.sendOrderPlan(ctx, tx, batch, leasedAt, plan.Lease, token, expires)
	return leased, len(plan.Wake) > 0, err
}

// orderCandidates reads the ordered deliveries due at now that no one
// leases and no held destination has: a few times limit, since the plan
// may park or mark many of them.
func orderCandidates(ctx context.Context, tx pgx.Tx, held []string, now time.Time, limit int) ([]store.OrderCandidate, error) {
	if held == nil {
		held = []string{}
	}
	rows, err := tx.Query(ctx, `SELECT id, destination, order_entity, order_version, order_mode, order_deliver_stale FROM deliveries
		WHERE state = 'pending' AND order_entity IS NOT NULL AND next_attempt_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
		AND NOT (destination = ANY($2::text[]))
		ORDER BY next_attempt_at LIMIT $3`, now, held, 4*limit+16)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.OrderCandidate, error) {
		var c store.OrderCandidate
		var mode string
		err := row.Scan(&c.ID, &c.Destination, &c.Entity, &c.Version, &mode, &c.DeliverStale)
		c.Mode = store.OrderMode(mode)
		return c, err
	})
}

// orderGroups locks the candidates' entities and reads each one's state
// (store.OrderGroup). It returns the candidates less those of an entity
// whose row another transaction holds (left for the next step), and the
// groups.
//
// The entities that have a row are locked first, without waiting: an
// outcome that frees one holds it until it commits, and then wakes the
// entity's waiting deliveries in a statement of its own, which sees what
// this step parks. What is read next is read after the locks, so an
// outcome that committed before them is seen: no wake-up is lost.
func (s *Store) orderGroups(ctx context.Context, tx pgx.Tx, cands []store.OrderCandidate) ([]store.OrderCandidate, map[store.OrderGroupKey]store.OrderGroup, error) {
	var dests, entities []string
	groups := map[store.OrderGroupKey]store.OrderGroup{}
	for _, c := range cands {
		k := store.OrderGroupKey{Destination: c.Destination, Entity: c.Entity}
		if _, ok := groups[k]; !ok {
			groups[k] = store.OrderGroup{}
			dests, entities = append(dests, c.Destination), append(entities, c.Entity)
		}
	}
	rows, err := tx.Query(ctx, `SELECT h.destination, h.entity FROM order_heads h
		JOIN unnest($1::text[], $2::text[]) AS g(destination, entity) ON h.destination = g.destination AND h.entity = g.entity
		ORDER BY h.destination COLLATE "C", h.entity COLLATE "C" FOR UPDATE OF h SKIP LOCKED`, dests, entities)
	if err != nil {
		return nil, nil, err
	}
	locked := map[store.OrderGroupKey]bool{}
	var lk store.OrderGroupKey
	if _, err := pgx.ForEachRow(rows, []any{&lk.Destination, &lk.Entity}, func() error { locked[lk] = true; return nil }); err != nil {
		return nil, nil, err
	}
	rows, err = tx.Query(ctx, `SELECT g.destination, g.entity, h.destination IS NOT NULL, h.version, COALESCE(h.version_text, ''), h.inflight_until,
			COALESCE(f.id, 0), f.next_attempt_at, COALESCE(f.attempts > 0, FALSE), COALESCE(f.order_version, 0)
		FROM unnest($1::text[], $2::text[]) AS g(destination, entity)
		LEFT JOIN order_heads h ON h.destination = g.destination AND h.entity = g.entity
		LEFT JOIN LATERAL (SELECT id, next_attempt_at, attempts, order_version FROM deliveries d
			WHERE d.destination = g.destination AND d.order_entity = g.entity AND d.state = 'pending'
			ORDER BY d.attempts = 0, d.order_version, d.id LIMIT 1) f ON true`, dests, entities)
	if err != nil {
		return nil, nil, err
	}
	var k store.OrderGroupKey
	var exists bool
	var version *int64
	var text string
	var inflight, firstDue *time.Time
	var firstID, firstVersion int64
	var attempted bool
	busy := map[store.OrderGroupKey]bool{}
	_, err = pgx.ForEachRow(rows, []any{&k.Destination, &k.Entity, &exists, &version, &text, &inflight, &firstID, &firstDue, &attempted, &firstVersion}, func() error {
		if exists && !locked[k] {
			busy[k] = true
		}
		g := store.OrderGroup{DeliveredText: text, FirstID: firstID, FirstAttempted: attempted, FirstVersion: firstVersion}
		if version != nil {
			g.Delivered, g.HasDelivered = *version, true
		}
		if inflight != nil {
			g.InflightUntil = s.fromDB(*inflight)
		}
		if firstDue != nil {
			g.FirstDue = s.fromDB(*firstDue)
		}
		groups[k] = g
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(busy) > 0 {
		cands = slices.DeleteFunc(cands, func(c store.OrderCandidate) bool {
			return busy[store.OrderGroupKey{Destination: c.Destination, Entity: c.Entity}]
		})
	}
	return cands, groups, nil
}

// queueParked parks the plan's waiting deliveries: due again when what
// blocks them may end, and marked waiting, for an outcome to wake.
func queueParked(batch *pgx.Batch, park []store.Parked) {
	if len(park) == 0 {
		return
	}
	ids, until := make([]int64, len(park)), make([]time.Time, len(park))
	for i, p := range park {
		ids[i], until[i] = p.ID, p.Until
	}
	batch.Queue(`UPDATE deliveries d SET next_attempt_at = p.until, order_waiting = TRUE
		FROM unnest($1::bigint[], $2::timestamptz[]) AS p(id, until) WHERE d.id = p.id`, ids, until)
}

// queueStale marks the plan's stale deliveries, each with its reason, and
// counts them per source in the hourly rollups (shard's rows).
func queueStale(batch *pgx.Batch, marks []store.StaleMark, now time.Time, shard string) {
	if len(marks) == 0 {
		return
	}
	ids, reasons := make([]int64, len(marks)), make([]string, len(marks))
	stale := map[string]int64{}
	for i, m := range marks {
		ids[i], reasons[i] = m.ID, store.StaleReason(m)
		source, _ := store.SplitOrderKey(m.Entity)
		stale[source]++
	}
	batch.Queue(`UPDATE deliveries d SET state = 'stale', order_waiting = FALSE, updated_at = $3, last_error = m.reason
		FROM unnest($1::bigint[], $2::text[]) AS m(id, reason) WHERE d.id = m.id`, ids, reasons, now)
	var deltas []store.StatDelta
	for source, n := range stale {
		deltas = append(deltas, store.StatDelta{Hour: now.UTC().Truncate(time.Hour), Scope: store.ScopeSource, Name: source, Metric: store.StaleMetric, Value: n})
	}
	queueStats(batch, shard, deltas)
}

// queueOrderedLeases leases the plan's deliveries under token until
// expires, only if still due and unleased (an operator may have replayed
// or moved one since the candidates were read); each one leased marks its
// entity in flight. The statement returns the leased deliveries with their
// events.
func queueOrderedLeases(batch *pgx.Batch, lease []store.OrderLease, token string, expires, now time.Time) {
	ids := make([]int64, len(lease))
	for i, p := range lease {
		ids[i] = p.ID
	}
	batch.Queue(`WITH l AS (
			UPDATE deliveries d SET lease_token = $2, lease_expires_at = $3, next_attempt_at = $3, updated_at = $4,
				attempts = d.attempts + 1, order_waiting = FALSE
			WHERE d.id = ANY($1) AND d.state = 'pending' AND d.order_entity IS NOT NULL
			AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= $4)
			RETURNING d.id, d.event_id, d.destination, d.order_entity, d.attempts
		), h AS (
			INSERT INTO order_heads (destination, entity, inflight_id, inflight_until)
			SELECT destination, order_entity, id, $3 FROM l ORDER BY destination COLLATE "C", order_entity COLLATE "C"
			ON CONFLICT (destination, entity) DO UPDATE SET inflight_id = EXCLUDED.inflight_id, inflight_until = EXCLUDED.inflight_until
		)
		SELECT l.id, l.event_id, l.destination, l.attempts, e.source, e.key, e.content_type, e.headers::text, `+bodyOf+`, e.received_at, e.trace, e.type
		FROM l JOIN events e ON e.id = l.event_id `+withBody+` ORDER BY l.id`, ids, token, expires, now)
}

// queueWakes wakes what waits behind the entities the plan frees: two
// statements each.
func queueWakes(batch *pgx.Batch, wake []store.OrderGroupKey, groups map[store.OrderGroupKey]store.OrderGroup) {
	for _, k := range wake {
		// What waits below the delivered version is stale too: wake it
		// all, for the next step to mark at once, and the next one after.
		batch.Queue(`UPDATE deliveries SET next_attempt_at = LEAST(next_attempt_at, updated_at), order_waiting = FALSE
			WHERE destination = $1 AND order_entity = $2 AND state = 'pending' AND order_waiting AND order_version < $3`,
			k.Destination, k.Entity, groups[k].Delivered)
		batch.Queue(wakeSQL, []string{k.Destination}, []string{k.Entity})
	}
}

// sendOrderPlan sends the step's batch in tx and reads the deliveries the
// statement at leasedAt leased (-1: none), each with its place in its
// entity's order from the plan.
func (s *Store) sendOrderPlan(ctx context.Context, tx pgx.Tx, batch *pgx.Batch, leasedAt int, lease []store.OrderLease, token string, expires time.Time) ([]store.LeasedDelivery, error) {
	info := make(map[int64]store.OrderLease, len(lease))
	for _, p := range lease {
		info[p.ID] = p
	}
	br := tx.SendBatch(ctx, batch)
	defer br.Close()
	var leased []store.LeasedDelivery
	for i := range batch.Len() {
		if i != leasedAt {
			if _, err := br.Exec(); err != nil {
				return nil, fmt.Errorf("ordered lease step: %w", err)
			}
			continue
		}
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		leased, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LeasedDelivery, error) {
			var d store.LeasedDelivery
			var header string
			var received time.Time
			err := row.Scan(&d.ID, &d.EventID, &d.Destination, &d.Attempt, &d.Source, &d.Key, &d.ContentType, &header, &d.Body, &received, &d.Trace, &d.Type)
			d.Header, d.ReceivedAt = store.DecodeHeader(header), s.fromDB(received)
			p := info[d.ID]
			d.LeaseToken, d.LeaseExpiresAt, d.Ordered, d.Stale, d.CurrentVersion = token, s.fromDB(expires), true, p.Stale, p.Current
			_, d.Entity = store.SplitOrderKey(p.Entity) // the plan has it as stored: source/entity
			return d, err
		})
		if err != nil {
			return nil, err
		}
	}
	return leased, br.Close()
}

// wakeSQL makes each named entity's lowest waiting delivery due: at when
// it was last due of its own (updated_at: its arrival, or its last
// outcome), which is past on any clock.
const wakeSQL = `UPDATE deliveries w SET next_attempt_at = LEAST(w.next_attempt_at, w.updated_at), order_waiting = FALSE
	FROM (SELECT DISTINCT ON (g.destination, g.entity) n.id
		FROM unnest($1::text[], $2::text[]) AS g(destination, entity)
		JOIN deliveries n ON n.destination = g.destination AND n.order_entity = g.entity AND n.state = 'pending' AND n.order_waiting
		ORDER BY g.destination, g.entity, n.order_version, n.id) p
	WHERE w.id = p.id`

// orderedOutcomesSQL frees the entities of a tick's ordered outcomes, after
// outcomesSQL recorded them (in the same transaction): the delivery in
// flight is no longer, and a delivered version raises the entity's (the
// highest of the batch's). Rows are locked in one order, the ordered lease
// step's. wakeOutcomesSQL then wakes each entity's lowest waiting delivery,
// in a statement of its own: one that starts after this one got its locks,
// so it sees what a lease step holding them parked.
const orderedOutcomesSQL = `WITH done AS (
		SELECT d.destination, d.order_entity, d.order_version, d.order_text, d.state, e.expires_at
		FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.id = ANY($1) AND d.order_entity IS NOT NULL
	), g AS (
		SELECT destination, order_entity,
			MAX(order_version) FILTER (WHERE state = 'delivered') AS version,
			(array_agg(order_text ORDER BY order_version DESC) FILTER (WHERE state = 'delivered'))[1] AS version_text,
			MAX(expires_at) FILTER (WHERE state = 'delivered') AS expires_at
		FROM done GROUP BY destination, order_entity
	), locked AS (
		SELECT h.destination, h.entity FROM order_heads h JOIN g ON h.destination = g.destination AND h.entity = g.order_entity
		ORDER BY h.destination COLLATE "C", h.entity COLLATE "C" FOR UPDATE OF h
	)
	UPDATE order_heads h SET
		inflight_id = CASE WHEN h.inflight_id = ANY($1) THEN NULL ELSE h.inflight_id END,
		inflight_until = CASE WHEN h.inflight_id = ANY($1) THEN NULL ELSE h.inflight_until END,
		version = CASE WHEN g.version IS NOT NULL AND (h.version IS NULL OR g.version > h.version) THEN g.version ELSE h.version END,
		version_text = CASE WHEN g.version IS NOT NULL AND (h.version IS NULL OR g.version > h.version) THEN g.version_text ELSE h.version_text END,
		expires_at = GREATEST(h.expires_at, COALESCE(g.expires_at, h.expires_at))
	FROM g, locked l WHERE h.destination = g.destination AND h.entity = g.order_entity AND l.destination = h.destination AND l.entity = h.entity`

const wakeOutcomesSQL = `UPDATE deliveries w SET next_attempt_at = LEAST(w.next_attempt_at, w.updated_at), order_waiting = FALSE
	FROM (SELECT DISTINCT ON (d.destination, d.order_entity) n.id FROM deliveries d
		JOIN deliveries n ON n.destination = d.destination AND n.order_entity = d.order_entity AND n.state = 'pending' AND n.order_waiting
		WHERE d.id = ANY($1) AND d.order_entity IS NOT NULL
		ORDER BY d.destination, d.order_entity, n.order_version, n.id) p
	WHERE w.id = p.id`

// queueOrderedOutcomes queues what ordered outcomes change of their
// entities, when the tick has any.
func queueOrderedOutcomes(batch *pgx.Batch, outcomes []store.Outcome) {
	var ids []int64
	for _, o := range outcomes {
		if o.Ordered {
			ids = append(ids, o.DeliveryID)
		}
	}
	if len(ids) == 0 {
		return
	}
	batch.Queue(orderedOutcomesSQL, ids)
	batch.Queue(wakeOutcomesSQL, ids)
}

// sweepOrderHeads deletes what is kept of entities whose last delivered
// event's window is over and that have nothing pending.
func (s *Store) sweepOrderHeads(ctx context.Context, now time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM order_heads WHERE (destination, entity) IN (
		SELECT h.destination, h.entity FROM order_heads h WHERE h.expires_at < $1 AND (h.inflight_until IS NULL OR h.inflight_until < $1)
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.destination = h.destination AND d.order_entity = h.entity AND d.state = 'pending')
		LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, limit)
	if err != nil {
		return 0, unavailable("sweep entities", err)
	}
	return int(tag.RowsAffected()), nil
}

// SkipDelivery implements store.Admin. The entity's row is locked first,
// as an outcome locks it, so a lease step that parked deliveries behind
// this one has committed before the wake looks for them.
func (s *Store) SkipDelivery(ctx context.Context, eventID int64, destination string, now time.Time, a store.AuditEntry) (int, error) {
	now = s.toDB(now)
	n, err := s.change(ctx, false, a, func(tx pgx.Tx) (int, error) {
		var id int64
		var entity *string
		var leased bool
		err := tx.QueryRow(ctx, `SELECT id, order_entity, `+leasedAt("$3")+` FROM deliveries
			WHERE event_id = $1 AND destination = $2 AND state = 'pending' FOR UPDATE`, eventID, destination, now).Scan(&id, &entity, &leased)
		if errors.Is(err, pgx.ErrNoRows) {
			var one int
			if err := tx.QueryRow(ctx, `SELECT 1 FROM events WHERE id = $1`, eventID).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
				return 0, store.ErrNotFound // rolled back: nothing done, nothing audited
			}
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if leased {
			return 0, store.ErrInFlight
		}
		if entity != nil {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM order_heads WHERE destination = $1 AND entity = $2 FOR UPDATE`, destination, *entity); err != nil {
				return 0, err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE deliveries SET state = 'dead', order_waiting = FALSE, lease_token = NULL, lease_expires_at = NULL,
			last_error = $2, updated_at = $3 WHERE id = $1`, id, store.SkippedReason, now); err != nil {
			return 0, err
		}
		if entity != nil {
			if _, err := tx.Exec(ctx, wakeSQL, []string{destination}, []string{*entity}); err != nil {
				return 0, err
			}
		}
		return 1, nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, fmt.Errorf("event %d: %w", eventID, store.ErrNotFound)
	case errors.Is(err, store.ErrInFlight):
		return 0, fmt.Errorf("event %d to %s: %w", eventID, destination, store.ErrInFlight)
	}
	return n, err
}

// ResetOrder implements store.Admin. The rows are locked as the ordered
// lease step locks them, so a step in progress finishes on the version it
// read, and the next reads none.
func (s *Store) ResetOrder(ctx context.Context, source, entity, destination string, now time.Time, a store.AuditEntry) (int, error) {
	return s.change(ctx, false, a, func(tx pgx.Tx) (int, error) {
		tag, err := tx.Exec(ctx, `UPDATE order_heads SET version = NULL, version_text = NULL
			WHERE entity = $1 AND ($2 = '' OR destination = $2) AND version IS NOT NULL`,
			store.OrderKey(source, entity), destination)
		if err != nil {
			return 0, err
		}
		return int(tag.RowsAffected()), nil
	})
}
