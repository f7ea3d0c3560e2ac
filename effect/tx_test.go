package effect_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// outbox is one database of each kind, with oncehook's tables (a store
// opened on it) and the user's own table, reached through the user's own
// transactions.
type outbox struct {
	name  string
	store store.Store
	begin func(t *testing.T) (tx any, exec func(q string) error, commit, rollback func() error)
	// claim and complete are the TxLedger's, on the tx begin made.
	claim    func(ctx context.Context, tx any, key string) (effect.Claim, error)
	complete func(ctx context.Context, tx any, key, token string, result json.RawMessage) error
	orders   func(t *testing.T) int
}

// through returns claim and complete of a TxLedger, on a tx of its type.
func through[TTx any](l *effect.TxLedger[TTx]) (func(context.Context, any, string) (effect.Claim, error), func(context.Context, any, string, string, json.RawMessage) error) {
	return func(ctx context.Context, tx any, key string) (effect.Claim, error) {
			return l.Claim(ctx, tx.(TTx), key, effect.ClaimOptions{})
		}, func(ctx context.Context, tx any, key, token string, result json.RawMessage) error {
			return l.Complete(ctx, tx.(TTx), key, token, result)
		}
}

func sqliteOutbox(t *testing.T) (outbox, string) {
	path := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, reminded INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	claim, complete := through(effect.NewTx(sqlite.TxDriver{}, effect.Options{}))
	return outbox{
		name: "sqlite", store: s, claim: claim, complete: complete,
		begin: func(t *testing.T) (any, func(string) error, func() error, func() error) {
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx, func(q string) error { _, err := tx.Exec(q); return err }, tx.Commit, tx.Rollback
		},
		orders: func(t *testing.T) int {
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	}, path
}

func postgresOutbox(t *testing.T) (outbox, string) {
	url := testenv.Postgres(t)
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), `CREATE TABLE orders (id TEXT PRIMARY KEY, reminded BOOLEAN NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	claim, complete := through(effect.NewTx(postgres.TxDriver{}, effect.Options{}))
	return outbox{
		name: "postgres", store: s, claim: claim, complete: complete,
		begin: func(t *testing.T) (any, func(string) error, func() error, func() error) {
			tx, err := conn.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return tx, func(q string) error { _, err := tx.Exec(context.Background(), q); return err },
				func() error { return tx.Commit(context.Background()) }, func() error { return tx.Rollback(context.Background()) }
		},
		orders: func(t *testing.T) int {
			var n int
			if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	}, url
}

// The outbox: "done" commits or rolls back with the user's own write.
func TestOutboxCommitsWithTheUsersTransaction(t *testing.T) {
	for _, open := range []func(*testing.T) (outbox, string){sqliteOutbox, postgresOutbox} {
		o, _ := open(t)
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			tx, exec, _, rollback := o.begin(t)
			c, err := o.claim(ctx, tx, "reminder:order-1")
			if err != nil || c.Token == "" {
				t.Fatalf("Claim in the transaction: %+v %v", c, err)
			}
			if err := exec(`INSERT INTO orders VALUES ('order-1', true)`); err != nil {
				t.Fatal(err)
			}
			if err := o.complete(ctx, tx, "reminder:order-1", c.Token, json.RawMessage(`{"sent":true}`)); err != nil {
				t.Fatal(err)
			}
			if err := rollback(); err != nil {
				t.Fatal(err)
			}
			if _, err := o.store.Effect(ctx, "reminder:order-1"); !errors.Is(err, store.ErrNotFound) || o.orders(t) != 0 {
				t.Fatalf("after a rollback: %v, %d orders; want nothing at all", err, o.orders(t))
			}

			tx, exec, commit, _ := o.begin(t)
			c, err = o.claim(ctx, tx, "reminder:order-1")
			if err != nil {
				t.Fatal(err)
			}
			if err := exec(`INSERT INTO orders VALUES ('order-1', true)`); err != nil {
				t.Fatal(err)
			}
			if err := o.complete(ctx, tx, "reminder:order-1", c.Token, json.RawMessage(`{"sent":true}`)); err != nil {
				t.Fatal(err)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			rec, err := o.store.Effect(ctx, "reminder:order-1")
			if err != nil || rec.State != store.EffectDone || string(rec.Result) != `{"sent":true}` || o.orders(t) != 1 {
				t.Fatalf("after a commit: %+v %v", rec, err)
			}
			// The ledger then answers everyone else with the result.
			l := effect.New(o.store, effect.Options{})
			if c, err := l.Claim(ctx, "reminder:order-1", effect.ClaimOptions{}); err != nil || !c.AlreadyDone {
				t.Fatalf("claim after the outbox commit: %+v %v", c, err)
			}
		})
	}
}

// A transaction that committed is done, even when its process is killed
// (kill -9) right after the commit.
func TestOutboxSurvivesKillRightAfterCommit(t *testing.T) {
	if os.Getenv("ONCEHOOK_OUTBOX_CHILD") != "" {
		outboxChild()
		return
	}
	for _, open := range []func(*testing.T) (outbox, string){sqliteOutbox, postgresOutbox} {
		o, dsn := open(t)
		t.Run(o.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestOutboxSurvivesKillRightAfterCommit$")
			cmd.Env = append(os.Environ(), "ONCEHOOK_OUTBOX_CHILD="+o.name, "ONCEHOOK_OUTBOX_DSN="+dsn)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "committed") {
				cmd.Process.Kill()
				t.Fatalf("child: %q %v", line, err)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			rec, err := o.store.Effect(context.Background(), "reminder:killed")
			if err != nil || rec.State != store.EffectDone || o.orders(t) != 1 {
				t.Fatalf("after kill -9 right after the commit: %+v %v, %d orders", rec, err, o.orders(t))
			}
		})
	}
}

// outboxChild commits one outbox transaction, says so, and waits to be
// killed.
func outboxChild() {
	ctx := context.Background()
	dsn := os.Getenv("ONCEHOOK_OUTBOX_DSN")
	fail := func(err error) {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(1)
	}
	var tx any
	var exec func(string) error
	var commit func() error
	var claim func(context.Context, any, string) (effect.Claim, error)
	var complete func(context.Context, any, string, string, json.RawMessage) error
	switch os.Getenv("ONCEHOOK_OUTBOX_CHILD") {
	case "sqlite":
		db, err := sql.Open("sqlite", "file:"+dsn+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
		if err != nil {
			fail(err)
		}
		t, err := db.BeginTx(ctx, nil)
		if err != nil {
			fail(err)
		}
		tx, exec, commit = t, func(q string) error { _, err := t.Exec(q); return err }, t.Commit
		claim, complete = through(effect.NewTx(sqlite.TxDriver{}, effect.Options{}))
	default:
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			fail(err)
		}
		t, err := conn.Begin(ctx)
		if err != nil {
			fail(err)
		}
		tx, exec, commit = t, func(q string) error { _, err := t.Exec(ctx, q); return err }, func() error { return t.Commit(ctx) }
		claim, complete = through(effect.NewTx(postgres.TxDriver{}, effect.Options{}))
	}
	c, err := claim(ctx, tx, "reminder:killed")
	if err != nil {
		fail(err)
	}
	if err := exec(`INSERT INTO orders VALUES ('order-killed', true)`); err != nil {
		fail(err)
	}
	if err := complete(ctx, tx, "reminder:killed", c.Token, json.RawMessage(`1`)); err != nil {
		fail(err)
	}
	if err := commit(); err != nil {
		fail(err)
	}
	os.Stdout.WriteString("committed\n")
	time.Sleep(time.Hour)
}

// One set of rules for every path: the ledger in the caller's transaction
// refuses what the in-process one refuses, with the same field named, and
// keeps a record as long as retention_by_prefix says.
func TestTxLedgerKeepsTheLedgersRules(t *testing.T) {
	o, _ := sqliteOutbox(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	opts := effect.Options{MaxResult: 16, MaxLease: time.Minute, RetentionByPrefix: map[string]time.Duration{"llm:": 2 * time.Hour},
		Now: func() time.Time { return now }}
	txl := effect.NewTx(sqlite.TxDriver{}, opts)
	local := effect.New(o.store, opts)
	long := strings.Repeat("f", effect.MaxFingerprint+1)
	for _, c := range []struct {
		name, field string
		tx          func(tx *sql.Tx) error
		local       func() error
	}{
		{"fingerprint", "fingerprint",
			func(tx *sql.Tx) error {
				_, err := txl.Claim(ctx, tx, "llm:1", effect.ClaimOptions{Fingerprint: long})
				return err
			},
			func() error { _, err := local.Claim(ctx, "llm:1", effect.ClaimOptions{Fingerprint: long}); return err }},
		{"lease", "lease",
			func(tx *sql.Tx) error {
				_, err := txl.Claim(ctx, tx, "llm:1", effect.ClaimOptions{Lease: time.Hour})
				return err
			},
			func() error { _, err := local.Claim(ctx, "llm:1", effect.ClaimOptions{Lease: time.Hour}); return err }},
		{"result", "result",
			func(tx *sql.Tx) error {
				return txl.Complete(ctx, tx, "llm:1", "tok", json.RawMessage(`"seventeen bytes"`))
			},
			func() error { return local.Complete(ctx, "llm:1", "tok", json.RawMessage(`"seventeen bytes"`)) }},
		{"reason", "error",
			func(tx *sql.Tx) error { return txl.Fail(ctx, tx, "llm:1", "tok", "a\x00b") },
			func() error { return local.Fail(ctx, "llm:1", "tok", "a\x00b") }},
	} {
		tx, _, _, rollback := o.begin(t)
		errTx, errLocal := c.tx(tx.(*sql.Tx)), c.local()
		rollback()
		var a, b *effect.InvalidError
		if !errors.As(errTx, &a) || !errors.As(errLocal, &b) || a.Field != c.field || *a != *b {
			t.Errorf("%s: in a transaction %v, in process %v; want the same refusal of %s", c.name, errTx, errLocal, c.field)
		}
	}
	tx, _, commit, _ := o.begin(t)
	cl, err := txl.Claim(ctx, tx.(*sql.Tx), "llm:2", effect.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := txl.Complete(ctx, tx.(*sql.Tx), "llm:2", cl.Token, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	rec, err := o.store.Effect(ctx, "llm:2")
	if err != nil || !rec.ExpiresAt.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("record %+v %v: want it kept 2h (retention_by_prefix llm:)", rec, err)
	}
}
