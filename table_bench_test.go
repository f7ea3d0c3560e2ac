package oncehook_test

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// benchRows is how many rows BenchmarkTableSource takes from each table
// (ONCEHOOK_BENCH_ROWS overrides it).
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("ONCEHOOK_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 5000
}

// fill inserts n rows of about 200 bytes, 100 to a transaction.
func (o *outboxTable) fill(b testing.TB, prefix string, n int) {
	payload := []byte(`{"order_id":"` + strings.Repeat("x", 160) + `","event":"order.created","value":12.5}`)
	for i := 0; i < n; i += 100 {
		var rows []outboxRow
		for j := i; j < min(n, i+100); j++ {
			rows = append(rows, outboxRow{id: fmt.Sprintf("%s-%07d", prefix, j), aggType: "order",
				aggID: fmt.Sprintf("cust-%d", j%50), typ: "order.created", payload: payload})
		}
		if err := o.insert(b, true, rows...); err != nil {
			b.Fatal(err)
		}
	}
}

// drain is the bare drainer the consumer is measured against: the same
// transaction's shape (lock a batch of 100 with SKIP LOCKED, read every
// column, delete those rows, commit) with nothing in between, until the
// table is empty.
func (o *outboxTable) drain(b testing.TB) int {
	taken := 0
	sel := "SELECT id, aggregatetype, aggregateid, type, payload, headers FROM " + o.table + " ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED"
	for {
		tx, err := o.db.BeginTx(b.Context(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			b.Fatal(err)
		}
		rows, err := tx.Query(sel)
		if err != nil {
			b.Fatal(err)
		}
		var ids []any
		for rows.Next() {
			var id, at, ai, ty, h sql.NullString
			var p []byte
			if err := rows.Scan(&id, &at, &ai, &ty, &p, &h); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id.String)
		}
		rows.Close()
		if len(ids) == 0 {
			tx.Rollback()
			return taken
		}
		ph := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
		if o.kind == "postgres" {
			var p []string
			for i := range ids {
				p = append(p, fmt.Sprintf("$%d", i+1))
			}
			ph = strings.Join(p, ", ")
		}
		if _, err := tx.Exec("DELETE FROM "+o.table+" WHERE id IN ("+ph+")", ids...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		taken += len(ids)
	}
}

// BenchmarkTableSource: rows per second a table source takes (claimed in
// oncehook's store, deleted from the table) and delivers to an HTTP sink,
// from a PostgreSQL and a MariaDB table filled beforehand, against a bare
// drainer that selects and deletes the same number of rows from the same
// database in the same run. Run it once (each run takes benchRows rows):
//
//	go test -run '^$' -bench TableSource -benchtime 1x .
//
// The store is SQLite (oncehook's default), or PostgreSQL with
// ONCEHOOK_BENCH_STORE=postgres.
func BenchmarkTableSource(b *testing.B) {
	for _, kind := range []string{"postgres", "mysql"} {
		b.Run(kind, func(b *testing.B) {
			n := benchRows()
			o := newOutboxTable(b, kind, nil)
			o.fill(b, "drain", n)
			start := time.Now()
			if got := o.drain(b); got != n {
				b.Fatalf("drained %d of %d", got, n)
			}
			bare := float64(n) / time.Since(start).Seconds()

			o.fill(b, "ord", n)
			sink := testenv.NewSink(b)
			store := "sqlite://$DIR/oncehook.db"
			if os.Getenv("ONCEHOOK_BENCH_STORE") == "postgres" {
				store = testenv.Postgres(b)
			}
			b.ResetTimer()
			start = time.Now()
			gw := oncehooktest.Start(b, o.configWith(store, sink.URL, ""))
			if !testenv.WaitFor(10*time.Minute, func() bool { return o.count(b, "") == 0 }) {
				b.Fatalf("%d rows left", o.count(b, ""))
			}
			claimed := float64(n) / time.Since(start).Seconds()
			if !testenv.WaitFor(10*time.Minute, func() bool { return len(sink.Deliveries()) >= n }) {
				b.Fatalf("%d of %d delivered", len(sink.Deliveries()), n)
			}
			delivered := float64(n) / time.Since(start).Seconds()
			b.StopTimer()
			gw.Stop()
			b.ReportMetric(bare, "drained_rows/s")
			b.ReportMetric(claimed, "claimed_rows/s")
			b.ReportMetric(delivered, "delivered_rows/s")
			b.ReportMetric(claimed/bare, "claimed/drained")
		})
	}
}

// BenchmarkTableSourceLatency: from a row's commit to its delivery at an
// HTTP sink, one row at a time, woken by PostgreSQL's NOTIFY (the trigger
// `oncehook outbox ddl --trigger` prints) and by the poll alone
// (poll_interval 1s, the default) on PostgreSQL and MariaDB:
//
//	go test -run '^$' -bench TableSourceLatency -benchtime 1x .
func BenchmarkTableSourceLatency(b *testing.B) {
	for _, c := range []struct{ name, kind string }{{"postgres-notify", "postgres"}, {"postgres-poll", "postgres"}, {"mysql-poll", "mysql"}} {
		b.Run(c.name, func(b *testing.B) {
			o := newOutboxTable(b, c.kind, nil)
			if c.name == "postgres-poll" {
				o.exec(b, `DROP TRIGGER oncehook_notify ON `+o.table)
			}
			sink := testenv.NewSink(b)
			oncehooktest.Start(b, strings.Replace(o.config(sink.URL, ""), ", poll_interval: 200ms", "", 1))
			time.Sleep(500 * time.Millisecond)
			l := o.latencies(b, sink, 30, time.Second, 20*time.Second)
			b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(l[len(l)*9/10].Microseconds())/1000, "p90_ms")
			b.ReportMetric(float64(l[len(l)-1].Microseconds())/1000, "max_ms")
		})
	}
}
