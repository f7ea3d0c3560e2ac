package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/oncehook/oncehook/store"
)

const addStatSQL = `INSERT INTO stats_hourly (hour, scope, name, metric, shard, value) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (hour, scope, name, metric, shard) DO UPDATE SET value = value + excluded.value`

const addCopiesSQL = `UPDATE events SET copies = copies + ?, last_copy_at = MAX(COALESCE(last_copy_at, 0), ?) WHERE source = ? AND key = ?`

// addCopies counts a batch's duplicates on their events, in key order.
func addCopies(ctx context.Context, stmt *sql.Stmt, copies []store.Copy) error {
	copies = slices.Clone(copies)
	slices.SortFunc(copies, func(a, b store.Copy) int { return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Key, b.Key)) })
	for _, c := range copies {
		if _, err := stmt.ExecContext(ctx, c.N, ms(c.Last), c.Source, c.Key); err != nil {
			return failed("count copies", err)
		}
	}
	return nil
}

// addStats adds a batch's counters, in key order.
func addStats(ctx context.Context, stmt *sql.Stmt, shard string, deltas []store.StatDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	deltas = slices.Clone(deltas)
	slices.SortFunc(deltas, func(a, b store.StatDelta) int {
		return cmp.Or(a.Hour.Compare(b.Hour), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Metric, b.Metric))
	})
	for _, d := range deltas {
		if _, err := stmt.ExecContext(ctx, d.Hour.Unix(), d.Scope, d.Name, d.Metric, shard, d.Value); err != nil {
			return failed("add rollups", err)
		}
	}
	return nil
}

// Rollups implements store.Store.
func (s *Store) Rollups(ctx context.Context, q store.RollupQuery) ([]store.Rollup, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT hour, scope, name, metric, SUM(value) FROM stats_hourly
		WHERE hour >= ? AND hour < ? AND (? = '' OR scope = ?) AND (? = '' OR name = ?)
		GROUP BY hour, scope, name, metric ORDER BY hour, scope, name, metric`,
		q.From.Unix(), q.To.Unix(), q.Scope, q.Scope, q.Name, q.Name)
	if err != nil {
		return nil, unavailable("read rollups", err)
	}
	defer rows.Close()
	var out []store.Rollup
	for rows.Next() {
		var r store.Rollup
		var hour int64
		if err := rows.Scan(&hour, &r.Scope, &r.Name, &r.Metric, &r.Value); err != nil {
			return nil, unavailable("read rollups", err)
		}
		r.Hour = time.Unix(hour, 0)
		out = append(out, r)
	}
	return out, rows.Err()
}

// SweepRollups implements store.Store.
func (s *Store) SweepRollups(ctx context.Context, before time.Time) (int, error) {
	return s.execWrite(ctx, "sweep rollups", `DELETE FROM stats_hourly WHERE hour < ?`, before.Unix())
}
