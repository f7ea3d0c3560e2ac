package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/internal/sqlstore"
)

// dialect is PostgreSQL's, for the queries the backends share (sqlstore),
// on s's clock.
func (s *Store) dialect() sqlstore.Dialect {
	return sqlstore.Dialect{Numbered: true, StartsWith: true, Time: func(t time.Time) any { return s.toDB(t) }}
}

// ListEvents implements store.Admin.
func (s *Store) ListEvents(ctx context.Context, q store.EventQuery) ([]store.EventSummary, error) {
	f := sqlstore.Events(q, s.dialect())
	page := f.Page("e.id", q.Before, q.Limit)
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.source, e.key, e.type, e.keyless, e.content_type, `+bodySize+`, e.received_at, e.expires_at,
		`+sqlstore.EventState+`, (SELECT COUNT(*) FROM deliveries d WHERE d.event_id = e.id)
		FROM events e WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("list events", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.EventSummary, error) {
		var e store.EventSummary
		err := row.Scan(&e.ID, &e.Source, &e.Key, &e.Type, &e.Keyless, &e.ContentType, &e.Size, &e.ReceivedAt, &e.ExpiresAt, &e.State, &e.Deliveries)
		e.ReceivedAt, e.ExpiresAt = s.fromDB(e.ReceivedAt), s.fromDB(e.ExpiresAt)
		return e, err
	})
	if err != nil {
		return nil, unavailable("list events", err)
	}
	return out, nil
}

// EventContents implements store.Admin.
func (s *Store) EventContents(ctx context.Context, q store.EventQuery) ([]store.EventContent, error) {
	f := sqlstore.Events(q, s.dialect())
	page := f.Page("e.id", q.Before, q.Limit)
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.source, e.received_at, e.headers::text, `+bodyOf+`
		FROM events e `+withBody+` WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("read events", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.EventContent, error) {
		var e store.EventContent
		var header string
		err := row.Scan(&e.ID, &e.Source, &e.ReceivedAt, &header, &e.Body)
		e.ReceivedAt, e.Header = s.fromDB(e.ReceivedAt), store.DecodeHeader(header)
		return e, err
	})
	if err != nil {
		return nil, unavailable("read events", err)
	}
	return out, nil
}

// Event implements store.Admin.
func (s *Store) Event(ctx context.Context, id int64) (store.EventDetail, error) {
	var e store.EventDetail
	var header, filtered string
	var lastCopy, dropped *time.Time
	err := s.pool.QueryRow(ctx, `SELECT e.id, e.source, e.key, e.type, e.keyless, e.content_type, `+bodySize+`, e.received_at, e.expires_at,
		`+sqlstore.EventState+`, (SELECT COUNT(*) FROM deliveries d WHERE d.event_id = e.id), e.headers::text, `+bodyOf+`, e.copies, e.last_copy_at, e.filtered,
		`+bodyDroppedAt+`
		FROM events e `+withBody+` WHERE e.id = $1`, id).Scan(&e.ID, &e.Source, &e.Key, &e.Type, &e.Keyless, &e.ContentType, &e.Size, &e.ReceivedAt, &e.ExpiresAt,
		&e.State, &e.EventSummary.Deliveries, &header, &e.Body, &e.Copies, &lastCopy, &filtered, &dropped)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("event %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return e, unavailable("read event", err)
	}
	if filtered != "" {
		e.Filtered = strings.Split(filtered, ",")
	}
	e.ReceivedAt, e.ExpiresAt, e.Header = s.fromDB(e.ReceivedAt), s.fromDB(e.ExpiresAt), store.DecodeHeader(header)
	if lastCopy != nil {
		e.LastCopyAt = s.fromDB(*lastCopy)
	}
	if dropped != nil {
		e.BodyDroppedAt = s.fromDB(*dropped)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, destination, state, attempts, next_attempt_at, lease_expires_at,
		COALESCE(last_status, 0), COALESCE(last_error, ''), updated_at,
		COALESCE(order_entity, ''), COALESCE(order_text, ''), COALESCE(order_mode, ''), order_waiting, `+sqlstore.FirstAttempt+`
		FROM deliveries WHERE event_id = $1 ORDER BY destination`, id)
	if err != nil {
		return e, unavailable("read deliveries", err)
	}
	var firsts []*store.AttemptRecord // by delivery, as e.Deliveries
	e.Deliveries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.DeliveryDetail, error) {
		var d store.DeliveryDetail
		var lease, firstStarted *time.Time
		var entity string
		var firstMS int64
		var firstStatus int
		var firstResponse, firstScript, firstSent string
		err := row.Scan(&d.ID, &d.Destination, &d.State, &d.Attempts, &d.NextAttemptAt, &lease, &d.LastStatus, &d.LastError, &d.UpdatedAt,
			&entity, &d.Order.Version, &d.Order.Mode, &d.Order.Waiting,
			&firstStarted, &firstMS, &firstStatus, &firstResponse, &firstScript, &firstSent)
		var first *store.AttemptRecord
		if firstStarted != nil {
			first = sqlstore.FirstDelivered(s.fromDB(*firstStarted), firstMS, firstStatus, firstResponse, firstScript, firstSent)
		}
		firsts = append(firsts, first)
		_, d.Order.Entity = store.SplitOrderKey(entity)
		if lease != nil {
			d.LeaseExpiresAt = s.fromDB(*lease)
		}
		d.NextAttemptAt, d.UpdatedAt = s.fromDB(d.NextAttemptAt), s.fromDB(d.UpdatedAt)
		return d, err
	})
	if err != nil {
		return e, unavailable("read deliveries", err)
	}
	for i := range e.Deliveries {
		d := &e.Deliveries[i]
		rows, err := s.pool.Query(ctx, `SELECT attempt, started_at, duration_ms, status_code, error, outcome, response, script_digest, sent_digest
			FROM attempts WHERE delivery_id = $1 ORDER BY id`, d.ID)
		if err != nil {
			return e, unavailable("read attempts", err)
		}
		d.History, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AttemptRecord, error) {
			var a store.AttemptRecord
			var dur int64
			err := row.Scan(&a.Attempt, &a.StartedAt, &dur, &a.StatusCode, &a.Error, &a.Outcome, &a.Response, &a.ScriptDigest, &a.SentDigest)
			a.StartedAt, a.Duration = s.fromDB(a.StartedAt), time.Duration(dur)*time.Millisecond
			return a, err
		})
		if err != nil {
			return e, unavailable("read attempts", err)
		}
		d.History = sqlstore.History(firsts[i], d.History)
	}
	return e, nil
}

// RecordAudit implements store.Admin.
func (s *Store) RecordAudit(ctx context.Context, e store.AuditEntry) error {
	_, err := s.change(ctx, false, e, func(pgx.Tx) (int, error) { return e.Count, nil })
	return err
}

// change runs fn in a transaction with the audit entry (its Count set to
// what fn returns), or only counts with dryRun.
func (s *Store) change(ctx context.Context, dryRun bool, a store.AuditEntry, fn func(tx pgx.Tx) (int, error)) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if n, err = fn(tx); err != nil || dryRun {
			return err
		}
		if a.Action == "" {
			return nil
		}
		at := a.At
		if at.IsZero() {
			at = s.clock()
		}
		_, err = tx.Exec(ctx, `INSERT INTO audit (at, actor, action, target, count) VALUES ($1, $2, $3, $4, $5)`,
			s.toDB(at), a.Actor, a.Action, a.Target, n)
		return err
	})
	if err != nil {
		return 0, failed("change", err)
	}
	return n, nil
}

// Replay implements store.Admin, in one transaction.
func (s *Store) Replay(ctx context.Context, r store.Replay) (int, error) {
	f := sqlstore.Events(r.Events, s.dialect())
	events := `SELECT e.id FROM events e WHERE ` + f.Where()
	eventArgs := len(f.Args())
	// An event whose body was dropped has nothing to deliver: its
	// deliveries stay as they are.
	sel := `FROM deliveries WHERE event_id IN (` + events + ` AND NOT ` + bodyGone + `) AND NOT ` + leasedAt(f.Arg(s.toDB(r.Now)))
	if r.Destination != "" {
		sel += ` AND destination = ` + f.Arg(r.Destination)
	}
	if r.Dead {
		sel += ` AND state = 'dead'`
	}
	n, err := s.change(ctx, r.DryRun, r.Entry(), func(tx pgx.Tx) (int, error) {
		// FOR SHARE: a sweep on another replica passes these events by
		// (SKIP LOCKED) until the replay has committed, so it can never
		// delete what this replay requeues (see sweepEvents).
		lock := ` FOR SHARE`
		if r.DryRun {
			lock = ""
		}
		if !r.DryRun {
			// No day of bodies is dropped while this requeues (see
			// partitions.go).
			if _, err := tx.Exec(ctx, holdBodies); err != nil {
				return 0, err
			}
		}
		var found, gone int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE gone) FROM (SELECT e.id, `+bodyGone+` AS gone FROM events e WHERE `+f.Where()+lock+`) x`,
			f.Args()[:eventArgs]...).Scan(&found, &gone); err != nil {
			return 0, err
		}
		if found == 0 && r.OneEvent() {
			return 0, errNoEvent
		}
		if found > 0 && gone == found && r.OneEvent() {
			return 0, errBodyGone
		}
		if r.DryRun {
			var n int
			err := tx.QueryRow(ctx, `SELECT COUNT(*) `+sel, f.Args()...).Scan(&n)
			return n, err
		}
		tag, err := tx.Exec(ctx, `UPDATE deliveries SET `+requeueAt("$"+fmt.Sprint(eventArgs+1))+`
			WHERE id IN (SELECT id `+sel+` ORDER BY id FOR UPDATE)`, f.Args()...)
		if err != nil {
			return 0, err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", notifyChannel)
		return int(tag.RowsAffected()), err
	})
	if errors.Is(err, errNoEvent) {
		return 0, fmt.Errorf("replay: %w", store.ErrNotFound)
	}
	if errors.Is(err, errBodyGone) {
		return 0, fmt.Errorf("replay: %w", store.ErrBodyGone)
	}
	return n, err
}

// errBodyGone rolls a replay of one event whose body was dropped back.
var errBodyGone = errors.New("body gone")

// errNoEvent ends a replay of one event that is not stored.
var errNoEvent = errors.New("no such event")

// ListDeadLetters implements store.Admin.
func (s *Store) ListDeadLetters(ctx context.Context, q store.DeadQuery) ([]store.DeadLetter, error) {
	f := sqlstore.DeadLetters(q, s.dialect())
	page := f.Page("d.id", q.Before, q.Limit)
	rows, err := s.pool.Query(ctx, `SELECT d.id, d.event_id, e.source, e.key, d.destination, d.attempts,
		COALESCE(d.last_status, 0), COALESCE(d.last_error, ''), e.received_at, d.updated_at
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("list dead letters", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.DeadLetter, error) {
		var d store.DeadLetter
		err := row.Scan(&d.DeliveryID, &d.EventID, &d.Source, &d.Key, &d.Destination, &d.Attempts, &d.LastStatus, &d.LastError, &d.ReceivedAt, &d.DiedAt)
		d.ReceivedAt, d.DiedAt = s.fromDB(d.ReceivedAt), s.fromDB(d.DiedAt)
		return d, err
	})
	if err != nil {
		return nil, unavailable("list dead letters", err)
	}
	return out, nil
}

// AddDelivery implements store.Admin. The event's row is locked first: a
// sweep on another replica passes it by (SKIP LOCKED) until the new
// delivery, pending, keeps it.
func (s *Store) AddDelivery(ctx context.Context, eventID int64, destination string, now time.Time, a store.AuditEntry) (int, error) {
	now = s.toDB(now)
	n, err := s.change(ctx, false, a, func(tx pgx.Tx) (int, error) {
		if _, err := tx.Exec(ctx, holdBodies); err != nil {
			return 0, err
		}
		var filtered string
		var gone bool
		if err := tx.QueryRow(ctx, `SELECT filtered, `+bodyGone+` FROM events e WHERE id = $1 FOR UPDATE`, eventID).Scan(&filtered, &gone); err != nil {
			return 0, err
		}
		if gone {
			return 0, errBodyGone
		}
		tag, err := tx.Exec(ctx, `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at) VALUES ($1, $2, $3, $3)
			ON CONFLICT (event_id, destination) DO NOTHING`, eventID, destination, now)
		if err != nil || tag.RowsAffected() == 0 {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `UPDATE events SET filtered = $1 WHERE id = $2`, store.WithoutName(filtered, destination), eventID); err != nil {
			return 0, err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", notifyChannel)
		return 1, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("event %d: %w", eventID, store.ErrNotFound)
	}
	if errors.Is(err, errBodyGone) {
		return 0, fmt.Errorf("event %d: %w", eventID, store.ErrBodyGone)
	}
	return n, err
}

// AddDeliveries implements store.Admin, in transactions of s.bulk events
// (see store.Deliver). Each batch locks its events' rows, in id order,
// before it adds their deliveries, FOR NO KEY UPDATE (the lock its update
// of filtered takes anyway): a sweep on another replica passes them by
// (FOR UPDATE SKIP LOCKED) until the new deliveries, pending, keep them,
// and intake never waits on them (a duplicate's copies skip a locked
// event and are counted later); no day of bodies is dropped while it
// adds (holdBodies).
func (s *Store) AddDeliveries(ctx context.Context, d store.Deliver) (store.DeliverCount, error) {
	var out store.DeliverCount
	if d.OneEvent() {
		f := sqlstore.Events(d.Events, s.dialect())
		var found, gone int
		if err := s.pool.QueryRow(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE `+bodyGone+`) FROM events e WHERE `+f.Where(), f.Args()...).Scan(&found, &gone); err != nil {
			return out, unavailable("deliver", err)
		}
		if found == 0 {
			return out, fmt.Errorf("deliver: %w", store.ErrNotFound)
		}
		if gone == found {
			return out, fmt.Errorf("deliver: %w", store.ErrBodyGone)
		}
	}
	a := d.Entry()
	if a.At.IsZero() {
		a.At = s.clock()
	}
	var auditID int64
	for _, q := range store.SplitIDs(d.Events, s.bulk) {
		f := sqlstore.Events(q, s.dialect())
		if d.DryRun {
			var n, gone, already int
			args := append(slices.Clone(f.Args()), d.Destination)
			err := s.pool.QueryRow(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE gone), COUNT(*) FILTER (WHERE has AND NOT gone) FROM (SELECT `+bodyGone+` AS gone,
				EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.destination = $`+fmt.Sprint(len(args))+`) AS has FROM events e WHERE `+f.Where()+`) x`,
				args...).Scan(&n, &gone, &already)
			if err != nil {
				return out, unavailable("count deliver", err)
			}
			out.Added, out.Gone, out.Already = out.Added+n-gone-already, out.Gone+gone, out.Already+already
			continue
		}
		for after, more := int64(0), true; more; {
			err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, holdBodies); err != nil {
					return err
				}
				b, last, m, err := s.deliverBatch(ctx, tx, f, d, after)
				if err != nil {
					return err
				}
				switch {
				case auditID == 0:
					err = tx.QueryRow(ctx, `INSERT INTO audit (at, actor, action, target, count) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
						s.toDB(a.At), a.Actor, a.Action, a.Target, b.Added).Scan(&auditID)
				case b.Added > 0:
					_, err = tx.Exec(ctx, `UPDATE audit SET count = count + $1 WHERE id = $2`, b.Added, auditID)
				}
				if err == nil && b.Added > 0 {
					_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", notifyChannel)
				}
				if err == nil {
					out.Added, out.Already, out.Gone = out.Added+b.Added, out.Already+b.Already, out.Gone+b.Gone
					after, more = last, m && q.IDs == nil // a share of ids is one batch
				}
				return err
			})
			if err != nil {
				// The batches committed before stay, with their audit.
				return out, failed("deliver", err)
			}
		}
	}
	return out, nil
}

// deliverBatch adds d's delivery to the next s.bulk events f selects after
// the id after, in tx, and returns what it did, the last id it read and
// whether more may follow.
func (s *Store) deliverBatch(ctx context.Context, tx pgx.Tx, f *sqlstore.Filter, d store.Deliver, after int64) (store.DeliverCount, int64, bool, error) {
	var out store.DeliverCount
	args := append(slices.Clone(f.Args()), after, s.bulk)
	rows, err := tx.Query(ctx, `SELECT e.id, e.filtered, `+bodyGone+` FROM events e WHERE `+f.Where()+
		fmt.Sprintf(` AND e.id > $%d ORDER BY e.id LIMIT $%d FOR NO KEY UPDATE`, len(args)-1, len(args)), args...)
	if err != nil {
		return out, 0, false, err
	}
	filtered := map[int64]string{}
	var ids []int64
	read := 0
	for rows.Next() {
		var id int64
		var list string
		var gone bool
		if err := rows.Scan(&id, &list, &gone); err != nil {
			rows.Close()
			return out, 0, false, err
		}
		read, after = read+1, id
		if gone {
			out.Gone++
			continue
		}
		ids, filtered[id] = append(ids, id), list
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, 0, false, err
	}
	if len(ids) == 0 {
		return out, after, read == s.bulk, nil
	}
	// The unique (event, destination) decides: one already there (made
	// by the route, an earlier call, a concurrent one) stays.
	rows, err = tx.Query(ctx, `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at)
		SELECT id, $1, $2, $2 FROM unnest($3::bigint[]) AS id ON CONFLICT (event_id, destination) DO NOTHING RETURNING event_id`,
		d.Destination, s.toDB(d.Now), ids)
	if err != nil {
		return out, 0, false, err
	}
	added, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return out, 0, false, err
	}
	var changed []int64
	var lists []string
	for _, id := range added {
		if l := store.WithoutName(filtered[id], d.Destination); l != filtered[id] {
			changed, lists = append(changed, id), append(lists, l)
		}
	}
	if len(changed) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE events e SET filtered = v.filtered FROM unnest($1::bigint[], $2::text[]) AS v(id, filtered) WHERE e.id = v.id`,
			changed, lists); err != nil {
			return out, 0, false, err
		}
	}
	out.Added, out.Already = len(added), len(ids)-len(added)
	return out, after, read == s.bulk, nil
}

// PurgeDeadLetters implements store.Admin.
func (s *Store) PurgeDeadLetters(ctx context.Context, q store.DeadQuery, dryRun bool, a store.AuditEntry) (int, error) {
	f := sqlstore.DeadLetters(q, s.dialect())
	sel := `SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id WHERE ` + f.Where()
	return s.change(ctx, dryRun, a, func(tx pgx.Tx) (int, error) {
		if dryRun {
			var n int
			err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM (`+sel+`) x`, f.Args()...).Scan(&n)
			return n, err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE id IN (`+sel+`)`, f.Args()...)
		return int(tag.RowsAffected()), err
	})
}

// SetPaused implements store.Admin.
func (s *Store) SetPaused(ctx context.Context, destination string, paused bool, now time.Time, a store.AuditEntry) error {
	_, err := s.change(ctx, false, a, func(tx pgx.Tx) (int, error) {
		var err error
		if paused {
			_, err = tx.Exec(ctx, `INSERT INTO destination_pauses (destination, paused_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`, destination, s.toDB(now))
		} else {
			_, err = tx.Exec(ctx, `DELETE FROM destination_pauses WHERE destination = $1`, destination)
			if err == nil {
				_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", notifyChannel)
			}
		}
		return 1, err
	})
	return err
}

// Paused implements store.Admin.
func (s *Store) Paused(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination, paused_at FROM destination_pauses`)
	if err != nil {
		return nil, unavailable("read pauses", err)
	}
	out := map[string]time.Time{}
	var d string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&d, &at}, func() error { out[d] = s.fromDB(at); return nil })
	if err != nil {
		return nil, unavailable("read pauses", err)
	}
	return out, nil
}

// Queues implements store.Admin.
func (s *Store) Queues(ctx context.Context, now time.Time) ([]store.Queue, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.destination, COUNT(*), COUNT(*) FILTER (WHERE d.lease_expires_at > $1), MIN(e.received_at)
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.state = 'pending' GROUP BY d.destination ORDER BY d.destination`, s.toDB(now))
	if err != nil {
		return nil, unavailable("read queues", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Queue, error) {
		var q store.Queue
		err := row.Scan(&q.Destination, &q.Pending, &q.Leased, &q.Oldest)
		q.Oldest = s.fromDB(q.Oldest)
		return q, err
	})
	if err != nil {
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
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, unavailable(what, err)
	}
	out := map[string]int64{}
	var name string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error { out[name] = n; return nil }); err != nil {
		return nil, unavailable(what, err)
	}
	return out, nil
}

// ListAudit implements store.Admin.
func (s *Store) ListAudit(ctx context.Context, before int64, limit int) ([]store.AuditEntry, error) {
	f := sqlstore.NewFilter(s.dialect())
	page := f.Page("id", before, limit)
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, action, target, count FROM audit WHERE `+f.Where()+page, f.Args()...)
	if err != nil {
		return nil, unavailable("read audit", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AuditEntry, error) {
		var e store.AuditEntry
		err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Target, &e.Count)
		e.At = s.fromDB(e.At)
		return e, err
	})
	if err != nil {
		return nil, unavailable("read audit", err)
	}
	return out, nil
}

// EffectCounts implements store.Admin.
func (s *Store) EffectCounts(ctx context.Context, now time.Time) (map[string]int64, error) {
	return s.countBy(ctx, "count effects", `SELECT state, COUNT(*) FROM effects GROUP BY state
		UNION ALL SELECT 'lease_expired', COUNT(*) FROM effects WHERE state = 'pending' AND lease_expires_at <= $1`, s.toDB(now))
}
