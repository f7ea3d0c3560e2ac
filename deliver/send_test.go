package deliver_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/store"
)

// scripted is a destination kind that answers each send with the next of
// its results, and keeps what it was sent.
type scripted struct {
	mu      sync.Mutex
	results []deliver.Result
	got     []deliver.Message
}

func (s *scripted) Send(_ context.Context, m *deliver.Message) deliver.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, *m)
	r := s.results[0]
	if len(s.results) > 1 {
		s.results = s.results[1:]
	}
	return r
}

func (s *scripted) Close() error { return nil }

func (s *scripted) sent() []deliver.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]deliver.Message(nil), s.got...)
}

// gateLog records what the gate heard of each attempt.
type gateLog struct {
	mu  sync.Mutex
	out []deliver.GateOutcome
}

func (g *gateLog) Admit(context.Context, string, time.Time) (bool, time.Time) {
	return true, time.Time{}
}
func (g *gateLog) Report(_ context.Context, _ string, o deliver.GateOutcome) {
	g.mu.Lock()
	g.out = append(g.out, o)
	g.mu.Unlock()
}

// A destination of any kind is one Sender: the worker gives it the event
// with everything that travels (the key as Idempotency-Key, source, type,
// attempt), and its one classified Result decides both the delivery's next
// state and what the breaker counts: a retry is retried with backoff and a
// failure for the breaker, a permanent answer is a dead letter at once and
// no failure, delivered is a success.
func TestASendersResultIsTheOutcomeAndTheBreakersCount(t *testing.T) {
	for _, c := range []struct {
		name     string
		results  []deliver.Result
		want     func(store.Stats) bool
		sends    int
		failures int
	}{
		{"retried until delivered", []deliver.Result{{Kind: deliver.Retry, After: -1, Error: "broker down"}, {Kind: deliver.Retry, After: -1, Error: "nack"}, {Kind: deliver.Delivered}},
			func(s store.Stats) bool { return s.Delivered == 1 }, 3, 2},
		{"permanent at once", []deliver.Result{{Kind: deliver.Permanent, Error: "no such stream"}},
			func(s store.Stats) bool { return s.Dead == 1 }, 1, 0},
		{"retries bounded", []deliver.Result{{Kind: deliver.Retry, After: -1, Error: "broker down"}},
			func(s store.Stats) bool { return s.Dead == 1 }, 5, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t)
			now := time.Now()
			if _, err := store.ClaimEvents(context.Background(), s, []store.NewEvent{{
				Source: "orders", Key: "o-1", Type: "order.paid", ContentType: "application/json", Body: []byte(`{"order_id":"o-1"}`),
				Header: http.Header{"X-Shop": {"s1"}}, ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"bus"},
			}}); err != nil {
				t.Fatal(err)
			}
			snd := &scripted{results: c.results}
			gate := &gateLog{}
			startWorker(t, s, deliver.Options{Destinations: []deliver.Destination{{
				Name: "bus", Sender: snd, Timeout: time.Second,
				Retry: deliver.RetryPolicy{MaxAttempts: 5, BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond},
			}}, Lease: 5 * time.Second, Gate: gate})
			waitStats(t, s, c.want)
			got := snd.sent()
			if len(got) != c.sends {
				t.Fatalf("sent %d times, want %d", len(got), c.sends)
			}
			for i, m := range got {
				if m.IdempotencyKey != "orders:o-1" || m.Header.Get("Idempotency-Key") != "orders:o-1" || m.Type != "order.paid" ||
					m.Header.Get("X-Oncehook-Type") != "order.paid" || m.Header.Get("X-Oncehook-Source") != "orders" ||
					m.Header.Get("X-Shop") != "s1" || m.Attempt != i+1 || string(m.Body) != `{"order_id":"o-1"}` {
					t.Fatalf("send %d: %+v", i+1, m)
				}
			}
			// The gate hears an attempt before its outcome goes to the writer.
			gate.mu.Lock()
			defer gate.mu.Unlock()
			failures := 0
			for _, o := range gate.out {
				if o.Failure {
					failures++
				}
			}
			if failures != c.failures || len(gate.out) != c.sends {
				t.Fatalf("the breaker heard %d failures in %d reports, want %d in %d", failures, len(gate.out), c.failures, c.sends)
			}
		})
	}
}

// A message's own headers are each their own value: a sender that adds to
// one (a second Idempotency-Key, say) changes no other.
func TestMessageHeadersStandApart(t *testing.T) {
	m := deliver.NewMessage(&deliver.Destination{Name: "app"}, store.LeasedDelivery{
		Source: "src", Key: "evt_1", Type: "invoice.paid", Destination: "app", Attempt: 2, Stale: true, CurrentVersion: "7"})
	for _, k := range []string{"Idempotency-Key", deliver.DeliveryIDHeader, "X-Oncehook-Source", "X-Oncehook-Type", "X-Oncehook-Attempt", deliver.StaleHeader} {
		m.Header.Add(k, "added")
	}
	want := map[string][]string{
		"Idempotency-Key": {"src:evt_1", "added"}, deliver.DeliveryIDHeader: {deliver.DeliveryID("src", "evt_1", "app"), "added"},
		"X-Oncehook-Source": {"src", "added"}, "X-Oncehook-Type": {"invoice.paid", "added"},
		"X-Oncehook-Attempt": {"2", "added"}, deliver.StaleHeader: {"true", "added"}, deliver.CurrentVersionHeader: {"7"},
	}
	for k, v := range want {
		if got := m.Header.Values(k); len(got) != len(v) || got[0] != v[0] || (len(v) > 1 && got[1] != v[1]) {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if len(m.Header) != len(want) {
		t.Errorf("headers %v, want %d of them", m.Header, len(want))
	}
}
