package deliver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/hold"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// outcomes takes a worker's outcomes as the group committer would, and
// hands them to the benchmark instead of a commit.
type outcomes chan store.Outcome

func (c outcomes) Complete(os ...store.Outcome) {
	for _, o := range os {
		c <- o
	}
}
func (outcomes) WantDue() {}

// BenchmarkDeliverHTTP is one attempt of one 1 KiB event, from the hand
// over to its outcome, through the worker as the gateway wires it (the
// holds as its gate, Prometheus and the hourly rollups) to a destination
// on loopback that answers 200 (its serving is counted too): go test
// -bench DeliverHTTP -benchmem ./deliver/.
func BenchmarkDeliverHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "deliver.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// A breaker, as every destination has unless it turns it off.
	holds, err := hold.New(context.Background(), s, hold.Options{Policies: map[string]hold.Policy{"app": {}}})
	if err != nil {
		b.Fatal(err)
	}
	m := metrics.New()
	m.Hourly = metrics.NewHourly(nil)
	done := make(outcomes, 1)
	w := deliver.New(s, deliver.Options{
		Writer: done, Gate: holds, Held: holds.Held, Metrics: m,
		Destinations: []deliver.Destination{{Name: "app", URL: srv.URL, Timeout: 5 * time.Second,
			Retry: deliver.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: time.Minute}}},
	})
	now := time.Now()
	d := store.LeasedDelivery{ID: 1, EventID: 1, Source: "src", Key: "evt_00000000000001", Destination: "app", Attempt: 1,
		Type: "invoice.paid", ContentType: "application/json; charset=utf-8", Body: []byte(`{"pad":"` + strings.Repeat("x", 1012) + `"}`),
		ReceivedAt: now, LeaseToken: "token", LeaseExpiresAt: now.Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		w.Hand([]store.LeasedDelivery{d}, w.Reserve(1))
		if o := <-done; o.Kind != store.OutcomeDelivered {
			b.Fatalf("outcome %+v", o)
		}
	}
}
