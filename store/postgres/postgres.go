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
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/internal/sqlstore"
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

// schemaLock is the key of an advisory lock of this schema's, named by $1.
// Advisory locks are the database's: with one key for all, a gateway on
// one schema skipped its ordered lease step, or its partitions, whenever
// a gateway on another schema of the same database held it (seen as
// tests that share a database failing under load).
const schemaLock = `hashtextextended(current_schema() || '/' || $1::text, 0)`

// Store is the PostgreSQL backend of store.Store.
type Store struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	id     string
	schema string // where oncehook's tables are: the payload of its notifications

	clock   func() time.Time
	skew    atomic.Int64    // the database's clock minus this process's, in ns (see clock.go)
	bg      context.Context // the store's own work in the background, until Close
	stop    context.CancelFunc
	analyze analyzer // see analyze.go

	horizon      time.Duration
	bulk         int          // Options.BulkBatch
	latestDrop   atomic.Int64 // the latest drop_at committed, in ns (see partitions.go)
	partitionsAt atomic.Int64 // when maintainPartitions last ran, in ns of the sweep's clock
}

var _ store.Store = (*Store)(nil)

// Options tune the PostgreSQL store.
type Options struct {
	Logger *slog.Logger
	// Clock is this process's clock, the one callers read their now from
	// (default time.Now). The store measures it against the database's.
	Clock func() time.Time
	// Horizon is how long after arrival a body may be due to go: the
	// longest window of the sources. Open makes the day partitions that
	// cover it (see partitions.go), so that intake never writes a body
	// where no day waits for it; the sweep keeps them ahead.
	Horizon time.Duration
	// BulkBatch bounds the events one transaction of an operator's bulk
	// delivery reads (default 1000), so that no transaction holds the
	// locks of a whole search's result.
	BulkBatch int
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
	s := &Store{pool: pool, log: opts.Logger, clock: opts.Clock, horizon: opts.Horizon, bulk: opts.BulkBatch}
	if s.bulk <= 0 {
		s.bulk = 1000
	}
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
	if err := s.preparePartitions(ctx); err != nil {
		s.log.Warn("could not make the day partitions ahead; the sweep will", "err", err)
	}
	s.bg, s.stop = context.WithCancel(context.Background())
	s.analyze.next.Store(analyzeFirst)
	go s.trackSkew(s.bg)
	return s, nil
}

// Migrate applies every embedded migration not yet applied (see
// sqlstore.Migrations for their numbering) and returns the versions it
// applied. Replicas starting together wait on an advisory lock,
// so exactly one applies each migration.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		// The pool connects lazily: this is Open's first contact with the
		// database, for every command that opens the store, so it says
		// connect (serve, stats or events ls, not migrate).
		return nil, unavailable("connect", err)
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
	list, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	var applied []int
	for _, m := range list {
		if m.Version <= current {
			continue
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO oncehook_migrations (version) VALUES ($1)", m.Version)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("postgres: migration %s: %w", m.Name, err)
		}
		applied = append(applied, m.Version)
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

// commitSQL claims a batch's events and leases deliveries to the caller, in
// one statement (one round trip): insert the events that are new, give each
// its deliveries, the first $11 of them created already leased to the caller
// under $12 until $13 (the hand-off: nothing is read back), and, when $14 is
// set, lease due deliveries up to $11 in all. A key that appears twice in
// the batch is inserted once (ON CONFLICT sees the first copy) and gets its
// deliveries once (DISTINCT ON). The deliveries_notify trigger wakes the
// other replicas for the deliveries left unleased.
//
// Lock order: rows are inserted in one global order, (source, key) in byte
// order, then arrival. Two batches holding overlapping keys each wait on the
// other's uncommitted unique-index entry when they insert in arrival order,
// and PostgreSQL kills one of them as a deadlock (40P01). In one order, the
// second batch waits for the first at the first key they share and never
// holds a key the first still needs. (The order is the Sort feeding the
// insert; Commit also retries a deadlock, should a plan ever differ.)
//
// existing reads the stored expiry of keys already there, for the duplicate
// answers; a key committed by another transaction after this statement
// began is not visible to it, and its expiry is then reported as unknown.
// due cannot see the deliveries this statement inserts (one snapshot), so it
// never leases a handed-off delivery twice.
//
// The rows that come back are of five kinds (their first column; see
// rowKind): rowInserted, rowExisting, rowHandedOff, rowDue, and one
// rowOrderedDue row when ordered deliveries are due.
const commitSQL = `WITH input AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::bool[], $4::text[], $5::bytea[], $6::timestamptz[], $7::timestamptz[], $8::int[], $9::text[], $10::text[], $17::text[], $18::text[],
			$19::text[], $20::bigint[], $21::bool[], $22::text[], $23::text[], $24::bool[], $25::text[], $26::timestamptz[])
			AS t(source, key, keyless, content_type, body, received_at, expires_at, ord, headers, destinations, type, filtered,
				order_entity, order_version, order_versioned, order_text, order_mode, order_deliver_stale, trace, drop_at)
	), inserted AS (
		-- The body goes to event_bodies, in the partition of the day it
		-- may go (see migrations/0017_partitions.sql).
		INSERT INTO events (source, key, keyless, content_type, headers, body, received_at, expires_at, type, filtered, trace, body_at, body_size)
		SELECT source, key, keyless, content_type, headers::jsonb, '', received_at, expires_at, type, filtered, trace,
			drop_at, length(body) FROM input
		ORDER BY source COLLATE "C", key COLLATE "C", ord
		ON CONFLICT (source, key) DO NOTHING
		RETURNING id, source, key, expires_at, body_at
	), firsts AS (
		-- Each key's first copy in the batch, the one inserted (ON
		-- CONFLICT sees it first): its body and its deliveries.
		SELECT DISTINCT ON (source, key) source, key, body, received_at, destinations,
			order_entity, order_version, order_versioned, order_text, order_mode, order_deliver_stale
		FROM input ORDER BY source, key, ord
	), bodies AS (
		INSERT INTO event_bodies (event_id, drop_at, body)
		SELECT n.id, n.body_at, i.body FROM inserted n JOIN firsts i USING (source, key)
	), existing AS (
		-- Only the keys that were not inserted: a batch of new events
		-- looks nothing up.
		SELECT e.source, e.key, e.expires_at FROM input i JOIN events e USING (source, key)
		WHERE NOT EXISTS (SELECT 1 FROM inserted n WHERE n.source = i.source AND n.key = i.key)
	), fresh AS (
		-- n numbers the deliveries that may be handed off (not to a held
		-- destination, not ordered: the ordered lease step decides those);
		-- the others get no number to stay unleased.
		SELECT inserted.id AS event_id, d.destination, i.received_at,
			CASE WHEN d.destination = ANY($16::text[]) OR i.order_entity <> '' THEN NULL
			ELSE row_number() OVER (PARTITION BY d.destination = ANY($16::text[]) OR i.order_entity <> '' ORDER BY inserted.id, d.destination) END AS n,
			NULLIF(i.order_entity, '') AS order_entity,
			CASE WHEN i.order_versioned THEN i.order_version ELSE inserted.id END AS order_version,
			CASE WHEN i.order_versioned THEN i.order_text ELSE '#' || inserted.id END AS order_text,
			NULLIF(i.order_mode, '') AS order_mode, i.order_deliver_stale
		FROM inserted
		JOIN firsts i USING (source, key)
		CROSS JOIN LATERAL unnest(string_to_array(i.destinations, ',')) AS d(destination)
		WHERE i.destinations <> ''
	), delivered AS (
		INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at, lease_token, lease_expires_at, attempts,
			order_entity, order_version, order_text, order_mode, order_deliver_stale)
		SELECT event_id, destination,
			CASE WHEN n <= $11 THEN $13 ELSE received_at END, received_at,
			CASE WHEN n <= $11 THEN $12 END, CASE WHEN n <= $11 THEN $13::timestamptz END,
			CASE WHEN n <= $11 THEN 1 ELSE 0 END,
			order_entity, CASE WHEN order_entity IS NOT NULL THEN order_version END, CASE WHEN order_entity IS NOT NULL THEN order_text END,
			order_mode, order_deliver_stale
		FROM fresh ORDER BY event_id, destination
		RETURNING id, event_id, destination, lease_token IS NOT NULL AS leased
	), due AS (
		SELECT id FROM deliveries
		WHERE $14 AND state = 'pending' AND next_attempt_at <= $15 AND (lease_expires_at IS NULL OR lease_expires_at <= $15)
		AND NOT (destination = ANY($16::text[])) AND order_entity IS NULL
		ORDER BY next_attempt_at
		LIMIT GREATEST($11 - (SELECT count(*) FROM fresh WHERE n <= $11), 0)
		FOR UPDATE SKIP LOCKED
	), leased AS (
		-- A lease counts the attempt it is for (see store.Store).
		UPDATE deliveries d SET lease_token = $12, lease_expires_at = $13, next_attempt_at = $13, updated_at = $15,
			attempts = d.attempts + 1
		FROM due WHERE d.id = due.id
		RETURNING d.id, d.event_id, d.destination, d.attempts
	)
	SELECT 1 /* rowInserted */, id, source, key, expires_at, 0::bigint, '', 0, NULL::text, NULL::text, NULL::bytea, NULL::timestamptz, NULL::text, NULL::text FROM inserted
	UNION ALL
	SELECT 2 /* rowExisting */, 0, source, key, expires_at, 0, '', 0, NULL, NULL, NULL, NULL, NULL, NULL FROM existing
	UNION ALL
	SELECT 3 /* rowHandedOff */, dl.event_id, i.source, i.key, NULL, dl.id, dl.destination, 1, NULL, NULL, NULL, NULL, NULL, NULL
	FROM delivered dl JOIN inserted i ON i.id = dl.event_id WHERE dl.leased
	UNION ALL
	SELECT 4 /* rowDue */, l.event_id, e.source, e.key, NULL, l.id, l.destination, l.attempts, e.content_type, e.headers::text, ` + bodyOf + `, e.received_at, e.trace, e.type
	FROM leased l JOIN events e ON e.id = l.event_id ` + withBody + `
	UNION ALL
	SELECT 5 /* rowOrderedDue: ordered deliveries are due, for the ordered lease step */, 0, '', '', NULL, 0, '', 0, NULL, NULL, NULL, NULL, NULL, NULL
	WHERE $14 AND EXISTS (SELECT 1 FROM deliveries WHERE state = 'pending' AND order_entity IS NOT NULL
		AND next_attempt_at <= $15 AND (lease_expires_at IS NULL OR lease_expires_at <= $15)
		AND NOT (destination = ANY($16::text[])))`

// Commit implements store.Store: one pipeline, run by PostgreSQL as one
// implicit transaction and sent in one round trip: the outcomes statement,
// then the claim-and-lease statement.
func (s *Store) Commit(ctx context.Context, b store.Batch) (store.Committed, error) {
	l := b.Lease
	if l.Now.IsZero() {
		l.Now = s.clock()
	}
	now := s.toDB(l.Now)
	expires := now.Add(l.For)
	token := ""
	if l.Max > 0 {
		token = store.NewLeaseToken()
	}
	// Outcomes first: a delivery whose lease ran out while its outcome
	// waited for this commit must be recorded, not leased again below.
	batch := &pgx.Batch{}
	if err := s.queueOutcomes(batch, b.Outcomes); err != nil {
		return store.Committed{}, err
	}
	queueStats(batch, b.Shard, b.Stats)
	copiesAt := -1
	if len(b.Copies) > 0 {
		copiesAt = batch.Len()
		s.queueCopies(batch, commitCopiesSQL, b.Copies)
	}
	outcomes := batch.Len()
	claiming := len(b.Events) > 0 || (l.Max > 0 && l.Due)
	if claiming {
		batch.Queue(commitSQL, s.commitArgs(b.Events, l, token, expires, now)...)
	}
	if batch.Len() == 0 && len(b.Effects) == 0 {
		return store.Committed{}, nil
	}
	var rows []commitRow
	var deferred []store.Copy
	var effects []store.EffectResult
	// Without effects: one pipeline, one implicit transaction, one round
	// trip. With effects, whose writes depend on what they read: the same
	// pipeline, then each effect, in an explicit transaction.
	send := func(ctx context.Context, sb func(context.Context, *pgx.Batch) pgx.BatchResults) error {
		var err error
		rows, deferred, err = sendCommit(ctx, sb, batch, outcomes, copiesAt, claiming)
		return err
	}
	err := withRetry(ctx, func() error {
		if len(b.Effects) == 0 {
			return send(ctx, s.pool.SendBatch)
		}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := send(ctx, tx.SendBatch); err != nil {
				return err
			}
			var err error
			effects, err = s.applyEffects(ctx, tx, b.Effects)
			return err
		})
	})
	if err != nil {
		return store.Committed{}, failed("commit", err)
	}
	s.noteWritten(len(b.Events) + len(b.Outcomes))
	out := s.committed(b.Events, rows, token, expires)
	out.Effects = effects
	for i := range deferred {
		deferred[i].Last = s.fromDB(deferred[i].Last) // given back as it came, on the gateway's clock
	}
	out.Deferred = deferred
	// Ordered deliveries are never handed off here, and an ordered outcome
	// may have woken its entity's next: both are due for the lease step.
	out.OrderedDue = slices.ContainsFunc(b.Events, func(e store.NewEvent) bool { return e.Order.Entity != "" }) ||
		slices.ContainsFunc(b.Outcomes, func(o store.Outcome) bool { return o.Ordered })
	if room := l.Max - len(out.Leased); room > 0 && slices.ContainsFunc(rows, func(r commitRow) bool { return r.kind == rowOrderedDue }) {
		// In a transaction of its own: what the batch committed stands
		// whatever happens to it, and a step that fails leases nothing
		// (the deliveries stay due, for the next).
		ordered, err := s.leaseOrdered(ctx, l, now, expires, room, token, b.Shard)
		if err != nil {
			s.log.Warn("ordered deliveries not leased this time", "err", err)
		}
		out.Leased = append(out.Leased, ordered...)
	}
	return out, nil
}

// sendCommit sends a commit's pipeline with sb (the pool's, or a
// transaction's): the first outcomes statements of batch record outcomes,
// rollups and copies (the copies, commitCopiesSQL, at copiesAt: -1 for
// none), and then, when claiming, commitSQL claims and leases; its rows
// are returned, with the copies commitCopiesSQL left.
func sendCommit(ctx context.Context, sb func(context.Context, *pgx.Batch) pgx.BatchResults, batch *pgx.Batch, outcomes, copiesAt int, claiming bool) ([]commitRow, []store.Copy, error) {
	if batch.Len() == 0 {
		return nil, nil, nil
	}
	br := sb(ctx, batch)
	defer br.Close()
	var deferred []store.Copy
	for i := range outcomes {
		if i == copiesAt {
			rs, err := br.Query()
			if err != nil {
				return nil, nil, err
			}
			deferred, err = pgx.CollectRows(rs, func(row pgx.CollectableRow) (store.Copy, error) {
				var c store.Copy
				err := row.Scan(&c.Source, &c.Key, &c.N, &c.Last)
				return c, err
			})
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		if _, err := br.Exec(); err != nil {
			return nil, nil, err
		}
	}
	var rows []commitRow
	if claiming {
		rs, err := br.Query()
		if err != nil {
			return nil, nil, err
		}
		defer rs.Close()
		for rs.Next() {
			var r commitRow
			if err := rs.Scan(&r.kind, &r.eventID, &r.source, &r.key, &r.expires, &r.deliveryID, &r.destination, &r.attempt,
				&r.contentType, &r.headers, &r.body, &r.received, &r.trace, &r.eventType); err != nil {
				return nil, nil, err
			}
			rows = append(rows, r)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, nil, err
		}
	}
	return rows, deferred, br.Close()
}

// commitParams are commitSQL's parameters: the batch's events as one array
// per column ($1 to $10 and $17 to $26, unnested together into input), and
// the lease it asks for ($11 to $16). args gives each its number once.
type commitParams struct {
	sources, keys   []string
	keyless         []bool
	contentTypes    []string
	bodies          [][]byte
	received        []time.Time
	expires         []time.Time
	ord             []int32 // the event's place in the batch
	headers         []string
	destinations    []string // comma-separated (a destination's name holds none)
	types, filtered []string // the event's type; the destinations its routes filtered out
	orderEntity     []string
	orderVersion    []int64
	orderVersioned  []bool
	orderText       []string
	orderMode       []string
	orderStale      []bool
	traces          []string
	drops           []time.Time // when the body may go: its partition's day

	leaseMax     int       // hand off, then lease, up to this many
	leaseToken   string    // the lease's token
	leaseExpires time.Time // the lease's expiry, on the database's clock
	leaseDue     bool      // lease due deliveries too
	now          time.Time // on the database's clock
	held         []string  // held destinations: nothing of theirs is leased
}

// args are the parameters in commitSQL's order.
func (p *commitParams) args() []any {
	return []any{
		p.sources,        // $1
		p.keys,           // $2
		p.keyless,        // $3
		p.contentTypes,   // $4
		p.bodies,         // $5
		p.received,       // $6
		p.expires,        // $7
		p.ord,            // $8
		p.headers,        // $9
		p.destinations,   // $10
		p.leaseMax,       // $11
		p.leaseToken,     // $12
		p.leaseExpires,   // $13
		p.leaseDue,       // $14
		p.now,            // $15
		p.held,           // $16
		p.types,          // $17
		p.filtered,       // $18
		p.orderEntity,    // $19
		p.orderVersion,   // $20
		p.orderVersioned, // $21
		p.orderText,      // $22
		p.orderMode,      // $23
		p.orderStale,     // $24
		p.traces,         // $25
		p.drops,          // $26
	}
}

// commitArgs are commitSQL's arguments for events, with the lease l asks
// for (now and expires on the database's clock).
func (s *Store) commitArgs(events []store.NewEvent, l store.Lease, token string, expires, now time.Time) []any {
	n := len(events)
	p := commitParams{
		sources: make([]string, n), keys: make([]string, n), keyless: make([]bool, n), contentTypes: make([]string, n),
		bodies: make([][]byte, n), received: make([]time.Time, n), expires: make([]time.Time, n), ord: make([]int32, n),
		headers: make([]string, n), destinations: make([]string, n), types: make([]string, n), filtered: make([]string, n),
		orderEntity: make([]string, n), orderVersion: make([]int64, n), orderVersioned: make([]bool, n),
		orderText: make([]string, n), orderMode: make([]string, n), orderStale: make([]bool, n),
		traces: make([]string, n), drops: make([]time.Time, n),
		leaseMax: l.Max, leaseToken: token, leaseExpires: expires, leaseDue: l.Due, now: now, held: l.Held,
	}
	if p.held == nil {
		p.held = []string{}
	}
	var latest time.Time
	for i, e := range events {
		drop := e.ExpiresAt
		if !e.BodyExpiresAt.IsZero() {
			drop = e.BodyExpiresAt
		}
		p.drops[i] = s.toDB(drop)
		latest = later(latest, p.drops[i])
		if o := e.Order; o.Entity != "" {
			p.orderEntity[i], p.orderText[i], p.orderMode[i] = store.OrderKey(e.Source, o.Entity), o.VersionText, string(o.Mode)
			p.orderVersion[i], p.orderVersioned[i], p.orderStale[i] = o.Version, o.Versioned, o.DeliverStale
		}
		p.sources[i], p.keys[i], p.keyless[i], p.contentTypes[i], p.types[i] = e.Source, e.Key, e.Keyless, e.ContentType, e.Type
		p.headers[i], p.traces[i] = store.EncodeHeader(e.Header), e.Trace
		p.destinations[i] = strings.Join(e.Destinations, ",")
		p.filtered[i] = strings.Join(e.Filtered, ",")
		if p.bodies[i] = e.Body; p.bodies[i] == nil {
			p.bodies[i] = []byte{}
		}
		p.received[i], p.expires[i], p.ord[i] = s.toDB(e.ReceivedAt), s.toDB(e.ExpiresAt), int32(i)
	}
	if !latest.IsZero() {
		s.noteDrop(latest)
	}
	return p.args()
}

// rowKind is what a row of commitSQL is; the numbers are written in its
// SELECTs, each beside the kind's name.
type rowKind int

const (
	rowInserted   rowKind = 1 // an event inserted: its claim
	rowExisting   rowKind = 2 // an event already stored: a duplicate's claim, with its expiry
	rowHandedOff  rowKind = 3 // a delivery of an inserted event, created leased to the caller
	rowDue        rowKind = 4 // a due delivery leased to the caller, with its event
	rowOrderedDue rowKind = 5 // no data: ordered deliveries are due, for the ordered lease step
)

type commitRow struct {
	kind                 rowKind
	eventID, deliveryID  int64
	source, key          string
	expires, received    *time.Time
	destination          string
	attempt              int
	contentType, headers *string
	body                 []byte
	trace                *string
	eventType            *string // kind 4; a hand-off's is the NewEvent's
}

// committed turns commitSQL's rows into claims (one per event, in order)
// and leased deliveries (handed off first, then due).
func (s *Store) committed(events []store.NewEvent, rows []commitRow, token string, expires time.Time) store.Committed {
	type ident struct{ source, key string }
	inserted, stored := map[ident]commitRow{}, map[ident]commitRow{}
	for _, r := range rows {
		switch r.kind {
		case rowInserted:
			inserted[ident{r.source, r.key}] = r
		case rowExisting:
			stored[ident{r.source, r.key}] = r
		}
	}
	out := store.Committed{Claims: make([]store.Claim, len(events))}
	first := map[ident]int{} // the event whose copy was inserted
	for i, e := range events {
		k := ident{e.Source, e.Key}
		r, ok := inserted[k]
		if !ok {
			out.Claims[i] = store.Claim{Duplicate: true}
			if r, ok := stored[k]; ok && r.expires != nil {
				out.Claims[i].ExpiresAt = s.fromDB(*r.expires)
			}
			continue
		}
		delete(inserted, k) // a later copy in this batch is a duplicate of this one
		stored[k] = r
		first[k] = i
		out.Claims[i] = store.Claim{EventID: r.eventID, ExpiresAt: s.fromDB(*r.expires)}
	}
	for _, kind := range []rowKind{rowHandedOff, rowDue} {
		for _, r := range rows {
			if r.kind != kind {
				continue
			}
			d := store.LeasedDelivery{ID: r.deliveryID, EventID: r.eventID, Source: r.source, Key: r.key, Destination: r.destination,
				Attempt: r.attempt, LeaseToken: token, LeaseExpiresAt: s.fromDB(expires)}
			// Entity stays "" on both kinds: neither hands off nor leases a
			// delivery in an order (the ordered lease step does).
			if kind == rowHandedOff {
				e := events[first[ident{r.source, r.key}]]
				d.ContentType, d.Header, d.Body, d.ReceivedAt, d.Trace = e.ContentType, e.Header, e.Body, e.ReceivedAt, e.Trace
				d.Type = e.Type
			} else {
				d.ContentType, d.Header, d.Body, d.ReceivedAt = deref(r.contentType), store.DecodeHeader(deref(r.headers)), r.body, s.fromDB(*r.received)
				d.Trace, d.Type = deref(r.trace), deref(r.eventType)
			}
			out.Leased = append(out.Leased, d)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// outcomesSQL records a tick's outcomes in one statement: each delivery
// moves on (or, released, is given back with its attempt uncounted), and
// each attempt made is recorded. Each update names the lease it was leased
// under, so a worker whose lease expired cannot overwrite the new owner's
// outcome. Rows are taken in delivery id order, the one lock order of every
// multi-row write here.
//
// A first attempt that succeeded is kept on the delivery's row, not in
// attempts (#30); once that place is taken (a replay's success), the
// attempt is a row. The update writes the place only while it is empty
// (its SET reads the row as it was), and returns whether it was this
// outcome that filled it: the place holds this attempt's start, which no
// other attempt of the delivery shares. Reading the row before the update
// instead cost a second join to deliveries, which PostgreSQL's generic
// plan made a scan of the table while it was young.
const outcomesSQL = `WITH o AS (
		SELECT *, (kind = 'delivered' AND attempt = 1) AS may_be_first
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[], $7::int[], $8::text[], $9::timestamptz[], $10::bigint[], $12::text[], $13::text[], $14::text[])
			AS t(id, token, kind, state, attempt, next_at, status, error, started_at, duration_ms, response, script_digest, sent_digest)
		ORDER BY id
	), u AS (
		UPDATE deliveries d SET
			state = CASE WHEN o.kind = 'released' THEN d.state ELSE o.state END,
			attempts = CASE WHEN o.kind = 'released' THEN GREATEST(d.attempts - 1, 0) ELSE o.attempt END,
			next_attempt_at = o.next_at, lease_token = NULL, lease_expires_at = NULL,
			last_status = CASE WHEN o.kind = 'released' THEN d.last_status ELSE o.status END,
			last_error = CASE WHEN o.kind = 'released' THEN d.last_error ELSE o.error END,
			updated_at = $11,
			first_started_at = CASE WHEN o.may_be_first AND d.first_started_at IS NULL THEN o.started_at ELSE d.first_started_at END,
			first_duration_ms = CASE WHEN o.may_be_first AND d.first_started_at IS NULL THEN o.duration_ms ELSE d.first_duration_ms END,
			first_status = CASE WHEN o.may_be_first AND d.first_started_at IS NULL THEN o.status ELSE d.first_status END,
			first_response = CASE WHEN o.may_be_first AND d.first_started_at IS NULL THEN o.response ELSE d.first_response END,
			first_script_digest = CASE WHEN o.may_be_first AND d.first_started_at IS NULL THEN o.script_digest ELSE d.first_script_digest END,
			first_sent_digest = CASE WHEN o.may_be_first AND d.first_started_at IS NULL THEN o.sent_digest ELSE d.first_sent_digest END
		FROM o WHERE d.id = o.id AND d.lease_token = o.token
		RETURNING d.id, d.event_id, (o.may_be_first AND d.first_started_at = o.started_at) AS first
	)
	INSERT INTO attempts (delivery_id, attempt, started_at, duration_ms, status_code, error, outcome, response, script_digest, sent_digest, drop_at)
	SELECT o.id, o.attempt, o.started_at, o.duration_ms, o.status, o.error, o.kind, o.response, o.script_digest, o.sent_digest, COALESCE(e.body_at, 'infinity')
	FROM u JOIN o ON o.id = u.id JOIN events e ON e.id = u.event_id WHERE o.kind <> 'released' AND NOT u.first`

// queueOutcomes queues the statement that records outcomes, if any.
func (s *Store) queueOutcomes(batch *pgx.Batch, outcomes []store.Outcome) error {
	if len(outcomes) == 0 {
		return nil
	}
	now := s.toDB(s.clock())
	n := len(outcomes)
	ids, durations := make([]int64, n), make([]int64, n)
	tokens, kinds, states, errs, responses := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	scripts, sent := make([]string, n), make([]string, n)
	attempts, statuses := make([]int32, n), make([]int32, n)
	next, started := make([]time.Time, n), make([]time.Time, n)
	for i, o := range outcomes {
		state := string(store.Pending)
		switch o.Kind {
		case store.OutcomeDelivered:
			state = string(store.Delivered)
		case store.OutcomeDead:
			state = string(store.Dead)
		case store.OutcomeSkipped:
			state = string(store.Skipped)
		case store.OutcomeRetry, store.OutcomeReleased:
		default:
			return fmt.Errorf("postgres: complete delivery %d: unknown outcome %d: %w", o.DeliveryID, o.Kind, store.ErrRejected)
		}
		due := s.toDB(o.NextAttemptAt)
		if due.IsZero() {
			due = now
		}
		startedAt := s.toDB(o.StartedAt)
		if startedAt.IsZero() {
			startedAt = now
		}
		ids[i], tokens[i], kinds[i], states[i] = o.DeliveryID, o.LeaseToken, o.Kind.String(), state
		attempts[i], next[i], statuses[i], errs[i] = int32(o.Attempt), due, int32(o.StatusCode), o.Error
		started[i], durations[i], responses[i] = startedAt, o.Duration.Milliseconds(), o.Response
		scripts[i], sent[i] = o.ScriptDigest, o.SentDigest
	}
	batch.Queue(outcomesSQL, ids, tokens, kinds, states, attempts, next, statuses, errs, started, durations, now, responses, scripts, sent)
	queueOrderedOutcomes(batch, outcomes)
	return nil
}

// NextDue implements store.Store.
func (s *Store) NextDue(ctx context.Context, held []string) (time.Time, bool, error) {
	var next *time.Time
	if held == nil {
		held = []string{}
	}
	err := s.pool.QueryRow(ctx, `SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending'
		AND NOT (destination = ANY($1::text[]))`, held).Scan(&next)
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

// SweepExpired implements store.Store: the day partitions first (see
// partitions.go), then the steps every backend takes, in store.Sweeper's
// order.
func (s *Store) SweepExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	now = s.toDB(now)
	kept, err := s.maintainPartitions(ctx, now)
	if err != nil {
		return kept, err
	}
	swept, err := store.Sweeper{Events: s.sweepEvents, Effects: s.sweepEffects, OrderHeads: s.sweepOrderHeads, Bodies: s.dropBodies}.
		Sweep(ctx, now, limit)
	return max(kept, swept), err
}

// dropBodies empties the bodies of up to limit events past their
// body_retention that no delivery needs, in two statements of one
// transaction, as sweepEvents deletes: the candidates are locked skipping
// those a Replay holds (FOR SHARE), and the update judges them again on a
// snapshot of its own, so a replay that requeued one's delivery keeps its
// body, and a replay that starts later finds it gone (ErrBodyGone).
//
// Most bodies go with their day instead (see partitions.go); these are the
// ones that could not: of an event stored before the partitions, whose body
// is in its own row, and of one kept past its day, whose body is in the kept
// partition (deleted there).
func (s *Store) dropBodies(ctx context.Context, now time.Time, limit int) (int, error) {
	return s.lockThen(ctx, "drop bodies", `SELECT e.id FROM events e WHERE e.body_expires_at < $1 AND e.body_dropped_at IS NULL AND NOT `+keptBack+`
		ORDER BY e.body_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED`, []any{now, limit},
		`WITH d AS (
			UPDATE events e SET body = '', body_dropped_at = $2 WHERE e.id = ANY($1) AND NOT `+keptBack+` RETURNING e.id
		), b AS (
			DELETE FROM event_bodies WHERE drop_at = 'infinity' AND event_id IN (SELECT id FROM d)
		)
		SELECT count(*) FROM d`, now)
}

// sweepEvents deletes expired events in two statements of one
// transaction. The first locks a batch of candidates, skipping events that a
// Replay holds (FOR SHARE). The second deletes those that are still not
// kept back, judged on a snapshot of its own: a replay that committed after
// the first statement looked (its requeued deliveries pending again) is seen
// there, so its event stays. A replay that starts later waits for this
// transaction, and then finds the event gone (ErrNotFound), never half of it.
// The second deletes the events' deliveries too (no foreign key cascades
// there since migration 0020), and their attempts' kept rows cascade from
// them.
func (s *Store) sweepEvents(ctx context.Context, now time.Time, limit int) (int, error) {
	return s.lockThen(ctx, "sweep", `SELECT e.id FROM events e WHERE e.expires_at < $1 AND NOT `+keptBack+`
		ORDER BY e.id LIMIT $2 FOR UPDATE SKIP LOCKED`, []any{now, limit},
		`WITH d AS (DELETE FROM events e WHERE e.id = ANY($1) AND NOT `+keptBack+` RETURNING e.id),
			gone AS (DELETE FROM deliveries WHERE event_id IN (SELECT id FROM d))
		SELECT count(*) FROM d`)
}

// lockThen runs a sweep's two statements in one transaction: lock locks
// a batch of candidate events (skipping those a Replay holds FOR SHARE),
// and apply, given their ids as $1 (and extra as $2...), changes those
// still not kept back, judged on a snapshot of its own, and selects how
// many it changed, which lockThen returns.
func (s *Store) lockThen(ctx context.Context, what, lock string, lockArgs []any, apply string, extra ...any) (int, error) {
	var n int
	// A sweep's cascade and a replay (or a commit) can each hold a row the
	// other waits for; PostgreSQL then rolls one back. Rolled back, the
	// sweep has changed nothing and simply runs again, as a commit does.
	err := withRetry(ctx, func() error {
		n = 0
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, lock, lockArgs...)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(ids) == 0 {
				return err
			}
			return tx.QueryRow(ctx, apply, append([]any{ids}, extra...)...).Scan(&n)
		})
	})
	if err != nil {
		return 0, unavailable(what, err)
	}
	return n, nil
}

// requeueAt is the SET of a replay: due at now (a placeholder), attempts
// reset, no lease. A replay is the operator's word: the delivery leaves
// its entity's order and is delivered as it is, even when stale.
func requeueAt(now string) string {
	return `state = 'pending', attempts = 0, next_attempt_at = ` + now + `, lease_token = NULL, lease_expires_at = NULL, updated_at = ` + now +
		`, order_entity = NULL, order_waiting = FALSE`
}

// leasedAt is true for a delivery a worker holds at now (a placeholder); a
// delivery in backoff has no lease and is replayed.
func leasedAt(now string) string {
	return `(state = 'pending' AND lease_expires_at IS NOT NULL AND lease_expires_at > ` + now + `)`
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
		(SELECT COUNT(*) FROM deliveries WHERE state = 'stale'),
		-- A day's attempts outlive their swept event by less than a day
		-- (see partitions.go): count those of the deliveries stored.
		(SELECT COUNT(*) FROM attempts a WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id)) +
		(SELECT COUNT(*) FROM deliveries WHERE first_started_at IS NOT NULL)`).Scan(&st.Events, &st.Keyless, &st.Pending, &st.Delivered, &st.Dead, &st.Stale, &st.Attempts)
	if err != nil {
		return st, unavailable("stats", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT state, COUNT(*) FROM effects GROUP BY state`)
	if err != nil {
		return st, unavailable("stats", err)
	}
	st.Effects = map[string]int64{}
	var state string
	var count int64
	_, err = pgx.ForEachRow(rows, []any{&state, &count}, func() error { st.Effects[state] = count; return nil })
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

// LockWait implements store.Store: PostgreSQL has no database-wide write
// lock. A commit waits only on rows another transaction holds (a key an
// open outbox transaction published), and only for those keys.
func (s *Store) LockWait() store.LockWait { return store.LockWait{} }

// Close implements store.Store.
func (s *Store) Close() error {
	s.stop()
	s.analyze.wg.Wait()
	s.pool.Close()
	return nil
}

// ID implements store.Store.
func (s *Store) ID() string { return s.id }

// SupportsListener implements store.Listener: PostgreSQL announces new
// deliveries with NOTIFY.
func (s *Store) SupportsListener() bool { return true }

// Listen implements store.Listener: it calls wake whenever another
// transaction (on any replica) commits new deliveries, until ctx ends. It
// holds one connection of its own and reconnects after failures; after
// each (re)connect it calls wake once, since notifications sent while
// disconnected are lost.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	s.listenLoop(ctx, notifyChannel, "delivery notifications", wake)
	return nil
}

// listenLoop listens on channel (listenOn) until ctx ends, reconnecting
// after a failure with a backoff from 100 ms up to 5 s, back to 100 ms
// once a connection listened: what, for the log.
func (s *Store) listenLoop(ctx context.Context, channel, what string, wake func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		listened, err := s.listenOn(ctx, channel, wake)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = 100 * time.Millisecond
		}
		s.log.Warn(what+" interrupted; reconnecting", "err", err, "retry_in", backoff)
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

// listenOn LISTENs on channel on a connection of its own, calls wake once
// listening and at each notification for this store's schema, until the
// connection fails (its error) or ctx ends (nil); listened says it got
// as far as listening.
func (s *Store) listenOn(ctx context.Context, channel string, wake func()) (listened bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// The connection is not returned to the pool: LISTEN state must not
	// leak into other queries.
	listener := conn.Hijack()
	defer listener.Close(context.WithoutCancel(ctx))
	if _, err := listener.Exec(ctx, "LISTEN "+channel); err != nil {
		return false, err
	}
	wake()
	for {
		n, err := listener.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return true, nil
			}
			return true, err
		}
		if n.Payload == s.schema {
			wake()
		}
	}
}
