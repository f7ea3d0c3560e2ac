package effect_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/store/sqlite"
)

// Do around a side effect: however many times a reminder job runs (a
// retry, a deploy that killed it midway, a cron that fired on two
// replicas), the message goes out once, and every later run gets the first
// run's result.
func Example() {
	dir, _ := os.MkdirTemp("", "effect-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "oncehook.db"), sqlite.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	ledger := effect.New(st, effect.Options{}) // a Gateway's Effects() shares its commits

	sends := 0
	remind := func() {
		result, alreadyDone, err := effect.Do(context.Background(), ledger, "pix-reminder:HP123:24h", effect.ClaimOptions{Lease: 30 * time.Second},
			func(ctx context.Context, c effect.Claim) (json.RawMessage, error) {
				// c.Reclaimed: a previous run stopped halfway; look up
				// whether it sent the message before sending it again.
				sends++
				return json.RawMessage(`{"message_id":"wamid.1"}`), nil
			})
		fmt.Println(string(result), "already done:", alreadyDone, "err:", err)
	}
	remind()
	remind()
	fmt.Println("messages sent:", sends)
	// Output:
	// {"message_id":"wamid.1"} already done: false err: <nil>
	// {"message_id":"wamid.1"} already done: true err: <nil>
	// messages sent: 1
}

// Claim and Complete by hand, for work that outlives one call: renew the
// lease while it runs, release it on a retryable failure.
func ExampleLedger_claim() {
	dir, _ := os.MkdirTemp("", "effect-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(context.Background(), filepath.Join(dir, "oncehook.db"), sqlite.Options{})
	defer st.Close()
	var l effect.Ledger = effect.New(st, effect.Options{})
	ctx := context.Background()

	c, _ := l.Claim(ctx, "llm-summary:evt_1", effect.ClaimOptions{Lease: time.Minute})
	fmt.Println("attempt", c.Attempt, "owned:", c.Token != "")
	_, err := l.Claim(ctx, "llm-summary:evt_1", effect.ClaimOptions{})
	fmt.Println("second claimer:", err != nil)

	l.Release(ctx, "llm-summary:evt_1", c.Token, "the model timed out")
	c, _ = l.Claim(ctx, "llm-summary:evt_1", effect.ClaimOptions{Lease: time.Minute})
	fmt.Println("attempt", c.Attempt)
	l.Complete(ctx, "llm-summary:evt_1", c.Token, json.RawMessage(`{"summary":"..."}`))
	rec, _ := l.Get(ctx, "llm-summary:evt_1")
	fmt.Println(rec.State, len(rec.Attempts), rec.Attempts[0].Outcome)
	// Output:
	// attempt 1 owned: true
	// second claimer: true
	// attempt 2
	// done 2 released
}

// In your transaction: "done" commits with the application's own write, in
// its own transaction on oncehook's database, or not at all.
func ExampleNewTx() {
	dir, _ := os.MkdirTemp("", "effect-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "oncehook.db")
	st, _ := sqlite.Open(context.Background(), path, sqlite.Options{})
	defer st.Close()
	db, _ := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	defer db.Close()
	db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT)`)
	ctx := context.Background()

	ledger := effect.NewTx(sqlite.TxDriver{}, effect.Options{}) // postgres.TxDriver{} for a pgx.Tx
	tx, _ := db.BeginTx(ctx, nil)
	c, err := ledger.Claim(ctx, tx, "ship:order-987", effect.ClaimOptions{})
	if err == nil && !c.AlreadyDone {
		tx.Exec(`INSERT INTO orders VALUES ('order-987', 'shipped')`)
		ledger.Complete(ctx, tx, "ship:order-987", c.Token, json.RawMessage(`{"tracking":"BR123"}`))
	}
	tx.Commit()

	rec, _ := effect.New(st, effect.Options{}).Get(ctx, "ship:order-987")
	fmt.Println(rec.State, string(rec.Result))
	// Output:
	// done {"tracking":"BR123"}
}
