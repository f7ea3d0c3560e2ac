package oncehook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// orderSink records, per entity, the versions it was given in the order
// it got them, and can fail an entity's first delivery.
type orderSink struct {
	*httptest.Server
	mu     sync.Mutex
	seen   map[string][]int
	header map[string]http.Header // the last delivery's headers, per event id
	fail   func(entity string, version int) bool
}

func newOrderSink(t *testing.T) *orderSink {
	s := &orderSink{seen: map[string][]int{}, header: map[string]http.Header{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID     string `json:"id"`
			Entity string `json:"entity"`
			V      int    `json:"v"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &ev) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fail != nil && s.fail(ev.Entity, ev.V) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		s.seen[ev.Entity] = append(s.seen[ev.Entity], ev.V)

		s.header[ev.ID] = r.Header.Clone()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *orderSink) versions(entity string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.seen[entity]...)
}

func (s *orderSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, vs := range s.seen {
		n += len(vs)
	}
	return n
}

func postOrdered(t *testing.T, url, entity string, v int) {
	t.Helper()
	body := fmt.Sprintf(`{"id":"%s-v%d","entity":%q,"v":%d}`, entity, v, entity, v)
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s v%d: %d", entity, v, resp.StatusCode)
	}
}

// fifo: one entity's destination fails its first event; that entity's
// later events wait, and only they: 100 other entities keep arriving.
// After recovery the entity's events arrive in order, each once.
func TestFIFOFailingHeadHoldsOnlyItsEntity(t *testing.T) {
	sink := newOrderSink(t)
	failing, failures := true, 0
	sink.fail = func(entity string, v int) bool {
		if entity == "stuck" && failing {
			failures++
			return true
		}
		return false
	}
	failed := func() int {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return failures
	}
	gw := oncehooktest.Start(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - name: shop
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v", mode: fifo}
    destinations: [app]
destinations:
  - {name: app, url: %s, retry: {base_delay: 200ms, max_delay: 200ms, max_attempts: 100000}}
`, sink.URL))
	// max_attempts is out of reach on purpose: a head that goes to the dead
	// letters releases the next (as the README says), and under the race
	// detector on a loaded machine the 300 other deliveries can take longer
	// than a hundred 200 ms retries, which let v2 go before v1 was delivered.
	in := gw.URL + "/in/shop"
	for v := 1; v <= 5; v++ {
		postOrdered(t, in, "stuck", v)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return failed() >= 2 }) {
		t.Fatal("the head was not attempted")
	}
	// While the head keeps failing, 100 other entities arrive.
	for e := range 100 {
		for v := 1; v <= 3; v++ {
			postOrdered(t, in, fmt.Sprintf("e%03d", e), v)
		}
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return sink.total() == 300 }) {
		t.Fatalf("the other entities got %d of 300 deliveries while one entity's head failed", sink.total())
	}
	for e := range 100 {
		if got := sink.versions(fmt.Sprintf("e%03d", e)); fmt.Sprint(got) != "[1 2 3]" {
			t.Fatalf("e%03d got %v, want [1 2 3]", e, got)
		}
	}
	if got := sink.versions("stuck"); len(got) != 0 || failed() < 3 {
		t.Fatalf("the held entity got %v while its head failed (%d times)", got, failed())
	}
	sink.mu.Lock()
	failing = false
	sink.mu.Unlock()

	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.versions("stuck")) == 5 }) {
		t.Fatalf("after recovery the entity got %v", sink.versions("stuck"))
	}
	if got := sink.versions("stuck"); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("after recovery the entity got %v, want [1 2 3 4 5]", got)
	}
}

// stale with on_stale: deliver: an older event is sent anyway, marked
// stale with the version the destination already has; with the default
// (hold) it is not sent, and the API shows it stale.
func TestStaleEventIsHeldOrDeliveredMarked(t *testing.T) {
	sink := newOrderSink(t)
	gw := oncehooktest.Start(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: ops-token-0123456789}]}
sources:
  - name: held
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v"}
    destinations: [app]
  - name: marked
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v", on_stale: deliver}
    destinations: [app]
destinations:
  - {name: app, url: %s}
`, sink.URL))
	postOrdered(t, gw.URL+"/in/held", "h", 2)
	postOrdered(t, gw.URL+"/in/marked", "m", 2)
	if !testenv.WaitFor(5*time.Second, func() bool { return sink.total() == 2 }) {
		t.Fatalf("delivered %d of 2", sink.total())
	}
	postOrdered(t, gw.URL+"/in/held", "h", 1)
	postOrdered(t, gw.URL+"/in/marked", "m", 1)
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.versions("m")) == 2 }) {
		t.Fatalf("the marked source's stale event was not delivered: %v", sink.versions("m"))
	}
	sink.mu.Lock()
	h := sink.header["m-v1"]
	sink.mu.Unlock()
	if h.Get("X-Oncehook-Stale") != "true" || h.Get("X-Oncehook-Current-Version") != "2" {
		t.Fatalf("stale delivery headers %v: want X-Oncehook-Stale: true and the current version 2", h)
	}
	time.Sleep(300 * time.Millisecond)
	if got := sink.versions("h"); fmt.Sprint(got) != "[2]" {
		t.Fatalf("the held source delivered %v, want only v2", got)
	}
	req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/v1/events?source=held&key=h-v1", nil)
	req.Header.Set("Authorization", "Bearer ops-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"stale"`) {
		t.Fatalf("the API's view of the stale event: %s", b)
	}
}

// An operator skips a fifo head that will never succeed: through the API
// (audited), the entity's next events go, in order, and the event says
// where it stands.
func TestOperatorSkipsAFIFOHead(t *testing.T) {
	const token = "ops-token-0123456789"
	sink := newOrderSink(t)
	sink.fail = func(entity string, v int) bool { return v == 1 } // v1 never succeeds
	gw := oncehooktest.Start(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: %s}]}
sources:
  - name: shop
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v", mode: fifo}
    destinations: [app]
destinations:
  - {name: app, url: %s, retry: {base_delay: 50ms, max_delay: 50ms, max_attempts: 1000}}
`, token, sink.URL))
	for v := 1; v <= 3; v++ {
		postOrdered(t, gw.URL+"/in/shop", "ord_1", v)
	}
	c := api.NewClient(gw.APIURL, token, nil)
	ctx := context.Background()
	page, err := c.Events(ctx, admin.EventFilter{Source: "shop"})
	if err != nil || len(page.Events) != 3 {
		t.Fatalf("events %+v, %v", page, err)
	}
	ids := map[string]int64{}
	for _, e := range page.Events {
		ids[e.Key] = e.ID
	}
	var second admin.EventDetail
	if !testenv.WaitFor(5*time.Second, func() bool {
		second, err = c.Event(ctx, ids["ord_1-v2"])
		return err == nil && second.Deliveries[0].Order != nil && second.Deliveries[0].Order.Waiting
	}) {
		t.Fatalf("v2 while v1 fails: %+v, %v; want it waiting", second.Deliveries, err)
	}
	if o := second.Deliveries[0].Order; o.Entity != "ord_1" || o.Version != "2" || o.Mode != "fifo" {
		t.Fatalf("v2's order %+v", o)
	}
	var n admin.Count
	if !testenv.WaitFor(5*time.Second, func() bool {
		n, err = c.SkipEvent(ctx, ids["ord_1-v1"], "app")
		return err == nil // 409 while an attempt is in flight: try again
	}) || n.Count != 1 {
		t.Fatalf("skip = %+v, %v", n, err)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.versions("ord_1")) == 2 }) {
		t.Fatalf("after the skip the entity got %v", sink.versions("ord_1"))
	}
	if got := sink.versions("ord_1"); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("after the skip: %v, want [2 3]", got)
	}
	head, err := c.Event(ctx, ids["ord_1-v1"])
	if err != nil || head.Deliveries[0].State != "dead" || !head.Deliveries[0].Order.Released || !strings.Contains(head.Deliveries[0].LastError, "skipped") {
		t.Fatalf("the skipped head: %+v, %v", head.Deliveries, err)
	}
	audit, err := c.Audit(ctx, "", 10)
	if err != nil || len(audit.Entries) == 0 || audit.Entries[0].Action != "skip" {
		t.Fatalf("audit %+v, %v: want the skip first", audit, err)
	}
}

// Issue 26, item 9: a version far ahead. One that names a time (here Unix
// seconds) more than max_ahead past its arrival is delivered outside the
// order and counted, so the entity's real events are not stale behind it;
// a counter far ahead cannot be told, so the operator resets the entity
// through the API (audited), and its next event is current again.
func TestAVersionFarAheadGoesOutsideTheOrderOrIsReset(t *testing.T) {
	const token = "ops-token-0123456789"
	sink := newOrderSink(t)
	gw := oncehooktest.Start(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: %s}]}
sources:
  - name: times
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v", version_unit: unix, max_ahead: 1h}
    destinations: [app]
  - name: counter
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v"}
    destinations: [app]
  - {name: plain, preset: generic, unsigned: true, key: ["json:id"], destinations: [app]}
destinations:
  - {name: app, url: %s}
`, token, sink.URL))
	now := int(time.Now().Unix())
	for _, ahead := range []int{2 * 3600, 365 * 86400, 9_000_000_000_000_000_000 - now} {
		entity := fmt.Sprint("t", ahead)
		postOrdered(t, gw.URL+"/in/times", entity, now+ahead)
		if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.versions(entity)) == 1 }) {
			t.Fatalf("%s: the event ahead was not delivered", entity)
		}
		postOrdered(t, gw.URL+"/in/times", entity, now)
		if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.versions(entity)) == 2 }) {
			t.Fatalf("%s ahead: the entity's event of now got %v, want it delivered (the one ahead had no place)", entity, sink.versions(entity))
		}
	}
	c := api.NewClient(gw.APIURL, token, nil)
	ctx := context.Background()
	unordered := func() int64 {
		srcs, err := c.Sources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs {
			if s.Name == "times" {
				return s.LastHour.Unordered
			}
		}
		return -1
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return unordered() == 3 }) { // the hourly counts are flushed in the background
		t.Fatalf("times counted %d unordered, want the 3 ahead", unordered())
	}

	postOrdered(t, gw.URL+"/in/counter", "c", 9_000_000_000_000_000_000)
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.versions("c")) == 1 }) {
		t.Fatal("the counter far ahead was not delivered")
	}
	postOrdered(t, gw.URL+"/in/counter", "c", 5)
	var err error
	var stale admin.EventPage
	if !testenv.WaitFor(5*time.Second, func() bool {
		stale, err = c.Events(ctx, admin.EventFilter{Source: "counter", State: "stale"})
		return err == nil && len(stale.Events) == 1
	}) {
		t.Fatalf("stale events %+v, %v: want c-v5", stale, err)
	}
	if _, err := c.ResetOrder(ctx, "nope", "c", ""); !strings.Contains(fmt.Sprint(err), "no such source") {
		t.Fatalf("reset of an unknown source: %v", err)
	}
	if _, err := c.ResetOrder(ctx, "plain", "c", ""); !strings.Contains(fmt.Sprint(err), "does not order its events") {
		t.Fatalf("reset on a source without order: %v", err)
	}
	if _, err := c.ResetOrder(ctx, "counter", "", ""); err == nil {
		t.Fatal("a reset without an entity was accepted")
	}
	n, err := c.ResetOrder(ctx, "counter", "c", "")
	if err != nil || n.Count != 1 {
		t.Fatalf("reset = %+v, %v; want 1", n, err)
	}
	postOrdered(t, gw.URL+"/in/counter", "c", 6)
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.versions("c")) == 2 }) {
		t.Fatalf("after the reset the entity got %v, want v6 delivered", sink.versions("c"))
	}
	if got := sink.versions("c"); fmt.Sprint(got) != "[9000000000000000000 6]" {
		t.Fatalf("the counter source delivered %v; v5 stays stale (replay it to send it)", got)
	}
	audit, err := c.Audit(ctx, "", 10)
	if err != nil || len(audit.Entries) == 0 || audit.Entries[0].Action != "order_reset" || audit.Entries[0].Target != "source counter entity c" {
		t.Fatalf("audit %+v, %v: want the reset first", audit, err)
	}
}
