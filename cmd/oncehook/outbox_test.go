package main_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	gateway "github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// shop is the user's own database, the gateway's too: its domain table
// (orders) written in the user's transactions, each of which publishes
// its order's event with the outbox.
type shop[TTx any] struct {
	driver store.TxDriver[TTx]
	begin  func(ctx context.Context) (tx TTx, commit, rollback func() error, err error)
	exec   func(ctx context.Context, tx TTx, q string, args ...any) error
	ids    func(t *testing.T) []string
	// pending counts the gateway's deliveries not yet done.
	pending func() int
}

func sqliteShop(t *testing.T, path string) shop[*sql.Tx] {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1) // one writer: SQLite's busy handler serves waiters in no order
	return shop[*sql.Tx]{
		driver: sqlite.TxDriver{},
		begin: func(ctx context.Context) (*sql.Tx, func() error, func() error, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, nil, nil, err
			}
			return tx, tx.Commit, tx.Rollback, nil
		},
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, sqliteParams(q), args...)
			return err
		},
		ids: func(t *testing.T) []string {
			rows, err := db.Query(`SELECT id FROM orders ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var ids []string
			for rows.Next() {
				var id string
				rows.Scan(&id)
				ids = append(ids, id)
			}
			return ids
		},
		pending: func() int {
			n := -1
			db.QueryRow(`SELECT COUNT(*) FROM deliveries WHERE state = 'pending'`).Scan(&n)
			return n
		},
	}
}

// sqliteParams turns PostgreSQL's $1, $2 into SQLite's ?NNN.
func sqliteParams(q string) string {
	out := []byte{}
	for i := 0; i < len(q); i++ {
		if q[i] == '$' {
			out = append(out, '?')
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}

func postgresShop(t *testing.T, url string) shop[pgx.Tx] {
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return shop[pgx.Tx]{
		driver: postgres.TxDriver{},
		begin: func(ctx context.Context) (pgx.Tx, func() error, func() error, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return nil, nil, nil, err
			}
			return tx, func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(context.WithoutCancel(ctx)) }, nil
		},
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		ids: func(t *testing.T) []string {
			rows, err := pool.Query(context.Background(), `SELECT id FROM orders ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return ids
		},
		pending: func() int {
			n := -1
			pool.QueryRow(context.Background(), `SELECT COUNT(*) FROM deliveries WHERE state = 'pending'`).Scan(&n)
			return n
		},
	}
}

// outboxConfig writes the config of a gateway whose one source is an
// outbox, delivering to sinkURL, with an API listener (an operator's
// token and a publisher's).
func outboxConfig(t *testing.T, dir, storeURL, sinkURL, apiAddr string) string {
	t.Helper()
	path := filepath.Join(dir, "oncehook.yaml")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
store: %q
delivery:
  lease: 4s
api:
  listen: %s
  tokens:
    - {name: ops, token: "ops-token-0123456789"}
    - {name: shop, token: "shop-token-0123456789", publish: [orders]}
sources:
  - name: orders
    outbox: true
    destinations: [capi]
destinations:
  - name: capi
    url: %s
    timeout: 3s
    retry: {max_attempts: 20, base_delay: 50ms, max_delay: 200ms}
`, storeURL, apiAddr, sinkURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Invariant 20, end to end, on each backend: 1,000 orders, each written
// with its event in one of the user's transactions, while the gateway
// delivers them and is killed with kill -9 halfway (publishes go on while
// it is down: they need only the database). A fifth of the transactions
// roll back after publishing; three tenths are retried whole after a
// simulated timeout (half of those timed out after their commit, so the
// retry's publish is a duplicate; half before it, rolled back, so the
// retry's is new). Every committed order reaches the destination, which
// dedupes on Idempotency-Key as a real one does; no rolled-back one ever
// does. Then a reconciliation pass re-publishes every order, marked
// Reconcile: all republished (none a duplicate), no delivery, each
// counted in the hour's rollup.
func TestOutboxDeliversCommittedOrdersOnceAcrossAKill(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		runOutboxKill(t, dir, "sqlite://./events.db", func(t *testing.T) shop[*sql.Tx] {
			return sqliteShop(t, filepath.Join(dir, "events.db"))
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := testenv.Postgres(t)
		runOutboxKill(t, t.TempDir(), url, func(t *testing.T) shop[pgx.Tx] { return postgresShop(t, url) })
	})
}

func runOutboxKill[TTx any](t *testing.T, dir, storeURL string, open func(*testing.T) shop[TTx]) {
	ctx := context.Background()
	var mu sync.Mutex
	effects := map[string]int{} // the destination's attempts by Idempotency-Key
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		effects[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
	delivered := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(effects))
		for k, v := range effects {
			out[k] = v
		}
		return out
	}
	apiAddr := freeAddr(t)
	cfgPath := outboxConfig(t, dir, storeURL, sink.URL, apiAddr)
	p := startProcess(t, dir, "--config", cfgPath) // migrates the database
	s := open(t)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	outbox, err := gateway.NewOutbox(cfg, s.driver)
	if err != nil {
		t.Fatal(err)
	}
	{
		tx, commit, _, err := s.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.exec(ctx, tx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
	}

	// attempt is one whole transaction: the sale, and its event.
	var publishOpts *gateway.PublishOptions // the reconciliation pass's: Reconcile
	attempt := func(id string, total int, commit bool) (gateway.Published, error) {
		tx, commitTx, rollback, err := s.begin(ctx)
		if err != nil {
			return gateway.Published{}, err
		}
		if err := s.exec(ctx, tx, `INSERT INTO orders (id, total) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, total); err != nil {
			rollback()
			return gateway.Published{}, err
		}
		body := fmt.Appendf(nil, `{"event_name":"Purchase","event_id":%q,"value":%d}`, id, total)
		pub, err := outbox.PublishTx(ctx, tx, "orders", id, body, publishOpts)
		if err != nil {
			rollback()
			return pub, err
		}
		if !commit {
			return pub, rollback()
		}
		return pub, commitTx()
	}

	const orders = 1000
	var committed, rolledBack, retriedDup sync.Map
	var done atomic.Int64
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				id := fmt.Sprintf("ord_%04d", i)
				var err error
				switch i % 10 {
				case 0, 1: // rolled back after publishing
					_, err = attempt(id, i, false)
					rolledBack.Store(id, true)
				case 2, 3, 4: // retried whole after a timeout
					if i%2 == 0 {
						// The commit went through; the caller never heard.
						if _, err = attempt(id, i, true); err == nil {
							var again gateway.Published
							if again, err = attempt(id, i, true); err == nil && !again.Duplicate {
								t.Errorf("%s: the retry's publish was new, want a duplicate", id)
							}
							retriedDup.Store(id, true)
						}
					} else {
						// Timed out before the commit: rolled back, retried.
						if _, err = attempt(id, i, false); err == nil {
							var again gateway.Published
							if again, err = attempt(id, i, true); err == nil && again.Duplicate {
								t.Errorf("%s: the retry after a rollback was a duplicate", id)
							}
						}
					}
					committed.Store(id, true)
				default:
					_, err = attempt(id, i, true)
					committed.Store(id, true)
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
				done.Add(1)
			}
		})
	}
	// The kill happens mid-run, from a goroutine of its own; the restart,
	// which may fail the test, on the test's goroutine once the rest has
	// been published (t.Fatal elsewhere would leave this test hanging).
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for done.Load() < orders/2 {
			time.Sleep(5 * time.Millisecond)
		}
		p.kill() // kill -9, mid-run: nothing of its shutdown runs
	}()
	start := time.Now()
	for i := range orders {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d orders published in %v", orders, time.Since(start).Round(time.Millisecond))
	<-killed
	p2 := startProcess(t, dir, "--config", cfgPath)
	defer p2.kill()

	want := map[string]bool{}
	committed.Range(func(k, _ any) bool { want["orders:"+k.(string)] = true; return true })
	// Every delivery done, as the store says: attempts made before the
	// kill whose outcome it never recorded have been made again (their
	// leases expired) by now.
	if !testenv.WaitFor(60*time.Second, func() bool { return len(delivered()) >= len(want) && s.pending() == 0 }) {
		t.Fatalf("%d of %d committed orders delivered, %d deliveries pending; stderr:\n%s", len(delivered()), len(want), s.pending(), p2.stderr)
	}
	got := delivered()
	repeats := 0
	for key, n := range got {
		if !want[key] {
			t.Errorf("delivered %s, which was never committed", key)
		}
		repeats += n - 1
	}
	rolledBack.Range(func(k, _ any) bool {
		if got["orders:"+k.(string)] > 0 {
			t.Errorf("%s rolled back, and was delivered", k)
		}
		return true
	})
	// The destination dedupes on Idempotency-Key: each committed order
	// took effect once. An attempt the destination answered just before
	// the kill, its outcome not yet committed, is made again after the
	// restart with the same key (invariant 6): at most the attempts that
	// were in flight then.
	if repeats > 64 {
		t.Errorf("%d repeated attempts: more than were in flight at the kill", repeats)
	}
	t.Logf("%d committed orders delivered, %d attempts repeated after the kill -9, %d rolled-back orders never delivered", len(got), repeats, orders-len(want))

	// The reconciliation pass: every order written is published again,
	// marked as one, so that it is counted as republished, not as the
	// duplicates that reveal a provider's trouble (invariant 27).
	publishOpts = &gateway.PublishOptions{Reconcile: true}
	before := len(sink.Deliveries())
	ids := s.ids(t)
	if len(ids) != len(want) {
		t.Fatalf("%d orders in the domain table, %d committed", len(ids), len(want))
	}
	for _, id := range ids {
		pub, err := attempt(id, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		if !pub.Duplicate || !pub.Republished {
			t.Fatalf("reconciliation: %s: %+v, want republished", id, pub)
		}
	}
	time.Sleep(time.Second)
	if n := len(sink.Deliveries()) - before; n != 0 {
		t.Fatalf("the reconciliation pass made %d deliveries, want none", n)
	}
	dups := 0
	retriedDup.Range(func(any, any) bool { dups++; return true })
	// The hour's rollup, as /v1/stats (and the dashboard) read it.
	var stats struct {
		Sources []struct {
			Name  string `json:"name"`
			Total struct {
				Accepted    int64 `json:"accepted"`
				Duplicate   int64 `json:"duplicate"`
				Republished int64 `json:"republished"`
			} `json:"total"`
		} `json:"sources"`
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+apiAddr+"/v1/stats?source=orders", nil)
	req.Header.Set("Authorization", "Bearer ops-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || len(stats.Sources) != 1 {
		t.Fatalf("stats %+v %v", stats, err)
	}
	total := stats.Sources[0].Total
	if total.Duplicate != int64(dups) || total.Accepted != int64(len(want)) || total.Republished != int64(len(ids)) {
		t.Fatalf("rollups: accepted %d, duplicate %d, republished %d; want %d accepted (committed), %d duplicates (the retries after a commit) and %d republished (the reconciliation pass)",
			total.Accepted, total.Duplicate, total.Republished, len(want), dups, len(ids))
	}
	t.Logf("rollups: %d accepted, %d duplicates (retries after a commit), %d republished (the reconciliation pass)", total.Accepted, total.Duplicate, total.Republished)
}
