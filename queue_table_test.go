package oncehook_test

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/broker/table"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
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
func newOutboxTable(t testing.TB, kind string, via func(addr string) string) *outboxTable {
	t.Helper()
	return newOutboxTableAt(t, kind, "", via)
}

// newOutboxTableAt is newOutboxTable on the server at server ("": the
// shared one).
func newOutboxTableAt(t testing.TB, kind, server string, via func(addr string) string) *outboxTable {
	t.Helper()
	var b [5]byte
	rand.Read(b[:])
	o := &outboxTable{kind: kind, table: "outbox", url: server}
	switch {
	case kind == "postgres" && server == "":
		o.url = testenv.Postgres(t)
	case server == "":
		o.url = testenv.MySQL(t)
	}
	if kind == "mysql" {
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
func (o *outboxTable) exec(t testing.TB, sqls string) {
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
func (o *outboxTable) insert(t testing.TB, commit bool, rows ...outboxRow) error {
	t.Helper()
	tx, err := o.db.Begin()
	if err != nil {
		return err // a database that is away (the caller may wait for it)
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
func (o *outboxTable) count(t testing.TB, suffix string) int {
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
	return o.configWith("sqlite://$DIR/oncehook.db", sink, extra)
}

// configWith is config on another store.
func (o *outboxTable) configWith(store, sink, extra string) string {
	return `
store: "` + store + `"
max_body_size: 2MiB
sources:
  - name: orders
    consume: {table: {url: "` + o.url + `", table: ` + o.table + `, poll_interval: 200ms` + extra + `}}
    destinations: [app]
  - name: hooks
    preset: generic
    unsigned: true
    key: ["header:X-Id"]
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
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
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
			if m := testenv.Get(t, gw.URL+"/metrics"); !strings.Contains(m, `oncehook_source_broker_connected{broker="table",source="orders"} 1`) {
				t.Errorf("metrics lack the consumer's connection:\n%s", testenv.Grep(m, "broker"))
			}
		})
	}
}

// waitConnected waits until the gateway's one consumer says connected is
// so, and returns its status.
func waitConnected(t *testing.T, gw *oncehooktest.Gateway, connected bool, within time.Duration) broker.Status {
	t.Helper()
	var st broker.Status
	if !testenv.WaitFor(within, func() bool { st = gw.ConsumerStatus()[0]; return st.Connected == connected }) {
		t.Fatalf("after %s the consumer is not connected=%v: %+v", within, connected, st)
	}
	return st
}

// Invariant 19's poison rule for a table: a row intake refuses (headers
// that are not a JSON object of strings, a payload over max_body_size) is
// moved to <table>_rejected with its reason and counted as rejected by
// reason, in the transaction that deletes it; the rows around it are
// delivered, and the table is left empty.
func TestTableSourceMovesPoisonRowsAsideAndCountsThem(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			o := newOutboxTable(t, kind, nil)
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.config(sink.URL, ""))
			var rows []outboxRow
			for i := range 10 {
				rows = append(rows, order(i))
			}
			bad := []outboxRow{
				{id: "bad-array", typ: "x", payload: []byte(`{}`), headers: `[1]`},
				{id: "bad-value", typ: "x", payload: []byte(`{}`), headers: `{"A": 1}`},
				{id: "too-large", typ: "x", payload: bytes.Repeat([]byte("x"), 3<<20)},
				// An empty id would be a keyless event, delivered again each
				// time the row is written again (found from outside).
				{id: "", typ: "x", payload: []byte(`{}`)},
			}
			rows = append(rows, bad...)
			for i := 10; i < 20; i++ {
				rows = append(rows, order(i))
			}
			rows[0].headers = `{"X-Trace": "t1", "X-Many": ["a", "b"]}`
			if err := o.insert(t, true, rows...); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(30*time.Second, func() bool { return len(sink.ByKey()) == 20 && o.count(t, "") == 0 }) {
				t.Fatalf("after 30 s: %d of 20 delivered, %d rows left; %+v", len(sink.ByKey()), o.count(t, ""), gw.ConsumerStatus())
			}
			if n := o.count(t, "_rejected"); n != len(bad) {
				t.Fatalf("%d rows moved aside, want %d", n, len(bad))
			}
			got := map[string]string{}
			r, err := o.db.Query("SELECT id, reason, length(payload) FROM " + o.table + "_rejected")
			if err != nil {
				t.Fatal(err)
			}
			for r.Next() {
				var id, reason string
				var n int
				r.Scan(&id, &reason, &n)
				got[id] = fmt.Sprintf("%s %d", reason, n)
			}
			r.Close()
			want := map[string]string{"bad-array": "malformed 2", "bad-value": "malformed 2", "": "malformed 2", "too-large": fmt.Sprintf("too_large %d", 3<<20)}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("rejected rows %v, want %v", got, want)
			}
			if n := metric(t, gw, `oncehook_requests_total{outcome="malformed",source="orders"}`); n != 3 {
				t.Errorf("malformed counted %d, want 3", n)
			}
			if n := metric(t, gw, `oncehook_requests_total{outcome="too_large",source="orders"}`); n != 1 {
				t.Errorf("too_large counted %d, want 1", n)
			}
			sink.CheckEachOnce(t)
		})
	}
}

// Invariant 23 for a table's columns: an id, a type and a payload holding
// CR/LF, NUL, invalid UTF-8 or 1 MiB are either refused by the database
// itself (the user's insert fails: PostgreSQL's text holds no NUL and no
// invalid UTF-8, MariaDB's utf8mb4 no invalid UTF-8), or taken: the
// payload delivered byte for byte, once, under a key intake made a valid
// header value; none blocks the table.
func TestTableSourceTakesHostileBytesOrTheDatabaseRefusesThem(t *testing.T) {
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			o := newOutboxTable(t, kind, nil)
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.config(sink.URL, ""))
			big := bytes.Repeat([]byte("\x00\xff\r\n{"), 1<<18) // 1 MiB
			hostile := []outboxRow{
				{id: "crlf\r\nid", typ: "t", payload: []byte("p1")},
				{id: "nul\x00id", typ: "t", payload: []byte("p2")},
				{id: "bad\xff\xfeutf8", typ: "t", payload: []byte("p3")},
				{id: "type-crlf", typ: "order\r\nX-Evil: 1", payload: []byte("p4")},
				{id: "type-nul", typ: "order\x00x", payload: []byte("p5")},
				{id: "type-bad", typ: "order\xffx", payload: []byte("p6")},
				{id: "payload-bytes", typ: "t", payload: []byte("\x00\xff\xfe\r\n\x1b[31m")},
				{id: "payload-1mib", typ: "t", payload: big},
				{id: "headers-crlf", typ: "t", payload: []byte("p7"),
					headers: `{"X-Evil\r\nInjected": "v\r\nX-Other: y", "Traceparent": "00-zz\u00ff", "Content-Type": "text/plain\r\n", "Outbox-Id": "not-mine"}`},
			}
			var stored []outboxRow
			for _, r := range hostile {
				// Each in its own transaction: the database refuses some.
				if err := o.insert(t, true, r); err != nil {
					t.Logf("%q refused by %s: %v", r.id, kind, err)
					continue
				}
				stored = append(stored, r)
			}
			if len(stored) < 4 {
				t.Fatalf("only %d of %d hostile rows stored", len(stored), len(hostile))
			}
			if err := o.insert(t, true, order(1)); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(30*time.Second, func() bool {
				return o.count(t, "") == 0 && len(sink.Deliveries())+o.count(t, "_rejected") == len(stored)+1
			}) {
				t.Fatalf("after 30 s: %d delivered, %d rejected of %d stored; %d left; %+v", len(sink.Deliveries()), o.count(t, "_rejected"), len(stored)+1, o.count(t, ""), gw.ConsumerStatus())
			}
			time.Sleep(300 * time.Millisecond)
			sink.CheckEachOnce(t)
			bodies := map[string]int{}
			for _, d := range sink.Deliveries() {
				bodies[string(d.Body)]++
				if strings.ContainsAny(d.Key, "\r\n\x00") {
					t.Errorf("key %q is no header value", d.Key)
				}
			}
			for _, r := range stored {
				if bodies[string(r.payload)] != 1 {
					t.Errorf("%q: its payload (%d bytes) delivered %d times, byte for byte", r.id, len(r.payload), bodies[string(r.payload)])
				}
			}
			if n := o.count(t, "_rejected"); n != 0 {
				t.Errorf("%d hostile rows moved aside: every one the database holds is deliverable", n)
			}
			if sink.ByKey()["orders:headers-crlf"] != 1 {
				t.Errorf("the row whose headers name an Outbox-Id of their own: keys %v (the id column is the key)", sink.ByKey())
			}
		})
	}
}

// Several replicas share one table: two gateways (each its own store) take
// rows from it at once, with SKIP LOCKED; no row is taken twice (each
// delivered once over both), and the table ends empty.
func TestTableSourceSharedByTwoGatewaysTakesEachRowOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			o := newOutboxTable(t, kind, nil)
			sink := testenv.NewSink(t)
			gws := []*oncehooktest.Gateway{
				oncehooktest.Start(t, o.config(sink.URL, ", batch: 20")),
				oncehooktest.Start(t, o.config(sink.URL, ", batch: 20")),
			}
			const n = 600
			for i := 0; i < n; i += 20 {
				var rows []outboxRow
				for j := i; j < i+20; j++ {
					rows = append(rows, order(j))
				}
				if err := o.insert(t, true, rows...); err != nil {
					t.Fatal(err)
				}
			}
			if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) == n && o.count(t, "") == 0 }) {
				t.Fatalf("after 60 s: %d of %d delivered, %d rows left", len(sink.ByKey()), n, o.count(t, ""))
			}
			time.Sleep(500 * time.Millisecond)
			sink.CheckEachOnce(t)
			a := metric(t, gws[0], `oncehook_events_total{source="orders",verdict="accepted"}`)
			b := metric(t, gws[1], `oncehook_events_total{source="orders",verdict="accepted"}`)
			if a+b != n {
				t.Errorf("accepted %d + %d, want %d in all: a row was taken twice", a, b, n)
			}
			t.Logf("gateway A took %d rows, B %d", a, b)
		})
	}
}

// Invariant 19 with oncehook's own store down: rows are not deleted while
// intake cannot commit them (Retry leaves them, with backoff), and are
// delivered once each when it is back.
func TestTableSourceLeavesRowsWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			o := newOutboxTable(t, kind, nil)
			pg := testenv.Postgres(t)
			pgURL, _ := url.Parse(pg)
			proxy := testenv.NewProxy(t, pgURL.Host)
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.configWith(strings.Replace(pg, pgURL.Host, proxy.Addr, 1), sink.URL, ""))
			waitConnected(t, gw, true, 10*time.Second)
			proxy.Stop()
			const n = 50
			var rows []outboxRow
			for i := range n {
				rows = append(rows, order(i))
			}
			if err := o.insert(t, true, rows...); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second) // the consumer tries, is refused, backs off
			if c := o.count(t, ""); c != n {
				t.Fatalf("%d of %d rows left with the store down: some were deleted uncommitted", c, n)
			}
			if c := o.count(t, "_rejected"); c != 0 {
				t.Fatalf("%d rows moved aside: a store outage is not poison", c)
			}
			if st := gw.ConsumerStatus()[0]; !st.Connected {
				t.Errorf("consumer %+v: its table is there, only the store is down", st)
			}
			proxy.Start(t)
			if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) == n && o.count(t, "") == 0 }) {
				t.Fatalf("after the store came back: %d of %d delivered, %d rows left", len(sink.ByKey()), n, o.count(t, ""))
			}
			time.Sleep(300 * time.Millisecond)
			sink.CheckEachOnce(t)
		})
	}
}

// The table's database down, then back: the consumer says so in its
// Status (and /readyz's detail), HTTP intake answers as ever meanwhile,
// and once the database answers again the rows written meanwhile are
// delivered once each.
func TestTableSourceSurvivesItsDatabaseGoingAway(t *testing.T) {
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			var proxy *testenv.Proxy
			o := newOutboxTable(t, kind, func(addr string) string { proxy = testenv.NewProxy(t, addr); return proxy.Addr })
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.config(sink.URL, ""))
			waitConnected(t, gw, true, 10*time.Second)
			if err := o.insert(t, true, order(0)); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(30*time.Second, func() bool { return len(sink.ByKey()) == 1 }) {
				t.Fatal("the first row not delivered")
			}
			proxy.Stop()
			st := waitConnected(t, gw, false, 30*time.Second)
			if st.Error == "" || st.Kind != "table" {
				t.Errorf("status while the database is away: %+v", st)
			}
			if ready := testenv.Get(t, gw.URL+"/readyz"); !strings.Contains(ready, `"connected":false`) {
				t.Errorf("/readyz does not say the table is away: %s", ready)
			}
			if m := testenv.Get(t, gw.URL+"/metrics"); !strings.Contains(m, `oncehook_source_broker_connected{broker="table",source="orders"} 0`) {
				t.Errorf("/metrics does not say the table is away:\n%s", testenv.Grep(m, "broker"))
			}
			rep, err := gw.Admin().Doctor(t.Context(), "orders")
			if err != nil || len(rep.Sources) != 1 || !slices.ContainsFunc(rep.Sources[0].Findings, func(f admin.Finding) bool {
				return f.Kind == admin.FindingBrokerUnreachable && strings.Contains(f.Message, "table "+o.table)
			}) {
				t.Errorf("doctor: %+v %v: want broker_unreachable naming the table", rep, err)
			}
			// HTTP intake is another path: it answers as ever.
			if code := postHook(t, gw.URL+"/in/hooks", "h1"); code != 200 {
				t.Errorf("a webhook answered %d while the table's database was away", code)
			}
			var rows []outboxRow
			for i := 1; i <= 30; i++ {
				rows = append(rows, order(i))
			}
			if err := o.insert(t, true, rows...); err != nil {
				t.Fatal(err)
			}
			proxy.Start(t)
			waitConnected(t, gw, true, 60*time.Second)
			if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) == 32 && o.count(t, "") == 0 }) {
				t.Fatalf("after the database came back: %d of 32 delivered, %d rows left", len(sink.ByKey()), o.count(t, ""))
			}
			time.Sleep(300 * time.Millisecond)
			sink.CheckEachOnce(t)
		})
	}
}

// postHook posts a webhook to the hooks source under key id: its status.
func postHook(t *testing.T, url, id string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Header.Set("X-Id", id)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A crash between intake's commit and the table's delete: the delete
// fails (a trigger refuses it, as a process killed there would never send
// it), so the rows stay after intake committed them. They are taken
// again, are duplicates (counted, not delivered again), and are deleted
// then.
func TestTableSourceRowsLeftByACrashAreDuplicatesThenDeleted(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			o := newOutboxTable(t, kind, nil)
			flag := o.table + "_crash"
			if kind == "postgres" {
				o.exec(t, `CREATE TABLE `+flag+` (n int);
CREATE FUNCTION crash_before_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF EXISTS (SELECT 1 FROM `+flag+`) THEN RAISE EXCEPTION 'crash before the delete'; END IF; RETURN OLD; END $$;
CREATE TRIGGER crash BEFORE DELETE ON `+o.table+` FOR EACH ROW EXECUTE FUNCTION crash_before_delete();
INSERT INTO `+flag+` VALUES (1)`)
			} else {
				o.exec(t, "CREATE TABLE "+flag+" (n INT);\nINSERT INTO "+flag+" VALUES (1)")
				t.Cleanup(func() { o.db.Exec("DROP TABLE IF EXISTS " + flag) })
				if _, err := o.db.Exec("CREATE TRIGGER " + o.table + "_crash BEFORE DELETE ON " + o.table +
					" FOR EACH ROW BEGIN IF EXISTS (SELECT 1 FROM " + flag + ") THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'crash before the delete'; END IF; END"); err != nil {
					t.Fatal(err)
				}
			}
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.config(sink.URL, ""))
			const n = 40
			var rows []outboxRow
			for i := range n {
				rows = append(rows, order(i))
			}
			if err := o.insert(t, true, rows...); err != nil {
				t.Fatal(err)
			}
			accepted := func() int { return metric(t, gw, `oncehook_events_total{source="orders",verdict="accepted"}`) }
			if !testenv.WaitFor(30*time.Second, func() bool { return accepted() == n && len(sink.ByKey()) == n }) {
				t.Fatalf("%d accepted, %d delivered of %d", accepted(), len(sink.ByKey()), n)
			}
			time.Sleep(time.Second) // a batch or two more, each refused its delete
			if c := o.count(t, ""); c != n {
				t.Fatalf("%d rows left: want all %d, their delete refused", c, n)
			}
			if _, err := o.db.Exec("DELETE FROM " + flag); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(60*time.Second, func() bool { return o.count(t, "") == 0 }) {
				t.Fatalf("%d rows left after the crash's cause went", o.count(t, ""))
			}
			time.Sleep(300 * time.Millisecond)
			sink.CheckEachOnce(t)
			if d := metric(t, gw, `oncehook_events_total{source="orders",verdict="duplicate"}`); d < n {
				t.Errorf("duplicates counted %d: want at least %d (each row taken again)", d, n)
			}
			if a := accepted(); a != n {
				t.Errorf("accepted %d, want %d", a, n)
			}
		})
	}
}

// latencies inserts n rows one transaction at a time, each after the last
// was delivered and a random wait under spread (out of step with a poll),
// and returns how long each took from its commit to its
// delivery at the sink (sorted): what a user's row waits, end to end.
func (o *outboxTable) latencies(t testing.TB, sink *testenv.Sink, n int, spread, within time.Duration) []time.Duration {
	var out []time.Duration
	for i := range n {
		r := order(100000 + i)
		if err := o.insert(t, true, r); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		var got time.Time
		if !testenv.WaitFor(within, func() bool {
			for _, d := range sink.Deliveries() {
				if d.Key == "orders:"+r.id {
					got = d.At
					return true
				}
			}
			return false
		}) {
			t.Fatalf("%s not delivered within %s", r.id, within)
		}
		out = append(out, got.Sub(at))
		if spread > 0 {
			time.Sleep(mrand.N(spread))
		}
	}
	slices.Sort(out)
	return out
}

// With the trigger `oncehook outbox ddl --trigger` prints, PostgreSQL's
// NOTIFY wakes the consumer at the commit: a row is delivered well before
// the poll would have read it (poll_interval 5s here; the median wait of
// a poll alone is half of it).
func TestTableSourceNotifyWakesItBeforeThePoll(t *testing.T) {
	o := newOutboxTable(t, "postgres", nil)
	sink := testenv.NewSink(t)
	oncehooktest.Start(t, strings.Replace(o.config(sink.URL, ""), "poll_interval: 200ms", "poll_interval: 5s", 1))
	time.Sleep(300 * time.Millisecond) // LISTEN in place
	l := o.latencies(t, sink, 15, 0, 20*time.Second)
	t.Logf("commit to delivery with NOTIFY: min %s, median %s, max %s", l[0], l[len(l)/2], l[len(l)-1])
	if med := l[len(l)/2]; med > 1500*time.Millisecond {
		t.Errorf("median %s with NOTIFY: not woken by it (the poll is every 5s)", med)
	}
}

// The README's table source, as written (its url pointed at the test's
// database, and order: {} added): a row's id is the key, its type the
// event's type, its aggregateid the entity that order: {} reads without
// a rule of its own.
func TestREADMETableSourceExampleKeysByIDTypeAndEntity(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	text = text[strings.Index(text, "\n### Outbox table in your own database"):]
	block := strings.Split(text, "```yaml\n")[1]
	block = block[:strings.Index(block, "```")]
	o := newOutboxTable(t, "postgres", nil)
	sink := testenv.NewSink(t)
	block = strings.Replace(block, "${APP_DATABASE_URL}", o.url, 1)
	block = strings.Replace(block, "    destinations: [capi]", "    order: {}\n    destinations: [capi]", 1)
	gw := oncehooktest.Start(t, "store: sqlite://$DIR/oncehook.db\n"+block+"destinations: [{name: capi, url: "+sink.URL+"}]\n")
	if err := o.insert(t, true, outboxRow{id: "evt-1", aggType: "order", aggID: "ord-9", typ: "order.paid", payload: []byte(`{"total":10}`),
		headers: `{"X-Request-Id": "r1"}`}); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatalf("not delivered: %+v", gw.ConsumerStatus())
	}
	d := sink.Deliveries()[0]
	if d.Key != "orders:evt-1" || d.Header.Get("X-Oncehook-Type") != "order.paid" || string(d.Body) != `{"total":10}` {
		t.Errorf("delivered %q type %q body %q", d.Key, d.Header.Get("X-Oncehook-Type"), d.Body)
	}
	req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/v1/events/1", nil)
	req.Header.Set("Authorization", "Bearer "+gw.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if events := string(b); !strings.Contains(events, `"entity":"orders/ord-9"`) && !strings.Contains(events, `"entity":"ord-9"`) {
		t.Errorf("the event's entity is not its aggregateid: %s", events)
	}
}

// The table's database killed (kill -9 of a private mariadbd, an
// immediate shutdown of a private PostgreSQL) right after rows were
// committed, while the consumer takes them, then started again: the
// source says it is away, HTTP intake answers meanwhile, and once the
// database is back every row, those written before the kill and after the
// restart, is delivered once and deleted (a batch the kill cut short comes
// back as duplicates).
func TestTableSourceSurvivesItsDatabaseKilled(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var server interface {
				Kill()
				Start()
			}
			var o *outboxTable
			if kind == "postgres" {
				p := testenv.StartPostgres(t)
				server, o = p, newOutboxTableAt(t, kind, p.URL, nil)
			} else {
				m := testenv.StartMariaDB(t)
				server, o = m, newOutboxTableAt(t, kind, m.URL, nil)
			}
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.config(sink.URL, ", batch: 5"))
			waitConnected(t, gw, true, 20*time.Second)
			var before []outboxRow
			for i := range 40 {
				before = append(before, order(i))
			}
			if err := o.insert(t, true, before...); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the consumer is taking them
			server.Kill()
			st := waitConnected(t, gw, false, 60*time.Second)
			if st.Error == "" {
				t.Errorf("status while the database is down says no error: %+v", st)
			}
			if code := postHook(t, gw.URL+"/in/hooks", "h1"); code != 200 {
				t.Errorf("a webhook answered %d while the table's database was down", code)
			}
			server.Start()
			var after []outboxRow
			for i := 40; i < 60; i++ {
				after = append(after, order(i))
			}
			if !testenv.WaitFor(20*time.Second, func() bool { return o.insert(t, true, after...) == nil }) {
				t.Fatal("could not insert after the restart")
			}
			waitConnected(t, gw, true, 60*time.Second)
			// 60 rows, and the webhook.
			if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) == 61 && o.count(t, "") == 0 }) {
				t.Fatalf("after the restart: %d of 61 delivered, %d rows left; %+v", len(sink.ByKey()), o.count(t, ""), gw.ConsumerStatus())
			}
			time.Sleep(300 * time.Millisecond)
			sink.CheckEachOnce(t)
			t.Logf("delivered 60 once; %d duplicates counted (rows whose delete the kill cut off)",
				metric(t, gw, `oncehook_events_total{source="orders",verdict="duplicate"}`))
		})
	}
}

// A table source reads its row's id, type and aggregateid unless it says
// otherwise: its own key:, type: and order.entity win, and a preset's
// source (a table of a provider's events) keeps the preset's rules.
func TestTableSourceDefaultRulesGiveWayToTheSources(t *testing.T) {
	parse := func(src string) config.Source {
		t.Helper()
		cfg, err := oncehook.ParseConfig([]byte(`
store: sqlite://./x.db
sources:
  - name: orders
    consume: {table: {url: "postgres://127.0.0.1/test"}}
    destinations: [app]
`+src+`
destinations: [{name: app, url: "http://127.0.0.1:9"}]
`), func(string) (string, bool) { return "", false }, kinds.All())
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Sources[0]
	}
	s := parse("    order: {}")
	if fmt.Sprintf("%v %v %s", s.Key, s.Type, s.Order.Entity) != "[header:Outbox-Id] [header:Outbox-Type] header:Outbox-Aggregate-Id" {
		t.Errorf("defaults: key %v type %v entity %q", s.Key, s.Type, s.Order.Entity)
	}
	s = parse("    key: [json:order_id]\n    type: [json:event]\n    order: {entity: json:customer}")
	if fmt.Sprintf("%v %v %s", s.Key, s.Type, s.Order.Entity) != "[json:order_id] [json:event] json:customer" {
		t.Errorf("the source's own: key %v type %v entity %q", s.Key, s.Type, s.Order.Entity)
	}
	s = parse("    preset: stripe\n    secrets: [whsec_x]")
	if len(s.Key) != 0 || len(s.Type) != 0 {
		t.Errorf("a stripe source's rules: key %v type %v, want the preset's (none written)", s.Key, s.Type)
	}
}
