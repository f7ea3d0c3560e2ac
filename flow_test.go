package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// sendInvoicePaid posts Stripe's invoice.paid evt_<i> (three digits),
// signed with whsec_test, to the stripe source of the gateway at url, and
// fails the test unless it is answered 200.
func sendInvoicePaid(t *testing.T, url string, i int) {
	t.Helper()
	body := fmt.Sprintf(`{"id":"evt_%03d","object":"event","type":"invoice.paid"}`, i)
	resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, url+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("intake: %v %v", resp, err)
	}
	resp.Body.Close()
}

// A destination down for a while holds instead of drowning: its breaker
// opens after a few failures and attempts stop (counted at the sink),
// nothing goes to the dead letters, the other destination keeps its
// pace, and once it is back every held event arrives exactly once.
func TestAFailingDestinationHoldsAndRecovers(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var attemptsWhileDown atomic.Int32
	crm, app := testenv.NewSink(t), testenv.NewSink(t)
	crm.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
		if down.Load() {
			attemptsWhileDown.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+flowToken+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [crm, app]}
destinations:
  - name: crm
    url: `+crm.URL+`
    retry: {max_attempts: 4, base_delay: 50ms, max_delay: 100ms}
    breaker: {failures: 3, cooldown: 1s}
  - {name: app, url: `+app.URL+`}
`)
	send := func(i int) { sendInvoicePaid(t, gw.URL, i) }
	for i := range 20 {
		send(i)
	}
	// app gets everything at once; crm's breaker opens after 3 failures.
	if !testenv.WaitFor(5*time.Second, func() bool { return len(app.ByKey()) == 20 }) {
		t.Fatalf("the healthy destination got %d of 20 while the other failed", len(app.ByKey()))
	}
	time.Sleep(3 * time.Second) // an outage of a few cool-downs
	n := attemptsWhileDown.Load()
	// 3 to open it, the few already in flight then (the events arrive
	// one after another), and a probe per cool-down (1 s, then 2 s);
	// without the breaker it would be 80 (20 events, 4 attempts each).
	if n < 3 || n > 10 {
		t.Fatalf("%d attempts reached the failing destination in 3 s; want the 3 that open the breaker, the few in flight and a probe or two", n)
	}
	st, _ := gw.Store().Stats(context.Background())
	if st.Dead != 0 {
		t.Fatalf("%d dead letters: a held destination must not drain into them", st.Dead)
	}
	if b, _ := gw.Store().Breakers(context.Background()); b["crm"].State == "" {
		t.Fatal("the breaker is not open in the store, where other replicas read it")
	}
	// The operator sees it: in /v1/destinations and in /metrics.
	c := api.NewClient(gw.APIURL, flowToken, nil)
	ds, err := c.Destinations(context.Background())
	if err != nil || ds[0].Name != "crm" || ds[0].Breaker == nil || !strings.Contains(ds[0].Breaker.Reason, "503") || ds[1].Breaker != nil {
		t.Fatalf("destinations %+v %v", ds, err)
	}
	if m := testenv.Get(t, gw.URL+"/metrics"); !strings.Contains(m, `oncehook_breaker_open{destination="crm"} 1`) || !strings.Contains(m, `oncehook_breaker_open{destination="app"} 0`) {
		t.Fatalf("metrics lack the breaker:\n%s", testenv.Grep(m, "breaker"))
	}
	down.Store(false)
	// Every event arrived while down too (a failed attempt each, some of
	// them): wait for the successes, not for the keys.
	succeeded := func() int { return len(crm.Deliveries()) - int(attemptsWhileDown.Load()) }
	if !testenv.WaitFor(20*time.Second, func() bool { return succeeded() >= 20 }) {
		t.Fatalf("after recovery crm has %d successful deliveries of 20 events", succeeded())
	}
	time.Sleep(300 * time.Millisecond)
	if got := len(crm.Deliveries()) - int(attemptsWhileDown.Load()); got != 20 {
		t.Fatalf("%d successful deliveries to crm, want each of the 20 events once", got)
	}
	if st, _ := gw.Store().Stats(context.Background()); st.Dead != 0 || st.Pending != 0 {
		t.Fatalf("stats after recovery %+v", st)
	}
	if b, _ := gw.Store().Breakers(context.Background()); len(b) != 0 {
		t.Fatalf("breakers after recovery %+v", b)
	}
}

const flowToken = "ops-token-0123456789"

// An operator opens a destination's breaker by hand: its deliveries are
// held (none spent, none dropped) until the operator closes it, and both
// acts are in the audit log.
func TestAnOperatorOpensAndClosesABreaker(t *testing.T) {
	crm := testenv.NewSink(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+flowToken+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [crm]}
destinations:
  - {name: crm, url: `+crm.URL+`}
`)
	c := api.NewClient(gw.APIURL, flowToken, nil)
	ctx := context.Background()
	d, err := c.SetBreaker(ctx, "crm", true)
	if err != nil || d.Breaker == nil || d.Breaker.State != "open" {
		t.Fatalf("open: %+v %v", d, err)
	}
	for i := range 5 {
		body := fmt.Sprintf(`{"id":"evt_h%d","object":"event"}`, i)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("intake: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	time.Sleep(time.Second)
	if n := len(crm.Deliveries()); n != 0 {
		t.Fatalf("%d deliveries went through a breaker opened by hand", n)
	}
	if d, _ := c.SetBreaker(ctx, "crm", false); d.Breaker != nil {
		t.Fatalf("close: %+v", d)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(crm.ByKey()) == 5 }) {
		t.Fatalf("after closing, %d of 5 held events arrived", len(crm.ByKey()))
	}
	for _, dl := range crm.Deliveries() {
		if dl.Attempt != "1" {
			t.Fatalf("%s arrived as attempt %s: holding spent attempts", dl.Key, dl.Attempt)
		}
	}
	audit, _ := c.Audit(ctx, "", 10)
	if len(audit.Entries) != 2 || audit.Entries[0].Action != "breaker_close" || audit.Entries[1].Action != "breaker_open" {
		t.Fatalf("audit %+v", audit.Entries)
	}
}

// A destination's own concurrency bound: never more attempts at once
// than it says, none spent on waiting, every event once.
func TestADestinationsConcurrencyBound(t *testing.T) {
	var now, most atomic.Int32
	crm := testenv.NewSink(t)
	crm.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(50 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	}
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [crm]}
destinations:
  - {name: crm, url: `+crm.URL+`, concurrency: 2}
`)
	for i := range 20 {
		body := fmt.Sprintf(`{"id":"evt_c%02d","object":"event"}`, i)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("intake: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(crm.ByKey()) == 20 }) {
		t.Fatalf("delivered %d of 20", len(crm.ByKey()))
	}
	if m := most.Load(); m > 2 {
		t.Fatalf("%d attempts at once, with concurrency: 2", m)
	}
	for _, d := range crm.Deliveries() {
		if d.Attempt != "1" {
			t.Fatalf("%s arrived as attempt %s: waiting for a slot spent an attempt", d.Key, d.Attempt)
		}
	}
	if len(crm.Deliveries()) != 20 {
		t.Fatalf("%d deliveries for 20 events", len(crm.Deliveries()))
	}
}

// A destination that sets no concurrency of its own shares the worker
// with the others: a slow one (seconds an answer) takes three quarters of
// delivery.concurrency at most, and the other destinations' events go
// out at once beside it, at every pool size a user would set.
func TestASlowDestinationLeavesTheOthersRoom(t *testing.T) {
	for _, pool := range []int{4, 16, 64} {
		t.Run(fmt.Sprintf("concurrency=%d", pool), func(t *testing.T) {
			t.Parallel()
			share := pool * 3 / 4
			var now, most atomic.Int32
			release := make(chan struct{})
			slow, fast := testenv.NewSink(t), testenv.NewSink(t)
			slow.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
				n := now.Add(1)
				defer now.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				select { // an answer that takes its time (until the test is done with it)
				case <-release:
				case <-time.After(20 * time.Second):
				}
				w.WriteHeader(http.StatusOK)
			}
			gw := oncehooktest.Start(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
delivery: {concurrency: %d, lease: 60s}
sources:
  - {name: reports, preset: stripe, secrets: [whsec_test], destinations: [slow]}
  - {name: payments, preset: stripe, secrets: [whsec_test], destinations: [fast]}
destinations:
  - {name: slow, url: %s, timeout: 25s}
  - {name: fast, url: %s}
`, pool, slow.URL, fast.URL))
			t.Cleanup(func() { close(release) })
			post := func(source string, i int) {
				body := fmt.Sprintf(`{"id":"evt_%s_%03d","object":"event"}`, source, i)
				resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/"+source, "stripe", "whsec_test", []byte(body), ""))
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("intake: %v %v", resp, err)
				}
				resp.Body.Close()
			}
			for i := range pool + 8 {
				post("reports", i)
			}
			if !testenv.WaitFor(10*time.Second, func() bool { return now.Load() == int32(share) }) {
				t.Fatalf("%d attempts in flight to the slow destination, want its share %d", now.Load(), share)
			}
			start := time.Now()
			for i := range 3 {
				post("payments", i)
			}
			if !testenv.WaitFor(10*time.Second, func() bool { return len(fast.ByKey()) == 3 }) {
				t.Fatalf("the other destination got %d of 3 while the slow one held its share", len(fast.ByKey()))
			}
			if waited := time.Since(start); waited > 3*time.Second {
				t.Fatalf("the other destination's events waited %s behind the slow one", waited)
			}
			if m := most.Load(); m != int32(share) {
				t.Fatalf("%d attempts at once to the slow destination, want %d (3/4 of %d)", m, share, pool)
			}
		})
	}
}
