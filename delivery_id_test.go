package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
)

// An app behind three destinations of one source (three paths of one
// service) gets each event three times, each delivery with a header of
// its own: X-Oncehook-Delivery-Id, stable across the delivery's attempts
// and an operator's replay, different for each destination and each
// event. An app that dedupes on it keeps every delivery once; one that
// dedupes on Idempotency-Key (or webhook-id), the event's, keeps a third.
func TestEachDeliveryCarriesItsOwnID(t *testing.T) {
	sink := testenv.NewSink(t)
	var failed atomic.Bool
	sink.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		// The audit path's first attempt fails: its retry must carry the
		// same delivery id.
		if r.URL.Path == "/audit" && failed.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}
	gw := startGateway(t, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - name: stripe
    preset: stripe
    secrets: [%q]
    destinations: [orders, email, audit]
destinations:
  - {name: orders, url: %q, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", retry: {max_attempts: 5, base_delay: 10ms, max_delay: 50ms}}
  - {name: email, url: %q, retry: {max_attempts: 5, base_delay: 10ms, max_delay: 50ms}}
  - {name: audit, url: %q, retry: {max_attempts: 5, base_delay: 10ms, max_delay: 50ms}}
`, stripeSecret, sink.URL+"/orders", sink.URL+"/email", sink.URL+"/audit"))
	const events = 5
	for i := range events {
		body := stripeEvent(fmt.Sprintf("evt_d%d", i))
		req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, body, "")
		if a := do(t, http.DefaultClient, req); a.Status != http.StatusOK {
			t.Fatalf("intake: %+v", a)
		}
	}
	// Every event at every destination, and the audit's retry.
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 3*events+1 }) {
		t.Fatalf("%d requests at the app, want %d", len(sink.Deliveries()), 3*events+1)
	}
	// The app has a request before its outcome commits, and a replay
	// leaves a delivery its worker still leases: wait for all to settle.
	if !testenv.WaitFor(10*time.Second, func() bool {
		st, err := gw.Store().Stats(context.Background())
		return err == nil && st.Pending == 0 && st.Delivered == 3*events
	}) {
		t.Fatal("the deliveries never settled as delivered")
	}
	if n, err := gw.Replay(context.Background(), "stripe", "evt_d0"); err != nil || n != 3 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 3*events+4 }) {
		t.Fatalf("%d requests at the app after the replay, want %d", len(sink.Deliveries()), 3*events+4)
	}
	// What each delivery id was carried with: the event (its key) and the
	// destination (the path).
	carried := map[string]map[string]bool{}
	byKey, byWebhookID := map[string]bool{}, map[string]bool{}
	for _, d := range sink.Deliveries() {
		id := d.Header.Get(deliver.DeliveryIDHeader)
		if !strings.HasPrefix(id, "dlv_") || len(id) != 36 {
			t.Fatalf("%s at %s: delivery id %q, want dlv_ and 32 hex digits", d.Key, d.Path, id)
		}
		if carried[id] == nil {
			carried[id] = map[string]bool{}
		}
		carried[id][d.Key+" at "+d.Path] = true
		byKey[d.Key] = true
		if w := d.Header.Get("Webhook-Id"); w != "" {
			byWebhookID[w] = true
		}
	}
	// Deduped on the delivery id, every delivery is kept once: three per
	// event; the retry and the replay's three repeat deliveries already
	// kept, and no id is two deliveries'.
	if len(carried) != 3*events {
		t.Fatalf("%d delivery ids over %d requests, want %d: one per event and destination", len(carried), len(sink.Deliveries()), 3*events)
	}
	for id, with := range carried {
		if len(with) != 1 {
			t.Errorf("delivery id %s came with %v: want one event at one destination", id, with)
		}
	}
	// Deduped on the event's own headers, a third is kept.
	if len(byKey) != events || len(byWebhookID) != events {
		t.Fatalf("%d Idempotency-Keys and %d webhook-ids: want %d, one per event", len(byKey), len(byWebhookID), events)
	}
}
