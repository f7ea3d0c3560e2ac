package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Bodies and attempts by day. Expiring a day of events row by row is a
// DELETE of every body and attempt and, after it, a VACUUM of the space they
// held: work that grows with the traffic and competes with intake for the
// same disk. Here a body, and its event's attempts, are stored in the
// partition of the day they may go (drop_at: the end of the source's
// body_retention, else of the key's window), and that day goes as one DROP
// TABLE once it has passed, after moving out what a delivery still needs.
// migrations/0017_partitions.sql has the tables.
//
// What the drop keeps: an event with a delivery pending (to deliver) or dead
// (the operator's, to replay), exactly the events the sweep keeps back. Their
// rows move to the kept partition (drop_at 'infinity') first, in a pass of
// their own, and once more in the drop's transaction, under the locks that
// make it exact: the watermark row (bodies_dropped_before), which a replay
// and a new delivery hold FOR SHARE while they requeue, so none is half
// done; and the partitioned tables, ACCESS EXCLUSIVE for the few
// milliseconds of the drop. The claim is not part of it: events keeps its
// unique (source, key) unpartitioned, and its rows are deleted by the sweep.

// partitioned are the tables kept by day: each has a DEFAULT partition
// <name>_kept and day partitions <name>_dYYYYMMDD. The drop locks them in
// this order, the one every other transaction takes them in: a commit
// records attempts (its outcomes) before it inserts bodies, and the sweep's
// cascade from an event reaches its deliveries' attempts before its body.
var partitioned = []string{"attempts", "event_bodies"}

// partitionLock names the advisory lock (see schemaLock) one replica holds
// while it makes and drops partitions; the others pass.
const partitionLock = "partitions"

// partitionsAhead is how far ahead of the latest drop_at seen day partitions
// are made, and partitionsMax how far ahead of now at most (a body due later
// waits in the kept partition until its day is in reach).
const (
	partitionsAhead = 24 * time.Hour
	partitionsMax   = 400 * 24 * time.Hour
)

const day = 24 * time.Hour

// withBody joins an events row e to its body b, in the partition its
// body_at names (so a lookup reads one partition's index).
const withBody = `LEFT JOIN event_bodies b ON b.event_id = e.id AND b.drop_at = e.body_at`

// bodyOf is e's body, with withBody: an event stored before the partitions
// (body_at NULL) keeps its body in its own row.
const bodyOf = `CASE WHEN e.body_at IS NULL THEN e.body ELSE b.body END`

// droppedBefore is the watermark: every body with a finite body_at before it
// is gone, with its day.
const droppedBefore = `(SELECT value::timestamptz FROM oncehook_meta WHERE name = 'bodies_dropped_before')`

// bodyGone is true for an event e whose body was dropped, by its
// body_retention (body_dropped_at) or with its day.
const bodyGone = `(e.body_dropped_at IS NOT NULL OR COALESCE(e.body_at < ` + droppedBefore + `, FALSE))`

// bodyDroppedAt is when e's body went: for a day dropped, the instant the
// body was due to go (the day's drop came after it, by less than a day).
const bodyDroppedAt = `COALESCE(e.body_dropped_at, CASE WHEN e.body_at < ` + droppedBefore + ` THEN e.body_at END)`

// bodySize is the length of e's body, 0 once it is gone.
const bodySize = `CASE WHEN ` + bodyGone + ` THEN 0 ELSE COALESCE(e.body_size, length(e.body)) END`

// holdBodies is the first statement of a transaction that requeues
// deliveries (a replay, a new delivery): no day is dropped until it has
// committed, and one dropped before it is seen as gone (bodyGone).
const holdBodies = `SELECT value FROM oncehook_meta WHERE name = 'bodies_dropped_before' FOR SHARE`

// maintainPartitions makes the day partitions that intake will need and
// drops the days that have passed, at most once a minute of now's clock (a
// clock that goes back runs it again). It returns how many rows of the kept
// partitions it deleted; a day dropped is not counted row by row.
func (s *Store) maintainPartitions(ctx context.Context, now time.Time) (int, error) {
	if last := s.partitionsAt.Load(); last != 0 && now.UnixNano() >= last && now.UnixNano() < last+int64(time.Minute) {
		return 0, nil
	}
	var n int
	err := s.withPartitionLock(ctx, func(conn *pgxpool.Conn) error {
		err := s.makePartitions(ctx, conn, now)
		if err == nil {
			n, err = s.dropPartitions(ctx, conn, now)
		}
		if err == nil {
			s.partitionsAt.Store(now.UnixNano())
		}
		return err
	})
	if errors.Is(err, errBusy) {
		// Another transaction held a table past the lock timeout: not
		// marked done, the next sweep tries again.
		s.log.Debug("partitions: a lock was busy; the next sweep tries again")
		return 0, nil
	}
	return n, err
}

// preparePartitions makes the day partitions from today to the horizon,
// unless another replica is at it.
func (s *Store) preparePartitions(ctx context.Context) error {
	err := s.withPartitionLock(ctx, func(conn *pgxpool.Conn) error {
		return s.makePartitions(ctx, conn, s.toDB(s.clock()))
	})
	if errors.Is(err, errBusy) {
		return nil // the sweep makes them
	}
	return err
}

// withPartitionLock runs fn on a connection that holds partitionLock, or
// does nothing when another replica holds it.
func (s *Store) withPartitionLock(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return unavailable("partitions", err)
	}
	defer conn.Release()
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+schemaLock+`)`, partitionLock).Scan(&mine); err != nil {
		return unavailable("partitions: lock", err)
	}
	if !mine {
		return nil // another replica is at it
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+schemaLock+`)`, partitionLock)
	return fn(conn)
}

// dayOf is the start of t's day, in UTC.
func dayOf(t time.Time) time.Time { return t.UTC().Truncate(day) }

func partitionName(table string, d time.Time) string {
	return table + "_d" + d.Format("20060102")
}

// partitions lists table's day partitions by their day, oldest first.
func partitions(ctx context.Context, conn *pgxpool.Conn, table string) ([]time.Time, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass`, table)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var days []time.Time
	for _, n := range names {
		if d, err := time.Parse("20060102", strings.TrimPrefix(n, table+"_d")); err == nil && strings.HasPrefix(n, table+"_d") {
			days = append(days, d)
		}
	}
	slices.SortFunc(days, time.Time.Compare)
	return days, nil
}

// makePartitions makes the day partitions from now's day to a day past the
// latest drop_at known (this replica's commits, and what waits in the kept
// partition for its day), moving into each what waits there for it.
func (s *Store) makePartitions(ctx context.Context, conn *pgxpool.Conn, now time.Time) error {
	from := dayOf(now)
	until := later(from.Add(2*day), dayOf(now.Add(s.horizon)).Add(day))
	if seen := s.latestDrop.Load(); seen != 0 {
		until = later(until, dayOf(time.Unix(0, seen)).Add(partitionsAhead+day))
	}
	var waiting *time.Time
	if err := conn.QueryRow(ctx, `SELECT max(drop_at) FROM event_bodies_kept WHERE drop_at < 'infinity'`).Scan(&waiting); err != nil {
		return unavailable("partitions", err)
	}
	if waiting != nil {
		until = later(until, dayOf(*waiting).Add(day))
	}
	if limit := from.Add(partitionsMax); until.After(limit) {
		until = limit
	}
	for _, table := range partitioned {
		have, err := partitions(ctx, conn, table)
		if err != nil {
			return unavailable("partitions", err)
		}
		for d := from; d.Before(until); d = d.Add(day) {
			if slices.ContainsFunc(have, d.Equal) {
				continue
			}
			start := time.Now()
			err := makePartition(ctx, conn, table, d)
			s.log.Debug("partition made", "name", partitionName(table, d), "took", time.Since(start), "err", err)
			if busy(err) {
				return errBusy
			}
			if err != nil {
				return unavailable("make partition "+partitionName(table, d), err)
			}
		}
	}
	return nil
}

// makePartition makes table's partition of day d: empty, with a CHECK of its
// range so that attaching it reads nothing, then filled with what waited in
// the kept partition for d, then attached, in one transaction.
func makePartition(ctx context.Context, conn *pgxpool.Conn, table string, d time.Time) error {
	name := partitionName(table, d)
	lo, hi := d.Format(time.RFC3339), d.Add(day).Format(time.RFC3339)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range []string{
			`SET LOCAL lock_timeout = '500ms'`,
			// The kept partition first, whole: ATTACH needs it so, and a
			// sweep deleting its rows (an event's cascade) must not hold
			// them half way.
			fmt.Sprintf(`LOCK TABLE %s_kept IN ACCESS EXCLUSIVE MODE`, table),
			fmt.Sprintf(`CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS)`, name, table),
			fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT %s_range CHECK (drop_at >= '%s' AND drop_at < '%s')`, name, name, lo, hi),
			fmt.Sprintf(`WITH m AS (DELETE FROM %s_kept WHERE drop_at >= '%s' AND drop_at < '%s' RETURNING *) INSERT INTO %s SELECT * FROM m`,
				table, lo, hi, name),
			fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`, table, name, lo, hi),
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// keepSQL moves the bodies and attempts of the events with a finite body_at
// before $1 that a delivery still needs (pending or dead) to the kept
// partitions, and marks their events so (body_at 'infinity'; a
// body_retention they had is kept in body_expires_at, for dropBodies).
const keepSQL = `WITH k AS (
		SELECT DISTINCT e.id, e.body_at FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.state IN ('pending', 'dead') AND e.body_at < $1
	), b AS (
		UPDATE event_bodies SET drop_at = 'infinity' WHERE drop_at < $1 AND event_id IN (SELECT id FROM k)
	), a AS (
		UPDATE attempts SET drop_at = 'infinity' WHERE drop_at < $1
		AND delivery_id IN (SELECT d.id FROM deliveries d WHERE d.event_id IN (SELECT id FROM k))
	)
	UPDATE events e SET body_at = 'infinity', body_expires_at = CASE WHEN k.body_at < e.expires_at THEN k.body_at END
	FROM k WHERE e.id = k.id`

// dropPartitions drops the day partitions that ended by now's day, and the
// rows of the kept partitions due before it, keeping what a delivery needs.
func (s *Store) dropPartitions(ctx context.Context, conn *pgxpool.Conn, now time.Time) (int, error) {
	until := dayOf(now)
	var ahead bool // until is past the watermark
	if err := conn.QueryRow(ctx, `SELECT $1::timestamptz > `+droppedBefore, until).Scan(&ahead); err != nil {
		return 0, unavailable("partitions", err)
	}
	gone := map[string][]time.Time{}
	some := false
	for _, table := range partitioned {
		have, err := partitions(ctx, conn, table)
		if err != nil {
			return 0, unavailable("partitions", err)
		}
		for _, d := range have {
			if !d.Add(day).After(until) {
				gone[table] = append(gone[table], d)
				some = true
			}
		}
	}
	if !some && !ahead {
		return 0, nil
	}
	// The bulk of what is kept moves first, outside the drop's locks, so
	// that the drop itself moves only what was requeued since.
	start := time.Now()
	if _, err := conn.Exec(ctx, keepSQL, until); err != nil {
		return 0, unavailable("partitions: keep", err)
	}
	moved := time.Since(start)
	var n int
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// The watermark first: a replay that holds it commits before this
		// goes on, and is seen by keepSQL below.
		if _, err := tx.Exec(ctx, `UPDATE oncehook_meta SET value = $1::timestamptz::text WHERE name = 'bodies_dropped_before'
			AND value::timestamptz < $1`, until); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(partitioned, ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, keepSQL, until); err != nil {
			return err
		}
		n = 0
		for _, table := range partitioned {
			tag, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s_kept WHERE drop_at < $1`, table), until)
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
			// Detached here, dropped after the commit: a DROP of a day's
			// files (a gigabyte for a million bodies) took 0.4 s for 300,000
			// here, all of it under the lock that holds intake back; a
			// detach changes the catalog only.
			for _, d := range gone[table] {
				if _, err := tx.Exec(ctx, `ALTER TABLE `+table+` DETACH PARTITION `+partitionName(table, d)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if busy(err) {
		return 0, errBusy
	}
	if err != nil {
		return 0, unavailable("drop partitions", err)
	}
	locked := time.Since(start) - moved
	if err := dropDetached(ctx, conn); err != nil {
		return n, unavailable("drop partitions", err)
	}
	for table, days := range gone {
		for _, d := range days {
			s.log.Debug("dropped a day of "+table, "day", d.Format(time.DateOnly))
		}
	}
	s.log.Debug("partitions dropped", "before", until.Format(time.DateOnly), "keep", moved, "locked", locked, "drop", time.Since(start)-moved-locked)
	return n, nil
}

// dropDetached drops the day tables no longer attached: the ones this
// replica detached a moment ago, and any a replica detached before it died.
// Nothing reads them (detached, they are no partition of anything), so the
// DROP holds no lock another transaction waits for.
func dropDetached(ctx context.Context, conn *pgxpool.Conn) error {
	var names []string
	for _, table := range partitioned {
		rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c
			WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND NOT c.relispartition
			AND c.relname LIKE $1`, table+`\_d%`)
		if err != nil {
			return err
		}
		more, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		names = append(names, more...)
	}
	for _, name := range names {
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// noteDrop remembers the latest drop_at this replica committed, for
// makePartitions.
func (s *Store) noteDrop(t time.Time) {
	for {
		old := s.latestDrop.Load()
		if t.UnixNano() <= old || s.latestDrop.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

// errBusy is a drop that could not take its locks in time.
var errBusy = errors.New("partitions busy")

// busy is a lock wait that ran out (lock_timeout, 55P03) or a deadlock
// (40P01): the transaction was rolled back, nothing changed.
func busy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
