package oncehook_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
)

// received is one request a transforming destination got, whole.
type received struct {
	Path, Query string
	Header      http.Header
	Body        []byte
}

// digest is what the destination got, byte for byte: path, query, the
// headers a transformation controls and oncehook's key, and the body.
func (r received) digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s?%s\n", r.Path, r.Query)
	for _, k := range []string{"Content-Type", "Idempotency-Key", "X-Event-Type", "X-Amount"} {
		fmt.Fprintf(h, "%s: %q\n", k, r.Header.Values(k))
	}
	h.Write(r.Body)
	return hex.EncodeToString(h.Sum(nil))
}

type recorder struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
	// fail answers 503 to the first n requests whose Idempotency-Key it names.
	fail map[string]int
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{Path: req.URL.Path, Query: req.URL.RawQuery, Header: req.Header.Clone(), Body: body})
		key := req.Header.Get("Idempotency-Key")
		fail := r.fail[key] > 0
		if fail {
			r.fail[key]--
		}
		r.mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// orders.js: Hookdeck's shape. It reshapes a Stripe event into an order,
// skips refunds, and loops forever on one poisoned event.
const ordersScript = `addHandler("transform", (request, context) => {
  const o = request.body.data.object;
  if (request.body.type === "charge.refunded") return null;
  if (o.id === "pi_evil") {
    while (true) {}
  }
  request.path = request.path + "/orders";
  request.query = { tenant: "7" };
  request.headers["x-event-type"] = context.type;
  request.headers["x-amount"] = String(o.amount);
  request.body = { order: o.id, amount: o.amount / 100, event: context.key, at: new Date().toISOString() };
  return request;
});
`

// Invariant 21 through a real gateway: an event reaches its destination
// reshaped by the destination's transformation; its retries and its replay are
// sent byte for byte the same (and its attempts record the same digests); an
// event the script skips is recorded as skipped; one that runs the script
// past its time limit is a dead letter naming the script's line, and
// fails only itself (invariant 13).
func TestATransformedDestinationGetsTheSameBytesOnEveryAttemptAndReplay(t *testing.T) {
	dest := newRecorder(t)
	dest.fail = map[string]int{"stripe:evt_2": 2} // three attempts
	cfg := stripeConfig(dest.URL+"/hooks", "")
	cfg = strings.Replace(cfg, "    timeout: 2s\n", "    timeout: 2s\n    transform: {file: $DIR/orders.js, timeout: 100ms}\n", 1)
	dir := t.TempDir()
	cfg = strings.ReplaceAll(cfg, "$DIR/orders.js", dir+"/orders.js")
	if err := os.WriteFile(dir+"/orders.js", []byte(ordersScript), 0o644); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, cfg)
	send := func(id, typ, pi string) {
		t.Helper()
		body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"data":{"object":{"id":%q,"amount":4990}}}`, id, typ, pi))
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/stripe", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", stripeHeader(time.Now().Unix(), body))
		if a := do(t, http.DefaultClient, req); a.Status != http.StatusOK {
			t.Fatalf("%s: %d %+v", id, a.Status, a.Error)
		}
	}
	send("evt_evil", "payment_intent.succeeded", "pi_evil")
	send("evt_1", "payment_intent.succeeded", "pi_1")
	send("evt_refund", "charge.refunded", "pi_2")
	send("evt_2", "payment_intent.succeeded", "pi_3")

	if !testenv.WaitFor(10*time.Second, func() bool {
		st := stats(t, gw)
		return len(dest.all()) >= 4 && st.Dead == 1 && st.Pending == 0
	}) {
		t.Fatalf("got %d, stats %+v", len(dest.all()), stats(t, gw))
	}
	got := dest.all()
	if len(got) != 4 {
		t.Fatalf("the destination got %d requests, want 4 (evt_1 once, evt_2 three times, the refund skipped, the poisoned one dead)", len(got))
	}
	var first received
	var second []received
	for _, r := range got {
		switch r.Header.Get("Idempotency-Key") {
		case "stripe:evt_1":
			first = r
		case "stripe:evt_2":
			second = append(second, r)
		}
	}
	// Three attempts of one event: the same bytes each time (but the attempt's number).
	for i, r := range second {
		if r.digest() != second[0].digest() || r.Header.Get("X-Oncehook-Attempt") != fmt.Sprint(i+1) {
			t.Errorf("evt_2's attempt %d: %s %s, want the first's bytes", i+1, r.Header.Get("X-Oncehook-Attempt"), r.Body)
		}
	}
	if first.Path != "/hooks/orders" || first.Query != "tenant=7" || first.Header.Get("X-Event-Type") != "payment_intent.succeeded" ||
		first.Header.Get("X-Amount") != "4990" || first.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(string(first.Body), `{"order":"pi_1","amount":49.9,"event":"evt_1","at":"`) {
		t.Errorf("reshaped request: %s?%s %v %s", first.Path, first.Query, first.Header, first.Body)
	}

	ctx := context.Background()
	eventOf := func(key string) admin.EventDetail {
		t.Helper()
		page, err := gw.Admin().Events(ctx, admin.EventFilter{Source: "stripe", Key: key})
		if err != nil || len(page.Events) != 1 {
			t.Fatalf("%s: %+v %v", key, page, err)
		}
		e, err := gw.Admin().Event(ctx, page.Events[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	evil := eventOf("evt_evil").Deliveries[0]
	if evil.State != string(store.Dead) || !strings.Contains(evil.LastError, "transformation: ") ||
		!strings.Contains(evil.LastError, ":4:") || !strings.Contains(evil.LastError, "time limit") {
		t.Errorf("the poisoned event: %s %q, want dead with the script's line 4 and its time limit", evil.State, evil.LastError)
	}
	if h := eventOf("evt_2").Deliveries[0].History; len(h) != 3 || h[0].SentDigest == "" || h[0].SentDigest != h[1].SentDigest || h[1].SentDigest != h[2].SentDigest {
		t.Errorf("evt_2's attempts %+v, want three with one sent digest", h)
	}
	skipped := eventOf("evt_refund").Deliveries[0]
	if skipped.State != string(store.Skipped) || len(skipped.History) != 1 || skipped.History[0].Outcome != "skipped" {
		t.Errorf("the refund: %+v, want skipped", skipped)
	}

	rec := httptest.NewRecorder()
	gw.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range []string{`oncehook_delivery_attempts_total{destination="app",outcome="skipped"} 1`,
		`oncehook_delivery_attempts_total{destination="app",outcome="dead"} 1`} {
		if !strings.Contains(rec.Body.String(), line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}

	// Replayed: the same bytes, the same recorded digests.
	if n, err := gw.Replay(ctx, "stripe", "evt_1"); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	var again received
	if !testenv.WaitFor(10*time.Second, func() bool {
		for _, r := range dest.all()[4:] {
			if r.Header.Get("Idempotency-Key") == "stripe:evt_1" {
				again = r
				return true
			}
		}
		return false
	}) {
		t.Fatal("the replay never arrived")
	}
	if again.digest() != first.digest() || !bytes.Equal(again.Body, first.Body) {
		t.Errorf("replayed: %s\n  first: %s", again.Body, first.Body)
	}
	var h []admin.AttemptDetail
	testenv.WaitFor(5*time.Second, func() bool {
		h = eventOf("evt_1").Deliveries[0].History
		return len(h) == 2
	})
	if len(h) != 2 || h[0].SentDigest == "" || h[0].SentDigest != h[1].SentDigest || h[0].ScriptDigest != h[1].ScriptDigest ||
		!strings.HasPrefix(h[0].ScriptDigest, "sha256:") {
		t.Errorf("attempts %+v, want two with the same script and sent digests", h)
	}
}
