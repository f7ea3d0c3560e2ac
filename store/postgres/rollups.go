package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

// statsSQL adds a batch's counters in one statement, in key order (the one
// lock order), each under the writer's own shard.
const statsSQL = `INSERT INTO stats_hourly (hour, scope, name, metric, shard, value)
	SELECT hour, scope, name, metric, $6, value
	FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS t(hour, scope, name, metric, value)
	ORDER BY hour, scope, name, metric
	ON CONFLICT (hour, scope, name, metric, shard) DO UPDATE SET value = stats_hourly.value + EXCLUDED.value`

// copiesSQL counts duplicates on their events, the keys in one order.
const copiesSQL = `UPDATE events e SET copies = e.copies + c.n, last_copy_at = GREATEST(e.last_copy_at, c.at)
	FROM (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[]) AS u(source, key, n, at)
	      ORDER BY source COLLATE "C", key COLLATE "C") c
	WHERE e.source = c.source AND e.key = c.key`

// commitCopiesSQL is copiesSQL for the gateway's own commits, which carry
// other requests' claims: it takes only the rows no other transaction
// holds, and returns the copies it left (their events exist, and their
// rows are held), for a later commit. A caller's outbox transaction that
// published a copy of a key holds its event's row until it ends, for as
// long as the caller likes; waiting for it held every request of the
// commit with it (11 s for an 11 s transaction). NO KEY UPDATE is the
// lock the UPDATE itself takes.
const commitCopiesSQL = `WITH c AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[]) AS u(source, key, n, at)
	), locked AS (
		SELECT e.id, c.source, c.key, c.n, c.at FROM c JOIN events e ON e.source = c.source AND e.key = c.key
		ORDER BY c.source COLLATE "C", c.key COLLATE "C"
		FOR NO KEY UPDATE OF e SKIP LOCKED
	), counted AS (
		UPDATE events e SET copies = e.copies + l.n, last_copy_at = GREATEST(e.last_copy_at, l.at)
		FROM locked l WHERE e.id = l.id
		RETURNING e.id
	)
	SELECT c.source, c.key, c.n, c.at FROM c
	WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.source = c.source AND l.key = c.key)
	AND EXISTS (SELECT 1 FROM events e WHERE e.source = c.source AND e.key = c.key)`

// queueCopies queues copies with query: copiesSQL in a caller's own
// transaction (which waits, as its claim does), commitCopiesSQL in the
// gateway's commits.
func (s *Store) queueCopies(batch *pgx.Batch, query string, copies []store.Copy) {
	if len(copies) == 0 {
		return
	}
	n := len(copies)
	sources, keys, ns, ats := make([]string, n), make([]string, n), make([]int64, n), make([]time.Time, n)
	for i, c := range copies {
		sources[i], keys[i], ns[i], ats[i] = c.Source, c.Key, c.N, s.toDB(c.Last)
	}
	batch.Queue(query, sources, keys, ns, ats)
}

// outboxStatsSQL is statsSQL in a caller's own transaction (the outbox):
// its shard is its session's, which no other open transaction has, so
// that publishers never wait on each other's counter rows (nor deadlock
// on two of them taken in opposite orders).
var outboxStatsSQL = strings.Replace(statsSQL, "$6", "'outbox/' || pg_backend_pid()", 1)

func queueStats(batch *pgx.Batch, shard string, deltas []store.StatDelta) {
	if len(deltas) == 0 {
		return
	}
	batch.Queue(statsSQL, append(statsArgs(deltas), shard)...)
}

// statsArgs are statsSQL's arrays, $1 to $5.
func statsArgs(deltas []store.StatDelta) []any {
	n := len(deltas)
	hours, values := make([]time.Time, n), make([]int64, n)
	scopes, names, metrics := make([]string, n), make([]string, n), make([]string, n)
	for i, d := range deltas {
		hours[i], scopes[i], names[i], metrics[i], values[i] = d.Hour, d.Scope, d.Name, d.Metric, d.Value
	}
	return []any{hours, scopes, names, metrics, values}
}

// Rollups implements store.Store.
func (s *Store) Rollups(ctx context.Context, q store.RollupQuery) ([]store.Rollup, error) {
	rows, err := s.pool.Query(ctx, `SELECT hour, scope, name, metric, SUM(value)::bigint FROM stats_hourly
		WHERE hour >= $1 AND hour < $2 AND ($3 = '' OR scope = $3) AND ($4 = '' OR name = $4)
		GROUP BY hour, scope, name, metric ORDER BY hour, scope, name, metric`, q.From, q.To, q.Scope, q.Name)
	if err != nil {
		return nil, unavailable("read rollups", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Rollup, error) {
		var r store.Rollup
		err := row.Scan(&r.Hour, &r.Scope, &r.Name, &r.Metric, &r.Value)
		return r, err
	})
	if err != nil {
		return nil, unavailable("read rollups", err)
	}
	return out, nil
}

// SweepRollups implements store.Store.
func (s *Store) SweepRollups(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM stats_hourly WHERE hour < $1`, before)
	if err != nil {
		return 0, unavailable("sweep rollups", err)
	}
	return int(tag.RowsAffected()), nil
}
