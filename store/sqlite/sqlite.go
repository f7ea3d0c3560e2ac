// Package sqlite is oncehook's embedded store: one SQLite file in WAL mode,
// with synchronous=FULL by default so that a commit is on disk before intake
// answers 200.
//
// SQLite has one writer at a time, so all writes go through a single
// connection; readers use a pool of their own. A single-event commit costs an
// fsync (about 4k/s on a typical disk), which is why intake reaches this store
// through the group committer: many requests' claims share one transaction.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Synchronous levels accepted by Open. FULL fsyncs the WAL on every commit;
// NORMAL may lose the last commits on power loss (not on a process crash).
var synchronousLevels = map[string]bool{"OFF": true, "NORMAL": true, "FULL": true, "EXTRA": true}

// Options tune the SQLite store.
type Options struct {
	// Synchronous is SQLite's synchronous pragma: FULL (default), EXTRA,
	// NORMAL or OFF. Anything below FULL weakens "durable before 200".
	Synchronous string
	// BulkBatch bounds the rows one transaction of an operator's bulk
	// change (replay, retry, purge) touches (default 1,000): SQLite has
	// one writer, and intake's commits wait behind it.
	BulkBatch int
}

// walSizeLimit is the size the write-ahead log is cut back to once it has
// been checkpointed (journal_size_limit). Without it, a WAL that one large
// batch grew (40 bodies of 5 MiB: 201 MiB) stays that size on disk for
// good, since SQLite reuses the file rather than shrinking it.
const walSizeLimit = 64 << 20

// Store is the SQLite backend of store.Store.
type Store struct {
	write *sql.DB // exactly one connection: SQLite's single writer
	read  *sql.DB // a pool of read-only connections (WAL lets them run beside the writer)
	stmt  statements
	id    string
	bulk  int       // Options.BulkBatch
	waits lockWaits // the writer's waits for the write lock (lock.go)
}

// statements are prepared once on the writer: parsing SQL on every
// transaction showed up as a tenth of intake's CPU.
type statements struct {
	insertEvent, storedExpiry, insertDelivery, handOff, leaseDue, loadEvent, insertBody *sql.Stmt
	release, finish, firstSuccess, retry, insertAttempt, addStat, addCopies             *sql.Stmt
	effects                                                                             map[string]*sql.Stmt
	order                                                                               map[string]*sql.Stmt // orderSQL
}

func (s *Store) prepare(ctx context.Context) error {
	for dst, query := range map[**sql.Stmt]string{
		&s.stmt.insertEvent:    insertEventSQL,
		&s.stmt.storedExpiry:   storedExpirySQL,
		&s.stmt.insertDelivery: insertDeliverySQL,
		&s.stmt.handOff: `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at, lease_token, lease_expires_at, attempts)
			VALUES (?, ?, ?, ?, ?, ?, 1)`,
		// A lease counts the attempt it is for (see store.Store's
		// LeaseDeliveries): an attempt that never reports is still one.
		&s.stmt.leaseDue: `UPDATE deliveries SET lease_token = ?, lease_expires_at = ?, next_attempt_at = ?, updated_at = ?,
				attempts = attempts + 1
			WHERE id IN (
				SELECT id FROM deliveries
				WHERE state = 'pending' AND next_attempt_at <= ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
				AND destination NOT IN (SELECT value FROM json_each(?)) AND order_entity IS NULL
				ORDER BY next_attempt_at LIMIT ?)
			RETURNING id, event_id, destination, attempts`,
		&s.stmt.loadEvent: `SELECT e.source, e.key, e.content_type, e.headers, COALESCE(b.body, e.body), e.received_at, e.trace, e.type
			FROM events e LEFT JOIN bodies b ON b.event_id = e.id WHERE e.id = ?`,
		&s.stmt.insertBody: insertBodySQL,
		&s.stmt.release: `UPDATE deliveries SET lease_token = NULL, lease_expires_at = NULL, next_attempt_at = ?, updated_at = ?,
				attempts = MAX(attempts - 1, 0)
			WHERE id = ? AND lease_token = ?`,
		&s.stmt.finish: `UPDATE deliveries SET state = ?, attempts = ?, lease_token = NULL, lease_expires_at = NULL,
			last_status = ?, last_error = ?, updated_at = ? WHERE id = ? AND lease_token = ?`,
		// A first attempt that succeeded is kept on the delivery's row, not
		// in attempts (#30): the one write of the common outcome. Once
		// that place is taken (a replay's success), the attempt is a row.
		&s.stmt.firstSuccess: `UPDATE deliveries SET state = 'delivered', attempts = 1, lease_token = NULL, lease_expires_at = NULL,
			last_status = ?, last_error = ?, updated_at = ?,
			first_started_at = ?, first_duration_ms = ?, first_status = ?, first_response = ?, first_script_digest = ?, first_sent_digest = ?
			WHERE id = ? AND lease_token = ? AND first_started_at IS NULL`,
		&s.stmt.retry: `UPDATE deliveries SET attempts = ?, next_attempt_at = ?, lease_token = NULL, lease_expires_at = NULL,
			last_status = ?, last_error = ?, updated_at = ? WHERE id = ? AND lease_token = ?`,
		&s.stmt.addStat:   addStatSQL,
		&s.stmt.addCopies: addCopiesSQL,
		&s.stmt.insertAttempt: `INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, status_code, error, outcome, response, script_digest, sent_digest)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	} {
		st, err := s.write.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		*dst = st
	}
	s.stmt.order = map[string]*sql.Stmt{}
	for _, query := range orderSQL {
		st, err := s.write.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		s.stmt.order[query] = st
	}
	s.stmt.effects = map[string]*sql.Stmt{}
	for _, query := range []string{loadEffectSQL, upsertEffectSQL, endAttemptSQL, startAttemptSQL, auditEffectSQL} {
		st, err := s.write.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		s.stmt.effects[query] = st
	}
	return nil
}

var _ store.Store = (*Store)(nil)

// The claim's statements, as text: the writer prepares them (statements),
// and a caller's own transaction (TxDriver) runs the same text.
const (
	insertEventSQL = `INSERT INTO events (source, key, keyless, content_type, headers, body, received_at, expires_at, type, filtered, trace, body_expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source, key) DO NOTHING`
	storedExpirySQL   = `SELECT expires_at FROM events WHERE source = ? AND key = ?`
	insertDeliverySQL = `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at,
			order_entity, order_version, order_text, order_mode, order_deliver_stale) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertBodySQL = `INSERT INTO bodies (event_id, body) VALUES (?, ?)`
)

// Open opens (creating if needed) the database at path and applies the
// embedded migrations.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	sync := strings.ToUpper(opts.Synchronous)
	if sync == "" {
		sync = "FULL"
	}
	if !synchronousLevels[sync] {
		return nil, fmt.Errorf("sqlite: synchronous %q: want FULL, EXTRA, NORMAL or OFF", opts.Synchronous)
	}
	pragmas := url.Values{}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") || strings.Contains(path, "mode=memory") {
		return nil, fmt.Errorf("sqlite: path %q: want a file (an in-memory database is not durable)", path)
	}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(" + sync + ")", "busy_timeout(10000)", "foreign_keys(ON)", "cache_size(-32768)",
		fmt.Sprintf("journal_size_limit(%d)", walSizeLimit)} {
		pragmas.Add("_pragma", p)
	}
	writeDSN := "file:" + path + "?" + pragmas.Encode() + "&_txlock=immediate"
	write, err := sql.Open("sqlite", writeDSN)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	s := &Store{write: write, bulk: opts.BulkBatch}
	if s.bulk <= 0 {
		s.bulk = 1000
	}
	if err := s.migrate(ctx, migrations); err != nil {
		write.Close()
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		write.Close()
		return nil, err
	}
	if err := write.QueryRowContext(ctx, "SELECT value FROM oncehook_meta WHERE name = 'store_id'").Scan(&s.id); err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: read store id: %w", err)
	}
	pragmas.Add("_pragma", "query_only(ON)")
	read, err := sql.Open("sqlite", "file:"+path+"?"+pragmas.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	s.read = read
	return s, nil
}

// migrate applies, in order, every embedded migration not yet applied
// (see sqlstore.Migrations for their numbering). The highest version
// applied is kept in SQLite's user_version, so no extra table is needed.
// Until 0018 the files were numbered 1, 2, 3... without a gap, and
// user_version counted them: the count and the highest number agree, so a
// database migrated before reads the same here.
func (s *Store) migrate(ctx context.Context, fsys fs.FS) error {
	list, err := sqlstore.Migrations(fsys, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	var version int
	if err := s.write.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("sqlite: read schema version: %w", err)
	}
	for _, m := range list {
		if m.Version <= version {
			continue
		}
		if err := s.migrateOne(ctx, m.Name, m.SQL, m.Version); err != nil {
			return err
		}
	}
	return nil
}

// migrateOne applies one migration and records its version, in one
// transaction.
func (s *Store) migrateOne(ctx context.Context, name, body string, version int) error {
	tx, done, err := s.begin(ctx, "migrate "+name)
	if err != nil {
		return err
	}
	defer done()
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", name, err)
	}
	return nil
}

// jsonList is a list of names as a JSON array, for json_each.
func jsonList(names []string) string {
	if len(names) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(names)
	return string(b)
}

func unavailable(op string, err error) error {
	return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrUnavailable, err)
}

// failed wraps an error of a write: ErrRejected when SQLite refused the
// values themselves (a constraint, a value too big), so that the group
// committer can retry the other requests of the batch without them; else
// ErrUnavailable (disk full, I/O error, a closed store).
func failed(op string, err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE:
			return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrRejected, err)
		}
	}
	return unavailable(op, err)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v) }

// Commit implements store.Store: claims, outcomes and leases in one
// IMMEDIATE transaction, which holds SQLite's write lock from its start, so
// no other writer can lease the same rows in between. While another
// connection holds the lock, it waits until ctx ends (begin).
func (s *Store) Commit(ctx context.Context, b store.Batch) (store.Committed, error) {
	tx, done, err := s.begin(ctx, "begin")
	if err != nil {
		return store.Committed{}, err
	}
	defer done()
	defer tx.Rollback()
	// The statements run without ctx's cancellation, which the transaction
	// keeps: database/sql rolls it back when ctx ends, and the next
	// statement fails. The driver watches a cancellable context with a
	// goroutine and a channel per statement, to interrupt it midway: 4% of
	// the gateway's CPU under load, for statements of microseconds.
	ctx = context.WithoutCancel(ctx)
	l := b.Lease
	if l.Max > 0 && l.Now.IsZero() {
		l.Now = time.Now()
	}
	var out store.Committed
	token := ""
	if l.Max > 0 {
		token = store.NewLeaseToken()
	}
	// Outcomes first: a delivery whose lease ran out while its outcome
	// waited for this commit must be recorded, not leased again below.
	if out.OrderedDue, err = s.complete(ctx, tx, b.Outcomes); err != nil {
		return store.Committed{}, err
	}
	if out.Claims, out.Leased, err = s.claim(ctx, tx, s.claimStatements(ctx, tx), b.Events, l, token, &out.OrderedDue); err != nil {
		return store.Committed{}, err
	}
	if l.Due && len(out.Leased) < l.Max {
		due, err := s.leaseDue(ctx, tx, l.Now, l.For, l.Max-len(out.Leased), token, l.Held)
		if err != nil {
			return store.Committed{}, err
		}
		out.Leased = append(out.Leased, due...)
	}
	if l.Due && len(out.Leased) < l.Max {
		ordered, err := s.leaseOrdered(ctx, tx, l, l.Max-len(out.Leased), token, b.Shard)
		if err != nil {
			return store.Committed{}, err
		}
		out.Leased = append(out.Leased, ordered...)
	}
	if out.Effects, err = applyEffects(ctx, &preparedDB{ctx: ctx, tx: tx, stmts: s.stmt.effects}, b.Effects); err != nil {
		return store.Committed{}, err
	}
	if len(b.Stats) > 0 {
		if err := addStats(ctx, tx.StmtContext(ctx, s.stmt.addStat), b.Shard, b.Stats); err != nil {
			return store.Committed{}, err
		}
	}
	if len(b.Copies) > 0 {
		if err := addCopies(ctx, tx.StmtContext(ctx, s.stmt.addCopies), b.Copies); err != nil {
			return store.Committed{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return store.Committed{}, unavailable("commit", err)
	}
	return out, nil
}

// statement is what claim runs a statement through: the writer's prepared
// one, bound to its transaction, or text on a caller's (textStatement).
type statement interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, args ...any) *sql.Row
}

// claimStatements are the statements claim runs for every event.
type claimStatements struct {
	insertEvent, storedExpiry, insertDelivery, insertBody statement
}

// claimStatements are the writer's prepared ones, in tx.
func (s *Store) claimStatements(ctx context.Context, tx *sql.Tx) claimStatements {
	return claimStatements{
		insertEvent:    tx.StmtContext(ctx, s.stmt.insertEvent),
		storedExpiry:   tx.StmtContext(ctx, s.stmt.storedExpiry),
		insertDelivery: tx.StmtContext(ctx, s.stmt.insertDelivery),
		insertBody:     &lazyStatement{tx: tx, stmt: s.stmt.insertBody}, // few events keep their body apart
	}
}

// lazyStatement is a prepared statement bound to tx when first run.
type lazyStatement struct {
	tx          *sql.Tx
	stmt, bound *sql.Stmt
}

func (l *lazyStatement) in(ctx context.Context) *sql.Stmt {
	if l.bound == nil {
		l.bound = l.tx.StmtContext(ctx, l.stmt)
	}
	return l.bound
}

func (l *lazyStatement) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return l.in(ctx).ExecContext(ctx, args...)
}

func (l *lazyStatement) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	return l.in(ctx).QueryRowContext(ctx, args...)
}

// textStatement runs one statement as text on a caller's transaction.
type textStatement struct {
	tx    *sql.Tx
	query string
}

func (t textStatement) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.query, args...)
}

func (t textStatement) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.query, args...)
}

// claim stores the events that are new. The claim is the INSERT ... ON
// CONFLICT DO NOTHING: a row inserted (its rowid is the event's id) means
// this call created the event; none means the key was already there (stored
// earlier, or earlier in this same batch). Exec and the rowid, rather than
// RETURNING through a result set, cost less per row on the writer. The first l.Max deliveries it creates are inserted
// leased to the caller under token, and returned.
//
// One statement per row: multi-row statements were measured and gave
// nothing at the batch sizes group commit produces (SQLite's own work per
// row, not the statement overhead, is the cost).
//
// due is set when it leaves an ordered delivery due now, unleased.
//
// With l.Max 0 (the outbox, in a caller's transaction: s is nil there) it
// hands nothing off and runs only st's statements.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, st claimStatements, events []store.NewEvent, l store.Lease, token string, due *bool) ([]store.Claim, []store.LeasedDelivery, error) {
	if len(events) == 0 {
		return nil, nil, nil
	}
	insertEvent, storedExpiry, insertDelivery := st.insertEvent, st.storedExpiry, st.insertDelivery
	var handOff *sql.Stmt // bound to tx when first needed
	expires := l.Now.Add(l.For)
	claims := make([]store.Claim, len(events))
	var handed []store.LeasedDelivery
	for i, e := range events {
		body := e.Body
		if body == nil {
			body = []byte{} // an empty body is still a body, not NULL
		}
		// A body that may go before its key is kept apart (table bodies),
		// for its drop to free pages.
		inline := body
		if !e.BodyExpiresAt.IsZero() {
			inline = []byte{}
		}
		res, err := insertEvent.ExecContext(ctx, e.Source, e.Key, e.Keyless, e.ContentType, store.EncodeHeader(e.Header), inline, ms(e.ReceivedAt), ms(e.ExpiresAt), e.Type, strings.Join(e.Filtered, ","), e.Trace, nullMS(e.BodyExpiresAt))
		if err != nil {
			return nil, nil, failed("claim event", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			// A duplicate: report the stored key's expiry, not this copy's,
			// so that no cache remembers the key past the store.
			var expiry int64
			if err := storedExpiry.QueryRowContext(ctx, e.Source, e.Key).Scan(&expiry); err != nil {
				return nil, nil, unavailable("read stored expiry", err)
			}
			claims[i] = store.Claim{Duplicate: true, ExpiresAt: fromMS(expiry)}
			continue
		}
		id, err := res.LastInsertId()
		if err != nil {
			return nil, nil, failed("claim event", err)
		}
		claims[i] = store.Claim{EventID: id, ExpiresAt: fromMS(ms(e.ExpiresAt))}
		if !e.BodyExpiresAt.IsZero() {
			if _, err := st.insertBody.ExecContext(ctx, id, body); err != nil {
				return nil, nil, failed("claim event's body", err)
			}
		}
		var entity, text, mode any // NULL: not ordered
		var version any
		if e.Order.Entity != "" {
			v, t := store.StoredVersion(e.Order, id)
			entity, version, text, mode = store.OrderKey(e.Source, e.Order.Entity), v, t, string(e.Order.Mode)
		}
		for _, d := range e.Destinations {
			if entity != nil && len(handed) < l.Max && !slices.Contains(l.Held, d) {
				// Ordered: handed off only when its entity is free (see
				// claimOrdered); else it waits for the lease step.
				leased, left, err := s.claimOrdered(ctx, tx, e, id, d, l, token)
				if err != nil {
					return nil, nil, err
				}
				*due = *due || left
				if leased != nil {
					leased.Body = body
					handed = append(handed, *leased)
				}
				continue
			}
			if len(handed) >= l.Max || slices.Contains(l.Held, d) || entity != nil {
				*due = *due || entity != nil
				if _, err := insertDelivery.ExecContext(ctx, id, d, ms(e.ReceivedAt), ms(e.ReceivedAt), entity, version, text, mode, e.Order.DeliverStale); err != nil {
					return nil, nil, failed("create delivery", err)
				}
				continue
			}
			// Handed off: created leased to the caller, as its first
			// attempt, due again (for anyone) when the lease expires.
			if handOff == nil {
				handOff = tx.StmtContext(ctx, s.stmt.handOff)
			}
			res, err := handOff.ExecContext(ctx, id, d, ms(expires), ms(l.Now), token, ms(expires))
			if err != nil {
				return nil, nil, failed("create delivery", err)
			}
			did, err := res.LastInsertId()
			if err != nil {
				return nil, nil, failed("create delivery", err)
			}
			handed = append(handed, store.LeasedDelivery{
				ID: did, EventID: id, Source: e.Source, Key: e.Key, Destination: d, Attempt: 1, Type: e.Type,
				ContentType: e.ContentType, Header: e.Header, Body: body, ReceivedAt: fromMS(ms(e.ReceivedAt)),
				LeaseToken: token, LeaseExpiresAt: fromMS(ms(expires)), Trace: e.Trace,
			})
		}
	}
	return claims, handed, nil
}

// leaseDue leases up to limit due deliveries under token.
func (s *Store) leaseDue(ctx context.Context, tx *sql.Tx, now time.Time, lease time.Duration, limit int, token string, held []string) ([]store.LeasedDelivery, error) {
	expires := now.Add(lease)
	rows, err := tx.StmtContext(ctx, s.stmt.leaseDue).QueryContext(ctx, token, ms(expires), ms(expires), ms(now), ms(now), ms(now), jsonList(held), limit)
	if err != nil {
		return nil, unavailable("lease deliveries", err)
	}
	var leased []store.LeasedDelivery
	for rows.Next() {
		var d store.LeasedDelivery
		if err := rows.Scan(&d.ID, &d.EventID, &d.Destination, &d.Attempt); err != nil {
			rows.Close()
			return nil, unavailable("lease deliveries", err)
		}
		d.LeaseToken = token
		d.LeaseExpiresAt = fromMS(ms(expires))
		leased = append(leased, d)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, unavailable("lease deliveries", err)
	}
	load := tx.StmtContext(ctx, s.stmt.loadEvent)
	for i := range leased {
		d := &leased[i]
		var received int64
		var header string
		// Entity stays "": this statement leases only deliveries outside
		// an order (order_entity NULL); the ordered step leases the rest.
		if err := load.QueryRowContext(ctx, d.EventID).Scan(&d.Source, &d.Key, &d.ContentType, &header, &d.Body, &received, &d.Trace, &d.Type); err != nil {
			return nil, unavailable("load event", err)
		}
		d.Header = store.DecodeHeader(header)
		d.ReceivedAt = fromMS(received)
	}
	return leased, nil
}

// complete records outcomes.
func (s *Store) complete(ctx context.Context, tx *sql.Tx, outcomes []store.Outcome) (woke bool, err error) {
	if len(outcomes) == 0 {
		return false, nil
	}
	now := ms(time.Now())
	release := tx.StmtContext(ctx, s.stmt.release)
	finish := tx.StmtContext(ctx, s.stmt.finish)
	retry := tx.StmtContext(ctx, s.stmt.retry)
	insertAttempt := tx.StmtContext(ctx, s.stmt.insertAttempt)
	var firstSuccess *sql.Stmt
	for _, o := range outcomes {
		if o.Kind == store.OutcomeDelivered && o.Attempt == 1 {
			if firstSuccess == nil {
				firstSuccess = tx.StmtContext(ctx, s.stmt.firstSuccess)
			}
			res, err := firstSuccess.ExecContext(ctx, o.StatusCode, o.Error, now,
				ms(o.StartedAt), o.Duration.Milliseconds(), o.StatusCode, o.Response, o.ScriptDigest, o.SentDigest, o.DeliveryID, o.LeaseToken)
			if err != nil {
				return false, failed("complete delivery", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				continue
			}
			// The lease was lost (finish below changes nothing either), or
			// the row's first attempt is taken: a row in attempts.
		}
		var res sql.Result
		switch o.Kind {
		case store.OutcomeReleased:
			due := now
			if !o.NextAttemptAt.IsZero() {
				due = ms(o.NextAttemptAt)
			}
			res, err = release.ExecContext(ctx, due, now, o.DeliveryID, o.LeaseToken)
		case store.OutcomeDelivered, store.OutcomeDead, store.OutcomeSkipped:
			state := store.Delivered
			switch o.Kind {
			case store.OutcomeDead:
				state = store.Dead
			case store.OutcomeSkipped:
				state = store.Skipped
			}
			res, err = finish.ExecContext(ctx, state, o.Attempt, o.StatusCode, o.Error, now, o.DeliveryID, o.LeaseToken)
		case store.OutcomeRetry:
			res, err = retry.ExecContext(ctx, o.Attempt, ms(o.NextAttemptAt), o.StatusCode, o.Error, now, o.DeliveryID, o.LeaseToken)
		default:
			return false, fmt.Errorf("sqlite: complete delivery %d: unknown outcome %d: %w", o.DeliveryID, o.Kind, store.ErrRejected)
		}
		if err != nil {
			return false, failed("complete delivery", err)
		}
		if o.Kind == store.OutcomeReleased {
			continue
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // the lease was lost to another worker: its attempt is the one on record
		}
		if _, err := insertAttempt.ExecContext(ctx, o.DeliveryID, o.Attempt, ms(o.StartedAt), o.Duration.Milliseconds(), o.StatusCode, o.Error, o.Kind.String(), o.Response, o.ScriptDigest, o.SentDigest); err != nil {
			return false, failed("record attempt", err)
		}
	}
	return s.completeOrdered(ctx, tx, outcomes)
}

// NextDue implements store.Store.
func (s *Store) NextDue(ctx context.Context, held []string) (time.Time, bool, error) {
	var next sql.NullInt64
	err := s.read.QueryRowContext(ctx, `SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending'
		AND destination NOT IN (SELECT value FROM json_each(?))`, jsonList(held)).Scan(&next)
	if err != nil {
		return time.Time{}, false, unavailable("next due", err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return fromMS(next.Int64), true, nil
}

// sweepable is the condition for deleting an event: its window is over and
// no delivery keeps it back.
const sweepable = `expires_at < ? AND NOT ` + keptBack

// keptBack is true for an event a delivery still needs: pending (to
// deliver) or dead (the operator's, to replay). Neither its key nor its
// body goes while it is.
const keptBack = `EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND d.state IN ('pending', 'dead'))`

// SweepExpired implements store.Store. Candidates are found on a reader
// connection, beside the writer (WAL), so however many expired events are
// kept back, intake never waits on that scan; the write transaction deletes
// only the batch found, checking the condition again. The steps run in
// store.Sweeper's order.
func (s *Store) SweepExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	return store.Sweeper{Events: s.sweepEvents, Effects: s.sweepEffects, OrderHeads: s.sweepOrderHeads, Bodies: s.dropBodies}.
		Sweep(ctx, now, limit)
}

// readIDs reads the ids a sweep's query selects, on a reader beside the
// writer, as arguments for the write that follows.
func (s *Store) readIDs(ctx context.Context, what, query string, args ...any) ([]any, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, unavailable(what, err)
	}
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, unavailable(what, err)
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, unavailable(what, err)
	}
	return ids, nil
}

// droppable is an event whose body may go now (its body_retention is
// over) under the window sweep's rule: no delivery still needs it.
const droppable = `body_expires_at < ? AND body_dropped_at IS NULL AND NOT ` + keptBack

// dropBodies deletes the bodies of up to limit events past their
// body_retention (kept apart, in bodies), found by the partial index of
// bodies still waiting on a reader beside the writer, as sweepEvents finds
// its batch; the key, the headers and the deliveries' history stay. The
// write checks the rule again and marks the events in the same
// transaction.
func (s *Store) dropBodies(ctx context.Context, now time.Time, limit int) (int, error) {
	ids, err := s.readIDs(ctx, "drop bodies", `SELECT id FROM events WHERE `+droppable+` LIMIT ?`, ms(now), limit)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	in := `(?` + strings.Repeat(", ?", len(ids)-1) + `)`
	tx, done, err := s.begin(ctx, "drop bodies")
	if err != nil {
		return 0, err
	}
	defer done()
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE events SET body = X'', body_dropped_at = ? WHERE `+droppable+` AND id IN `+in,
		append([]any{ms(now), ms(now)}, ids...)...)
	if err != nil {
		return 0, unavailable("drop bodies", err)
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM bodies WHERE event_id IN (SELECT id FROM events WHERE body_dropped_at = ? AND id IN `+in+`)`,
		append([]any{ms(now)}, ids...)...); err != nil {
		return 0, unavailable("drop bodies", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, unavailable("drop bodies", err)
	}
	return int(n), nil
}

func (s *Store) sweepEvents(ctx context.Context, now time.Time, limit int) (int, error) {
	ids, err := s.readIDs(ctx, "sweep", `SELECT id FROM events WHERE `+sweepable+` LIMIT ?`, ms(now), limit)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	args := append([]any{ms(now)}, ids...)
	return s.execWrite(ctx, "sweep", `DELETE FROM events WHERE `+sweepable+` AND id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
}

// requeue is the part of a replay every backend's SQL shares: due now,
// attempts reset, no lease.
//
// A replay is the operator's word: the delivery leaves its entity's order
// (order_entity NULL) and is delivered as it is, even when stale.
const requeueSet = `state = 'pending', attempts = 0, next_attempt_at = ?, lease_token = NULL, lease_expires_at = NULL, updated_at = ?,
	order_entity = NULL, order_waiting = 0`

// leasedNow is true for a delivery a worker holds right now (and never
// NULL: a delivery waiting in backoff has no lease and is replayed).
const leasedNow = `(state = 'pending' AND lease_expires_at IS NOT NULL AND lease_expires_at > ?)`

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	err := s.read.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM events),
		(SELECT COUNT(*) FROM events WHERE keyless = 1),
		(SELECT COUNT(*) FROM deliveries WHERE state = 'pending'),
		(SELECT COUNT(*) FROM deliveries WHERE state = 'delivered'),
		(SELECT COUNT(*) FROM deliveries WHERE state = 'dead'),
		(SELECT COUNT(*) FROM deliveries WHERE state = 'stale'),
		(SELECT COUNT(*) FROM attempts) + (SELECT COUNT(*) FROM deliveries WHERE first_started_at IS NOT NULL)`).Scan(&st.Events, &st.Keyless, &st.Pending, &st.Delivered, &st.Dead, &st.Stale, &st.Attempts)
	if err != nil {
		return st, unavailable("stats", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT state, COUNT(*) FROM effects GROUP BY state`)
	if err != nil {
		return st, unavailable("stats", err)
	}
	defer rows.Close()
	st.Effects = map[string]int64{}
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return st, unavailable("stats", err)
		}
		st.Effects[state] = n
	}
	return st, rows.Err()
}

// Ping implements store.Store: a small durable write through the writer,
// since a file that can be read may still refuse commits (a full disk).
// It begins as a commit does, so its wait for a lock another connection
// holds is reported (LockWait) and ends in store.ErrLocked.
func (s *Store) Ping(ctx context.Context) error {
	tx, done, err := s.begin(ctx, "ping")
	if err != nil {
		return err
	}
	defer done()
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO oncehook_meta (name, value) VALUES ('ready_probe', ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, fmt.Sprint(time.Now().UnixMilli())); err != nil {
		return unavailable("ping", err)
	}
	if err := tx.Commit(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// ID implements store.Store.
func (s *Store) ID() string { return s.id }

// Close implements store.Store.
func (s *Store) Close() error {
	return errors.Join(s.read.Close(), s.write.Close())
}

// SupportsListener implements store.Listener: SQLite has no notifications.
// Its one process's worker is woken by its own writer, and by polling.
func (s *Store) SupportsListener() bool { return false }

// Listen implements store.Listener: SQLite cannot announce commits.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	return fmt.Errorf("sqlite: listen for new deliveries: %w", store.ErrNotSupported)
}
