package oncehook_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

const benchOutboxConfig = `
sources: [{name: orders, outbox: true, destinations: [capi]}]
destinations: [{name: capi, url: "http://127.0.0.1:9"}]
`

func benchOutbox[TTx any](b *testing.B, driver store.TxDriver[TTx]) *oncehook.Outbox[TTx] {
	cfg, err := config.Parse([]byte(benchOutboxConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	o, err := oncehook.NewOutbox(cfg, driver)
	if err != nil {
		b.Fatal(err)
	}
	return o
}

// tx names what BenchmarkOutboxTx alternates.
var tx = [2]string{"order", "order+publish"}

// The cost of the outbox in the user's transaction: one order row, then
// the same row and its event, one transaction each, in the same run (go
// test -run '^$' -bench OutboxTx .). The ratio is the price of publishing
// with the domain write.
func BenchmarkOutboxTx(b *testing.B) {
	ctx := context.Background()
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "oncehook.db")
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		db := sqlitetest.Open(b, path)
		if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		o := benchOutbox[*sql.Tx](b, sqlite.TxDriver{})
		var n atomic.Int64
		one := func(b *testing.B, publish bool) error {
			id := fmt.Sprint("ord_", n.Add(1))
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.Exec(`INSERT INTO orders (id, total) VALUES (?, 1)`, id); err != nil {
				return err
			}
			if publish {
				if _, err := o.PublishTx(ctx, tx, "orders", id, []byte(`{"event_name":"Purchase","event_id":"`+id+`"}`), nil); err != nil {
					return err
				}
			}
			return tx.Commit()
		}
		b.Run("serial", func(b *testing.B) { alternate(b, 1, tx, one) })
	})
	b.Run("postgres", func(b *testing.B) {
		url := testenv.Postgres(b)
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		pcfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			b.Fatal(err)
		}
		pcfg.MaxConns = 16 // a connection for each of the 16 at once
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total BIGINT NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		if os.Getenv("ONCEHOOK_BENCH_NO_NOTIFY") != "" {
			// What the wake-up costs: PostgreSQL serialises the commits of
			// transactions that NOTIFY (one queue, in commit order).
			pool.Exec(ctx, `ALTER TABLE deliveries DISABLE TRIGGER deliveries_notify`)
		}
		o := benchOutbox[pgx.Tx](b, postgres.TxDriver{})
		var n atomic.Int64
		one := func(b *testing.B, publish bool) error {
			id := fmt.Sprint("ord_", n.Add(1))
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO orders (id, total) VALUES ($1, 1)`, id); err != nil {
					return err
				}
				if publish {
					_, err := o.PublishTx(ctx, tx, "orders", id, []byte(`{"event_name":"Purchase","event_id":"`+id+`"}`), nil)
					return err
				}
				return nil
			})
		}
		b.Run("serial", func(b *testing.B) { alternate(b, 1, tx, one) })
		b.Run("16", func(b *testing.B) { alternate(b, 8, tx, one) }) // 16 at once on 2 cores: a shop's checkout
	})
}

// alternate runs one of each in turn, on every goroutine (parallelism per
// core; 1: one goroutine), so that both meet the same disk and the same
// neighbours, and reports each one's mean time and their ratio.
func alternate(b *testing.B, parallelism int, names [2]string, one func(b *testing.B, publish bool) error) {
	var took [2]atomic.Int64
	var count [2]atomic.Int64
	run := func(publish bool) bool {
		i := 0
		if publish {
			i = 1
		}
		start := time.Now()
		if err := one(b, publish); err != nil {
			b.Error(err)
			return false
		}
		took[i].Add(int64(time.Since(start)))
		count[i].Add(1)
		return true
	}
	start := time.Now()
	if parallelism == 1 {
		for b.Loop() {
			if !run(false) || !run(true) {
				return
			}
		}
	} else {
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !run(false) || !run(true) {
					return
				}
			}
		})
	}
	wall := time.Since(start)
	mean := func(i int) float64 { return float64(took[i].Load()) / float64(max(count[i].Load(), 1)) }
	b.ReportMetric(mean(0)/1e3, names[0]+"-µs")
	b.ReportMetric(mean(1)/1e3, names[1]+"-µs")
	b.ReportMetric(mean(1)/mean(0), "ratio")
	if parallelism > 1 {
		// Both kinds shared the wall time: each got about half of it.
		b.ReportMetric(float64(count[1].Load())/wall.Seconds(), names[1]+"/s")
	}
}

// Publishes over HTTP (POST /v1/publish/orders) against intake's webhooks
// of the same body (POST /in/hooks, an unsigned generic source keyed by the
// same header) on the same gateway, alternating, 64 at once, each a new
// key answered after its durable commit, on SQLite FULL, the gateway
// delivering them all (go test -run '^$' -bench PublishHTTP .).
func BenchmarkPublishHTTP(b *testing.B) {
	sink := testenv.NewSink(b)
	gw := oncehooktest.Start(b, `store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: shop, token: `+shopToken+`, publish: [orders]}]}
sources:
  - {name: orders, outbox: true, destinations: [capi]}
  - {name: hooks, preset: generic, unsigned: true, key: ["header:Idempotency-Key"], destinations: [capi]}
destinations: [{name: capi, url: `+sink.URL+`}]
`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	var n atomic.Int64
	alternate(b, 32, [2]string{"intake", "publish"}, func(b *testing.B, publish bool) error {
		id := fmt.Sprint("ord_", n.Add(1))
		url, want := gw.URL+"/in/hooks", http.StatusOK
		if publish {
			url, want = gw.APIURL+"/v1/publish/orders", http.StatusAccepted
		}
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"event_name":"Purchase","event_id":"`+id+`"}`))
		req.Header.Set("Authorization", "Bearer "+shopToken)
		req.Header.Set("Idempotency-Key", id)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: %d", url, id, resp.StatusCode)
		}
		return nil
	})
}
