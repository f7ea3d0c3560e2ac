package table

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/receive"
)

// The consumer's timings: reconnecting to a database that went away, and
// leaving rows the store could not take for later, both back off
// exponentially with jitter up to maxBackoff. A batch's Accepts are given
// acceptTimeout, and its commit finishes even when Run is stopped.
const (
	maxBackoff    = 30 * time.Second
	acceptTimeout = 30 * time.Second
)

// Consumer takes one source's rows from an outbox table in the user's
// database, hands each to intake (broker.Intake) and deletes it only once
// intake's own commit holds it, in the transaction that locked it. It is
// a broker.Consumer.
type Consumer struct {
	source string
	s      ConsumeSettings
	d      dialect
	q      statements
	verify bool
	in     *broker.Intake
	log    *slog.Logger
	health *broker.Health
	now    func() time.Time
	// wake is poked by a NOTIFY (PostgreSQL) or a batch that was full:
	// the next batch starts without waiting for the poll.
	wake chan struct{}
}

// NewConsumer builds src's consumer from its consume.table settings
// (checked). It does not connect: Run does, and keeps trying while the
// database is away.
func NewConsumer(src broker.Source, s ConsumeSettings) (*Consumer, error) {
	s = s.withDefaults()
	d, err := dialectOf(s.URL)
	if err != nil {
		return nil, err
	}
	c := &Consumer{
		source: src.Name, s: s, d: d, q: newStatements(d, s), verify: src.Verify,
		in: broker.NewIntake(src), log: broker.Log(src.Logger), now: time.Now,
		wake: make(chan struct{}, 1),
	}
	if d.my != nil {
		// The driver's own complaints (a pooled connection the server
		// closed) are the consumer's debug log, not stderr.
		d.my.Logger = driverLog{c.log}
	}
	c.health = broker.NewHealth(src.Name, "table", c.where(), c.now())
	return c, nil
}

// driverLog is the MySQL driver's Logger, as debug lines of the consumer's.
type driverLog struct{ log *slog.Logger }

func (l driverLog) Print(v ...any) { l.log.Debug("mysql driver", "msg", fmt.Sprint(v...)) }

// where names the table and its database, without credentials.
func (c *Consumer) where() string {
	w := "table " + c.s.Table + " rejected to " + c.s.Rejected
	if c.d.postgres {
		return fmt.Sprintf("%s on postgres %s:%d/%s", w, c.d.pg.Host, c.d.pg.Port, c.d.pg.Database)
	}
	return fmt.Sprintf("%s on mysql %s/%s", w, c.d.my.Addr, c.d.my.DBName)
}

// Status is the consumer's connection as an operator reads it.
func (c *Consumer) Status() broker.Status {
	st := c.health.Status()
	st.InFlightBytes = c.in.HeldBytes()
	return st
}

// Run takes rows until ctx ends. A database that is down, or a table
// that is not there yet, is said in Status and retried with exponential
// backoff and jitter (up to 30 s). On PostgreSQL it also listens on the
// settings' channel, whose NOTIFY (the trigger `oncehook outbox ddl
// --trigger` prints) wakes it at once; otherwise it reads the table every
// poll_interval. Run returns nil at ctx's end, once the batch in flight
// has committed or rolled back.
func (c *Consumer) Run(ctx context.Context) error {
	if c.d.postgres {
		go c.listen(ctx)
	}
	for failures := 0; ; {
		connected, err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			failures = 0
		}
		c.health.Lost(err, c.now())
		failures++
		wait := broker.Backoff(failures, 500*time.Millisecond, maxBackoff)
		c.log.Warn("outbox table not consumed; retrying", "err", err, "retry_in", wait.Round(time.Millisecond))
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// session opens the database, checks that both tables are there, and
// takes batches until ctx ends or the database fails; connected says it
// got that far.
func (c *Consumer) session(ctx context.Context) (connected bool, err error) {
	db, err := c.d.open()
	if err != nil {
		return false, err
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	err = db.PingContext(pctx)
	if err == nil {
		err = c.probe(pctx, db)
	}
	cancel()
	if err != nil {
		return false, err
	}
	c.health.Connected(c.now())
	c.log.Info("consuming outbox table", "where", c.where(), "poll_interval", time.Duration(c.s.PollInterval))
	poll := time.NewTicker(time.Duration(c.s.PollInterval))
	defer poll.Stop()
	for retries := 0; ; {
		n, retry, err := c.batch(ctx, db)
		if ctx.Err() != nil {
			return true, nil
		}
		if err != nil {
			// Rolled back: the batch's rows come back (those intake took
			// are duplicates then). A database that still answers had a
			// statement fail (a deadlock, a lock timeout, a rejected
			// table that refuses a row): it is retried with backoff, and
			// the error is logged; one that does not is reconnected to.
			pctx, cancel := context.WithTimeout(ctx, connectTimeout)
			perr := db.PingContext(pctx)
			cancel()
			if perr != nil {
				return true, err
			}
			retries++
			wait := broker.Backoff(retries, time.Second, maxBackoff)
			c.log.Warn("outbox batch rolled back; its rows are taken again", "err", err, "retry_in", wait.Round(time.Millisecond))
			if !sleep(ctx, wait) {
				return true, nil
			}
			continue
		}
		if retry {
			// The store could not take a row now: it stays, and is taken
			// again after a backoff (1 s doubling to 30 s).
			retries++
			if !sleep(ctx, broker.Backoff(retries, time.Second, maxBackoff)) {
				return true, nil
			}
			continue
		}
		retries = 0
		if n == c.s.Batch {
			continue // a backlog: the next batch at once
		}
		select {
		case <-ctx.Done():
			return true, nil
		case <-c.wake:
		case <-poll.C:
		}
	}
}

// probe says what is missing when a table is not there (or not as the
// settings name its columns).
func (c *Consumer) probe(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, c.q.probe); err != nil {
		return fmt.Errorf("outbox table %s (columns %s): %w (create it: oncehook outbox ddl --db %s --table %s)", c.s.Table, c.columns(), err, c.d.name, c.s.Table)
	}
	if _, err := db.ExecContext(ctx, c.q.probeRejected); err != nil {
		return fmt.Errorf("table %s for rejected rows: %w (create it: oncehook outbox ddl --db %s --table %s)", c.s.Rejected, err, c.d.name, c.s.Table)
	}
	return nil
}

func (c *Consumer) columns() string {
	k := c.s.Columns
	return fmt.Sprintf("%s, %s, %s, %s, %s, %s", k.ID, k.AggregateType, k.AggregateID, k.Type, k.Payload, k.Headers)
}

// row is one outbox row as read.
type row struct {
	id                   any // as the driver gave it: what DELETE matches
	key, aggType, aggID  []byte
	typ, payload, header []byte
	hasAggID             bool
}

// taken is a row and its verdict.
type taken struct {
	row
	out broker.Outcome
	// done is closed once out is set: the next row of the same entity
	// waits for it.
	done chan struct{}
}

// batch takes up to Batch rows in one transaction: it locks them (SKIP
// LOCKED: another consumer's are left to it), hands each to intake as it
// is read, deletes the rows intake committed (Ack) and moves aside the
// ones it refused (Poison), then commits. A row the store could not take
// now (Retry) is left, locked by nobody once the transaction ends; retry
// says there was one. Rows of one entity are taken one after another, in
// the table's order, and after one that is left the rest of its entity
// are left too, so they stay in order.
func (c *Consumer) batch(ctx context.Context, db *sql.DB) (n int, retry bool, err error) {
	// The transaction and Accept run on a context that a stop does not
	// cut (database/sql rolls a transaction back when its context ends):
	// a row on its way to intake's commit finishes, and is deleted,
	// rather than left for a duplicate. A stop ends only the reading of
	// more rows (Reserve's wait).
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), acceptTimeout)
	defer cancel()
	tx, err := db.BeginTx(actx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(actx, c.q.take, c.s.Batch)
	if err != nil {
		return 0, false, err
	}
	// Reading waits for room in the byte budget only while the
	// transaction has time left for the rows it then takes.
	rctx, rcancel := context.WithTimeout(ctx, acceptTimeout/2)
	defer rcancel()
	var all []*taken
	var wg sync.WaitGroup
	last := map[string]*taken{} // the entity's row before, by aggregateid
	for rows.Next() {
		t := &taken{done: make(chan struct{})}
		if err := rows.Scan(&t.id, &t.aggType, &t.aggID, &t.typ, &t.payload, &t.header); err != nil {
			rows.Close()
			wg.Wait()
			return 0, false, err
		}
		t.key, t.hasAggID = idBytes(t.id), t.aggID != nil
		// Room in intake's byte budget first: while there is none, the
		// batch reads no further (the rows already handed over make it).
		held, err := c.in.Reserve(rctx, len(t.payload))
		if err != nil {
			break // stopping, or no room in time: the rows handed over are finished and committed, the rest stay
		}
		var before *taken
		if t.hasAggID {
			before = last[string(t.aggID)]
			last[string(t.aggID)] = t
		}
		all = append(all, t)
		c.health.InFlight(1)
		wg.Add(1)
		go func() {
			defer func() { close(t.done); c.health.InFlight(-1); wg.Done() }()
			if before != nil {
				<-before.done
				if before.out.Verdict == broker.Retry {
					c.in.Release(held)
					t.out = broker.Outcome{Verdict: broker.Retry, Err: errors.New("an earlier row of its entity was left")}
					return
				}
			}
			t.out = c.take(actx, held, t.row)
		}()
	}
	err = rows.Err()
	rows.Close()
	wg.Wait()
	if err != nil {
		return 0, false, err
	}
	var done []any
	for _, t := range all {
		switch t.out.Verdict {
		case broker.Ack:
			done = append(done, c.param(t.id))
		case broker.Poison:
			rej := t.out.Rejection
			if _, err := tx.ExecContext(actx, c.q.moveAside, text(rej.Reason), text(rej.Detail), c.param(t.id)); err != nil {
				return 0, false, fmt.Errorf("move a rejected row to %s: %w", c.s.Rejected, err)
			}
			done = append(done, c.param(t.id))
			c.log.Warn("outbox row rejected: moved aside", "reason", rej.Reason, "detail", rej.Detail,
				"table", c.s.Rejected, "id", fmt.Sprintf("%q", t.key))
		default:
			retry = true
			c.log.Debug("outbox row left for later", "err", t.out.Err, "id", fmt.Sprintf("%q", t.key))
		}
	}
	if err := c.remove(actx, tx, done); err != nil {
		return 0, false, fmt.Errorf("delete taken rows: %w", err)
	}
	// A commit that fails (or a crash before it) leaves the rows: they
	// are taken again, and intake counts them as duplicates.
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("commit the taken rows' delete: %w", err)
	}
	return len(all), retry, nil
}

// remove deletes the rows of ids, which the transaction holds locked. On
// PostgreSQL in one statement. On MySQL one row at a time: a DELETE ... IN
// that InnoDB runs as a scan (it may, on a small table) locks every row
// it reads, waits for another consumer's and deadlocks with it; a DELETE
// of one primary key reads only its row.
func (c *Consumer) remove(ctx context.Context, tx *sql.Tx, ids []any) error {
	if len(ids) == 0 {
		return nil
	}
	if c.d.postgres {
		_, err := tx.ExecContext(ctx, c.q.remove(len(ids)), ids...)
		return err
	}
	stmt, err := tx.PrepareContext(ctx, c.q.remove(1))
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, id := range ids {
		if _, err := stmt.ExecContext(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// param is a row's id as DELETE is given it: the driver's own value, but
// MySQL's bytes as a string (a VARCHAR compares with it by its charset,
// not as binary).
func (c *Consumer) param(id any) any {
	if b, ok := id.([]byte); ok && !c.d.postgres {
		return string(b)
	}
	return id
}

// text is s as a text column holds it: valid UTF-8 without NUL (a
// rejection's detail may quote a row's bytes).
func text(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// idBytes is an id as the key's header holds it.
func idBytes(id any) []byte {
	switch v := id.(type) {
	case []byte:
		return v
	case string:
		return []byte(v)
	case int64:
		return strconv.AppendInt(nil, v, 10)
	case nil:
		return nil
	case time.Time:
		return []byte(v.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Append(nil, id)
}

// take hands one row to intake: its verdict. A headers column that is not
// a JSON object of strings is refused here, counted as intake counts its
// own (malformed), and the row is moved aside.
func (c *Consumer) take(ctx context.Context, held *receive.Held, r row) broker.Outcome {
	// An empty id would make a keyless event, delivered again each time
	// the row is written again; a NULL payload, an empty body. Neither is
	// an event the user's code meant: moved aside, said why.
	switch {
	case len(r.key) == 0:
		c.in.Release(held)
		return c.in.Refuse(ctx, c.client(), http.StatusBadRequest, receive.ReasonMalformed, "id column: empty: each row needs an id of its own, its key")
	case r.payload == nil:
		c.in.Release(held)
		return c.in.Refuse(ctx, c.client(), http.StatusBadRequest, receive.ReasonMalformed, "payload column: NULL")
	}
	h, err := headers(r.header)
	if err != nil {
		c.in.Release(held)
		return c.in.Refuse(ctx, c.client(), http.StatusBadRequest, receive.ReasonMalformed, "headers column: "+err.Error())
	}
	reconcile := false
	if v := h.Values(HeaderReconcile); len(v) > 0 {
		if reconcile, err = strconv.ParseBool(v[0]); err != nil || len(v) != 1 {
			c.in.Release(held)
			return c.in.Refuse(ctx, c.client(), http.StatusBadRequest, receive.ReasonMalformed,
				"headers column: "+HeaderReconcile+" is given once, true or false")
		}
		h.Del(HeaderReconcile)
	}
	h.Set(HeaderID, string(r.key))
	h.Del(HeaderType)
	h.Del(HeaderAggregateType)
	h.Del(HeaderAggregateID)
	if r.typ != nil {
		h.Set(HeaderType, string(r.typ))
	}
	if r.aggType != nil {
		h.Set(HeaderAggregateType, string(r.aggType))
	}
	if r.hasAggID {
		h.Set(HeaderAggregateID, string(r.aggID))
	}
	broker.DefaultContentType(h, r.payload)
	return c.in.Take(ctx, held, receive.Envelope{
		Header: h, Body: r.payload, ReceivedAt: c.now(), Queued: true, Trace: h.Get("Traceparent"),
		SkipVerify: !c.verify, Client: c.client(), Reconcile: reconcile,
	})
}

func (c *Consumer) client() string { return "table:" + c.s.Table }

// headers reads a headers column: NULL (or empty) is none, else a JSON
// object whose values are strings or arrays of strings.
func headers(b []byte) (http.Header, error) {
	h := http.Header{}
	if len(b) == 0 {
		return h, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("not a JSON object")
	}
	for k, raw := range m {
		k = textproto.CanonicalMIMEHeaderKey(k)
		var one string
		if err := json.Unmarshal(raw, &one); err == nil {
			h[k] = append(h[k], one)
			continue
		}
		var many []string
		if err := json.Unmarshal(raw, &many); err != nil {
			return nil, fmt.Errorf("%q: want a string or an array of strings", k)
		}
		h[k] = append(h[k], many...)
	}
	return h, nil
}

// listen wakes the consumer on each NOTIFY on the settings' channel, on
// a connection of its own, reconnecting with backoff: a wake-up lost
// while it was away is the poll's to make up (it pokes once when it is
// back, too).
func (c *Consumer) listen(ctx context.Context) {
	for failures := 0; ctx.Err() == nil; {
		err := func() error {
			conn, err := pgx.ConnectConfig(ctx, c.d.pg.Copy())
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			if _, err := conn.Exec(ctx, "LISTEN "+c.d.quote(c.s.Channel)); err != nil {
				return err
			}
			failures = 0
			c.poke()
			for {
				if _, err := conn.WaitForNotification(ctx); err != nil {
					return err
				}
				c.poke()
			}
		}()
		if ctx.Err() != nil {
			return
		}
		failures++
		c.log.Debug("outbox LISTEN lost; the poll goes on", "channel", c.s.Channel, "err", redact.Error(err))
		if !sleep(ctx, broker.Backoff(failures, 500*time.Millisecond, maxBackoff)) {
			return
		}
	}
}

// poke wakes the consumer (once, however many come before it wakes).
func (c *Consumer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// sleep waits d, or less when ctx ends first (false then).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
