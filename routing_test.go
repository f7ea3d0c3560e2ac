package oncehook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// What a user sees of event types: the type Stripe sent is stored with
// each event, selects events in the API (exactly, or invoice.*), and is
// counted per source and hour, duplicates not.
func TestEventTypesAreStoredListedAndCounted(t *testing.T) {
	const token = "ops-token-0123456789"
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test]}
  - {name: crm, preset: generic, unsigned: true, key: ["json:id"], type: ["header:X-Topic", "json:action"]}
`)
	post := func(req *http.Request) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", req.URL, resp.StatusCode)
		}
	}
	for i, typ := range []string{"invoice.paid", "invoice.paid", "invoice.finalized", "charge.succeeded"} {
		body := fmt.Sprintf(`{"id":"evt_%d","object":"event","type":%q}`, i, typ)
		for range 2 { // every event twice: the copy is no second event of its type
			post(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		}
	}
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/crm", strings.NewReader(`{"id":"l1","action":"created"}`))
	req.Header.Set("X-Topic", "lead")
	post(req)

	c := api.NewClient(gw.APIURL, token, nil)
	ctx := context.Background()
	for _, q := range []struct {
		typ  string
		want int
	}{{"invoice.paid", 2}, {"invoice.*", 3}, {"charge.succeeded", 1}, {"lead.created", 1}, {"customer.*", 0}} {
		page, err := c.Events(ctx, admin.EventFilter{Type: q.typ})
		if err != nil || len(page.Events) != q.want {
			t.Errorf("type %s: %d events, %v; want %d", q.typ, len(page.Events), err, q.want)
		}
		for _, e := range page.Events {
			if q.typ == "invoice.paid" && e.Type != "invoice.paid" {
				t.Errorf("listed type %q", e.Type)
			}
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		src, err := c.Sources(ctx)
		if err != nil || len(src) != 2 {
			return false
		}
		ty := src[0].Last24h.Types
		return ty["invoice.paid"] == 2 && ty["invoice.finalized"] == 1 && ty["charge.succeeded"] == 1 && src[1].Last24h.Types["lead.created"] == 1
	}) {
		src, _ := c.Sources(ctx)
		t.Fatalf("types per source in the rollups: %+v", src)
	}
}

// An event a destination's filter passed over goes there only when an
// operator says so: one delivery, audited, under the event's own key.
func TestAnOperatorDeliversAFilteredEventOnPurpose(t *testing.T) {
	const token = "ops-token-0123456789"
	billing, fraud := testenv.NewSink(t), testenv.NewSink(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - name: stripe
    preset: stripe
    secrets: [whsec_test]
    destinations:
      - {name: billing, types: ["invoice.*"]}
      - {name: fraud, filter: {body: {data: {object: {amount: {$gte: 10000}}}}}}
destinations:
  - {name: billing, url: `+billing.URL+`}
  - {name: fraud, url: `+fraud.URL+`}
`)
	body := `{"id":"evt_small","object":"event","type":"charge.dispute.created","data":{"object":{"amount":500}}}`
	resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("intake: %v %v", resp, err)
	}
	resp.Body.Close()
	c := api.NewClient(gw.APIURL, token, nil)
	ctx := context.Background()
	page, err := c.Events(ctx, admin.EventFilter{State: "filtered"})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("filtered events %+v %v", page, err)
	}
	e, _ := c.Event(ctx, page.Events[0].ID)
	if fmt.Sprint(e.Filtered) != "[billing fraud]" || len(e.Deliveries) != 0 {
		t.Fatalf("event: filtered %v, deliveries %+v", e.Filtered, e.Deliveries)
	}
	if _, err := c.DeliverEvent(ctx, e.ID, "nope"); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("deliver to an unknown destination: %v", err)
	}
	n, err := c.DeliverEvent(ctx, e.ID, "fraud")
	if err != nil || n.Count != 1 {
		t.Fatalf("DeliverEvent = %+v, %v", n, err)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(fraud.Deliveries()) == 1 }) {
		t.Fatal("the operator's delivery never arrived")
	}
	if k := fraud.Deliveries()[0].Key; k != "stripe:evt_small" || len(billing.Deliveries()) != 0 {
		t.Fatalf("key %q, billing %d", k, len(billing.Deliveries()))
	}
	if n, _ := c.DeliverEvent(ctx, e.ID, "fraud"); n.Count != 0 {
		t.Fatalf("a second deliver added %d", n.Count)
	}
	audit, _ := c.Audit(ctx, "", 10)
	if len(audit.Entries) == 0 || audit.Entries[0].Action != "deliver" || !strings.Contains(audit.Entries[0].Target, "fraud") {
		t.Fatalf("audit %+v", audit.Entries)
	}
}

// Issue 41, item 5: a filter's cost is bounded per request, and a request
// whose filters would cost more loses nothing. Eight destinations each
// filter on a $regex over a 1 MiB field, which would cost more than the
// request's budget (route.Budget): the event is still accepted and
// stored, the routes that filter on its body pass it over (it says so,
// it is counted as filter_over_budget and logged), the routes that do
// not (types, no filter) deliver it, and the next request, small, is
// routed by the same filters as usual.
func TestFiltersOverTheRequestsBudgetPassTheEventOverAndLoseNothing(t *testing.T) {
	const token = "ops-token-0123456789"
	sinks := map[string]*testenv.Sink{"audit": testenv.NewSink(t), "orders": testenv.NewSink(t)}
	var routes, dests strings.Builder
	dests.WriteString("  - {name: audit, url: " + sinks["audit"].URL + "}\n  - {name: orders, url: " + sinks["orders"].URL + "}\n")
	var regexDests []string
	for i := range 8 {
		name := fmt.Sprintf("regex%d", i)
		regexDests = append(regexDests, name)
		sinks[name] = testenv.NewSink(t)
		fmt.Fprintf(&routes, "      - {name: %s, filter: {body: {note: {$regex: \"[0-9]x%d|^note\"}}}}\n", name, i)
		fmt.Fprintf(&dests, "  - {name: %s, url: %s}\n", name, sinks[name].URL)
	}
	logs := &testenv.Buffer{}
	gw := oncehooktest.StartWith(t, `
store: sqlite://$DIR/oncehook.db
max_body_size: 4MiB
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - name: shop
    preset: generic
    unsigned: true
    key: ["json:id"]
    type: ["json:type"]
    destinations:
      - audit
      - {name: orders, types: ["order.*"]}
`+routes.String()+`destinations:
`+dests.String(), oncehook.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	post := func(body string) {
		t.Helper()
		resp, err := http.Post(gw.URL+"/in/shop", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "accepted") {
			t.Fatalf("intake: %d %s", resp.StatusCode, b)
		}
	}
	post(`{"id":"big","type":"order.paid","note":"note ` + strings.Repeat("abc ", 1<<18) + `"}`)
	post(`{"id":"small","type":"order.paid","note":"note 1"}`)

	c := api.NewClient(gw.APIURL, token, nil)
	ctx := context.Background()
	for _, name := range []string{"audit", "orders"} {
		if !testenv.WaitFor(10*time.Second, func() bool { return len(sinks[name].Deliveries()) == 2 }) {
			t.Fatalf("%s: %d deliveries, want both events", name, len(sinks[name].Deliveries()))
		}
	}
	for _, name := range regexDests {
		if !testenv.WaitFor(10*time.Second, func() bool { return len(sinks[name].Deliveries()) == 1 }) {
			t.Fatalf("%s: %d deliveries, want the small event's", name, len(sinks[name].Deliveries()))
		}
		if k := sinks[name].Deliveries()[0].Key; k != "shop:small" {
			t.Errorf("%s got %s", name, k)
		}
	}
	page, err := c.Events(ctx, admin.EventFilter{Source: "shop"})
	if err != nil || len(page.Events) != 2 {
		t.Fatalf("events %+v %v", page, err)
	}
	for _, s := range page.Events {
		e, err := c.Event(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := "[]"
		if e.Key == "big" {
			want = fmt.Sprint(regexDests)
		}
		if got := fmt.Sprint(e.Filtered); got != want {
			t.Errorf("event %s: filtered %s, want %s", e.Key, got, want)
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		src, err := c.Sources(ctx)
		return err == nil && len(src) == 1 && src[0].Last24h.FilterOverBudget == 1
	}) {
		src, _ := c.Sources(ctx)
		t.Fatalf("filter_over_budget per source: %+v", src)
	}
	if !strings.Contains(logs.String(), "cost more than the request's budget") || !strings.Contains(logs.String(), "source=shop") {
		t.Errorf("no log line for the events passed over: %s", logs.String())
	}
}
