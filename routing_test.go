package oncehook_test

import (
	"context"
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
