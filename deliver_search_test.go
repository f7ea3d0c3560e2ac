package oncehook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
)

// Issue 46, acting on a search: the events a search by content found are
// delivered, through the API, to a destination their route passed over,
// on SQLite and PostgreSQL. The dry run counts and sends nothing; then each
// found event reaches the receiving server exactly once, under the same
// Idempotency-Key its own route's destination got, and no other event
// does; a second bulk delivery adds nothing and says why; a search
// bounded below the corpus says so and delivers only what it read; a
// misspelt destination is a 404 naming the known ones.
func TestBulkDeliveryOfASearchReachesTheDestinationOnce(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			const token = "ops-token-0123456789"
			billing, fraud := testenv.NewSink(t), testenv.NewSink(t)
			dsn := "sqlite://$DIR/oncehook.db"
			if backend == "postgres" {
				dsn = testenv.Postgres(t)
			}
			gw := startGateway(t, fmt.Sprintf(`
store: %s
api: {tokens: [{name: ops, token: %s}]}
sources:
  - name: shop
    preset: generic
    unsigned: true
    key: ["json:id"]
    destinations:
      - billing
      - {name: fraud, filter: {body: {amount: {$gte: 100000}}}}
destinations:
  - {name: billing, url: %s}
  - {name: fraud, url: %s, retry: {max_attempts: 3, base_delay: 10ms, max_delay: 50ms}}
`, dsn, token, billing.URL, fraud.URL))
			const n = 60
			for i := range n {
				body := fmt.Sprintf(`{"id":"ord_%02d","customer":"cus_%d","amount":%d}`, i, i%3, i*100)
				resp, err := http.Post(gw.URL+"/in/shop", "application/json", strings.NewReader(body))
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("intake %d: %v %v", i, resp, err)
				}
				resp.Body.Close()
			}
			if !testenv.WaitFor(10*time.Second, func() bool { return len(billing.Deliveries()) == n }) {
				t.Fatalf("billing got %d of %d", len(billing.Deliveries()), n)
			}
			// The keys billing got, by the customer in the body.
			keysOf := func(customer string, from int) []string {
				var keys []string
				for _, d := range billing.Deliveries() {
					var i int
					fmt.Sscanf(string(d.Body), `{"id":"ord_%d"`, &i)
					if strings.Contains(string(d.Body), `"customer":"`+customer+`"`) && i >= from {
						keys = append(keys, d.Key)
					}
				}
				slices.Sort(keys)
				return keys
			}
			fraudKeys := func() (keys []string) {
				for _, d := range fraud.Deliveries() {
					keys = append(keys, d.Key)
				}
				slices.Sort(keys)
				return keys
			}
			c := api.NewClient(gw.APIURL, token, nil)
			ctx := context.Background()
			f := admin.EventFilter{Source: "shop", Where: `{"body":{"customer":"cus_1"}}`, Destination: "fraud"}
			found := keysOf("cus_1", 0)
			if len(found) != n/3 || found[0] == "" {
				t.Fatalf("billing's keys of cus_1: %v", found)
			}

			dry, err := c.DeliverEvents(ctx, f, true)
			if err != nil || dry.Count != len(found) || !dry.DryRun || dry.Already != 0 || dry.Searched == nil || !dry.Searched.Complete {
				t.Fatalf("dry run: %+v, %v; want %d, the search complete", dry, err, len(found))
			}
			time.Sleep(300 * time.Millisecond)
			if got := fraud.Deliveries(); len(got) != 0 {
				t.Fatalf("the dry run sent %d events", len(got))
			}
			if audit, _ := c.Audit(ctx, "", 5); len(audit.Entries) != 0 {
				t.Fatalf("the dry run was audited: %+v", audit.Entries)
			}

			done, err := c.DeliverEvents(ctx, f, false)
			if err != nil || done.Count != len(found) || done.DryRun {
				t.Fatalf("deliver: %+v, %v; want %d", done, err, len(found))
			}
			if !testenv.WaitFor(10*time.Second, func() bool { return len(fraud.Deliveries()) >= len(found) }) {
				t.Fatalf("fraud got %d of %d", len(fraud.Deliveries()), len(found))
			}
			time.Sleep(300 * time.Millisecond) // room for a second copy to show
			if got := fraudKeys(); !slices.Equal(got, found) {
				t.Fatalf("fraud got %v, want each of %v once, with billing's key", got, found)
			}

			// Again: every found event already has its delivery there.
			again, err := c.DeliverEvents(ctx, f, false)
			if err != nil || again.Count != 0 || again.Already != len(found) {
				t.Fatalf("a second deliver: %+v, %v; want 0 added, %d already there", again, err, len(found))
			}

			// A bound below the corpus: the newest 30 read, said so, and
			// only what was read delivered.
			f.Where, f.Scan = `{"body":{"customer":"cus_2"}}`, 30
			bounded, err := c.DeliverEvents(ctx, f, false)
			read := keysOf("cus_2", n-30)
			if err != nil || bounded.Searched == nil || bounded.Searched.Complete || bounded.Searched.Read != 30 ||
				!strings.Contains(bounded.Searched.Message, "older ones were not read") || bounded.Count != len(read) {
				t.Fatalf("a bounded deliver: %+v (%+v), %v; want %d, the bound said", bounded, bounded.Searched, err, len(read))
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(found), read...)))
			if !testenv.WaitFor(10*time.Second, func() bool { return len(fraud.Deliveries()) >= len(want) }) {
				t.Fatalf("fraud got %d of %d", len(fraud.Deliveries()), len(want))
			}
			time.Sleep(300 * time.Millisecond)
			if got := fraudKeys(); !slices.Equal(got, want) {
				t.Fatalf("after the bounded deliver fraud got %v, want %v", got, want)
			}

			f.Destination = "frad"
			if _, err := c.DeliverEvents(ctx, f, true); !errors.Is(err, admin.ErrNotFound) || !strings.Contains(err.Error(), "fraud") {
				t.Fatalf("a misspelt destination: %v, want a 404 naming fraud", err)
			}
			audit, err := c.Audit(ctx, "", 10)
			if err != nil || len(audit.Entries) != 3 {
				t.Fatalf("audit %+v %v; want the three deliveries", audit.Entries, err)
			}
			for i, wantCount := range []int{len(read), 0, len(found)} {
				e := audit.Entries[i]
				if e.Action != "deliver" || e.Actor != "token:ops" || e.Count != wantCount || !strings.Contains(e.Target, "destination=fraud") || !strings.Contains(e.Target, "where=") {
					t.Errorf("audit entry %d: %+v; want ops's deliver to fraud of %d, naming the search", i, e, wantCount)
				}
			}
		})
	}
}
