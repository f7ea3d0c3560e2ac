package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/internal/sqlstore"
)

// dialect is SQLite's, for the queries the backends share (sqlstore).
var dialect = sqlstore.Dialect{Time: func(t time.Time) any { return ms(t) }}

// ListEvents implements store.Admin.
func (s *Store) ListEvents(ctx context.Context, q store.EventQuery) ([]store.EventSummary, error) {
	f := sqlstore.Events(q, dialect)
	page := f.Page("e.id", q.Before, q.Limit)
	rows, err := s.read.QueryContext(ctx, `SELECT e.id, e.source, e.key, e.type, e.keyless, e.content_type, `+bodySize+`, e.received_at, e.expires_at,
		`+sqlstore.EventState+`, (SELECT COUNT(*) FROM deliveries d WHERE d.event_id = e.id)
		FROM events e WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("list events", err)
	}
	defer rows.Close()
	var out []store.EventSummary
	for rows.Next() {
		var e store.EventSummary
		var received, expires int64
		if err := rows.Scan(&e.ID, &e.Source, &e.Key, &e.Type, &e.Keyless, &e.ContentType, &e.Size, &received, &expires, &e.State, &e.Deliveries); err != nil {
			return nil, unavailable("list events", err)
		}
		e.ReceivedAt, e.ExpiresAt = fromMS(received), fromMS(expires)
		out = append(out, e)
	}
	return out, rows.Err()
}

// EventContents implements store.Admin.
func (s *Store) EventContents(ctx context.Context, q store.EventQuery) ([]store.EventContent, error) {
	f := sqlstore.Events(q, dialect)
	page := f.Page("e.id", q.Before, q.Limit)
	rows, err := s.read.QueryContext(ctx, `SELECT e.id, e.source, e.received_at, e.headers,
		COALESCE((SELECT b.body FROM bodies b WHERE b.event_id = e.id), e.body)
		FROM events e WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("read events", err)
	}
	defer rows.Close()
	var out []store.EventContent
	for rows.Next() {
		var e store.EventContent
		var received int64
		var header string
		if err := rows.Scan(&e.ID, &e.Source, &received, &header, &e.Body); err != nil {
			return nil, unavailable("read events", err)
		}
		e.ReceivedAt, e.Header = fromMS(received), store.DecodeHeader(header)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Event implements store.Admin.
func (s *Store) Event(ctx context.Context, id int64) (store.EventDetail, error) {
	var e store.EventDetail
	var received, expires int64
	var lastCopy, dropped sql.NullInt64
	var header, filtered string
	err := s.read.QueryRowContext(ctx, `SELECT e.id, e.source, e.key, e.type, e.keyless, e.content_type, `+bodySize+`, e.received_at, e.expires_at,
		`+sqlstore.EventState+`, (SELECT COUNT(*) FROM deliveries d WHERE d.event_id = e.id), e.headers,
		COALESCE((SELECT b.body FROM bodies b WHERE b.event_id = e.id), e.body), e.copies, e.last_copy_at, e.filtered, e.body_dropped_at
		FROM events e WHERE e.id = ?`, id).Scan(&e.ID, &e.Source, &e.Key, &e.Type, &e.Keyless, &e.ContentType, &e.Size, &received, &expires,
		&e.State, &e.EventSummary.Deliveries, &header, &e.Body, &e.Copies, &lastCopy, &filtered, &dropped)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("event %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return e, unavailable("read event", err)
	}
	if filtered != "" {
		e.Filtered = strings.Split(filtered, ",")
	}
	e.ReceivedAt, e.ExpiresAt, e.Header = fromMS(received), fromMS(expires), store.DecodeHeader(header)
	e.BodyDroppedAt = fromNullMS(dropped)
	if lastCopy.Valid {
		e.LastCopyAt = fromMS(lastCopy.Int64)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT id, destination, state, attempts, next_attempt_at, lease_expires_at,
		COALESCE(last_status, 0), COALESCE(last_error, ''), updated_at,
		COALESCE(order_entity, ''), COALESCE(order_text, ''), COALESCE(order_mode, ''), order_waiting, `+sqlstore.FirstAttempt+`
		FROM deliveries WHERE event_id = ? ORDER BY destination`, id)
	if err != nil {
		return e, unavailable("read deliveries", err)
	}
	defer rows.Close()
	var firsts []*store.AttemptRecord // by delivery, as e.Deliveries
	for rows.Next() {
		var d store.DeliveryDetail
		var next, updated int64
		var lease, firstStarted sql.NullInt64
		var entity string
		var firstMS int64
		var firstStatus int
		var firstResponse, firstScript, firstSent string
		if err := rows.Scan(&d.ID, &d.Destination, &d.State, &d.Attempts, &next, &lease, &d.LastStatus, &d.LastError, &updated,
			&entity, &d.Order.Version, &d.Order.Mode, &d.Order.Waiting,
			&firstStarted, &firstMS, &firstStatus, &firstResponse, &firstScript, &firstSent); err != nil {
			return e, unavailable("read deliveries", err)
		}
		_, d.Order.Entity = store.SplitOrderKey(entity)
		d.NextAttemptAt, d.LeaseExpiresAt, d.UpdatedAt = fromMS(next), fromNullMS(lease), fromMS(updated)
		e.Deliveries = append(e.Deliveries, d)
		var first *store.AttemptRecord
		if firstStarted.Valid {
			first = sqlstore.FirstDelivered(fromMS(firstStarted.Int64), firstMS, firstStatus, firstResponse, firstScript, firstSent)
		}
		firsts = append(firsts, first)
	}
	if err := rows.Err(); err != nil {
		return e, unavailable("read deliveries", err)
	}
	for i := range e.Deliveries {
		d := &e.Deliveries[i]
		arows, err := s.read.QueryContext(ctx, `SELECT attempt, started_at, duration_ms, status_code, error, outcome, response, script_digest, sent_digest
			FROM attempts WHERE delivery_id = ? ORDER BY id`, d.ID)
		if err != nil {
			return e, unavailable("read attempts", err)
		}
		for arows.Next() {
			var a store.AttemptRecord
			var started, dur int64
			if err := arows.Scan(&a.Attempt, &started, &dur, &a.StatusCode, &a.Error, &a.Outcome, &a.Response, &a.ScriptDigest, &a.SentDigest); err != nil {
				arows.Close()
				return e, unavailable("read attempts", err)
			}
			a.StartedAt, a.Duration = fromMS(started), time.Duration(dur)*time.Millisecond
			d.History = append(d.History, a)
		}
		if err := errors.Join(arows.Err(), arows.Close()); err != nil {
			return e, unavailable("read attempts", err)
		}
		d.History = sqlstore.History(firsts[i], d.History)
	}
	return e, nil
}

// bodySize is an event's body's length, wherever it is kept (events.body,
// or bodies for a source with a body_retention).
const bodySize = `CASE WHEN e.body_expires_at IS NULL THEN length(e.body)
	ELSE COALESCE((SELECT length(b.body) FROM bodies b WHERE b.event_id = e.id), 0) END`

// audit writes e in tx.
func audit(ctx context.Context, tx *sql.Tx, e store.AuditEntry, now time.Time) error {
	if e.Action == "" {
		return nil
	}
	_, err := auditReturningID(ctx, tx, e, now)
	return err
}

// auditReturningID writes e in tx and returns its id.
func auditReturningID(ctx context.Context, tx *sql.Tx, e store.AuditEntry, now time.Time) (int64, error) {
	if e.At.IsZero() {
		e.At = now
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO audit (at, actor, action, target, count) VALUES (?, ?, ?, ?, ?)`,
		ms(e.At), e.Actor, e.Action, e.Target, e.Count)
	if err != nil {
		return 0, failed("audit", err)
	}
	return res.LastInsertId()
}

// RecordAudit implements store.Admin.
func (s *Store) RecordAudit(ctx context.Context, e store.AuditEntry) error {
	_, err := s.change(ctx, false, e, time.Now(), func(*sql.Tx) (int, error) { return e.Count, nil })
	return err
}

// change runs fn in a write transaction with the audit entry (its Count
// set to what fn returns), or only counts with dryRun.
func (s *Store) change(ctx context.Context, dryRun bool, a store.AuditEntry, now time.Time, fn func(tx *sql.Tx) (int, error)) (int, error) {
	tx, done, err := s.begin(ctx, "begin")
	if err != nil {
		return 0, err
	}
	defer done()
	defer tx.Rollback()
	n, err := fn(tx)
	if err != nil {
		return 0, err
	}
	if dryRun {
		return n, nil
	}
	a.Count = n
	if err := audit(ctx, tx, a, now); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, unavailable("commit", err)
	}
	return n, nil
}

// bulkChange runs an operator's change over many rows in transactions of
// at most s.bulk rows, so that intake's commits get the single writer in
// between. step changes the next rows after the id it is given, in id
// order, and returns their ids. The audit entry is written by the first
// transaction and its count raised by each later one, with the rows it
// counts: the record and the change never part, even if the process dies
// halfway. With dryRun, count (one read) counts instead.
func (s *Store) bulkChange(ctx context.Context, dryRun bool, a store.AuditEntry, now time.Time,
	count func() (int, error), step func(tx *sql.Tx, after int64) ([]int64, error)) (int, error) {
	if dryRun {
		return count()
	}
	return s.inBatches(ctx, &batchAudit{entry: a, now: now}, step)
}

// inBatches is bulkChange's run, its audit entry rec (shared by the runs
// of one change over several selections).
func (s *Store) inBatches(ctx context.Context, rec *batchAudit, step func(tx *sql.Tx, after int64) ([]int64, error)) (int, error) {
	total, after := 0, int64(0)
	for {
		var ids []int64
		err := s.batch(ctx, func(tx *sql.Tx) (err error) {
			if ids, err = step(tx, after); err != nil {
				return err
			}
			return rec.add(ctx, tx, len(ids))
		})
		if err != nil {
			return total, err
		}
		total += len(ids)
		if len(ids) < s.bulk {
			return total, nil
		}
		after = ids[len(ids)-1]
	}
}

// batch runs fn in one transaction of a bulk change, and commits it.
func (s *Store) batch(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, done, err := s.begin(ctx, "bulk change")
	if err != nil {
		return err
	}
	defer done()
	err = fn(tx)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		tx.Rollback()
		return unavailable("bulk change", err)
	}
	return nil
}

// batchAudit is a bulk change's audit entry: written by its first
// transaction, its count raised by each later one that changed rows.
type batchAudit struct {
	entry store.AuditEntry
	now   time.Time
	id    int64
}

func (b *batchAudit) add(ctx context.Context, tx *sql.Tx, n int) (err error) {
	switch {
	case b.entry.Action == "":
	case b.id == 0:
		b.entry.Count = n
		b.id, err = auditReturningID(ctx, tx, b.entry, b.now)
	case n > 0:
		_, err = tx.ExecContext(ctx, `UPDATE audit SET count = count + ? WHERE id = ?`, n, b.id)
	}
	return err
}

// returningIDs runs a statement that returns the ids it changed, in order.
func returningIDs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids) // RETURNING promises no order
	return ids, nil
}

func (s *Store) count(ctx context.Context, what, query string, args ...any) (int, error) {
	var n int
	if err := s.read.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, unavailable(what, err)
	}
	return n, nil
}

// Replay implements store.Admin, in transactions of s.bulk deliveries (see
// bulkChange). SQLite has one writer, so no sweep runs between a
// transaction's read and its write.
func (s *Store) Replay(ctx context.Context, r store.Replay) (int, error) {
	if r.OneEvent() {
		f := sqlstore.Events(r.Events, dialect)
		if err := s.oneEvent(ctx, "replay", f.Where(), f.Args()); err != nil {
			return 0, err
		}
	}
	// A search's ids go in shares of a batch: SQLite builds a literal IN
	// list anew for every statement, and each batch of one list of them
	// all cost as much as the whole (100,000 ids: 4 minutes, not 10 s).
	rec, total := &batchAudit{entry: r.Entry(), now: r.Now}, 0
	for _, q := range store.SplitIDs(r.Events, s.bulk) {
		f := sqlstore.Events(q, dialect)
		// An event whose body was dropped has nothing to deliver: its
		// deliveries stay as they are.
		sel := `FROM deliveries WHERE event_id IN (SELECT e.id FROM events e WHERE ` + f.Where() + ` AND e.body_dropped_at IS NULL) AND NOT ` + leasedNow
		args := append(slices.Clone(f.Args()), ms(r.Now))
		if r.Destination != "" {
			sel += ` AND destination = ?`
			args = append(args, r.Destination)
		}
		if r.Dead {
			sel += ` AND state = 'dead'`
		}
		var n int
		var err error
		if r.DryRun {
			n, err = s.count(ctx, "count replay", `SELECT COUNT(*) `+sel, args...)
		} else {
			n, err = s.replayBatches(ctx, rec, f, q.IDs != nil, r)
		}
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// replayBatches requeues the deliveries of the events f selects (to
// r.Destination, dead ones only with r.Dead) that no worker holds now, in
// transactions of s.bulk events read in id order, as a bulk delivery
// goes. Walking the deliveries instead, each batch's "event_id IN (the
// events' subquery)" built its list anew: 100,000 deliveries took 25 s.
// oneShare: f names its events by ids, one batch's worth.
func (s *Store) replayBatches(ctx context.Context, rec *batchAudit, f *sqlstore.Filter, oneShare bool, r store.Replay) (int, error) {
	total := 0
	for after, more := int64(0), true; more; {
		var n int
		err := s.batch(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `SELECT e.id, e.body_dropped_at IS NULL FROM events e WHERE `+f.Where()+
				` AND e.id > ? ORDER BY e.id LIMIT ?`, append(slices.Clone(f.Args()), after, s.bulk)...)
			if err != nil {
				return err
			}
			var ids []string
			read := 0
			for rows.Next() {
				var id int64
				var body bool
				if err := rows.Scan(&id, &body); err != nil {
					rows.Close()
					return err
				}
				after, read = id, read+1
				if body { // a dropped body has nothing to deliver: its deliveries stay
					ids = append(ids, strconv.FormatInt(id, 10))
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			more = read == s.bulk && !oneShare
			if len(ids) == 0 {
				return rec.add(ctx, tx, 0) // the entry, written once whatever it found
			}
			// Ids the store made, written into the statement (as
			// sqlstore.Events writes a search's).
			query := `UPDATE deliveries SET ` + requeueSet + ` WHERE event_id IN (` + strings.Join(ids, ",") + `) AND NOT ` + leasedNow
			args := []any{ms(r.Now), ms(r.Now), ms(r.Now)}
			if r.Destination != "" {
				query += ` AND destination = ?`
				args = append(args, r.Destination)
			}
			if r.Dead {
				query += ` AND state = 'dead'`
			}
			res, err := tx.ExecContext(ctx, query, args...)
			if err != nil {
				return err
			}
			affected, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n = int(affected)
			return rec.add(ctx, tx, n)
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// oneEvent answers a bulk action that names one event (r.OneEvent) when
// that event is not stored (ErrNotFound) or has no body (ErrBodyGone).
func (s *Store) oneEvent(ctx context.Context, what, where string, args []any) error {
	var found, gone int
	if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(e.body_dropped_at) FROM events e WHERE `+where, args...).Scan(&found, &gone); err != nil {
		return unavailable(what, err)
	}
	if found == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if gone == found {
		return fmt.Errorf("%s: %w", what, store.ErrBodyGone)
	}
	return nil
}

// AddDeliveries implements store.Admin, in transactions of s.bulk events
// (see store.Deliver). SQLite has one writer, so no sweep runs between a
// batch's read and its write.
func (s *Store) AddDeliveries(ctx context.Context, d store.Deliver) (store.DeliverCount, error) {
	var out store.DeliverCount
	if d.OneEvent() {
		f := sqlstore.Events(d.Events, dialect)
		if err := s.oneEvent(ctx, "deliver", f.Where(), f.Args()); err != nil {
			return out, err
		}
	}
	rec := &batchAudit{entry: d.Entry(), now: d.Now}
	for _, q := range store.SplitIDs(d.Events, s.bulk) {
		f := sqlstore.Events(q, dialect)
		if d.DryRun {
			var n, gone, already int
			err := s.read.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(e.body_dropped_at), COALESCE(SUM(e.body_dropped_at IS NULL AND EXISTS
				(SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.destination = ?)), 0) FROM events e WHERE `+f.Where(),
				append([]any{d.Destination}, f.Args()...)...).Scan(&n, &gone, &already)
			if err != nil {
				return out, unavailable("count deliver", err)
			}
			out.Added, out.Gone, out.Already = out.Added+n-gone-already, out.Gone+gone, out.Already+already
			continue
		}
		for after, more := int64(0), true; more; {
			err := s.batch(ctx, func(tx *sql.Tx) error {
				var b store.DeliverCount
				var err error
				b, after, more, err = s.deliverBatch(ctx, tx, f, d, after)
				more = more && q.IDs == nil // a share of ids is one batch
				if err == nil {
					err = rec.add(ctx, tx, b.Added)
				}
				if err == nil {
					out.Added, out.Already, out.Gone = out.Added+b.Added, out.Already+b.Already, out.Gone+b.Gone
				}
				return err
			})
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// deliverBatch adds d's delivery to the next s.bulk events f selects after
// the id after, in tx, and returns what it did, the last id it read and
// whether more may follow.
func (s *Store) deliverBatch(ctx context.Context, tx *sql.Tx, f *sqlstore.Filter, d store.Deliver, after int64) (store.DeliverCount, int64, bool, error) {
	var out store.DeliverCount
	rows, err := tx.QueryContext(ctx, `SELECT e.id, e.filtered, e.body_dropped_at IS NOT NULL FROM events e WHERE `+f.Where()+
		` AND e.id > ? ORDER BY e.id LIMIT ?`, append(slices.Clone(f.Args()), after, s.bulk)...)
	if err != nil {
		return out, 0, false, err
	}
	type row struct {
		id       int64
		filtered string
	}
	var read []row
	for rows.Next() {
		var r row
		var gone bool
		if err := rows.Scan(&r.id, &r.filtered, &gone); err != nil {
			rows.Close()
			return out, 0, false, err
		}
		after = r.id
		if gone {
			out.Gone++
			continue
		}
		read = append(read, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, 0, false, err
	}
	more := len(read)+out.Gone == s.bulk
	if len(read) == 0 {
		return out, after, more, nil
	}
	// The unique (event, destination) decides: one already there (made
	// by the route, an earlier call, a concurrent one) stays. Prepared
	// once a batch: parsing each row's statement anew was most of the
	// batch's time.
	insert, err := tx.PrepareContext(ctx, `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (event_id, destination) DO NOTHING`)
	if err != nil {
		return out, 0, false, err
	}
	defer insert.Close()
	update, err := tx.PrepareContext(ctx, `UPDATE events SET filtered = ? WHERE id = ?`)
	if err != nil {
		return out, 0, false, err
	}
	defer update.Close()
	for _, r := range read {
		res, err := insert.ExecContext(ctx, r.id, d.Destination, ms(d.Now), ms(d.Now))
		if err != nil {
			return out, 0, false, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			out.Already++
			continue
		}
		if l := store.WithoutName(r.filtered, d.Destination); l != r.filtered {
			if _, err := update.ExecContext(ctx, l, r.id); err != nil {
				return out, 0, false, err
			}
		}
		out.Added++
	}
	return out, after, more, nil
}

// ListDeadLetters implements store.Admin.
func (s *Store) ListDeadLetters(ctx context.Context, q store.DeadQuery) ([]store.DeadLetter, error) {
	f := sqlstore.DeadLetters(q, dialect)
	page := f.Page("d.id", q.Before, q.Limit)
	rows, err := s.read.QueryContext(ctx, `SELECT d.id, d.event_id, e.source, e.key, d.destination, d.attempts,
		COALESCE(d.last_status, 0), COALESCE(d.last_error, ''), e.received_at, d.updated_at
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("list dead letters", err)
	}
	defer rows.Close()
	var out []store.DeadLetter
	for rows.Next() {
		var d store.DeadLetter
		var received, died int64
		if err := rows.Scan(&d.DeliveryID, &d.EventID, &d.Source, &d.Key, &d.Destination, &d.Attempts, &d.LastStatus, &d.LastError, &received, &died); err != nil {
			return nil, unavailable("list dead letters", err)
		}
		d.ReceivedAt, d.DiedAt = fromMS(received), fromMS(died)
		out = append(out, d)
	}
	return out, rows.Err()
}

// AddDelivery implements store.Admin, in one write transaction (SQLite's
// one writer: no sweep runs between its read and its write).
func (s *Store) AddDelivery(ctx context.Context, eventID int64, destination string, now time.Time, a store.AuditEntry) (int, error) {
	return s.change(ctx, false, a, now, func(tx *sql.Tx) (int, error) {
		var filtered string
		var dropped sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT filtered, body_dropped_at FROM events WHERE id = ?`, eventID).Scan(&filtered, &dropped)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("event %d: %w", eventID, store.ErrNotFound)
		}
		if err != nil {
			return 0, unavailable("add delivery", err)
		}
		if dropped.Valid {
			return 0, fmt.Errorf("event %d: %w", eventID, store.ErrBodyGone)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (event_id, destination) DO NOTHING`, eventID, destination, ms(now), ms(now))
		if err != nil {
			return 0, unavailable("add delivery", err)
		}
		n, _ := res.RowsAffected()
		if n == 0 {
			return 0, nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE events SET filtered = ? WHERE id = ?`, store.WithoutName(filtered, destination), eventID); err != nil {
			return 0, unavailable("add delivery", err)
		}
		return 1, nil
	})
}

// PurgeDeadLetters implements store.Admin.
func (s *Store) PurgeDeadLetters(ctx context.Context, q store.DeadQuery, dryRun bool, a store.AuditEntry) (int, error) {
	f := sqlstore.DeadLetters(q, dialect)
	where, args := f.Where(), f.Args()
	sel := `SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id WHERE ` + where
	return s.bulkChange(ctx, dryRun, a, time.Now(),
		func() (int, error) {
			return s.count(ctx, "count dead letters", `SELECT COUNT(*) FROM (`+sel+`)`, args...)
		},
		func(tx *sql.Tx, after int64) ([]int64, error) {
			return returningIDs(ctx, tx, `DELETE FROM deliveries WHERE id IN (`+sel+` AND d.id > ? ORDER BY d.id LIMIT ?) RETURNING id`,
				append(args, after, s.bulk)...)
		})
}

// SetPaused implements store.Admin.
func (s *Store) SetPaused(ctx context.Context, destination string, paused bool, now time.Time, a store.AuditEntry) error {
	_, err := s.change(ctx, false, a, now, func(tx *sql.Tx) (int, error) {
		var err error
		if paused {
			_, err = tx.ExecContext(ctx, `INSERT INTO destination_pauses (destination, paused_at) VALUES (?, ?) ON CONFLICT DO NOTHING`, destination, ms(now))
		} else {
			_, err = tx.ExecContext(ctx, `DELETE FROM destination_pauses WHERE destination = ?`, destination)
		}
		if err != nil {
			return 0, unavailable("pause", err)
		}
		return 1, nil
	})
	return err
}

// Paused implements store.Admin.
func (s *Store) Paused(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT destination, paused_at FROM destination_pauses`)
	if err != nil {
		return nil, unavailable("read pauses", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var d string
		var at int64
		if err := rows.Scan(&d, &at); err != nil {
			return nil, unavailable("read pauses", err)
		}
		out[d] = fromMS(at)
	}
	return out, rows.Err()
}

// Queues implements store.Admin.
func (s *Store) Queues(ctx context.Context, now time.Time) ([]store.Queue, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT d.destination, COUNT(*),
		SUM(CASE WHEN d.lease_expires_at > ? THEN 1 ELSE 0 END), MIN(e.received_at)
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.state = 'pending' GROUP BY d.destination ORDER BY d.destination`, ms(now))
	if err != nil {
		return nil, unavailable("read queues", err)
	}
	defer rows.Close()
	var out []store.Queue
	for rows.Next() {
		var q store.Queue
		var oldest int64
		if err := rows.Scan(&q.Destination, &q.Pending, &q.Leased, &oldest); err != nil {
			return nil, unavailable("read queues", err)
		}
		q.Oldest = fromMS(oldest)
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("read queues", err)
	}
	dead, err := s.countBy(ctx, "read queues", sqlstore.DeadByDestination)
	if err != nil {
		return nil, err
	}
	return store.MergeDead(out, dead), nil
}

// countBy runs a query of (name, count) rows into a map.
func (s *Store) countBy(ctx context.Context, what, query string, args ...any) (map[string]int64, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, unavailable(what, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, unavailable(what, err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(what, err)
	}
	return out, nil
}

// ListAudit implements store.Admin.
func (s *Store) ListAudit(ctx context.Context, before int64, limit int) ([]store.AuditEntry, error) {
	f := sqlstore.NewFilter(dialect)
	page := f.Page("id", before, limit)
	rows, err := s.read.QueryContext(ctx, `SELECT id, at, actor, action, target, count FROM audit WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("read audit", err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		var e store.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Count); err != nil {
			return nil, unavailable("read audit", err)
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// EffectCounts implements store.Admin.
func (s *Store) EffectCounts(ctx context.Context, now time.Time) (map[string]int64, error) {
	return s.countBy(ctx, "count effects", `SELECT state, COUNT(*) FROM effects GROUP BY state
		UNION ALL SELECT 'lease_expired', COUNT(*) FROM effects WHERE state = 'pending' AND lease_expires_at <= ?`, ms(now))
}
