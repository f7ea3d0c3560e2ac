package oncehook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

const (
	opsToken  = "ops-token-0123456789"
	shopToken = "shop-token-0123456789"
	roToken   = "read-token-0123456789"
)

func outboxGateway(t *testing.T, sinkURL string) (*gateway, string) {
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.db")
	gw := startGateway(t, `store: sqlite://`+path+`
api:
  tokens:
    - {name: ops, token: `+opsToken+`}
    - {name: shop, token: `+shopToken+`, publish: [orders]}
    - {name: ro, token: `+roToken+`, read_only: true}
sources:
  - name: orders
    outbox: true
    destinations: [capi]
  - name: refunds
    outbox: true
    destinations: [capi]
  - name: stripe
    preset: stripe
    secrets: [whsec_x]
    destinations: [capi]
destinations:
  - {name: capi, url: `+sinkURL+`}
`)
	return gw, path
}

// POST /v1/publish/{source}: 202 for a new event, 200 for a duplicate,
// both after the durable commit; the event is delivered once, with the
// caller's key in Idempotency-Key; a publish without a key is refused.
func TestPublishOverHTTPAcceptsOnceAndAnswersDuplicates(t *testing.T) {
	sink := testenv.NewSink(t)
	gw, _ := outboxGateway(t, sink.URL)
	body := `{"event_name":"Purchase","event_id":"ord_1"}`
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", "ord_1", body); status != http.StatusAccepted || !strings.Contains(got, `"status":"accepted"`) {
		t.Fatalf("first publish: %d %s, want 202 accepted", status, got)
	}
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", "ord_1", body); status != http.StatusOK || !strings.Contains(got, `"status":"duplicate"`) {
		t.Fatalf("second publish: %d %s, want 200 duplicate", status, got)
	}
	// An operator's full token may publish too.
	if status, got := testenv.Publish(t, gw.APIURL, opsToken, "orders", "ord_1", body); status != http.StatusOK {
		t.Fatalf("publish with the operator's token: %d %s", status, got)
	}
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", "", body); status != http.StatusUnprocessableEntity || !strings.Contains(got, "missing_key") {
		t.Fatalf("publish without a key: %d %s, want 422 missing_key", status, got)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) >= 1 }) {
		t.Fatal("the published event was never delivered")
	}
	time.Sleep(200 * time.Millisecond)
	if d := sink.Deliveries(); len(d) != 1 || d[0].Key != "orders:ord_1" || string(d[0].Body) != body {
		t.Fatalf("deliveries %+v: want one, Idempotency-Key orders:ord_1, the body as published", d)
	}
	// The source takes no webhooks: its events come only from the outbox.
	resp, err := http.Post(gw.URL+"/in/orders", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /in/orders: %d, want 404", resp.StatusCode)
	}
}

// An Idempotency-Key is read by one parser wherever it arrives: POST
// /v1/publish and PublishTx's header take "ord_q1" (the IETF draft's
// quoted string) and ord_q1 (bare, as most clients send it) for one key,
// as the proxy does, so a client that changes spelling publishes no
// second event; the header given twice, or a key the draft does not
// allow, is 400 and stores nothing.
func TestPublishReadsIdempotencyKeyAsTheProxyDoes(t *testing.T) {
	sink := testenv.NewSink(t)
	gw, path := outboxGateway(t, sink.URL)
	body := `{"event_name":"Purchase","event_id":"ord_q1"}`
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", `"ord_q1"`, body); status != http.StatusAccepted || !strings.Contains(got, `"key":"ord_q1"`) {
		t.Fatalf("quoted: %d %s, want 202 with the key ord_q1", status, got)
	}
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", `ord_q1`, body); status != http.StatusOK || !strings.Contains(got, `"status":"duplicate"`) {
		t.Fatalf("bare, after quoted: %d %s, want 200 duplicate", status, got)
	}
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", ` "ord_q1" `, body); status != http.StatusOK || !strings.Contains(got, `"status":"duplicate"`) {
		t.Fatalf("quoted with spaces: %d %s, want 200 duplicate", status, got)
	}
	// A quoted key with an escaped quote is that key, not its spelling.
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", `"say \"hi\""`, body); status != http.StatusAccepted || !strings.Contains(got, `"key":"say%20\"hi\""`) {
		t.Fatalf("escaped quote: %d %s, want 202 with the key say \"hi\"", status, got)
	}
	for name, values := range map[string][]string{
		"twice":        {"ord_q2", "ord_q3"},
		"twice, same":  {"ord_q2", "ord_q2"},
		"a list":       {`"ord_q2", "ord_q3"`},
		"a bare list":  {`ord_q2,ord_q3`},
		"empty":        {``},
		"not a string": {`"caf` + "\u00e9" + `"`},
		"unclosed":     {`"ord_q2`},
	} {
		req, _ := http.NewRequest(http.MethodPost, gw.APIURL+"/v1/publish/orders", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+shopToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header["Idempotency-Key"] = values
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error, Reason, Field string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Reason != "invalid" || e.Field != "Idempotency-Key" || !strings.Contains(e.Error, "Idempotency-Key") {
			t.Errorf("%s %q: %d %+v, want 400 invalid naming Idempotency-Key", name, values, resp.StatusCode, e)
		}
	}
	if got := publishedCount(t, gw, "orders"); got != 2 {
		t.Fatalf("%d events stored, want 2 (ord_q1 and say \"hi\"): a refused key stores nothing", got)
	}
	// PublishTx reads a key given in its header the same way.
	db := sqlitetest.Open(t, path)
	outbox := oncehook.GatewayOutbox(gw.Gateway, sqlite.TxDriver{})
	ctx := context.Background()
	for _, header := range []http.Header{{"Idempotency-Key": {`"ord_q1"`}}, {"Idempotency-Key": {`ord_q1`}}} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := outbox.PublishTx(ctx, tx, "orders", "", []byte(body), &oncehook.PublishOptions{Header: header})
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if p.Key != "ord_q1" || !p.Duplicate {
			t.Fatalf("PublishTx with %v: %+v, want the duplicate ord_q1", header, p)
		}
	}
	// Refused as POST /v1/publish refuses it: a Rejection, 400 invalid,
	// counted under the source beside the HTTP ones.
	tx, _ := db.BeginTx(ctx, nil)
	var rej *receive.Rejection
	if _, err := outbox.PublishTx(ctx, tx, "orders", "", []byte(body), &oncehook.PublishOptions{Header: http.Header{"Idempotency-Key": {"a", "b"}}}); err == nil || !strings.Contains(err.Error(), "once") ||
		!errors.As(err, &rej) || rej.Status != http.StatusBadRequest || rej.Reason != "invalid" {
		t.Errorf("PublishTx with two Idempotency-Key headers: %v, want a 400 invalid Rejection saying to give it once", err)
	}
	tx.Rollback()
	if got := metric(t, gw, `oncehook_requests_total{outcome="invalid",source="orders"}`); got != 8 {
		t.Errorf("%d refused Idempotency-Keys counted, want the 7 over HTTP and PublishTx's", got)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) >= 2 }) {
		t.Fatal("the published events were never delivered")
	}
	time.Sleep(200 * time.Millisecond)
	keys := map[string]int{}
	for _, d := range sink.Deliveries() {
		keys[d.Key]++
	}
	if len(keys) != 2 || keys["orders:ord_q1"] != 1 {
		t.Fatalf("deliveries by Idempotency-Key %v: want orders:ord_q1 once, and the escaped key once", keys)
	}
}

// publishedCount is how many events of source the store holds.
func publishedCount(t *testing.T, gw *gateway, source string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/v1/events?source="+source, nil)
	req.Header.Set("Authorization", "Bearer "+opsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	return len(page.Events)
}

// A publishing token may publish to the sources it names, and do nothing
// else: not another source, not any other endpoint, not the dashboard.
func TestPublishTokenMayOnlyPublishToItsSources(t *testing.T) {
	sink := testenv.NewSink(t)
	gw, _ := outboxGateway(t, sink.URL)
	body := `{"id":"r1"}`
	for _, c := range []struct {
		token, source string
		want          int
	}{
		{shopToken, "refunds", http.StatusForbidden}, // an outbox source it does not name
		{shopToken, "stripe", http.StatusForbidden},  // not one it names (nor an outbox source)
		{opsToken, "stripe", http.StatusNotFound},    // not even for the operator: a webhook source's events are signed
		{roToken, "orders", http.StatusForbidden},    // read-only
		{"wrong-token-0123456789", "orders", http.StatusUnauthorized},
	} {
		if status, got := testenv.Publish(t, gw.APIURL, c.token, c.source, "k1", body); status != c.want {
			t.Errorf("token %s to %s: %d %s, want %d", c.token, c.source, status, got, c.want)
		}
	}
	for _, ep := range []struct{ method, path string }{
		{http.MethodGet, "/v1/stats"}, {http.MethodGet, "/v1/events"}, {http.MethodGet, "/v1/sources"},
		{http.MethodPost, "/v1/reload"}, {http.MethodGet, "/v1/effects/x"}, {http.MethodPost, "/v1/effects/x/claim"},
		{http.MethodGet, "/v1/dead"},
	} {
		req, _ := http.NewRequest(ep.method, gw.APIURL+ep.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+shopToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "publish_only") {
			t.Errorf("%s %s with the publishing token: %d %s, want 403", ep.method, ep.path, resp.StatusCode, b)
		}
	}
	// The dashboard's login refuses it.
	form := url.Values{"token": {shopToken}, "next": {"/ui/"}}
	req, _ := http.NewRequest(http.MethodPost, gw.APIURL+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", gw.APIURL)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("dashboard login with the publishing token: %d, cookies %v; want 403 and no session", resp.StatusCode, resp.Cookies())
	}
	if len(sink.Deliveries()) != 0 {
		t.Fatalf("%d deliveries, want none", len(sink.Deliveries()))
	}
}

// PublishTx from a gateway's own process (GatewayOutbox), on its SQLite
// file: delivered within the worker's outbox poll, a duplicate counted.
func TestPublishTxOnTheGatewaysDatabase(t *testing.T) {
	sink := testenv.NewSink(t)
	gw, path := outboxGateway(t, sink.URL)
	db := sqlitetest.Open(t, path)
	outbox := oncehook.GatewayOutbox(gw.Gateway, sqlite.TxDriver{})
	ctx := context.Background()
	pub := func(key string) oncehook.Published {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := outbox.PublishTx(ctx, tx, "orders", key, []byte(`{"id":"`+key+`"}`), nil)
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := time.Now()
	if p := pub("o1"); p.Duplicate || p.Key != "o1" {
		t.Fatalf("first %+v", p)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatal("never delivered")
	}
	t.Logf("delivered %v after the commit", time.Since(start).Round(time.Millisecond))
	if p := pub("o1"); !p.Duplicate {
		t.Fatalf("second %+v: want a duplicate", p)
	}
	tx, _ := db.BeginTx(ctx, nil)
	defer tx.Rollback()
	if _, err := outbox.PublishTx(ctx, tx, "stripe", "x", []byte(`{}`), nil); err == nil {
		t.Fatal("PublishTx to a webhook source was taken")
	}
	var view struct {
		Sources []struct {
			Total struct{ Accepted, Duplicate int64 } `json:"total"`
		} `json:"sources"`
	}
	req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/v1/stats?source=orders", nil)
	req.Header.Set("Authorization", "Bearer "+opsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil || len(view.Sources) != 1 || view.Sources[0].Total.Accepted != 1 || view.Sources[0].Total.Duplicate != 1 {
		t.Fatalf("stats %+v %v: want 1 accepted, 1 duplicate", view, err)
	}
}

// An outbox event's destinations are decided as intake decides a
// webhook's, at the commit that stores it (invariant 15): by its type and
// the destinations' filters, through PublishTx and over HTTP alike.
func TestPublishedEventsAreRoutedAsIntakeRoutesThem(t *testing.T) {
	purchases, refunds := testenv.NewSink(t), testenv.NewSink(t)
	path := filepath.Join(t.TempDir(), "oncehook.db")
	gw := startGateway(t, `store: sqlite://`+path+`
api: {tokens: [{name: shop, token: `+shopToken+`, publish: [orders]}]}
sources:
  - name: orders
    outbox: true
    type: ["json:event_name"]
    destinations:
      - {name: capi, types: [Purchase], filter: {body: {value: {$gte: 10}}}}
      - {name: ledger, types: [Refund]}
destinations:
  - {name: capi, url: `+purchases.URL+`}
  - {name: ledger, url: `+refunds.URL+`}
`)
	db := sqlitetest.Open(t, path)
	outbox := oncehook.GatewayOutbox(gw.Gateway, sqlite.TxDriver{})
	ctx := context.Background()
	for _, e := range []struct{ key, body string }{
		{"p1", `{"event_name":"Purchase","value":99}`},
		{"p2", `{"event_name":"Purchase","value":5}`}, // under capi's filter: stored, delivered nowhere
		{"r1", `{"event_name":"Refund","value":99}`},
	} {
		tx, _ := db.BeginTx(ctx, nil)
		if _, err := outbox.PublishTx(ctx, tx, "orders", e.key, []byte(e.body), nil); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
	}
	if status, got := testenv.Publish(t, gw.APIURL, shopToken, "orders", "p3", `{"event_name":"Purchase","value":20}`); status != http.StatusAccepted {
		t.Fatalf("publish p3: %d %s", status, got)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(purchases.Deliveries()) == 2 && len(refunds.Deliveries()) == 1 }) {
		t.Fatalf("capi got %v, ledger %v", purchases.ByKey(), refunds.ByKey())
	}
	time.Sleep(400 * time.Millisecond)
	if got := purchases.ByKey(); len(got) != 2 || got["orders:p1"] != 1 || got["orders:p3"] != 1 {
		t.Fatalf("capi got %v: want p1 and p3 (p2 is under its filter)", got)
	}
	if got := refunds.ByKey(); len(got) != 1 || got["orders:r1"] != 1 {
		t.Fatalf("ledger got %v: want r1", got)
	}
	for _, d := range purchases.Deliveries() {
		if d.Header.Get("X-Oncehook-Type") != "Purchase" {
			t.Fatalf("delivery %s typed %q, want Purchase", d.Key, d.Header.Get("X-Oncehook-Type"))
		}
	}
}

// A caller's open transaction that published a copy of a key holds that
// event's row (its copies count) until it ends. The gateway counted its
// own copies of the key in a commit that claimed other requests' events:
// that commit waited for the caller's transaction, and every request in
// it with it (11 s, the transaction's length; past 5 s the replica is not
// ready). One caller's transaction must hold no other request (invariant
// 13): the gateway's copy of a row held elsewhere waits for a later
// commit, and is still counted.
func TestAnOpenOutboxTransactionHoldsNoOtherRequest(t *testing.T) {
	sink := testenv.NewSink(t)
	pg := testenv.Postgres(t)
	gw := startGateway(t, `store: `+pg+`
api:
  tokens:
    - {name: shop, token: `+shopToken+`, publish: [orders]}
sources:
  - {name: orders, outbox: true, destinations: [capi]}
destinations:
  - {name: capi, url: `+sink.URL+`}
`)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	outbox := oncehook.GatewayOutbox(gw.Gateway, postgres.TxDriver{})
	if status, body := testenv.Publish(t, gw.APIURL, shopToken, "orders", "held", `{}`); status != http.StatusAccepted {
		t.Fatalf("first publish: %d %s", status, body)
	}
	// A copy the gateway answers from the keys it remembers, and counts
	// in a commit of its own within a second; and the caller's copy, in
	// a transaction it keeps open meanwhile.
	if status, body := testenv.Publish(t, gw.APIURL, shopToken, "orders", "held", `{}`); status != http.StatusOK {
		t.Fatalf("second publish: %d %s", status, body)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if p, err := outbox.PublishTx(ctx, tx, "orders", "held", []byte(`{}`), nil); err != nil || !p.Duplicate {
		t.Fatalf("PublishTx in the open transaction: %+v %v, want a duplicate", p, err)
	}
	var slowest time.Duration
	for i := range 30 { // 3 s: past the gateway's 1 s pace of counting copies
		start := time.Now()
		if status, body := testenv.Publish(t, gw.APIURL, shopToken, "orders", fmt.Sprintf("other-%d", i), `{}`); status != http.StatusAccepted {
			t.Fatalf("publish other-%d: %d %s", i, status, body)
		}
		slowest = max(slowest, time.Since(start))
		time.Sleep(100 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if slowest > 2*time.Second {
		t.Errorf("a publish of another key waited %v for the caller's open transaction", slowest.Round(time.Millisecond))
	}
	// Both copies are counted, the caller's and the gateway's: the
	// gateway's by its next commit, which an idle gateway makes within
	// its 10 s flush.
	var copies int
	if !testenv.WaitFor(15*time.Second, func() bool {
		return pool.QueryRow(ctx, `SELECT copies FROM events WHERE source = 'orders' AND key = 'held'`).Scan(&copies) == nil && copies == 2
	}) {
		t.Fatalf("copies %d, want 2", copies)
	}
}
