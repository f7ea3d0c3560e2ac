package oncehook_test

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/broker/table"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// outboxTable is an outbox table of the test's own in a real database,
// made with the DDL `oncehook outbox ddl` prints, dropped when the test
// ends.
type outboxTable struct {
	kind  string // postgres or mysql
	url   string // the source's url: (via is where a proxy is put)
	table string
	db    *sql.DB
}

// newOutboxTable makes one on PostgreSQL (a fresh schema, with the NOTIFY
// trigger) or MariaDB (a table of a unique name). via, when set, is the
// address the source's url names instead of the server's (a proxy).
func newOutboxTable(t *testing.T, kind string, via func(addr string) string) *outboxTable {
	t.Helper()
	var b [5]byte
	rand.Read(b[:])
	o := &outboxTable{kind: kind, table: "outbox"}
	switch kind {
	case "postgres":
		o.url = testenv.Postgres(t)
	case "mysql":
		o.url = testenv.MySQL(t)
		o.table = "outbox_" + hex.EncodeToString(b[:])
	}
	ddl, err := table.DDL(kind, o.table, kind == "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if o.db, err = table.Open(o.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.db.Close() })
	o.exec(t, ddl)
	if kind == "mysql" {
		t.Cleanup(func() { o.db.Exec("DROP TABLE IF EXISTS " + o.table + ", " + o.table + "_rejected") })
	}
	if via != nil {
		u, _ := url.Parse(o.url)
		u.Host = via(u.Host)
		o.url = u.String()
	}
	return o
}

// exec runs statements separated by ";\n" (MySQL takes one at a time).
func (o *outboxTable) exec(t *testing.T, sqls string) {
	t.Helper()
	if o.kind == "postgres" {
		if _, err := o.db.Exec(sqls); err != nil {
			t.Fatalf("%v\n%s", err, sqls)
		}
		return
	}
	for _, s := range strings.Split(sqls, ";\n") {
		if strings.TrimSpace(strings.Join(skipComments(s), "")) == "" {
			continue
		}
		if _, err := o.db.Exec(s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
}

func skipComments(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			out = append(out, l)
		}
	}
	return out
}

// p is the n-th placeholder.
func (o *outboxTable) p(n int) string {
	if o.kind == "postgres" {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// outboxRow is one row as the user's code inserts it.
type outboxRow struct {
	id, aggType, aggID, typ string
	payload                 []byte
	headers                 any // nil: NULL
}

// insert inserts rows in one transaction, committed or rolled back.
func (o *outboxTable) insert(t *testing.T, commit bool, rows ...outboxRow) error {
	t.Helper()
	tx, err := o.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	q := fmt.Sprintf("INSERT INTO %s (id, aggregatetype, aggregateid, type, payload, headers) VALUES (%s, %s, %s, %s, %s, %s)",
		o.table, o.p(1), o.p(2), o.p(3), o.p(4), o.p(5), o.p(6))
	for _, r := range rows {
		if _, err := tx.Exec(q, r.id, r.aggType, r.aggID, r.typ, r.payload, r.headers); err != nil {
			tx.Rollback()
			return err
		}
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

// count is the rows of a table (the outbox, or "_rejected").
func (o *outboxTable) count(t *testing.T, suffix string) int {
	t.Helper()
	var n int
	if err := o.db.QueryRow("SELECT count(*) FROM " + o.table + suffix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// source is the gateway's config for a source orders on the table,
// delivering to url.
func (o *outboxTable) config(sink string, extra string) string {
	return `
store: sqlite://$DIR/oncehook.db
max_body_size: 2MiB
sources:
  - name: orders
    consume: {table: {url: "` + o.url + `", table: ` + o.table + `, poll_interval: 200ms` + extra + `}}
    destinations: [app]
destinations:
  - {name: app, url: ` + sink + `}
`
}

func order(i int) outboxRow {
	return outboxRow{id: fmt.Sprintf("ord-%05d", i), aggType: "order", aggID: fmt.Sprintf("cust-%d", i%7),
		typ: "order.created", payload: fmt.Appendf(nil, `{"n":%d}`, i)}
}

// Invariants 19 and 20 for an outbox table in the user's own database:
// rows committed in the user's transactions are delivered once each, under
// <source>:<id>, with their type and payload as written, and deleted; rows
// whose transaction rolled back never are.
func TestTableSourceDeliversCommittedRowsOnceAndRolledBackNever(t *testing.T) {
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			o := newOutboxTable(t, kind, nil)
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.config(sink.URL, ""))
			const committed = 300
			for i := 0; i < committed; i += 10 {
				var rows []outboxRow
				for j := i; j < i+10; j++ {
					rows = append(rows, order(j))
				}
				if err := o.insert(t, true, rows...); err != nil {
					t.Fatal(err)
				}
				if i%50 == 0 {
					if err := o.insert(t, false, order(committed+i), order(committed+i+1)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) == committed && o.count(t, "") == 0 }) {
				t.Fatalf("after 60 s: %d of %d delivered, %d rows left; %+v", len(sink.ByKey()), committed, o.count(t, ""), gw.ConsumerStatus())
			}
			time.Sleep(500 * time.Millisecond)
			sink.CheckEachOnce(t)
			byKey := sink.ByKey()
			for i := range committed {
				if byKey["orders:"+order(i).id] != 1 {
					t.Errorf("%s: delivered %d times", order(i).id, byKey["orders:"+order(i).id])
				}
			}
			for k := range byKey {
				if n := strings.TrimPrefix(k, "orders:ord-"); n >= fmt.Sprintf("%05d", committed) {
					t.Errorf("%s delivered: its transaction rolled back", k)
				}
			}
			d := sink.Deliveries()[0]
			if d.Header.Get("X-Oncehook-Type") != "order.created" || !bytes.HasPrefix(d.Body, []byte(`{"n":`)) {
				t.Errorf("a delivery: %v %q", d.Header, d.Body)
			}
			if got := metric(t, gw, `oncehook_events_total{source="orders",verdict="accepted"}`); got != committed {
				t.Errorf("accepted counted: %d, want %d", got, committed)
			}
			if m := get(t, gw.URL+"/metrics"); !strings.Contains(m, `oncehook_source_broker_connected{broker="table",source="orders"} 1`) {
				t.Errorf("metrics lack the consumer's connection:\n%s", grep(m, "broker"))
			}
		})
	}
}
