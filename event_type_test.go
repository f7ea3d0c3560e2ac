package oncehook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
)

// Invariant 23 for an event's type: a type with a line break, a NUL or a
// bidi override is kept readable (percent-encoded), on both backends, so
// the event still takes its type's routes and shows the type it came
// with. Found from outside: a type with CR/LF was dropped silently, and
// the event went untyped past its types: route.
func TestAHostileTypeIsKeptReadableAndRoutes(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			billing := testenv.NewSink(t)
			store := "sqlite://$DIR/oncehook.db"
			if backend == "postgres" {
				store = testenv.Postgres(t)
			}
			gw := startGateway(t, fmt.Sprintf(`
store: %s
sources:
  - name: stripe
    preset: stripe
    secrets: [%q]
    destinations: [{name: billing, types: ["invoice.*"]}]
destinations:
  - {name: billing, url: %s}
`, store, stripeSecret, billing.URL))
			types := map[string]string{
				"evt_crlf": "invoice.paid\r\n", "evt_nul": "invoice.\u0000paid", "evt_bidi": "invoice.\u202epaid", "evt_c1": "invoice.\u0085paid",
			}
			want := map[string]string{
				"evt_crlf": "invoice.paid%0D%0A", "evt_nul": "invoice.%00paid", "evt_bidi": "invoice.%E2%80%AEpaid", "evt_c1": "invoice.%C2%85paid",
			}
			for id, typ := range types {
				quoted, _ := json.Marshal(typ)
				body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%s}`, id, quoted))
				if a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, body, "")); a.Status != 200 {
					t.Fatalf("%s: %d %+v", id, a.Status, a.Error)
				}
			}
			if !testenv.WaitFor(10*time.Second, func() bool { return len(billing.ByKey()) == len(types) }) {
				t.Fatalf("billing got %v; want every invoice.* event, whatever its type's bytes", billing.ByKey())
			}
			for _, d := range billing.Deliveries() {
				id := d.Header.Get("Idempotency-Key")[len("stripe:"):]
				if got := d.Header.Get("X-Oncehook-Type"); got != want[id] {
					t.Errorf("%s: X-Oncehook-Type %q, want %q", id, got, want[id])
				}
			}
			page, err := gw.Admin().Events(context.Background(), admin.EventFilter{Source: "stripe", Type: "invoice.*"})
			if err != nil || len(page.Events) != len(types) {
				t.Fatalf("events of type invoice.*: %+v %v", page, err)
			}
			for _, e := range page.Events {
				if e.Type != want[e.Key] {
					t.Errorf("%s stored with type %q, want %q", e.Key, e.Type, want[e.Key])
				}
			}
		})
	}
}
