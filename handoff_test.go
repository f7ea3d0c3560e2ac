package oncehook_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/receive"
)

// One writer: a new event's delivery is handed to the worker at the commit
// that stores it. A graceful shutdown gives back the deliveries it holds in
// memory (attempts cut at the end of the grace period): the next start
// delivers them at once, as their first attempt, not an hour later when
// their leases would have expired.
func TestGracefulShutdownGivesHandedOffDeliveriesBack(t *testing.T) {
	dir := t.TempDir()
	var open atomic.Bool
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		if !open.Load() {
			<-r.Context().Done() // held until the attempt is cut
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	cfg := fmt.Sprintf(`
store: sqlite://%s
delivery: {lease: 1h}
sources:
  - {name: stripe, preset: stripe, secrets: [%s], destinations: [app]}
destinations:
  - {name: app, url: %s, timeout: 10m}
`, filepath.Join(dir, "o.db"), stripeSecret, sink.URL)
	gw := oncehooktest.StartWith(t, cfg, oncehook.Options{ShutdownTimeout: 300 * time.Millisecond})
	const events = 20
	for i := range events {
		a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent(fmt.Sprintf("evt_held_%02d", i)), ""))
		if a.Status != 200 || a.Body.Status != receive.StatusAccepted {
			t.Fatalf("event %d: %d %+v", i, a.Status, a.Body)
		}
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == events }) {
		t.Fatalf("%d of %d attempts in flight", len(sink.Deliveries()), events)
	}
	gw.Stop()

	open.Store(true)
	start := time.Now()
	gw2 := oncehooktest.StartWith(t, cfg, oncehook.Options{})
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.ByKey()) == events && stats(t, gw2).Delivered == events }) {
		t.Fatalf("after the restart %d of %d delivered: the leases were not given back", stats(t, gw2).Delivered, events)
	}
	t.Logf("delivered %d held deliveries %s after the restart", events, time.Since(start).Round(time.Millisecond))
	if st := stats(t, gw2); st.Attempts != events {
		t.Errorf("stats %+v: want one attempt on record per event (the cut ones are not counted)", st)
	}
	for _, d := range sink.Deliveries()[events:] {
		if d.Attempt != "1" {
			t.Errorf("%s redelivered as attempt %s: a cut attempt is given back uncounted", d.Key, d.Attempt)
		}
	}
}
