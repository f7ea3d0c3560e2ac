package oncehook_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/internal/testenv"
)

// countingReceiver answers each POST to /<name>/<status>[/<control>]
// with that status (and webhook-delivery: <control>), counting the
// attempts per path.
type countingReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newCountingReceiver(t *testing.T) *countingReceiver {
	r := &countingReceiver{hits: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		status, _ := strconv.Atoi(parts[1])
		r.mu.Lock()
		r.hits[req.URL.Path]++
		r.mu.Unlock()
		if len(parts) > 2 {
			w.Header().Set("Webhook-Delivery", parts[2])
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *countingReceiver) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

// snapshot is a copy of the counts, read under the lock: the receiver's
// handlers may still be counting an attempt in flight.
func (r *countingReceiver) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.hits)
}

func (r *countingReceiver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.hits {
		n += v
	}
	return n
}

// Each status × each retry rule, deliveries counted at a real receiver:
// a final status is attempted once (a dead letter at once), a retried one
// max_attempts times (3), a 2xx delivered once. The expected finals are
// written out here by hand, not computed by the rules under test.
func TestRetryRulesSweep(t *testing.T) {
	statuses := []int{200, 400, 401, 403, 404, 408, 409, 410, 422, 429, 500, 502, 503}
	rules := []struct {
		name, yaml string
		final      []int
	}{
		{"default", "", []int{400, 401, 403, 404, 410, 422}},
		{"retry4xx", "retry_on: [4xx]", nil},
		{"final5xx", "final_on: [5xx]", []int{400, 401, 403, 404, 410, 422, 500, 502, 503}},
		{"final4xx-but", "final_on: [4xx], retry_on: [429, 408]", []int{400, 401, 403, 404, 409, 410, 422}},
		{"mixed", "retry_on: [404, 410], final_on: [500-502]", []int{400, 401, 403, 422, 500, 502}},
	}
	rx := newCountingReceiver(t)
	var dests, names []string
	for _, r := range rules {
		for _, s := range statuses {
			name := fmt.Sprintf("%s-%d", r.name, s)
			names = append(names, name)
			dests = append(dests, fmt.Sprintf("  - {name: %s, url: %q, timeout: 2s, breaker: {off: true}, retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}%s}",
				name, rx.URL+"/"+r.name+"/"+strconv.Itoa(s), map[bool]string{true: ", " + r.yaml, false: ""}[r.yaml != ""]))
		}
	}
	gw := startGateway(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - {name: acme, preset: generic, unsigned: true, key: ["json:id"], destinations: [%s]}
destinations:
%s
`, strings.Join(names, ", "), strings.Join(dests, "\n")))
	if a := postJSON(t, gw.URL+"/in/acme", `{"id":"evt-1"}`); a.Status != http.StatusOK {
		t.Fatalf("intake: %d", a.Status)
	}
	want, dead := 0, 0
	for _, r := range rules {
		for _, s := range statuses {
			switch {
			case s == 200:
				want++
			case slices.Contains(r.final, s):
				want, dead = want+1, dead+1
			default:
				want, dead = want+3, dead+1
			}
		}
	}
	if !testenv.WaitFor(20*time.Second, func() bool {
		st, err := gw.Store().Stats(context.Background())
		return err == nil && st.Dead == int64(dead) && rx.total() >= want
	}) {
		st, _ := gw.Store().Stats(context.Background())
		t.Fatalf("after 20s: %d dead letters (want %d), %d attempts (want %d)", st.Dead, dead, rx.total(), want)
	}
	time.Sleep(300 * time.Millisecond) // nothing more comes
	var table strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&table, "%-13s", r.name)
		for _, s := range statuses {
			path := "/" + r.name + "/" + strconv.Itoa(s)
			exp := 3
			if s == 200 || slices.Contains(r.final, s) {
				exp = 1
			}
			got := rx.count(path)
			if got != exp {
				t.Errorf("%s (%s) answering %d: %d attempts, want %d", r.name, r.yaml, s, got, exp)
			}
			fmt.Fprintf(&table, " %d:%d", s, got)
		}
		table.WriteString("\n")
	}
	t.Logf("attempts per rule and status (max_attempts 3):\n%s", table.String())
}

// The receiver's webhook-delivery header (Standard Webhooks), both ways:
// honoured where the destination opted in (abort-message: one attempt, a
// dead letter; disable: the destination paused, audited, nothing more
// sent until resumed), and ignored where it did not (three attempts, no
// pause). A 2xx with abort-message is delivered.
func TestWebhookDeliveryHeader(t *testing.T) {
	rx := newCountingReceiver(t)
	dest := func(name, path, extra string) string {
		return fmt.Sprintf("  - {name: %s, url: %q, timeout: 2s, breaker: {off: true}, retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}%s}", name, rx.URL+path, extra)
	}
	gw := startGateway(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: acme, preset: generic, unsigned: true, key: ["json:id"], destinations: [abort, abort-ignored, abort-ok, disable, disable-ignored]}
destinations:
`+strings.Join([]string{
		dest("abort", "/abort/503/abort-message", ", standard_webhooks_abort: true"),
		dest("abort-ignored", "/abort-ignored/503/abort-message", ""),
		dest("abort-ok", "/abort-ok/200/abort-message", ", standard_webhooks_abort: true"),
		dest("disable", "/disable/503/disable", ", standard_webhooks_abort: true"),
		dest("disable-ignored", "/disable-ignored/503/disable", ""),
	}, "\n")+"\n")
	ctx := context.Background()
	// Five events at once: attempts in flight together all hear disable,
	// and the destination is paused once.
	for i := 1; i <= 5; i++ {
		if a := postJSON(t, gw.URL+"/in/acme", fmt.Sprintf(`{"id":"evt-%d"}`, i)); a.Status != http.StatusOK {
			t.Fatalf("intake: %d", a.Status)
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		return rx.count("/abort/503/abort-message") == 5 && rx.count("/abort-ignored/503/abort-message") == 15 && rx.count("/abort-ok/200/abort-message") == 5 &&
			rx.count("/disable/503/disable") >= 1 && rx.count("/disable-ignored/503/disable") == 15
	}) {
		t.Fatalf("attempts: %v", rx.snapshot())
	}
	paused := func(name string) bool {
		ds, err := gw.Admin().Destinations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Name == name {
				return d.Paused
			}
		}
		t.Fatalf("no destination %s", name)
		return false
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return paused("disable") }) {
		t.Fatal("the destination whose receiver answered webhook-delivery: disable is not paused")
	}
	if paused("disable-ignored") {
		t.Fatal("a destination that did not opt in was paused")
	}
	page, err := gw.Admin().Audit(ctx, "", 50)
	if err != nil {
		t.Fatal(err)
	}
	var audited []string
	for _, e := range page.Entries {
		audited = append(audited, e.Actor+" "+e.Action+" "+e.Target)
	}
	pauses := 0
	for _, a := range audited {
		if a == oncehook.ReceiverActor+" pause destination disable" {
			pauses++
		}
	}
	if pauses != 1 {
		t.Errorf("audit log %q: %d pauses by the receiver, want 1", audited, pauses)
	}
	// The aborted delivery is a dead letter that says why.
	dl, err := gw.Admin().DeadLetters(ctx, admin.DeadFilter{Destination: "abort"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dl.DeadLetters) != 5 || !strings.Contains(dl.DeadLetters[0].LastError, "webhook-delivery: abort-message") || dl.DeadLetters[0].Attempts != 1 {
		t.Errorf("dead letters of abort: %+v", dl.DeadLetters)
	}
	// Paused: nothing more is sent to it, new events are held, not lost.
	time.Sleep(300 * time.Millisecond)
	before := rx.count("/disable/503/disable")
	for i := 6; i <= 8; i++ {
		if a := postJSON(t, gw.URL+"/in/acme", fmt.Sprintf(`{"id":"evt-%d"}`, i)); a.Status != http.StatusOK {
			t.Fatalf("intake: %d", a.Status)
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return rx.count("/abort-ok/200/abort-message") == 8 }) {
		t.Fatal("the other destinations did not get the new events")
	}
	time.Sleep(300 * time.Millisecond)
	if got := rx.count("/disable/503/disable"); got != before {
		t.Fatalf("a paused destination got %d more attempts", got-before)
	}
	if _, err := gw.Admin().SetPaused(ctx, "disable", false); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return rx.count("/disable/503/disable") > before }) {
		t.Fatal("resumed, the destination got nothing: its deliveries were lost")
	}
	t.Logf("attempts: %v", rx.snapshot())
}

// A pull consumer's ack is classified by the same rules, and its answer
// says the outcome they make: final_on: [503] ends a 503 at once (a dead
// letter), retry_on: [404] retries a 404 (offered again).
func TestRetryRulesClassifyPullAcks(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: ops, token: `+opsToken+`}
    - {name: dev, token: `+pullToken+`, pull: [laptop]}
sources:
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], destinations: [laptop]}
destinations:
  - name: laptop
    pull: {}
    retry: {max_attempts: 3, base_delay: 10ms, max_delay: 50ms}
    final_on: [503]
    retry_on: [404]
`)
	ctx := context.Background()
	c := pull.NewClient(gw.APIURL, pullToken, nil)
	for _, id := range []string{"a", "b"} {
		if a := postJSON(t, gw.URL+"/in/shop", `{"id":"`+id+`"}`); a.Status != http.StatusOK {
			t.Fatalf("intake: %d", a.Status)
		}
	}
	got := pullAll(t, c, 2, 10*time.Second, pull.PullBody{Max: 10, Wait: "1s"})
	byKey := map[string]pull.WireDelivery{}
	for _, d := range got {
		byKey[d.Key] = d
	}
	if a, err := c.Ack(ctx, byKey["a"].ID, pull.AckBody{Token: byKey["a"].Token, Status: 503}); err != nil || a.Outcome != "permanent" {
		t.Fatalf("503 under final_on: %+v, %v; want permanent", a, err)
	}
	if a, err := c.Ack(ctx, byKey["b"].ID, pull.AckBody{Token: byKey["b"].Token, Status: 404}); err != nil || a.Outcome != "retry" {
		t.Fatalf("404 under retry_on: %+v, %v; want retry", a, err)
	}
	again := pullAll(t, c, 1, 10*time.Second, pull.PullBody{Max: 10, Wait: "1s"})
	if again[0].Key != "b" {
		t.Fatalf("offered again: %s, want b", again[0].Key)
	}
	dl, err := gw.Admin().DeadLetters(ctx, admin.DeadFilter{Destination: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dl.DeadLetters) != 1 || dl.DeadLetters[0].Key != "a" || !strings.Contains(dl.DeadLetters[0].LastError, "final_on") {
		t.Fatalf("dead letters: %+v", dl.DeadLetters)
	}
}
