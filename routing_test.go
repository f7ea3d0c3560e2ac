package oncehook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
