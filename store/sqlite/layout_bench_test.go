package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store/sqlite"
)

// BenchmarkDeliveryLayout weighs the layout issue 30 proposed for the
// common case (one destination, a first attempt that succeeds) against
// today's, on the store's own schema and the statements of its hot path:
//
//   - rows: the event's row, then the delivery's row handed off leased;
//     the outcome rewrites the delivery's row (today's).
//   - event: the delivery's state in the event's row (the columns added,
//     and a due index over them), one insert; the outcome rewrites the
//     event's row.
//
// It answers whether the event's row would write fewer pages: the second
// row's insert goes, but the outcome then dirties the events' pages (a few
// rows of 1 KiB bodies each) instead of the deliveries' (dozens of small
// rows each). Read cpu-µs/event and writes/event; keys sequential and
// random, commits of 16 claims and the previous commit's 16 outcomes, as
// BenchmarkTick.
func BenchmarkDeliveryLayout(b *testing.B) {
	for _, layout := range []string{"rows", "event"} {
		for _, keys := range []string{"sequential", "random"} {
			b.Run(layout+"/"+keys, func(b *testing.B) { benchLayout(b, layout, keys == "random") })
		}
	}
}

func benchLayout(b *testing.B, layout string, random bool) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "layout.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{}) // today's schema, every migration applied
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)&_pragma=cache_size(-32768)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	const outcomeSet = `SET state = 'delivered', attempts = 1, lease_token = NULL, lease_expires_at = NULL, last_status = ?, last_error = ?, updated_at = ?,
		first_started_at = ?, first_duration_ms = ?, first_status = ?, first_response = ?, first_script_digest = ?, first_sent_digest = ?
		WHERE id = ? AND lease_token = ? AND first_started_at IS NULL`
	const eventColumns = `source, key, keyless, content_type, headers, body, received_at, expires_at, type, filtered, trace, body_expires_at`
	var insertEvent, insertDelivery, outcome string
	switch layout {
	case "rows":
		insertEvent = `INSERT INTO events (` + eventColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source, key) DO NOTHING`
		insertDelivery = `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at, lease_token, lease_expires_at, attempts) VALUES (?, ?, ?, ?, ?, ?, 1)`
		outcome = `UPDATE deliveries ` + outcomeSet
	case "event":
		for _, column := range []string{"destination TEXT", "state TEXT NOT NULL DEFAULT 'pending'", "attempts INTEGER NOT NULL DEFAULT 0",
			"next_attempt_at INTEGER", "lease_token TEXT", "lease_expires_at INTEGER", "last_status INTEGER", "last_error TEXT", "updated_at INTEGER",
			"first_started_at INTEGER", "first_duration_ms INTEGER", "first_status INTEGER", "first_response TEXT",
			"first_script_digest TEXT", "first_sent_digest TEXT"} {
			if _, err := db.Exec("ALTER TABLE events ADD COLUMN " + column); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := db.Exec(`CREATE INDEX events_due ON events (next_attempt_at) WHERE state = 'pending'`); err != nil {
			b.Fatal(err)
		}
		insertEvent = `INSERT INTO events (` + eventColumns + `, destination, next_attempt_at, updated_at, lease_token, lease_expires_at, attempts)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (source, key) DO NOTHING`
		outcome = `UPDATE events ` + outcomeSet
	}
	// Prepared once, as the store's writer prepares its statements.
	prepare := func(query string) *sql.Stmt {
		if query == "" {
			return nil
		}
		st, err := db.Prepare(query)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	insertEventStmt, insertDeliveryStmt, outcomeStmt := prepare(insertEvent), prepare(insertDelivery), prepare(outcome)
	body := []byte(strings.Repeat("x", 1024))
	const token = "lease_0123456789abcdef"
	seed := uint64(88172645463325252)
	n := 0
	var pending []int64
	b.ResetTimer()
	cpu := testenv.CPUTime()
	calls, _ := testenv.Writes()
	for b.Loop() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now().UnixMilli()
		out, ins := tx.Stmt(outcomeStmt), tx.Stmt(insertEventStmt)
		var del *sql.Stmt
		if insertDeliveryStmt != nil {
			del = tx.Stmt(insertDeliveryStmt)
		}
		for _, id := range pending {
			if _, err := out.Exec(200, "", now, now-3, 2, 200, "", "", "", id, token); err != nil {
				b.Fatal(err)
			}
		}
		pending = pending[:0]
		for range 16 {
			n++
			key := fmt.Sprintf("evt_%012d", n)
			if random {
				seed ^= seed << 13
				seed ^= seed >> 7
				seed ^= seed << 17
				key = fmt.Sprintf("evt_%016x", seed)
			}
			args := []any{"bench", key, false, "application/json", "{}", body, now, now + time.Hour.Milliseconds(), "invoice.paid", "", "", nil}
			if layout == "event" {
				args = append(args, "app", now+40_000, now, token, now+40_000)
			}
			res, err := ins.Exec(args...)
			if err != nil {
				b.Fatal(err)
			}
			id, _ := res.LastInsertId()
			if layout == "rows" {
				if res, err = del.Exec(id, "app", now+40_000, now, token, now+40_000); err != nil {
					b.Fatal(err)
				}
				id, _ = res.LastInsertId()
			}
			pending = append(pending, id)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((testenv.CPUTime()-cpu).Microseconds())/float64(n), "cpu-µs/event")
	calls2, _ := testenv.Writes()
	b.ReportMetric(float64(calls2-calls)/float64(n), "writes/event")
}
