package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/oncehook/oncehook/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Effects: the ledger's records live beside the events, and every operation
// is store.Transition applied to the record read inside the writer's
// transaction (which holds SQLite's write lock, so the record is locked).

const effectColumns = `key, state, token, attempt, lease_expires_at, fingerprint, deadline, result, error, created_at, updated_at, expires_at`

// The four statements an effect needs, as text: the writer prepares them
// once (parsing them on every operation cost a fifth of the ledger's
// throughput); a caller's own transaction (TxDriver) runs them as they are.
const (
	loadEffectSQL   = `SELECT ` + effectColumns + ` FROM effects WHERE key = ?`
	upsertEffectSQL = `INSERT INTO effects (` + effectColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET state = excluded.state, token = excluded.token, attempt = excluded.attempt,
			lease_expires_at = excluded.lease_expires_at, fingerprint = excluded.fingerprint, deadline = excluded.deadline,
			result = excluded.result, error = excluded.error, updated_at = excluded.updated_at, expires_at = excluded.expires_at`
	endAttemptSQL = `UPDATE effect_attempts SET ended_at = ?, outcome = ?, error = ?
		WHERE key = ? AND attempt = ? AND ended_at IS NULL`
	startAttemptSQL = `INSERT INTO effect_attempts (key, attempt, claimed_at) VALUES (?, ?, ?)`
	auditEffectSQL  = `INSERT INTO audit (at, actor, action, target, count) VALUES (?, ?, ?, ?, 1)`
)

// effectDB runs those statements: prepared, on the writer, or as text.
type effectDB interface {
	row(ctx context.Context, query string, args ...any) *sql.Row
	exec(ctx context.Context, query string, args ...any) error
}

// textDB runs the statements as text, on a caller's transaction.
type textDB struct{ tx *sql.Tx }

func (t textDB) row(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t textDB) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

// preparedDB runs the writer's prepared statements in its transaction.
type preparedDB struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (p *preparedDB) stmt(q string) *sql.Stmt { return p.tx.StmtContext(p.ctx, p.stmts[q]) }

func (p *preparedDB) row(ctx context.Context, q string, args ...any) *sql.Row {
	return p.stmt(q).QueryRowContext(ctx, args...)
}

func (p *preparedDB) exec(ctx context.Context, q string, args ...any) error {
	_, err := p.stmt(q).ExecContext(ctx, args...)
	return err
}

func nullMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ms(t)
}

func fromNullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMS(v.Int64)
}

type scanner interface{ Scan(dest ...any) error }

func scanEffect(row scanner) (store.EffectRecord, error) {
	var r store.EffectRecord
	var lease, deadline, expires sql.NullInt64
	var created, updated int64
	err := row.Scan(&r.Key, &r.State, &r.Token, &r.Attempt, &lease, &r.Fingerprint, &deadline, &r.Result, &r.Error, &created, &updated, &expires)
	r.LeaseExpiresAt, r.Deadline, r.ExpiresAt = fromNullMS(lease), fromNullMS(deadline), fromNullMS(expires)
	r.CreatedAt, r.UpdatedAt = fromMS(created), fromMS(updated)
	return r, err
}

// applyEffects applies ops in key order (each key's ops in their own
// order) and returns their results in the ops' order.
func applyEffects(ctx context.Context, tx effectDB, ops []store.EffectOp) ([]store.EffectResult, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ops[a].Key, ops[b].Key) })
	out := make([]store.EffectResult, len(ops))
	for _, i := range order {
		res, err := applyEffect(ctx, tx, ops[i])
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

// applyEffect is one op: read the record, decide, write.
func applyEffect(ctx context.Context, tx effectDB, op store.EffectOp) (store.EffectResult, error) {
	if op.Now.IsZero() {
		op.Now = time.Now()
	}
	var rec *store.EffectRecord
	r, err := scanEffect(tx.row(ctx, loadEffectSQL, op.Key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return store.EffectResult{}, unavailable("read effect", err)
	default:
		rec = &r
	}
	next, res, ch := store.Transition(rec, op, store.NewLeaseToken())
	if next != nil {
		err := tx.exec(ctx, upsertEffectSQL,
			next.Key, next.State, next.Token, next.Attempt, nullMS(next.LeaseExpiresAt), next.Fingerprint, nullMS(next.Deadline),
			next.Result, next.Error, ms(next.CreatedAt), ms(next.UpdatedAt), nullMS(next.ExpiresAt))
		if err != nil {
			return store.EffectResult{}, failed("write effect", err)
		}
	}
	if e := ch.End; e != nil {
		if err := tx.exec(ctx, endAttemptSQL, ms(e.EndedAt), e.Outcome, e.Error, op.Key, e.Attempt); err != nil {
			return store.EffectResult{}, failed("record effect attempt", err)
		}
	}
	if a := ch.Start; a != nil {
		if err := tx.exec(ctx, startAttemptSQL, op.Key, a.Attempt, ms(a.ClaimedAt)); err != nil {
			return store.EffectResult{}, failed("record effect attempt", err)
		}
	}
	if a := op.Audit; a.Action != "" && res.Status == store.EffectOK {
		if err := tx.exec(ctx, auditEffectSQL, ms(op.Now), a.Actor, a.Action, a.Target); err != nil {
			return store.EffectResult{}, failed("audit", err)
		}
	}
	return res, nil
}

// TxDriver is the effects ledger's store.TxDriver for a *sql.Tx on this
// store's database (effect.NewTx). ApplyEffect applies op in that
// transaction: it commits, or rolls back, with the caller's own writes.
type TxDriver struct{}

var _ store.TxDriver[*sql.Tx] = TxDriver{}

// ApplyEffect applies op in the caller's own transaction on this store's
// database (the outbox): it commits, or rolls back, with the caller's own
// writes. Open that database with _txlock=immediate, so the transaction
// holds the write lock from its start, as oncehook's writer does; the
// gateway's writer waits for it until it ends (see lock.go), so keep it
// short.
func (TxDriver) ApplyEffect(ctx context.Context, tx *sql.Tx, op store.EffectOp) (store.EffectResult, error) {
	res, err := applyEffect(ctx, textDB{tx}, op)
	return res, deferredHint(err)
}

// deferredHint says what to change when a caller's transaction began
// deferred: it read, another writer committed, and SQLite refuses its
// write at once (SQLITE_BUSY_SNAPSHOT, which no busy timeout waits out).
// "database is locked (517)" alone does not tell the caller that its
// connection lacks _txlock=immediate.
func deferredHint(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) && e.Code() == sqlite3.SQLITE_BUSY_SNAPSHOT {
		return fmt.Errorf("%w (the transaction began deferred, and another writer committed since it read: open the database with _txlock=immediate, so a transaction holds the write lock from its start)", err)
	}
	return err
}

// Effect implements store.Store.
func (s *Store) Effect(ctx context.Context, key string) (store.EffectRecord, error) {
	r, err := scanEffect(s.read.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM effects WHERE key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("effect %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return r, unavailable("read effect", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT attempt, claimed_at, ended_at, outcome, error FROM effect_attempts WHERE key = ? ORDER BY attempt`, key)
	if err != nil {
		return r, unavailable("read effect attempts", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a store.EffectAttempt
		var claimed int64
		var ended sql.NullInt64
		if err := rows.Scan(&a.Attempt, &claimed, &ended, &a.Outcome, &a.Error); err != nil {
			return r, unavailable("read effect attempts", err)
		}
		a.ClaimedAt, a.EndedAt = fromMS(claimed), fromNullMS(ended)
		r.Attempts = append(r.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return r, unavailable("read effect attempts", err)
	}
	return r, nil
}

// ListEffects implements store.Store.
func (s *Store) ListEffects(ctx context.Context, q store.EffectQuery) ([]store.EffectRecord, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	query := `SELECT ` + effectColumns + ` FROM effects WHERE key > ?`
	args := []any{q.After}
	if q.State != "" {
		query += ` AND state = ?`
		args = append(args, q.State)
	}
	if q.LeaseExpired {
		query += ` AND state = 'pending' AND lease_expires_at IS NOT NULL AND lease_expires_at <= ?`
		args = append(args, ms(q.Now))
	}
	if q.Prefix != "" {
		// The range the prefix starts, on the primary key's index.
		query += ` AND key >= ? AND key < ?`
		args = append(args, q.Prefix, q.Prefix+"\U0010FFFF")
	}
	query += ` ORDER BY key LIMIT ?`
	args = append(args, q.Limit)
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, unavailable("list effects", err)
	}
	defer rows.Close()
	var out []store.EffectRecord
	for rows.Next() {
		r, err := scanEffect(rows)
		if err != nil {
			return nil, unavailable("list effects", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list effects", err)
	}
	return out, nil
}

// sweepEffects deletes up to limit final records past their retention.
func (s *Store) sweepEffects(ctx context.Context, now time.Time, limit int) (int, error) {
	return s.execWrite(ctx, "sweep effects", `DELETE FROM effects WHERE key IN (
		SELECT key FROM effects WHERE expires_at IS NOT NULL AND expires_at < ? AND state <> 'pending' LIMIT ?)`, ms(now), limit)
}

// ClaimEvents claims events in the caller's own transaction on this
// store's database (the outbox), with the statements Commit runs for a
// batch's events: a duplicate is the same duplicate, and each new event's
// deliveries are due at once, leased to nobody. The gateway's worker
// finds them when it next asks the store for due deliveries (within its
// idle poll: another process's commit cannot wake it).
func (TxDriver) ClaimEvents(ctx context.Context, tx *sql.Tx, events []store.NewEvent) ([]store.Claim, error) {
	st := claimStatements{
		insertEvent:    textStatement{tx, insertEventSQL},
		storedExpiry:   textStatement{tx, storedExpirySQL},
		insertDelivery: textStatement{tx, insertDeliverySQL},
		insertBody:     textStatement{tx, insertBodySQL},
	}
	var due bool
	// No lease (Max 0): nothing is handed off, so the writer's own
	// statements (s) are never reached.
	claims, _, err := (*Store)(nil).claim(ctx, tx, st, events, store.Lease{}, "", &due)
	return claims, deferredHint(err)
}

// outboxShard is the rollup rows a caller's transaction adds to: SQLite
// has one writer at a time, so one shard waits on nobody.
const outboxShard = "outbox"

// AddCounts adds counters and copies in the caller's transaction, as a
// Commit's Stats and Copies.
func (TxDriver) AddCounts(ctx context.Context, tx *sql.Tx, stats []store.StatDelta, copies []store.Copy) error {
	if len(stats) > 0 {
		st, err := tx.PrepareContext(ctx, addStatSQL)
		if err != nil {
			return failed("add rollups", err)
		}
		defer st.Close()
		if err := addStats(ctx, st, outboxShard, stats); err != nil {
			return err
		}
	}
	if len(copies) > 0 {
		st, err := tx.PrepareContext(ctx, addCopiesSQL)
		if err != nil {
			return failed("count copies", err)
		}
		defer st.Close()
		return addCopies(ctx, st, copies)
	}
	return nil
}
