package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// A fresh deployment's tables have no statistics until autovacuum's first
// ANALYZE, which comes a minute or more after they fill (its naptime, and
// longer when it is busy with other tables). pgx prepares the commit's
// statements once per connection, and after five executions PostgreSQL
// keeps a generic plan, made while the tables looked empty: it joined the
// outcomes to deliveries by a scan of the whole table, so that every
// commit read every delivery until that ANALYZE (8 million rows read for
// 500 commits of 64 events, where the table held 32,000:
// TestAFreshDeploymentDoesNotScanDeliveriesEachCommit).
//
// So the store analyzes its young tables itself: a table of at least
// analyzeMinPages pages that has grown to more than analyzeGrowth times the
// pages its statistics counted (never analyzed: none). Its size is read
// from the file, which is current, where the statistics views' counts of
// changes reach them seconds late. An ANALYZE invalidates the plans cached
// on the table, and the next execution plans again, on the statistics.
// Planning each execution instead (plan_cache_mode = force_custom_plan)
// ended the scans too but cost two replicas a quarter of their
// throughput; per-table autovacuum thresholds in a migration would still
// wait for autovacuum's naptime.
//
// Below a few thousand rows the generic plan scans deliveries by choice
// (its estimate of the outcomes is ten rows, and a scan of a small table
// costs it less than ten lookups); it is the plan kept while the table
// grows that must go. So the commits count the rows they write, and
// whenever the count has grown by an eighth (analyzeFirst at least) the
// store looks, in a goroutine of its own (a commit never waits for it), at
// most one at a time. Looking is one query on the catalog; the steps
// grow with the count, so a store that has run long looks rarely, and
// autovacuum, once it runs, keeps relpages current: it finds nothing.
const (
	analyzeFirst    = 500 // rows written before the first look
	analyzeMinPages = 8
	analyzeGrowth   = 2
)

// analyzer decides when the store looks at its tables' statistics.
type analyzer struct {
	written atomic.Int64 // rows written by commits (events and outcomes)
	next    atomic.Int64 // the count at which to look next
	running atomic.Bool
	wg      sync.WaitGroup
}

// noteWritten counts n rows a commit wrote, and starts a look when the
// count reaches the next threshold and no look is running.
func (s *Store) noteWritten(n int) {
	a := &s.analyze
	if s.bg.Err() != nil {
		return // closed
	}
	w := a.written.Add(int64(n))
	next := a.next.Load()
	if w < next || !a.next.CompareAndSwap(next, w+max(analyzeFirst, w/8)) {
		return
	}
	if !a.running.CompareAndSwap(false, true) {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.running.Store(false)
		start := time.Now()
		tables, err := s.analyzeYoung(s.bg)
		switch {
		case err != nil && s.bg.Err() == nil:
			s.log.Warn("could not analyze the tables whose statistics are behind; autovacuum will", "err", err)
		case len(tables) > 0:
			s.log.Info("analyzed tables whose statistics were behind, so that cached plans are made again",
				"tables", tables, "took", time.Since(start))
		}
	}()
}

// youngSQL lists this schema's tables (partitions included: their
// parents have no rows of their own) whose statistics are far behind
// them. relpages is the size ANALYZE (or VACUUM) last saw.
const youngSQL = `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
	JOIN pg_namespace n ON n.oid = c.relnamespace
	CROSS JOIN LATERAL (SELECT pg_relation_size(c.oid) / current_setting('block_size')::int AS pages) p
	WHERE n.nspname = current_schema() AND c.relkind = 'r'
	AND p.pages >= $1 AND p.pages > $2 * greatest(c.relpages, 0)
	ORDER BY p.pages DESC`

// analyzeYoung analyzes the tables youngSQL lists, in one transaction
// under an advisory lock of the schema's: replicas on one database look
// at the same tables, and one analyzes them while the others skip. A
// replica that looks after it finds the statistics current.
func (s *Store) analyzeYoung(ctx context.Context) ([]string, error) {
	var tables []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// An ANALYZE waits for a VACUUM of its table, and cancels an
		// autovacuum's: it would rather skip this time.
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1s'"); err != nil {
			return err
		}
		var mine bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock("+schemaLock+")", "analyze").Scan(&mine); err != nil || !mine {
			return err
		}
		rows, err := tx.Query(ctx, youngSQL, analyzeMinPages, analyzeGrowth)
		if err != nil {
			return err
		}
		if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		for _, table := range tables {
			// The name comes quoted from format's %I.
			if _, err := tx.Exec(ctx, "ANALYZE "+table); err != nil {
				return fmt.Errorf("analyze %s: %w", table, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tables, nil
}
