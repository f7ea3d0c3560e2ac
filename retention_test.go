package oncehook_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// body_retention, as a user sees it: the event is delivered, and a little
// later its body is gone from the store while its key still answers
// copies as duplicates; a replay says 410, the body is gone; an event
// whose delivery is still failing keeps its body until it is delivered.
func TestBodyRetentionDropsDeliveredBodiesAndKeepsTheirKeys(t *testing.T) {
	const token = "ops-token-0123456789"
	app := testenv.NewSink(t)
	var failing atomic.Bool
	failing.Store(true)
	app.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		if failing.Load() && r.Header.Get("Idempotency-Key") == "stripe:evt_failing" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	gw := oncehooktest.StartWith(t, `
store: sqlite://$DIR/oncehook.db
api: {tokens: [{name: ops, token: `+token+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], window: 1h, body_retention: 1s, destinations: [app]}
destinations:
  - {name: app, url: `+app.URL+`, retry: {base_delay: 100ms, max_delay: 200ms}, breaker: {off: true}}
`, oncehook.Options{SweepInterval: 100 * time.Millisecond})
	send := func(id string) string {
		t.Helper()
		req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(`{"id":"`+id+`","object":"event"}`), "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("send %s: %v %v", id, resp, err)
		}
		defer resp.Body.Close()
		var b [512]byte
		n, _ := resp.Body.Read(b[:])
		return string(b[:n])
	}
	send("evt_kept")
	send("evt_failing")
	c := api.NewClient(gw.APIURL, token, nil)
	ctx := context.Background()
	event := func(key string) admin.EventDetail {
		t.Helper()
		page, err := c.Events(ctx, admin.EventFilter{Source: "stripe", Key: key})
		if err != nil || len(page.Events) != 1 {
			t.Fatalf("event %s: %+v %v", key, page, err)
		}
		e, err := c.Event(ctx, page.Events[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return event("evt_kept").BodyDroppedAt != nil }) {
		t.Fatalf("the delivered event's body was not dropped: %+v", event("evt_kept"))
	}
	kept := event("evt_kept")
	if kept.Body != "" || app.ByKey()["stripe:evt_kept"] != 1 {
		t.Fatalf("after its body_retention: body %q, delivered %d times", kept.Body, app.ByKey()["stripe:evt_kept"])
	}
	// The failing one keeps its body while its delivery is pending.
	if e := event("evt_failing"); e.BodyDroppedAt != nil || e.Body == "" {
		t.Fatalf("a pending delivery's event lost its body: %+v", e)
	}
	// The key is still the barrier.
	if body := send("evt_kept"); !strings.Contains(body, `"duplicate"`) {
		t.Fatalf("a copy after the body went: %s, want duplicate", body)
	}
	if _, err := c.ReplayEvent(ctx, kept.ID); !errors.Is(err, admin.ErrGone) {
		t.Fatalf("replay of an event without its body: %v, want 410 gone", err)
	}
	// Once delivered, the failing one's body goes too.
	failing.Store(false)
	if !testenv.WaitFor(10*time.Second, func() bool { return event("evt_failing").BodyDroppedAt != nil }) {
		t.Fatalf("the body of the event delivered late was not dropped")
	}
	if n := app.ByKey()["stripe:evt_failing"]; n < 2 {
		t.Fatalf("the failing event was attempted %d times", n)
	}
}
