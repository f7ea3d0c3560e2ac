package oncehook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store/sqlite"
)

// alertReceiver is a real HTTP endpoint for alerts.url: it keeps every
// alert POSTed to it.
type alertReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	alerts []map[string]any
}

func newAlertReceiver(t *testing.T) *alertReceiver {
	r := &alertReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var a map[string]any
		if err := json.NewDecoder(req.Body).Decode(&a); err != nil {
			t.Errorf("alert body: %v", err)
		}
		r.mu.Lock()
		r.alerts = append(r.alerts, a)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// got returns the alerts received (not their ends), as "kind name".
func (r *alertReceiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.alerts {
		if a["resolved"] == true {
			continue // an alert's end (a test that crosses an hour may see one)
		}
		out = append(out, fmt.Sprint(a["kind"], " ", a["name"]))
	}
	return out
}

// sourceTotal is /v1/stats' total for source.
func sourceTotal(t *testing.T, gw *gateway, source string) map[string]any {
	t.Helper()
	return testenv.SourceTotal(t, gw.APIURL, opsToken, source)
}

// Invariant 27: a reconciliation pass over N events already delivered,
// marked reconcile=true (over HTTP, and PublishTx's Reconcile), is N
// republished, 0 duplicates, 0 new deliveries, and no alert, in the
// rollups, /v1/stats and /metrics; the same pass unmarked, on another
// source, is N duplicates and raises the duplicate-rate alert (the
// user's 47.4%), so the checks did run. A reconcile publish of a key never
// stored is accepted and delivered; ?reconcile=maybe is refused.
func TestAReconciliationPassIsRepublishedNotDuplicates(t *testing.T) {
	const n = 120
	sink := testenv.NewSink(t)
	hook := newAlertReceiver(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.db")
	gw := startGateway(t, `store: sqlite://`+path+`
api:
  tokens:
    - {name: ops, token: `+opsToken+`}
    - {name: shop, token: `+shopToken+`, publish: [orders, refunds]}
alerts: {url: `+hook.URL+`, interval: 200ms, min_volume: 100}
sources:
  - {name: orders, outbox: true, destinations: [capi]}
  - {name: refunds, outbox: true, destinations: [capi]}
destinations:
  - {name: capi, url: `+sink.URL+`}
`)
	body := func(k string) string { return `{"order":"` + k + `"}` }
	for i := range n {
		for _, src := range []string{"orders", "refunds"} {
			k := fmt.Sprintf("%s-%d", src, i)
			if status, got := testenv.Publish(t, gw.APIURL, shopToken, src, k, body(k)); status != http.StatusAccepted {
				t.Fatalf("publish %s: %d %s", k, status, got)
			}
		}
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(sink.Deliveries()) >= 2*n }) {
		t.Fatalf("delivered %d of %d", len(sink.Deliveries()), 2*n)
	}

	// The pass: the first ten in the caller's transaction (PublishTx),
	// the rest over HTTP; refunds' the same, unmarked.
	db := sqlitetest.Open(t, path)
	outbox := oncehook.GatewayOutbox(gw.Gateway, sqlite.TxDriver{})
	ctx := context.Background()
	for i := range n {
		k := fmt.Sprintf("orders-%d", i)
		if i < 10 {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := outbox.PublishTx(ctx, tx, "orders", k, []byte(body(k)), &oncehook.PublishOptions{Reconcile: true})
			if err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if !p.Duplicate || !p.Republished {
				t.Fatalf("PublishTx %s with Reconcile: %+v, want Duplicate and Republished", k, p)
			}
		} else if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders?reconcile=true", k, body(k)); status != http.StatusOK || !strings.Contains(got, `"status":"republished"`) {
			t.Fatalf("reconcile %s: %d %s, want 200 republished", k, status, got)
		}
		k = fmt.Sprintf("refunds-%d", i)
		if status, got := testenv.Publish(t, gw.APIURL, shopToken, "refunds", k, body(k)); status != http.StatusOK || !strings.Contains(got, `"status":"duplicate"`) {
			t.Fatalf("unmarked re-publish %s: %d %s, want 200 duplicate", k, status, got)
		}
	}
	// A row whose publish was lost: new, so stored and delivered.
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders?reconcile=true", "orders-lost", body("orders-lost")); status != http.StatusAccepted || !strings.Contains(got, `"status":"accepted"`) {
		t.Fatalf("reconcile of a key never published: %d %s, want 202 accepted", status, got)
	}
	for _, q := range []string{"reconcile=maybe", "reconcile=true&reconcile=false"} {
		if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders?"+q, "orders-x", body("x")); status != http.StatusBadRequest || !strings.Contains(got, `"field":"reconcile"`) {
			t.Fatalf("?%s: %d %s, want 400 naming reconcile", q, status, got)
		}
	}

	// The checks run every 200 ms: the unmarked pass's alert arrives, and
	// the marked one's never does.
	if !testenv.WaitFor(15*time.Second, func() bool { return len(hook.got()) >= 1 }) {
		t.Fatal("the unmarked pass raised no alert: the checks did not run")
	}
	time.Sleep(time.Second)
	if got := hook.got(); len(got) != 1 || got[0] != "duplicate_rate refunds" {
		t.Fatalf("alerts %q: want only refunds' duplicate rate", got)
	}
	if d := sink.ByKey(); len(d) != 2*n+1 || len(sink.Deliveries()) != 2*n+1 || d["orders:orders-lost"] != 1 {
		t.Fatalf("%d deliveries of %d keys: want %d, each once, orders-lost among them", len(sink.Deliveries()), len(d), 2*n+1)
	}

	total := sourceTotal(t, gw, "orders")
	if total["republished"] != float64(n) || total["duplicate"] != float64(0) || total["accepted"] != float64(n+1) || total["duplicate_rate"] != float64(0) {
		t.Fatalf("orders' stats %v: want %d republished, 0 duplicates, %d accepted, rate 0", total, n, n+1)
	}
	if total := sourceTotal(t, gw, "refunds"); total["duplicate"] != float64(n) || total["republished"] != float64(0) {
		t.Fatalf("refunds' stats %v: want %d duplicates", total, n)
	}
	metrics := testenv.Get(t, gw.URL+"/metrics")
	for _, want := range []string{
		fmt.Sprintf(`oncehook_events_total{source="orders",verdict="republished"} %d`, n-10), // PublishTx counts in the rollups only
		fmt.Sprintf(`oncehook_requests_total{outcome="republished",source="orders"} %d`, n-10),
		fmt.Sprintf(`oncehook_events_total{source="refunds",verdict="duplicate"} %d`, n),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, testenv.Grep(metrics, "oncehook_events_total"))
		}
	}
	if strings.Contains(metrics, `source="orders",verdict="duplicate"`) {
		t.Errorf("/metrics counts orders' pass as duplicates:\n%s", testenv.Grep(metrics, "oncehook_events_total"))
	}
}

// Invariant 27: an alert that has fired is not told again because the
// gateway restarted. A real gateway, started six times on one store
// within the hour (as the user did), with a real HTTP receiver: one POST
// and one "alert:" line in the log in all, though the duplicate rate is
// above its baseline at every start and every start shows it firing.
func TestAnAlertIsNotToldAgainWhenTheGatewayRestarts(t *testing.T) {
	t.Parallel()
	const n = 100
	sink := testenv.NewSink(t)
	hook := newAlertReceiver(t)
	path := filepath.Join(t.TempDir(), "oncehook.db")
	cfg := `store: sqlite://` + path + `
api:
  tokens:
    - {name: ops, token: ` + opsToken + `}
    - {name: shop, token: ` + shopToken + `, publish: [orders]}
alerts: {url: ` + hook.URL + `, interval: 100ms, min_volume: 100}
sources:
  - {name: orders, outbox: true, destinations: [capi]}
destinations:
  - {name: capi, url: ` + sink.URL + `}
`
	var mu sync.Mutex
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	hours := map[time.Time]bool{time.Now().UTC().Truncate(time.Hour): true}
	for start := 1; start <= 6; start++ {
		gw := oncehooktest.StartWith(t, cfg, oncehook.Options{Logger: log})
		if start == 1 {
			// 100 orders published twice: 50% duplicates.
			for i := range 2 * n {
				k := fmt.Sprintf("ord-%d", i%n)
				if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", k, `{}`); status != http.StatusAccepted && status != http.StatusOK {
					t.Fatalf("publish %s: %d %s", k, status, got)
				}
			}
		}
		// Each start shows the alert firing: its checks ran.
		if !testenv.WaitFor(15*time.Second, func() bool {
			return strings.Contains(testenv.Get(t, gw.URL+"/metrics"), `oncehook_alert_firing{kind="duplicate_rate",name="orders",scope="source"} 1`)
		}) {
			t.Fatalf("start %d: the alert is not firing", start)
		}
		time.Sleep(300 * time.Millisecond) // a few more checks
		gw.Stop()
		hours[time.Now().UTC().Truncate(time.Hour)] = true
	}
	mu.Lock()
	lines := strings.Count(logged.String(), `msg="alert: `)
	mu.Unlock()
	// Crossing an hour while the test runs tells the alert once per hour,
	// as it should (alerts are told once per alert and hour).
	if got := hook.got(); len(got) != len(hours) || lines != len(hours) {
		t.Fatalf("over 6 starts: %d POSTs %q and %d alert lines in the log, want %d", len(got), got, lines, len(hours))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Invariant 27 for an outbox table: rows inserted again by a
// reconciliation pass, marked {"Oncehook-Reconcile": "true"} in their
// headers column, are republished (not duplicates), delivered no second
// time and removed; a marked row never taken before is delivered; a
// mark neither true nor false refuses the row (moved aside, malformed).
func TestTableSourceReconciliationRowsAreRepublished(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			const n = 20
			o := newOutboxTable(t, kind, nil)
			sink := testenv.NewSink(t)
			gw := oncehooktest.Start(t, o.config(sink.URL, ""))
			var rows []outboxRow
			for i := range n {
				rows = append(rows, order(i))
			}
			if err := o.insert(t, true, rows...); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(30*time.Second, func() bool { return len(sink.ByKey()) == n && o.count(t, "") == 0 }) {
				t.Fatalf("%d of %d delivered, %d rows left", len(sink.ByKey()), n, o.count(t, ""))
			}
			// The pass: every row again, marked, and one whose first
			// insert was lost; and a row marked with a value no one can read.
			for i := range rows {
				rows[i].headers = `{"Oncehook-Reconcile": "true", "X-Pass": "hourly"}`
			}
			lost := order(n)
			lost.headers = `{"Oncehook-Reconcile": "true"}`
			bad := order(n + 1)
			bad.headers = `{"Oncehook-Reconcile": "maybe"}`
			if err := o.insert(t, true, append(rows, lost, bad)...); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(30*time.Second, func() bool { return o.count(t, "") == 0 && o.count(t, "_rejected") == 1 }) {
				t.Fatalf("%d rows left, %d moved aside; want 0 and 1", o.count(t, ""), o.count(t, "_rejected"))
			}
			if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.ByKey()) == n+1 }) {
				t.Fatalf("%d keys delivered, want %d (the lost row's too)", len(sink.ByKey()), n+1)
			}
			time.Sleep(300 * time.Millisecond)
			sink.CheckEachOnce(t)
			if r, d := metric(t, gw, `oncehook_events_total{source="orders",verdict="republished"}`), metric(t, gw, `oncehook_events_total{source="orders",verdict="duplicate"}`); r != n || d != 0 {
				t.Errorf("republished %d, duplicate %d: want %d and 0", r, d, n)
			}
		})
	}
}
