package oncehook_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// The outbox: a sale and its Purchase event written in one transaction.
// The one rolled back is never delivered; the one committed is delivered
// once, and publishing it again (a retried transaction) is a duplicate.
func ExampleOutbox_PublishTx() {
	delivered := make(chan string, 10)
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered <- r.Header.Get("Idempotency-Key")
	}))
	defer meta.Close()

	dir, _ := os.MkdirTemp("", "oncehook-outbox")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "oncehook.db")
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
store: sqlite://%s
sources:
  - {name: purchases, outbox: true, destinations: [meta]}
destinations:
  - {name: meta, url: %s}
`, path, meta.URL)), os.LookupEnv)
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	gw, err := oncehook.New(ctx, cfg, oncehook.Options{
		// The kinds this program uses: its build holds no other client
		// (the binary passes kinds.All()).
		Kinds: oncehook.Kinds{Stores: []store.Kind{sqlite.Kind()}},
	})
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error)
	go func() { done <- gw.Serve(ctx, ln) }()

	// The shop's own connection to the gateway's database, and its table.
	db, _ := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.Exec(`CREATE TABLE sales (id TEXT PRIMARY KEY, total INTEGER)`)
	outbox, err := oncehook.NewOutbox(cfg, sqlite.TxDriver{})
	if err != nil {
		panic(err)
	}
	sell := func(id string, commit bool) {
		tx, _ := db.BeginTx(ctx, nil)
		defer tx.Rollback()
		tx.Exec(`INSERT INTO sales (id, total) VALUES (?, 100) ON CONFLICT DO NOTHING`, id)
		pub, err := outbox.PublishTx(ctx, tx, "purchases", id, []byte(`{"event_name":"Purchase","event_id":"`+id+`"}`), nil)
		if err != nil {
			panic(err)
		}
		if commit {
			tx.Commit()
		}
		fmt.Printf("%s: duplicate %v, committed %v\n", id, pub.Duplicate, commit)
	}
	sell("sale-1", false) // the payment failed: rolled back
	sell("sale-2", true)
	sell("sale-2", true) // retried after a timeout
	fmt.Println("delivered with Idempotency-Key:", <-delivered)

	stop()
	<-done
	// Output:
	// sale-1: duplicate false, committed false
	// sale-2: duplicate false, committed true
	// sale-2: duplicate true, committed true
	// delivered with Idempotency-Key: purchases:sale-2
}
