package writers

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/broker/table"
	"github.com/oncehook/oncehook/internal/testenv"
)

// binary is the oncehook binary, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	var remove func()
	var err error
	if binary, remove, err = testenv.BuildOncehook("../../../cmd/oncehook"); err != nil {
		fmt.Fprintln(os.Stderr, "build oncehook:", err)
		os.Exit(1)
	}
	code := m.Run()
	remove()
	os.Exit(code)
}

const opsToken = "ops-token-writers-0123456789"

// need skips the test without a writer's runtime, and fails it under CI
// (.ci/run installs them).
func need(t *testing.T, what string, check ...string) {
	t.Helper()
	if err := exec.Command(check[0], check[1:]...).Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required under CI: %v", what, err)
		}
		t.Skipf("%s not here (%v); set CI=1 to make this a failure", what, err)
	}
}

// gateway is a running `oncehook serve`, killed with SIGKILL.
type gateway struct {
	t      *testing.T
	config string
	api    string // its API's URL
	cmd    *exec.Cmd
	stderr testenv.Buffer
}

// start runs it (again) on its config and waits until it is ready.
func (g *gateway) start() {
	g.t.Helper()
	g.cmd = exec.Command(binary, "serve", "--config", g.config)
	g.stderr = testenv.Buffer{}
	g.cmd.Stderr = &g.stderr
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	first, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		g.t.Fatalf("no banner: %v\nstderr: %s", err, g.stderr.String())
	}
	go io.Copy(io.Discard, out)
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(first)
	if m == nil {
		g.t.Fatalf("banner %q", first)
	}
	if !testenv.WaitFor(60*time.Second, func() bool {
		resp, err := http.Get(m[1] + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		g.t.Fatalf("never ready; stderr: %s", g.stderr.String())
	}
}

// kill sends SIGKILL: no shutdown code runs.
func (g *gateway) kill() {
	if g.cmd == nil || g.cmd.ProcessState != nil {
		return
	}
	g.cmd.Process.Signal(syscall.SIGKILL)
	g.cmd.Wait()
}

// stats is /v1/stats' total for source, its counts as numbers.
func (g *gateway) stats(source string) map[string]float64 {
	g.t.Helper()
	out := map[string]float64{}
	for k, v := range testenv.SourceTotal(g.t, g.api, opsToken, source) {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

// writer is one writer process's outcome, as it printed it.
type writer struct {
	name       string
	cmd        *exec.Cmd
	committed  []string
	rolledBack []string
	done       bool
	err        error
	lines      atomic.Int64 // orders finished so far
}

// run starts a writer; progress counts the orders it has finished.
func run(t *testing.T, name string, progress *atomic.Int64, env []string, args ...string) (*writer, <-chan struct{}) {
	t.Helper()
	w := &writer{name: name, cmd: exec.Command(args[0], args[1:]...)}
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stderr = logWriter{t, name}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill() })
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			verb, id, _ := strings.Cut(sc.Text(), " ")
			switch verb {
			case "committed":
				w.committed = append(w.committed, id)
			case "rolledback":
				w.rolledBack = append(w.rolledBack, id)
			case "done":
				w.done = true
			}
			progress.Add(1)
			w.lines.Add(1)
		}
		w.err = w.cmd.Wait()
	}()
	return w, finished
}

// logWriter puts a process's errors (its reconnects) in the test's log.
type logWriter struct {
	t    *testing.T
	name string
}

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Logf("%s: %s", l.name, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// alerts is a real HTTP endpoint for alerts.url; it counts the alerts
// raised (not their ends).
type alerts struct {
	*httptest.Server
	n atomic.Int64
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func count(t *testing.T, db *sql.DB, tbl string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + tbl).Scan(&n); err != nil {
		t.Logf("count %s: %v", tbl, err)
		return -1
	}
	return n
}

// Issue 43's proof of the table source: writers in Python (psycopg2) and
// Node (pg) on one PostgreSQL outbox, and PHP (PDO) on a MariaDB one, each
// order and its outbox row in one transaction, a fifth rolled back after
// the inserts, a tenth retried whole after its commit; meanwhile two
// gateway processes consume both tables, one is killed with SIGKILL and
// restarted, the application's PostgreSQL (a private instance) is
// restarted, so is the application's MariaDB, then the other gateway is
// killed and restarted. Every committed order reaches a real HTTP sink
// under its Idempotency-Key, no rolled-back one ever, and both outboxes
// end empty. Then a reconciliation pass re-inserts every committed row
// marked {"Oncehook-Reconcile": "true"}: all of them republished, 0
// duplicates, 0 deliveries, no alert.
//
// N orders per writer: the 5,000 (about 45 s here),
// ONCEHOOK_WRITERS_N for another figure.
func TestWritersInThreeLanguagesDeliverEachCommittedOrderOnce(t *testing.T) {
	// Debian's interpreter, whose packages hold psycopg2 (a python3 first
	// on PATH, such as pyenv's, does not see them).
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	need(t, "Debian's python3-psycopg2", python, "-c", "import psycopg2")
	need(t, "node with pg (npm ci in broker/table/writers)", "node", "-e", "require('pg')")
	need(t, "php with PDO's MySQL driver", "php", "-r", `exit(extension_loaded("pdo_mysql") ? 0 : 1);`)
	n := 5000
	if v := os.Getenv("ONCEHOOK_WRITERS_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 20 {
			t.Fatalf("ONCEHOOK_WRITERS_N=%q", v)
		}
	}
	began := time.Now()

	// The application's databases, private: restarting one touches no one
	// else's. oncehook's own store is a schema of the shared PostgreSQL.
	pg := testenv.StartPostgres(t)
	maria := testenv.StartMariaDB(t)
	store := testenv.Postgres(t)
	pgDB, myDB := open(t, pg.URL), open(t, maria.URL)
	for _, db := range []struct {
		db   *sql.DB
		kind string
		ddl  string
	}{
		{pgDB, "postgres", "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL)"},
		{myDB, "mysql", "CREATE TABLE orders (id VARCHAR(64) NOT NULL PRIMARY KEY, amount INT NOT NULL) ENGINE=InnoDB"},
	} {
		ddl, err := table.DDL(db.kind, "outbox", db.kind == "postgres")
		if err != nil {
			t.Fatal(err)
		}
		stmts := []string{db.ddl, ddl}
		if db.kind == "mysql" { // one statement per Exec
			stmts = append(stmts[:1], strings.Split(ddl, ";\n")...)
		}
		for _, stmt := range stmts {
			if !hasSQL(stmt) {
				continue
			}
			if _, err := db.db.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", db.kind, err)
			}
		}
	}

	sink := testenv.NewSink(t)
	hook := &alerts{}
	hook.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a map[string]any
		json.NewDecoder(r.Body).Decode(&a)
		if a["resolved"] != true {
			hook.n.Add(1)
			t.Logf("alert: %v", a)
		}
	}))
	defer hook.Close()
	dir := t.TempDir()
	gws := make([]*gateway, 2)
	for i := range gws {
		gws[i] = &gateway{t: t, config: filepath.Join(dir, fmt.Sprintf("oncehook-%d.yaml", i))}
		api := freeAddr(t)
		gws[i].api = "http://" + api
		cfg := `listen: 127.0.0.1:0
store: "` + store + `"
api:
  listen: ` + api + `
  tokens: [{name: ops, token: ` + opsToken + `}]
alerts: {url: ` + hook.URL + `, interval: 200ms, min_volume: 100}
delivery: {lease: 4s}
sources:
  - name: orders-pg
    consume: {table: {url: "` + pg.URL + `", table: outbox, poll_interval: 200ms}}
    destinations: [shop]
  - name: orders-mariadb
    consume: {table: {url: "` + maria.URL + `", table: outbox, poll_interval: 200ms}}
    destinations: [shop]
destinations:
  - {name: shop, url: ` + sink.URL + `, timeout: 3s, retry: {max_attempts: 50, base_delay: 50ms, max_delay: 500ms}}
`
		if err := os.WriteFile(gws[i].config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		gws[i].start()
		t.Cleanup(gws[i].kill)
	}

	// The writers, at once.
	var progress atomic.Int64
	pgDSN := strings.Replace(pg.URL, "postgres://", "postgresql://", 1)
	mu, _ := url.Parse(maria.URL)
	common := []string{"WRITER_N=" + strconv.Itoa(n)}
	py, pyDone := run(t, "python", &progress, append(common, "WRITER_DSN="+pgDSN, "WRITER_PREFIX=py"), python, "writer.py")
	node, nodeDone := run(t, "node", &progress, append(common, "WRITER_DSN="+pgDSN, "WRITER_PREFIX=node"), "node", "writer.mjs")
	php, phpDone := run(t, "php", &progress, append(common, "WRITER_DSN=mysql:host="+mu.Hostname()+";port="+mu.Port()+";dbname=test",
		"WRITER_USER=root", "WRITER_PREFIX=php"), "php", "writer.php")

	// Mid-stream: at a fifth of all orders, gateway 0 killed -9 and
	// restarted; at half of PHP's, MariaDB killed -9 and restarted; at two
	// fifths of all, the application's PostgreSQL restarted (a crash:
	// pg_ctl -m immediate); at three fifths, gateway 1 killed.
	total := int64(3 * n)
	at := func(fifths int64) {
		if !testenv.WaitFor(120*time.Second, func() bool { return progress.Load() >= total*fifths/5 }) {
			t.Fatalf("the writers stalled at %d of %d orders", progress.Load(), total)
		}
	}
	var kills []string
	at(1)
	gws[0].kill()
	kills = append(kills, fmt.Sprintf("gateway 0 killed at %d orders written, %d deliveries", progress.Load(), len(sink.Deliveries())))
	gws[0].start()
	if !testenv.WaitFor(120*time.Second, func() bool { return php.lines.Load() >= int64(n/2) }) {
		t.Fatalf("the PHP writer stalled at %d orders", php.lines.Load())
	}
	maria.Kill()
	kills = append(kills, fmt.Sprintf("MariaDB killed at %d of PHP's orders", php.lines.Load()))
	maria.Start()
	at(2)
	pg.Kill()
	kills = append(kills, fmt.Sprintf("PostgreSQL killed at %d orders", progress.Load()))
	time.Sleep(500 * time.Millisecond)
	pg.Start()
	at(3)
	gws[1].kill()
	kills = append(kills, fmt.Sprintf("gateway 1 killed at %d orders written, %d deliveries", progress.Load(), len(sink.Deliveries())))
	gws[1].start()
	for _, done := range []<-chan struct{}{pyDone, nodeDone, phpDone} {
		select {
		case <-done:
		case <-time.After(180 * time.Second):
			t.Fatal("a writer did not finish")
		}
	}
	committed := map[string]string{} // key -> source
	var rolledBack []string
	for _, w := range []*writer{py, node, php} {
		if w.err != nil || !w.done {
			t.Fatalf("writer %s: %v (done %v)", w.name, w.err, w.done)
		}
		if len(w.committed)+len(w.rolledBack) != n {
			t.Fatalf("writer %s: %d committed, %d rolled back, want %d in all", w.name, len(w.committed), len(w.rolledBack), n)
		}
		src := "orders-pg"
		if w == php {
			src = "orders-mariadb"
		}
		for _, id := range w.committed {
			committed[src+":"+id] = src
		}
		for _, id := range w.rolledBack {
			rolledBack = append(rolledBack, src+":"+id)
		}
	}
	wrote := time.Since(began)

	// Every committed order delivered, both outboxes empty.
	if !testenv.WaitFor(120*time.Second, func() bool {
		return len(sink.ByKey()) >= len(committed) && count(t, pgDB, "outbox") == 0 && count(t, myDB, "outbox") == 0
	}) {
		t.Fatalf("%d of %d orders delivered; outbox rows left: %d on PostgreSQL, %d on MariaDB",
			len(sink.ByKey()), len(committed), count(t, pgDB, "outbox"), count(t, myDB, "outbox"))
	}
	time.Sleep(time.Second) // a late repeat would show
	byKey := sink.ByKey()
	for key := range committed {
		if byKey[key] == 0 {
			t.Errorf("committed order %s never delivered", key)
		}
	}
	for _, key := range rolledBack {
		if byKey[key] != 0 {
			t.Errorf("rolled-back order %s delivered", key)
		}
	}
	// A delivery cut short by a kill -9 (its outcome not committed) is
	// made again after its lease, under the same Idempotency-Key, which is
	// what a destination dedupes on: counted, not failed.
	repeats, attempts := 0, map[string]int{}
	for key, c := range byKey {
		if _, ok := committed[key]; !ok {
			t.Errorf("delivered %s, which no writer committed", key)
		}
		repeats += c - 1
	}
	for _, d := range sink.Deliveries() {
		if byKey[d.Key] > 1 {
			attempts[d.Attempt]++
		}
	}
	if got, want := count(t, pgDB, "orders")+count(t, myDB, "orders"), len(committed); got != want {
		t.Errorf("the applications' orders tables hold %d orders, the writers committed %d", got, want)
	}
	for _, tbl := range []string{"outbox_rejected"} {
		if c := count(t, pgDB, tbl) + count(t, myDB, tbl); c != 0 {
			t.Errorf("%d rows moved aside to %s", c, tbl)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	deliveries := len(sink.Deliveries())
	delivered := time.Since(began)
	// The counts as they stand once the run has settled: the same over
	// three seconds (a gateway writes its counts in batches, and the alert
	// checks read them; over one second, CI once saw a duplicate from
	// before the pass counted during it), so that what follows is the
	// pass's alone. The writers'
	// own retries (a tenth, after their commit) are duplicates already,
	// and may have raised the duplicate-rate alert: they are not the pass.
	var before map[string]map[string]float64
	var alertsBefore int64
	settled := func() bool {
		now := map[string]map[string]float64{}
		for _, src := range []string{"orders-pg", "orders-mariadb"} {
			now[src] = gws[0].stats(src)
		}
		same := fmt.Sprint(now) == fmt.Sprint(before) && hook.n.Load() == alertsBefore
		before, alertsBefore = now, hook.n.Load()
		if !same {
			time.Sleep(3 * time.Second)
		}
		return same
	}
	if !testenv.WaitFor(60*time.Second, settled) {
		t.Fatalf("the counts never settled: %v", before)
	}

	// The reconciliation pass: every committed row again, marked.
	want := map[string]float64{}
	for _, w := range []*writer{py, node, php} {
		db, src := pgDB, "orders-pg"
		if w == php {
			db, src = myDB, "orders-mariadb"
		}
		want[src] += float64(len(w.committed))
		insert := "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, headers) VALUES ($1, 'order', $1, 'order.created', $2, $3)"
		if w == php {
			insert = "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, headers) VALUES (?, 'order', ?, 'order.created', ?, ?)"
		}
		for start := 0; start < len(w.committed); start += 500 {
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range w.committed[start:min(start+500, len(w.committed))] {
				args := []any{id, []byte(`{"order":"` + id + `","reconciled":true}`), `{"Oncehook-Reconcile": "true"}`}
				if w == php {
					args = append([]any{id}, args...)
				}
				if _, err := tx.Exec(insert, args...); err != nil {
					tx.Rollback()
					t.Fatalf("reconcile %s: %v", id, err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !testenv.WaitFor(120*time.Second, func() bool {
		for src, n := range want {
			if gws[1].stats(src)["republished"]-before[src]["republished"] < n {
				return false
			}
		}
		return count(t, pgDB, "outbox") == 0 && count(t, myDB, "outbox") == 0
	}) {
		t.Fatalf("the pass was not taken: %v, before %v; rows left %d and %d", gws[1].stats("orders-pg"), before["orders-pg"],
			count(t, pgDB, "outbox"), count(t, myDB, "outbox"))
	}
	time.Sleep(2 * time.Second) // the alert checks run every 200 ms; a delivery would show
	for src, n := range want {
		after := gws[0].stats(src)
		if r, d := after["republished"]-before[src]["republished"], after["duplicate"]-before[src]["duplicate"]; r != n || d != 0 {
			t.Errorf("%s: the pass counted %v republished and %v duplicates, want %v and 0", src, r, d, n)
		}
	}
	if got := len(sink.Deliveries()); got != deliveries {
		t.Errorf("the reconciliation pass made %d deliveries, want 0", got-deliveries)
	}
	if got := hook.n.Load(); got != alertsBefore {
		t.Errorf("the reconciliation pass raised %d alerts, want none", got-alertsBefore)
	}
	if c := count(t, pgDB, "outbox_rejected") + count(t, myDB, "outbox_rejected"); c != 0 {
		t.Errorf("%d rows of the pass moved aside", c)
	}
	t.Logf("%d orders per writer (3 writers): %d committed, %d rolled back; written in %v, all delivered at %v, reconciled at %v",
		n, len(committed), len(rolledBack), wrote.Round(time.Millisecond), delivered.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	t.Logf("%d deliveries of %d keys (%d repeated under the same Idempotency-Key after the kills; their attempts %v); duplicates counted before the pass: %v and %v",
		deliveries, len(byKey), repeats, attempts, before["orders-pg"]["duplicate"], before["orders-mariadb"]["duplicate"])
	for _, k := range kills {
		t.Log(k)
	}
}

// open opens an application database by oncehook's URL for it.
func open(t *testing.T, u string) *sql.DB {
	t.Helper()
	db, err := table.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// hasSQL reports whether a piece of a script holds more than comments.
func hasSQL(stmt string) bool {
	for _, line := range strings.Split(stmt, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
			return true
		}
	}
	return false
}
