package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

// Effects: every operation is store.Transition applied to the record read
// FOR UPDATE inside the commit's transaction. Records are locked in key
// order, so two commits holding the same keys never deadlock.

const effectColumns = `key, state, token, attempt, lease_expires_at, fingerprint, deadline, result, error, created_at, updated_at, expires_at`

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func scanEffect(row pgx.Row) (store.EffectRecord, error) {
	var r store.EffectRecord
	var lease, deadline, expires *time.Time
	err := row.Scan(&r.Key, &r.State, &r.Token, &r.Attempt, &lease, &r.Fingerprint, &deadline, &r.Result, &r.Error, &r.CreatedAt, &r.UpdatedAt, &expires)
	if lease != nil {
		r.LeaseExpiresAt = *lease
	}
	if deadline != nil {
		r.Deadline = *deadline
	}
	if expires != nil {
		r.ExpiresAt = *expires
	}
	return r, err
}

// shift moves every time of r by d (to or from the database's clock).
func shift(r store.EffectRecord, d time.Duration) store.EffectRecord {
	if d == 0 {
		return r
	}
	move := func(t *time.Time) {
		if !t.IsZero() {
			*t = t.Add(d)
		}
	}
	move(&r.LeaseExpiresAt)
	move(&r.Deadline)
	move(&r.CreatedAt)
	move(&r.UpdatedAt)
	move(&r.ExpiresAt)
	for i := range r.Attempts {
		move(&r.Attempts[i].ClaimedAt)
		move(&r.Attempts[i].EndedAt)
	}
	return r
}

// applyEffects applies ops in key order and returns their results in the
// ops' order, with times on this process's clock.
func (s *Store) applyEffects(ctx context.Context, tx pgx.Tx, ops []store.EffectOp) ([]store.EffectResult, error) {
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ops[a].Key, ops[b].Key) })
	skew := time.Duration(s.skew.Load())
	out := make([]store.EffectResult, len(ops))
	for _, i := range order {
		op := ops[i]
		if op.Now.IsZero() {
			op.Now = s.clock()
		}
		op.Now = op.Now.Add(skew)
		if !op.Deadline.IsZero() {
			op.Deadline = op.Deadline.Add(skew)
		}
		res, err := applyEffect(ctx, tx, op)
		if err != nil {
			return nil, err
		}
		res.Record = shift(res.Record, -skew)
		out[i] = res
	}
	return out, nil
}

// applyEffect is one op, on the database's clock: read the record locked,
// decide, write.
func applyEffect(ctx context.Context, tx pgx.Tx, op store.EffectOp) (store.EffectResult, error) {
	for {
		var rec *store.EffectRecord
		r, err := scanEffect(tx.QueryRow(ctx, `SELECT `+effectColumns+` FROM effects WHERE key = $1 FOR UPDATE`, op.Key))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return store.EffectResult{}, err
		default:
			rec = &r
		}
		next, res, ch := store.Transition(rec, op, store.NewLeaseToken())
		if next != nil {
			if rec == nil {
				// A new key: another transaction may be creating it too.
				// The unique key decides; the loser reads it again (locked,
				// so after the winner's commit) and decides again.
				tag, err := tx.Exec(ctx, `INSERT INTO effects (`+effectColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
					ON CONFLICT (key) DO NOTHING`,
					next.Key, next.State, next.Token, next.Attempt, timeOrNil(next.LeaseExpiresAt), next.Fingerprint, timeOrNil(next.Deadline),
					next.Result, next.Error, next.CreatedAt, next.UpdatedAt, timeOrNil(next.ExpiresAt))
				if err != nil {
					return store.EffectResult{}, err
				}
				if tag.RowsAffected() == 0 {
					continue
				}
			} else {
				_, err := tx.Exec(ctx, `UPDATE effects SET state = $2, token = $3, attempt = $4, lease_expires_at = $5, fingerprint = $6,
					deadline = $7, result = $8, error = $9, updated_at = $10, expires_at = $11 WHERE key = $1`,
					next.Key, next.State, next.Token, next.Attempt, timeOrNil(next.LeaseExpiresAt), next.Fingerprint, timeOrNil(next.Deadline),
					next.Result, next.Error, next.UpdatedAt, timeOrNil(next.ExpiresAt))
				if err != nil {
					return store.EffectResult{}, err
				}
			}
		}
		if e := ch.End; e != nil {
			if _, err := tx.Exec(ctx, `UPDATE effect_attempts SET ended_at = $1, outcome = $2, error = $3
				WHERE key = $4 AND attempt = $5 AND ended_at IS NULL`, e.EndedAt, e.Outcome, e.Error, op.Key, e.Attempt); err != nil {
				return store.EffectResult{}, err
			}
		}
		if a := ch.Start; a != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO effect_attempts (key, attempt, claimed_at) VALUES ($1, $2, $3)`, op.Key, a.Attempt, a.ClaimedAt); err != nil {
				return store.EffectResult{}, err
			}
		}
		if a := op.Audit; a.Action != "" && res.Status == store.EffectOK {
			// op.Now is on the database's clock already.
			if _, err := tx.Exec(ctx, `INSERT INTO audit (at, actor, action, target, count) VALUES ($1, $2, $3, $4, 1)`,
				op.Now, a.Actor, a.Action, a.Target); err != nil {
				return store.EffectResult{}, err
			}
		}
		return res, nil
	}
}

// TxDriver is the effects ledger's store.TxDriver for a pgx.Tx on this
// store's database (effect.NewTx). ApplyEffect applies op in that
// transaction: it commits, or rolls back, with the caller's own writes.
type TxDriver struct{}

var _ store.TxDriver[pgx.Tx] = TxDriver{}

// ApplyEffect applies op in the caller's own transaction on this store's
// database (the outbox): it commits, or rolls back, with the caller's own
// writes. Times are taken as they are (the caller's transaction has no
// store to correct its clock).
func (TxDriver) ApplyEffect(ctx context.Context, tx pgx.Tx, op store.EffectOp) (store.EffectResult, error) {
	if op.Now.IsZero() {
		op.Now = time.Now()
	}
	res, err := applyEffect(ctx, tx, op)
	if err != nil {
		return res, failed("effect", err)
	}
	return res, nil
}

// Effect implements store.Store.
func (s *Store) Effect(ctx context.Context, key string) (store.EffectRecord, error) {
	r, err := scanEffect(s.pool.QueryRow(ctx, `SELECT `+effectColumns+` FROM effects WHERE key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("effect %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return r, unavailable("read effect", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT attempt, claimed_at, ended_at, outcome, error FROM effect_attempts WHERE key = $1 ORDER BY attempt`, key)
	if err != nil {
		return r, unavailable("read effect attempts", err)
	}
	r.Attempts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.EffectAttempt, error) {
		var a store.EffectAttempt
		var ended *time.Time
		err := row.Scan(&a.Attempt, &a.ClaimedAt, &ended, &a.Outcome, &a.Error)
		if ended != nil {
			a.EndedAt = *ended
		}
		return a, err
	})
	if err != nil {
		return r, unavailable("read effect attempts", err)
	}
	return shift(r, -time.Duration(s.skew.Load())), nil
}

// ListEffects implements store.Store.
func (s *Store) ListEffects(ctx context.Context, q store.EffectQuery) ([]store.EffectRecord, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+effectColumns+` FROM effects
		WHERE key > $1 AND ($2 = '' OR state = $2)
		AND (NOT $3 OR (state = 'pending' AND lease_expires_at IS NOT NULL AND lease_expires_at <= $4))
		AND ($6 = '' OR starts_with(key, $6))
		ORDER BY key LIMIT $5`, q.After, q.State, q.LeaseExpired, s.toDB(q.Now), q.Limit, q.Prefix)
	if err != nil {
		return nil, unavailable("list effects", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.EffectRecord, error) {
		r, err := scanEffect(row)
		return shift(r, -time.Duration(s.skew.Load())), err
	})
	if err != nil {
		return nil, unavailable("list effects", err)
	}
	return out, nil
}

// sweepEffects deletes up to limit final records past their retention.
func (s *Store) sweepEffects(ctx context.Context, now time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM effects WHERE key IN (
		SELECT key FROM effects WHERE expires_at IS NOT NULL AND expires_at < $1 AND state <> 'pending'
		LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, limit)
	if err != nil {
		return 0, unavailable("sweep effects", err)
	}
	return int(tag.RowsAffected()), nil
}

// ClaimEvents claims events in the caller's own transaction on this
// store's database (the outbox), with the statement Commit runs for a
// batch's events (commitSQL), asking for no lease: a duplicate is the same
// duplicate, and each new event's deliveries are due at once, leased to
// nobody. Their insert's trigger (deliveries_notify) queues a NOTIFY that
// PostgreSQL sends when tx commits, and not if it rolls back: every
// replica's worker wakes for a committed publish at once. Times are taken
// as they are (the caller's transaction has no store to measure its
// clock against the database's).
func (TxDriver) ClaimEvents(ctx context.Context, tx pgx.Tx, events []store.NewEvent) ([]store.Claim, error) {
	if len(events) == 0 {
		return nil, nil
	}
	s := &Store{} // no skew, no lease: only commitSQL's arguments and rows
	now := time.Now()
	rs, err := tx.Query(ctx, commitSQL, s.commitArgs(events, store.Lease{}, "", now, now)...)
	if err != nil {
		return nil, failed("claim events", err)
	}
	var rows []commitRow
	for rs.Next() {
		var r commitRow
		if err := rs.Scan(&r.kind, &r.eventID, &r.source, &r.key, &r.expires, &r.deliveryID, &r.destination, &r.attempt,
			&r.contentType, &r.headers, &r.body, &r.received, &r.trace, &r.eventType); err != nil {
			rs.Close()
			return nil, failed("claim events", err)
		}
		rows = append(rows, r)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, failed("claim events", err)
	}
	return s.committed(events, rows, "", now).Claims, nil
}

// AddCounts adds counters and copies in the caller's transaction, as a
// Commit's Stats and Copies, in one round trip; the counters under the
// session's own shard (outboxStatsSQL).
func (TxDriver) AddCounts(ctx context.Context, tx pgx.Tx, stats []store.StatDelta, copies []store.Copy) error {
	batch := &pgx.Batch{}
	if len(stats) > 0 {
		batch.Queue(outboxStatsSQL, statsArgs(stats)...)
	}
	(&Store{}).queueCopies(batch, copiesSQL, copies)
	if batch.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return failed("add counts", err)
	}
	return nil
}
