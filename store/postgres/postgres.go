// Package postgres is oncehook's store for several replicas: every replica
// claims keys through the same unique constraint, so the database, not any
// process, decides each race.
//
// Intake reaches it through the group committer, as on SQLite: a batch of
// claims is one multi-row INSERT ... SELECT FROM unnest(...) ON CONFLICT DO
// NOTHING RETURNING. Workers of every replica lease deliveries with FOR
// UPDATE SKIP LOCKED, so they share the work without delivering twice, and a
// commit that creates deliveries sends a NOTIFY that wakes idle workers at
// once.
package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// notifyChannel is the LISTEN/NOTIFY channel that announces new deliveries.
// Channels are shared by every schema of a database, so the payload names
// the schema, and a listener wakes only for its own.
const notifyChannel = "oncehook_deliveries"

// migrationLock is the advisory lock key that serializes migrations when
// several replicas start at once ("oncehook" in ASCII, as an int64).
const migrationLock = 0x6f6e6365686f6f6b

// Store is the PostgreSQL backend of store.Store.
type Store struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	id     string
	schema string // where oncehook's tables are: the payload of its notifications

	clock    func() time.Time
	skew     atomic.Int64 // the database's clock minus this process's, in ns (see clock.go)
	stopSkew context.CancelFunc
}

var _ store.Store = (*Store)(nil)

// Options tune the PostgreSQL store.
type Options struct {
	Logger *slog.Logger
	// Clock is this process's clock, the one callers read their now from
	// (default time.Now). The store measures it against the database's.
	Clock func() time.Time
}

// Open connects to the database at url (postgres://...) and applies the
// embedded migrations under an advisory lock.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Durable before 200 needs the commit flushed before it returns. A
	// server (or role) set to synchronous_commit=off would acknowledge
	// events it can still lose, so oncehook's sessions turn it back on,
	// unless the URL asks for a level explicitly.
	if _, explicit := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; !explicit {
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			var level string
			if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&level); err != nil {
				return err
			}
			if level == "off" {
				_, err := conn.Exec(ctx, "SET synchronous_commit TO on")
				return err
			}
			return nil
		}
	} else if v := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; v == "off" {
		opts.Logger.Warn("synchronous_commit=off in the store URL: PostgreSQL may lose events oncehook has acknowledged")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	s := &Store{pool: pool, log: opts.Logger, clock: opts.Clock}
	if _, err := s.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := pool.QueryRow(ctx, "SELECT value, current_schema() FROM oncehook_meta WHERE name = 'store_id'").Scan(&s.id, &s.schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: read store id: %w", err)
	}
	skew, err := s.measureSkew(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: read the database's clock: %w", err)
	}
	if skew != 0 {
		s.log.Warn("this replica's clock differs from the database's; times are kept on the database's clock", "offset", skew)
	}
	s.skew.Store(int64(skew))
	var skewCtx context.Context
	skewCtx, s.stopSkew = context.WithCancel(context.Background())
	go s.trackSkew(skewCtx)
	return s, nil
}

// Migrate applies every embedded migration not yet applied and returns the
// versions it applied. Replicas starting together wait on an advisory lock,
// so exactly one applies each migration.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, unavailable("migrate", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return nil, unavailable("migrate: lock", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLock))
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS oncehook_migrations (
		version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM oncehook_migrations").Scan(&current); err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var applied []int
	for _, name := range names {
		version, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, "migrations/"), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("postgres: migration %s: name must start with its version", name)
		}
		if version <= current {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return nil, err
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO oncehook_migrations (version) VALUES ($1)", version)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("postgres: migration %s: %w", name, err)
		}
		applied = append(applied, version)
	}
	return applied, nil
}

func unavailable(op string, err error) error {
	return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrUnavailable, err)
}

// failed wraps an error of a write: ErrRejected when PostgreSQL refused the
// values themselves (SQLSTATE class 22, data exception, such as a NUL in
// text; 23, a constraint; 54, a program limit), so that the group committer
// retries the batch's other requests without them; else ErrUnavailable.
func failed(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "22", "23", "54":
			return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrRejected, err)
		}
	}
	return unavailable(op, err)
}

// retryable reports a deadlock (40P01) or serialization failure (40001):
// the transaction was rolled back and can simply run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// withRetry runs fn again, up to twice, after a deadlock or a serialization
// failure, with jitter so the two transactions do not meet again.
func withRetry(ctx context.Context, fn func() error) error {
	var err error
	for try := 0; try < 3; try++ {
		if err = fn(); err == nil || !retryable(err) {
			return err
		}
		t := time.NewTimer(time.Duration(1+rand.IntN(10*(try+1))) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}

// claimSQL claims a batch in one statement (one round trip, one implicit
// transaction): insert the events that are new and give each inserted
// event its deliveries; the deliveries_notify trigger wakes the replicas. A
// key that appears twice in the batch is inserted once (ON CONFLICT sees the
// first copy) and gets its deliveries once (DISTINCT ON).
//
// Lock order: rows are inserted in one global order, (source, key) in byte
// order, then arrival. Two batches holding overlapping keys each wait on the
// other's uncommitted unique-index entry when they insert in arrival order,
// and PostgreSQL kills one of them as a deadlock (40P01). In one order, the
// second batch waits for the first at the first key they share and never
// holds a key the first still needs. (The order is the Sort feeding the
// insert; ClaimEvents also retries a deadlock, should a plan ever differ.)
//
// existing reads the stored expiry of keys already there, for the duplicate
// answers; a key committed by another transaction after this statement
// began is not visible to it, and its expiry is then reported as unknown.
const claimSQL = `WITH input AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::bool[], $4::text[], $5::bytea[], $6::timestamptz[], $7::timestamptz[], $8::int[], $9::text[], $10::text[])
			AS t(source, key, keyless, content_type, body, received_at, expires_at, ord, headers, destinations)
	), existing AS (
		SELECT e.source, e.key, e.expires_at FROM events e
		WHERE (e.source, e.key) IN (SELECT source, key FROM input)
	), inserted AS (
		INSERT INTO events (source, key, keyless, content_type, headers, body, received_at, expires_at)
		SELECT source, key, keyless, content_type, headers::jsonb, body, received_at, expires_at FROM input
		ORDER BY source COLLATE "C", key COLLATE "C", ord
		ON CONFLICT (source, key) DO NOTHING
		RETURNING id, source, key, expires_at
	), delivered AS (
		INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at)
		SELECT inserted.id, d.destination, i.received_at, i.received_at
		FROM inserted
		JOIN (SELECT DISTINCT ON (source, key) source, key, received_at, destinations FROM input ORDER BY source, key, ord) i
			USING (source, key)
		CROSS JOIN LATERAL unnest(string_to_array(i.destinations, ',')) AS d(destination)
		WHERE i.destinations <> ''
		ORDER BY inserted.id, d.destination
	)
	SELECT id, source, key, expires_at FROM inserted
	UNION ALL
	SELECT 0, source, key, expires_at FROM existing`

// ClaimEvents implements store.Store.
func (s *Store) ClaimEvents(ctx context.Context, events []store.NewEvent) ([]store.Claim, error) {
	n := len(events)
	sources, keys, types, headers, dests := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	keyless, bodies := make([]bool, n), make([][]byte, n)
	received, expires := make([]time.Time, n), make([]time.Time, n)
	ord := make([]int32, n)
	for i, e := range events {
		sources[i], keys[i], types[i], keyless[i] = e.Source, e.Key, e.ContentType, e.Keyless
		headers[i] = store.EncodeHeader(e.Header)
		// Destination names cannot hold a comma (config validates them).
		dests[i] = strings.Join(e.Destinations, ",")
		bodies[i] = e.Body
		if bodies[i] == nil {
			bodies[i] = []byte{}
		}
		received[i], expires[i], ord[i] = s.toDB(e.ReceivedAt), s.toDB(e.ExpiresAt), int32(i)
	}
	type ident struct{ source, key string }
	type row struct {
		id      int64
		expires time.Time
	}
	var ids, stored map[ident]row
	err := withRetry(ctx, func() error {
		ids, stored = make(map[ident]row, n), map[ident]row{}
		rows, err := s.pool.Query(ctx, claimSQL, sources, keys, keyless, types, bodies, received, expires, ord, headers, dests)
		if err != nil {
			return err
		}
		for rows.Next() {
			var r row
			var k ident
			if err := rows.Scan(&r.id, &k.source, &k.key, &r.expires); err != nil {
				rows.Close()
				return err
			}
			if r.id == 0 {
				stored[k] = r
			} else {
				ids[k] = r
			}
		}
		rows.Close()
		return rows.Err()
	})
	if err != nil {
		return nil, failed("claim events", err)
	}
	claims := make([]store.Claim, n)
	for i, e := range events {
		k := ident{e.Source, e.Key}
		r, ok := ids[k]
		if !ok {
			claims[i] = store.Claim{Duplicate: true}
			if r, ok := stored[k]; ok {
				claims[i].ExpiresAt = s.fromDB(r.expires)
			}
			continue
		}
		delete(ids, k) // a later copy in this batch is a duplicate of this one
		stored[k] = r
		claims[i] = store.Claim{EventID: r.id, ExpiresAt: s.fromDB(r.expires)}
	}
	return claims, nil
}

// LeaseDeliveries implements store.Store. SKIP LOCKED lets every replica's
// worker lease at once, each taking rows the others are not.
func (s *Store) LeaseDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.LeasedDelivery, error) {
	token := store.NewLeaseToken()
	now = s.toDB(now)
	expires := now.Add(lease)
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT id FROM deliveries
			WHERE state = 'pending' AND next_attempt_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
			ORDER BY next_attempt_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		), leased AS (
			-- A lease counts the attempt it is for (see store.Store).
			UPDATE deliveries d SET lease_token = $3, lease_expires_at = $4, next_attempt_at = $4, updated_at = $1,
				attempts = d.attempts + 1
			FROM due WHERE d.id = due.id
			RETURNING d.id, d.event_id, d.destination, d.attempts
		)
		SELECT l.id, l.event_id, l.destination, l.attempts, e.source, e.key, e.content_type, e.headers::text, e.body, e.received_at
		FROM leased l JOIN events e ON e.id = l.event_id
		ORDER BY l.id`, now, limit, token, expires)
	if err != nil {
		return nil, unavailable("lease deliveries", err)
	}
	leased, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LeasedDelivery, error) {
		var d store.LeasedDelivery
		var header string
		err := row.Scan(&d.ID, &d.EventID, &d.Destination, &d.Attempt, &d.Source, &d.Key, &d.ContentType, &header, &d.Body, &d.ReceivedAt)
		d.Header = store.DecodeHeader(header)
		d.ReceivedAt = s.fromDB(d.ReceivedAt)
		d.LeaseToken, d.LeaseExpiresAt = token, s.fromDB(expires)
		return d, err
	})
	if err != nil {
		return nil, unavailable("lease deliveries", err)
	}
	return leased, nil
}

// CompleteDeliveries implements store.Store: one pipelined batch in one
// transaction. Each update names the lease it was leased under, so a
// worker whose lease expired cannot overwrite the new owner's outcome. Rows
// are updated in id order, the one lock order of every multi-row write here.
func (s *Store) CompleteDeliveries(ctx context.Context, outcomes []store.Outcome) error {
	now := s.toDB(s.clock())
	outcomes = slices.SortedStableFunc(slices.Values(outcomes), func(a, b store.Outcome) int { return cmp.Compare(a.DeliveryID, b.DeliveryID) })
	batch := &pgx.Batch{}
	for _, o := range outcomes {
		switch o.Kind {
		case store.OutcomeReleased:
			due := s.toDB(o.NextAttemptAt)
			if due.IsZero() {
				due = now
			}
			// The attempt was counted when leased, and never made.
			batch.Queue(`UPDATE deliveries SET lease_token = NULL, lease_expires_at = NULL, next_attempt_at = $1, updated_at = $2,
					attempts = GREATEST(attempts - 1, 0)
				WHERE id = $3 AND lease_token = $4`, due, now, o.DeliveryID, o.LeaseToken)
			continue
		case store.OutcomeDelivered, store.OutcomeDead, store.OutcomeRetry:
		default:
			return fmt.Errorf("postgres: complete delivery %d: unknown outcome %d", o.DeliveryID, o.Kind)
		}
		state, next := string(store.Pending), s.toDB(o.NextAttemptAt)
		switch o.Kind {
		case store.OutcomeDelivered:
			state = string(store.Delivered)
		case store.OutcomeDead:
			state = string(store.Dead)
		}
		if next.IsZero() {
			next = now
		}
		batch.Queue(`WITH u AS (
				UPDATE deliveries SET state = $1, attempts = $2, next_attempt_at = $3, lease_token = NULL, lease_expires_at = NULL,
					last_status = $4, last_error = $5, updated_at = $6
				WHERE id = $7 AND lease_token = $8
				RETURNING id)
			INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, status_code, error, outcome)
			SELECT id, $2, $9, $10, $4, $5, $11 FROM u`,
			state, o.Attempt, next, o.StatusCode, o.Error, now, o.DeliveryID, o.LeaseToken,
			s.toDB(o.StartedAt), o.Duration.Milliseconds(), o.Kind.String())
	}
	err := withRetry(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return tx.SendBatch(ctx, batch).Close()
		})
	})
	if err != nil {
		return unavailable("complete deliveries", err)
	}
	return nil
}

// NextDue implements store.Store.
func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	var next *time.Time
	err := s.pool.QueryRow(ctx, `SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending'`).Scan(&next)
	if err != nil {
		return time.Time{}, false, unavailable("next due", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return s.fromDB(*next), true, nil
}

// keptBack is true for an event that must not be swept: a delivery of it is
// still pending (to deliver) or dead (the operator's, to replay).
const keptBack = `EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.state IN ('pending', 'dead'))`

// SweepExpired implements store.Store, in two statements of one
// transaction. The first locks a batch of candidates, skipping events that a
// Replay holds (FOR SHARE). The second deletes those that are still not
// kept back, judged on a snapshot of its own: a replay that committed after
// the first statement looked (its requeued deliveries pending again) is seen
// there, so its event stays. A replay that starts later waits for this
// transaction, and then finds the event gone (ErrNotFound), never half of it.
func (s *Store) SweepExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	now = s.toDB(now)
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT e.id FROM events e WHERE e.expires_at < $1 AND NOT `+keptBack+`
			ORDER BY e.id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM events e WHERE e.id = ANY($1) AND NOT `+keptBack, ids)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, unavailable("sweep", err)
	}
	return n, nil
}

const requeueSet = `state = 'pending', attempts = 0, next_attempt_at = $1, lease_token = NULL, lease_expires_at = NULL, updated_at = $1`

// leasedNow is true for a delivery a worker holds right now; a delivery in
// backoff has no lease and is replayed.
const leasedNow = `(state = 'pending' AND lease_expires_at IS NOT NULL AND lease_expires_at > $1)`

// Replay implements store.Store.
func (s *Store) Replay(ctx context.Context, source, key string, now time.Time) (int, error) {
	now = s.toDB(now)
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// FOR SHARE: the sweep's SKIP LOCKED passes this event by while the
		// replay runs (see SweepExpired).
		var id int64
		if err := tx.QueryRow(ctx, `SELECT id FROM events WHERE source = $1 AND key = $2 FOR SHARE`, source, key).Scan(&id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE deliveries SET `+requeueSet+`
			WHERE id IN (SELECT id FROM deliveries WHERE event_id = $2 AND NOT `+leasedNow+` ORDER BY id FOR UPDATE)`, now, id)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", notifyChannel)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("replay %s:%s: %w", source, key, store.ErrNotFound)
	}
	if err != nil {
		return 0, unavailable("replay", err)
	}
	return n, nil
}

// ReplayDead implements store.Store.
func (s *Store) ReplayDead(ctx context.Context, destination string, now time.Time) (int, error) {
	now = s.toDB(now)
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE deliveries SET `+requeueSet+`
			WHERE id IN (SELECT id FROM deliveries WHERE state = 'dead' AND ($2 = '' OR destination = $2) ORDER BY id FOR UPDATE)`, now, destination)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", notifyChannel)
		return err
	})
	if err != nil {
		return 0, unavailable("replay dead letters", err)
	}
	return n, nil
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT COUNT(*) FROM events),
		(SELECT COUNT(*) FROM events WHERE keyless),
		(SELECT COUNT(*) FROM deliveries WHERE state = 'pending'),
		(SELECT COUNT(*) FROM deliveries WHERE state = 'delivered'),
		(SELECT COUNT(*) FROM deliveries WHERE state = 'dead'),
		(SELECT COUNT(*) FROM attempts)`).Scan(&st.Events, &st.Keyless, &st.Pending, &st.Delivered, &st.Dead, &st.Attempts)
	if err != nil {
		return st, unavailable("stats", err)
	}
	return st, nil
}

// Ping implements store.Store: a small durable write, since a server that
// answers may still refuse commits (a full disk, a read-only replica).
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO oncehook_meta (name, value) VALUES ('ready_probe', now()::text)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`)
	if err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.stopSkew()
	s.pool.Close()
	return nil
}

// ID implements store.Store.
func (s *Store) ID() string { return s.id }

// Listen calls wake whenever another transaction (on any replica) commits
// new deliveries, until ctx ends. It holds one connection of its own and
// reconnects after failures; after each (re)connect it calls wake once,
// since notifications sent while disconnected are lost.
func (s *Store) Listen(ctx context.Context, wake func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listen(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("delivery notifications interrupted; reconnecting", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Store) listen(ctx context.Context, wake func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is not returned to the pool: LISTEN state must not
	// leak into other queries.
	listener := conn.Hijack()
	defer listener.Close(context.WithoutCancel(ctx))
	if _, err := listener.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	wake()
	for {
		n, err := listener.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if n.Payload == s.schema {
			wake()
		}
	}
}
