// Command conversions records sales and reports each one to Meta's
// Conversions API once, through oncehook's outbox.
//
// The sale and its Purchase event are written in one transaction: the
// sale's row in the shop's own table, the event with Outbox.PublishTx, on
// the gateway's database. They commit or roll back together: a checkout
// whose payment fails after the event was written reports nothing, and a
// checkout retried after a timeout (the browser's, the load balancer's)
// reports once, because its second publish is a duplicate. oncehook's
// worker delivers the event (the Conversions API's own body, published as
// it is) with retries, and the event_id Meta dedupes on is the order: a
// repeat that gets past oncehook (a crash between Meta's answer and the
// outcome's commit) is still one conversion there.
//
// The gateway's config names the outbox source and Meta as its
// destination (the URL with its access token):
//
//	store: sqlite://./oncehook.db
//	sources:
//	  - {name: purchases, outbox: true, destinations: [meta]}
//	destinations:
//	  - {name: meta, url: "https://graph.facebook.com/v21.0/<pixel>/events?access_token=..."}
//
// and this program reads the same file (its sources, and where the
// database is):
//
//	ONCEHOOK_CONFIG=oncehook.yaml LISTEN=127.0.0.1:9002 go run ./examples/conversions
//
// POST /checkout {"order_id":"o-1042","email":"a@example.com","value":99.9,"currency":"BRL"}
// records the sale and its conversion. On PostgreSQL the same code takes a
// pgx.Tx and postgres.TxDriver{}.
package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// Sale is a checkout.
type Sale struct {
	OrderID  string  `json:"order_id"`
	Email    string  `json:"email"`
	Value    float64 `json:"value"`
	Currency string  `json:"currency"`
}

// Shop records sales with their conversions.
type Shop struct {
	DB     *sql.DB // the gateway's SQLite file, opened with _txlock=immediate
	Outbox *oncehook.Outbox[*sql.Tx]
	// Charge takes the payment inside the sale's transaction: its error
	// rolls the sale back, and its conversion with it.
	Charge func(ctx context.Context, s Sale) error
	Now    func() time.Time
}

// Migrate creates the shop's own table beside oncehook's.
func (sh *Shop) Migrate(ctx context.Context) error {
	_, err := sh.DB.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sales (
		order_id TEXT PRIMARY KEY, email TEXT NOT NULL, value REAL NOT NULL, currency TEXT NOT NULL, sold_at INTEGER NOT NULL)`)
	return err
}

// Checkout records s and its Purchase in one transaction. A checkout of
// an order already recorded changes nothing (its publish is a duplicate).
func (sh *Shop) Checkout(ctx context.Context, s Sale) (duplicate bool, err error) {
	tx, err := sh.DB.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // after Commit: nothing
	now := sh.Now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO sales (order_id, email, value, currency, sold_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (order_id) DO NOTHING`, s.OrderID, s.Email, s.Value, s.Currency, now.Unix()); err != nil {
		return false, fmt.Errorf("record the sale: %w", err)
	}
	email := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(s.Email))))
	body, _ := json.Marshal(map[string]any{"data": []map[string]any{{
		"event_name": "Purchase", "event_time": now.Unix(), "event_id": "order:" + s.OrderID, "action_source": "website",
		"user_data":   map[string]any{"em": []string{hex.EncodeToString(email[:])}},
		"custom_data": map[string]any{"value": s.Value, "currency": s.Currency, "order_id": s.OrderID},
	}}})
	pub, err := sh.Outbox.PublishTx(ctx, tx, "purchases", "order:"+s.OrderID, body, nil)
	if err != nil {
		return false, err
	}
	if sh.Charge != nil {
		if err := sh.Charge(ctx, s); err != nil {
			return false, err // rolled back: the sale and its conversion
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return pub.Duplicate, nil
}

// ServeHTTP takes POST /checkout.
func (sh *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var s Sale
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&s); err != nil || s.OrderID == "" {
		http.Error(w, "want {order_id, email, value, currency}", http.StatusBadRequest)
		return
	}
	dup, err := sh.Checkout(r.Context(), s)
	var declined *DeclinedError
	switch {
	case errors.As(err, &declined):
		http.Error(w, err.Error(), http.StatusPaymentRequired)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case dup:
		w.WriteHeader(http.StatusOK) // recorded before: a retried checkout
	default:
		w.WriteHeader(http.StatusCreated)
	}
}

// DeclinedError is a payment that failed: the checkout is rolled back.
type DeclinedError struct{ Reason string }

func (e *DeclinedError) Error() string { return "payment declined: " + e.Reason }

// Open builds the shop on the gateway's config: its SQLite file and its
// sources.
func Open(cfg *config.Config) (*Shop, error) {
	path, ok := strings.CutPrefix(cfg.Store, "sqlite://")
	if !ok {
		return nil, errors.New("this example runs on SQLite (store: sqlite://...); on PostgreSQL take a pgx.Tx and postgres.TxDriver{}")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	// One connection: SQLite has one writer at a time, and writers that
	// wait in its busy handler are not served in order (with 16 waiting,
	// one waited past its 10 s timeout). The pool queues them instead.
	db.SetMaxOpenConns(1)
	outbox, err := oncehook.NewOutbox(cfg, sqlite.TxDriver{})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Shop{DB: db, Outbox: outbox, Now: time.Now}, nil
}

func main() {
	cfg, err := oncehook.LoadConfig(os.Getenv("ONCEHOOK_CONFIG"),
		// Only the kinds this program uses: its build holds no other
		// store's or broker's client.
		oncehook.Kinds{Stores: []store.Kind{sqlite.Kind()}})
	if err != nil {
		log.Fatal(err)
	}
	sh, err := Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := sh.Migrate(context.Background()); err != nil {
		log.Fatal(err)
	}
	listen := os.Getenv("LISTEN")
	if listen == "" {
		listen = "127.0.0.1:9002"
	}
	log.Printf("conversions: listening on %s, POST /checkout", listen)
	mux := http.NewServeMux()
	mux.Handle("POST /checkout", sh)
	log.Fatal(http.ListenAndServe(listen, mux))
}
