package oncehook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
)

// Outbox publishes events from the user's own code into oncehook's
// database, inside the user's own transactions, the way River's InsertTx
// inserts a job: the event exists exactly when the transaction that
// published it commits (invariant 20). Write the domain row ("sale
// recorded") and publish its event ("Purchase, to Meta") in one
// transaction, and they commit or roll back together; the gateway's worker
// then delivers the event like any other (retries, dead letters, replay,
// order, rate limits), with Idempotency-Key: <source>:<key>.
//
// TTx is the backend's transaction type, and the driver the backend's:
// postgres.TxDriver for a pgx.Tx, sqlite.TxDriver for a *sql.Tx on the
// SQLite file (opened with _txlock=immediate). The transaction must be
// on the gateway's database (and, on PostgreSQL, its schema).
//
// An Outbox is built from a config (NewOutbox: in any process of the
// user's, the gateway running elsewhere) or from a running Gateway
// (GatewayOutbox: the same process, following its reloads). It decides
// each event's key, type, destinations (routes and filters) and order
// exactly as intake does (receive.Handler.Events), and counts what intake
// counts (the hourly rollups' accepted and duplicate events) in the same
// transaction.
//
// Only outbox sources (outbox: true) take publishes.
type Outbox[TTx any] struct {
	intake *receive.Core
	driver store.TxDriver[TTx]
	cfg    func() *config.Config
}

// NewOutbox returns the outbox of cfg's sources, for transactions of the
// driver's kind. It opens nothing: the caller's transactions are on the
// gateway's database, so it needs no store or broker kind (the brokers
// and store the config names are the gateway's to check). cfg is
// validated (and its defaults set, as Load does); a reload of the
// gateway's config is not seen: build another.
func NewOutbox[TTx any](cfg *config.Config, driver store.TxDriver[TTx]) (*Outbox[TTx], error) {
	p, err := compileWith(cfg, checker{partsOnly: true})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p.close() // an outbox runs no transformation: the gateway's worker does
	sources := p.sources
	var current atomic.Pointer[config.Config]
	current.Store(cfg)
	return &Outbox[TTx]{
		intake: receive.NewCore(receive.Options{Sources: sources, MaxBodySize: int64(cfg.MaxBodySize)}),
		driver: driver,
		cfg:    current.Load,
	}, nil
}

// GatewayOutbox returns g's outbox, for transactions of the driver's kind
// on g's database: its sources are g's, reloads included.
func GatewayOutbox[TTx any](g *Gateway, driver store.TxDriver[TTx]) *Outbox[TTx] {
	return &Outbox[TTx]{intake: g.intake.Core, driver: driver, cfg: g.cfg.Load}
}

// PublishOptions are a publish's optional parts.
type PublishOptions struct {
	// ContentType is the body's, sent with every delivery (default
	// application/json).
	ContentType string
	// Header is what the source's key, type and filter rules may read
	// (header:Name), beside the body. It is not delivered.
	Header http.Header
	// Reconcile marks the publish as part of a reconciliation pass, as
	// POST /v1/publish?reconcile=true does: a key published and committed
	// before is Republished (counted as republished in the rollups, not as
	// a duplicate, and never feeding the duplicate-rate alert); a key never
	// published is stored and delivered as any other.
	Reconcile bool
}

// Published is a publish's verdict.
type Published struct {
	// Key is the event's key as stored (the key given, made a valid header
	// value as intake makes every key: see README's Keys). The delivery's
	// Idempotency-Key is <source>:<Key>.
	Key string
	// Duplicate is true when the key was published before and committed
	// (a retried transaction, a reconciliation pass): nothing was written,
	// no second delivery will be made, and the copy is counted.
	Duplicate bool
	// Republished is true for a Duplicate of a publish marked Reconcile:
	// counted as republished, not as a duplicate.
	Republished bool
}

// ErrNotOutbox is a publish to a source that is not an outbox source.
var ErrNotOutbox = errors.New("not an outbox source (outbox: true)")

// PublishTx publishes body as an event of source under key, in tx. key
// empty: opts.Header's Idempotency-Key, read as the proxy and POST
// /v1/publish read it ("ord_q1" and ord_q1 are one key; the header given
// twice is an error), else the source's key rules over body (and
// opts.Header); a publish without a key is refused. Nothing is visible, nor delivered,
// before tx commits; rolled back, it never was. If key was published and
// committed before, the result is a Duplicate, and nothing else changes.
//
// The claim is the store's unique constraint, inside tx: a publish of a
// key another open transaction has published waits for it (a duplicate if
// it commits). On PostgreSQL an error leaves tx aborted: roll it back.
// Several publishes in one transaction should take their keys in one
// order, as any transaction that inserts unique keys should. A rejection
// (a malformed body, no key, an Idempotency-Key in opts.Header that
// POST /v1/publish would refuse) is a *receive.Rejection, counted under
// the source by reason as intake counts its own.
//
// On SQLite, tx holds the database's one write lock from its BEGIN
// (_txlock=immediate) to its commit or rollback, and the gateway's writer
// waits for it: every webhook's claim, every delivery's outcome, every
// effect. Keep tx as short as any SQLite write transaction should be (no
// call to another service, no wait for a person inside it). A webhook
// waits for it up to the gateway's commit bound (30 s) and is answered
// 200 within 0.2 s of its end; past the bound it is answered 503,
// and its provider retries it. The wait shows in
// oncehook_store_lock_wait_seconds, /readyz and `oncehook doctor`. On
// PostgreSQL an open tx holds only the rows it wrote: a webhook of
// another key does not wait for it.
func (o *Outbox[TTx]) PublishTx(ctx context.Context, tx TTx, source, key string, body []byte, opts *PublishOptions) (Published, error) {
	if opts == nil {
		opts = &PublishOptions{}
	}
	if !isOutbox(o.cfg(), source) {
		return Published{}, fmt.Errorf("oncehook: publish to %s: %w", source, ErrNotOutbox)
	}
	header := opts.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	ct := opts.ContentType
	if ct == "" {
		ct = "application/json"
	}
	header.Set("Content-Type", ct)
	if key == "" {
		// A key given in opts.Header is read as every Idempotency-Key is
		// (idempotency.ParseKey): "ord_q1" and ord_q1 are one event.
		k, err := idempotency.KeyFrom(header)
		if err != nil {
			// Refused as POST /v1/publish refuses it: a Rejection,
			// counted under the source by reason.
			rej := o.intake.Refuse(ctx, source, "outbox", http.StatusBadRequest, reasonInvalidKey, err.Error())
			return Published{}, fmt.Errorf("oncehook: publish to %s: %w", source, rej)
		}
		key = k
	}
	if key != "" {
		header.Set("Idempotency-Key", key)
	}
	now := time.Now()
	events, err := o.intake.Events(ctx, source, receive.Envelope{
		Header: header, Body: body, ReceivedAt: now, SkipVerify: true, Key: key, Client: "outbox", Reconcile: opts.Reconcile,
	})
	if err != nil {
		return Published{}, fmt.Errorf("oncehook: publish to %s: %w", source, err)
	}
	if len(events) != 1 {
		return Published{}, fmt.Errorf("oncehook: publish to %s: the body made %d events, want one", source, len(events))
	}
	claims, err := o.driver.ClaimEvents(ctx, tx, events)
	if err != nil {
		return Published{}, fmt.Errorf("oncehook: publish to %s: %w", source, err)
	}
	resp, stats, copies := o.intake.Verdicts(source, events, claims, now, opts.Reconcile)
	if err := o.driver.AddCounts(ctx, tx, stats, copies); err != nil {
		return Published{}, fmt.Errorf("oncehook: publish to %s: count: %w", source, err)
	}
	status := resp.Events[0].Status
	return Published{Key: resp.Events[0].Key, Duplicate: status != receive.StatusAccepted, Republished: status == receive.StatusRepublished}, nil
}

// isOutbox reports whether cfg names source as an outbox source.
func isOutbox(cfg *config.Config, source string) bool {
	for _, s := range cfg.Sources {
		if s.Name == source {
			return s.Outbox
		}
	}
	return false
}
