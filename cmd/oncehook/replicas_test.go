package main_test

// Several oncehook processes on one PostgreSQL: the store, not any process,
// decides every race.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
)

// countingSink answers 200 (after delay) and counts deliveries per
// Idempotency-Key.
type countingSink struct {
	*testenv.Sink
	delay time.Duration
}

func newCountingSink(t *testing.T, delay time.Duration) *countingSink {
	s := &countingSink{Sink: testenv.NewSink(t), delay: delay}
	s.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		if s.delay > 0 {
			time.Sleep(s.delay)
		}
		w.WriteHeader(http.StatusOK)
	}
	return s
}

func replicaConfig(t *testing.T, storeURL, redisURL, sinkURL string) string {
	return writeConfig(t, t.TempDir(), storeURL, redisURL, sinkURL)
}

func startReplicas(t *testing.T, n int, cfg string) []*process {
	ps := make([]*process, n)
	for i := range ps {
		ps[i] = startProcess(t, t.TempDir(), "--config", cfg)
	}
	return ps
}

func pgStats(t *testing.T, url string) store.Stats {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// storm sends each of ids copies times, all at once (64 in flight), spread
// over the replicas, and returns the answers' status codes per id. during,
// when set, runs once half the requests have been sent.
func storm(t *testing.T, ps []*process, ids []string, copies int, during func()) map[string][]int {
	var mu sync.Mutex
	codes := map[string][]int{}
	requests := testenv.NewStorm(64)
	var sent atomic.Int64
	var once sync.Once
	total := int64(len(ids) * copies)
	for c := range copies {
		for i, id := range ids {
			if during != nil && sent.Add(1) == total/2 {
				once.Do(during)
			}
			requests.Go(func() {
				code, _ := sendEvent(t, ps[(i+c)%len(ps)].URL, id)
				mu.Lock()
				codes[id] = append(codes[id], code)
				mu.Unlock()
			})
		}
	}
	requests.Wait()
	return codes
}

// allAnswered200 fails unless every copy of every id was answered 200, and
// returns the Idempotency-Keys the destination should then see once each.
func allAnswered200(t *testing.T, all []string, codes map[string][]int) map[string]bool {
	t.Helper()
	want := map[string]bool{}
	for _, id := range all {
		for _, c := range codes[id] {
			if c != 200 {
				t.Fatalf("%s answered %v", id, codes[id])
			}
		}
		want["stripe:"+id] = true
	}
	return want
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("evt_%s_%05d", prefix, i)
	}
	return out
}

func waitDeliveredOnce(t *testing.T, sink *countingSink, want map[string]bool) {
	t.Helper()
	if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) >= len(want) }) {
		t.Fatalf("delivered %d distinct events, want %d", len(sink.ByKey()), len(want))
	}
	time.Sleep(500 * time.Millisecond)
	got := sink.ByKey()
	extra := 0
	for k, n := range got {
		if !want[k] {
			t.Errorf("delivered %s, which was never acknowledged", k)
		}
		if n != 1 {
			extra += n - 1
		}
	}
	if extra > 0 {
		t.Errorf("%d extra deliveries", extra)
	}
}

// storedAndDeliveredOnce checks a storm of all's ids against PostgreSQL at
// pg: every copy answered 200, one event stored per id, and each
// delivered to sink once.
func storedAndDeliveredOnce(t *testing.T, pg string, sink *countingSink, all []string, codes map[string][]int) {
	t.Helper()
	want := allAnswered200(t, all, codes)
	if st := pgStats(t, pg); st.Events != int64(len(all)) {
		t.Fatalf("stored %d events, want %d", st.Events, len(all))
	}
	waitDeliveredOnce(t, sink, want)
}

// Three replicas, 2,000 events each sent 5 times at once across them:
// exactly 2,000 stored, 2,000 delivered, every request answered 200.
func TestThreeReplicasStoreAndDeliverEachEventOnce(t *testing.T) {
	pg := testenv.Postgres(t)
	sink := newCountingSink(t, 0)
	ps := startReplicas(t, 3, replicaConfig(t, pg, "", sink.URL))
	all := ids("rep", 2000)
	codes := storm(t, ps, all, 5, nil)
	storedAndDeliveredOnce(t, pg, sink, all, codes)
}

// kill -9 one replica mid-load, with deliveries leased and in flight on it
// (the destination takes 200ms, so every replica holds leases): every
// acknowledged event is delivered, the killed replica's leases taken over
// by the others once they expire.
func TestKillingAReplicaLosesNothingAcknowledged(t *testing.T) {
	pg := testenv.Postgres(t)
	sink := newCountingSink(t, 200*time.Millisecond)
	ps := startReplicas(t, 3, replicaConfig(t, pg, "", sink.URL))
	all := ids("kill", 600)
	var leasedAtKill int
	var killedAt time.Time
	codes := storm(t, ps, all, 3, func() {
		killedAt = time.Now()
		ps[0].kill()
		leasedAtKill = len(sink.Deliveries())
	})
	want := map[string]bool{}
	for _, id := range all {
		for _, c := range codes[id] {
			if c == 200 {
				want["stripe:"+id] = true
			} else if c != 0 { // 0: the killed replica's refused connections
				t.Errorf("%s answered %d", id, c)
			}
		}
	}
	if len(want) < len(all)*9/10 {
		t.Fatalf("only %d of %d events acknowledged", len(want), len(all))
	}
	if leasedAtKill == 0 {
		t.Fatal("no delivery had started when the replica died: the test proves nothing")
	}
	// The store's own account: every stored event delivered, none pending,
	// which needs the dead replica's leases taken over.
	var st store.Stats
	if !testenv.WaitFor(60*time.Second, func() bool {
		st = pgStats(t, pg)
		return st.Pending == 0 && st.Delivered == st.Events
	}) {
		t.Fatalf("after the kill: %+v", st)
	}
	if st.Events < int64(len(want)) {
		t.Fatalf("stored %d events, but %d were acknowledged", st.Events, len(want))
	}
	got := sink.ByKey()
	for k := range want {
		if got[k] == 0 {
			t.Errorf("acknowledged %s never reached the destination", k)
		}
	}
	// An attempt in flight when the replica died (or done, but its outcome
	// not yet committed) may have reached the destination; the takeover
	// then delivers it again, with the same Idempotency-Key. Only those may
	// repeat: no delivery first made after the kill (and what it had already
	// sent, a moment later) is ever repeated.
	first := map[string]time.Time{}
	for _, d := range sink.Deliveries() {
		if _, ok := first[d.Key]; !ok {
			first[d.Key] = d.At
		}
	}
	repeats := 0
	for k, n := range got {
		if n > 1 {
			repeats += n - 1
			// Bytes the replica wrote just before it died still reach the
			// destination a moment later; a second after the kill, nothing
			// of the dead replica's can arrive.
			if first[k].After(killedAt.Add(time.Second)) {
				t.Errorf("%s first delivered after the kill, then %d times", k, n)
			}
		}
	}
	t.Logf("%d deliveries had arrived by the kill; %d repeated after the takeover", leasedAtKill, repeats)
}

// Redis FLUSHALL in the middle of a duplicate storm: zero extra deliveries.
func TestRedisFlushMidStormLetsNoDuplicateThrough(t *testing.T) {
	pg := testenv.Postgres(t)
	rURL := testenv.Redis(t)
	sink := newCountingSink(t, 0)
	ps := startReplicas(t, 3, replicaConfig(t, pg, rURL, sink.URL))
	opts, err := goredis.ParseURL(rURL)
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opts)
	defer client.Close()
	all := ids("flush", 500)
	codes := storm(t, ps, all, 6, func() {
		if err := client.FlushAll(context.Background()).Err(); err != nil {
			t.Errorf("FLUSHALL: %v", err)
		}
	})
	storedAndDeliveredOnce(t, pg, sink, all, codes)
}

// PostgreSQL unreachable mid-load: every request during the outage gets
// 503, none 200; /readyz fails; after recovery, intake resumes without a
// restart and nothing acknowledged is lost.
func TestPostgresOutageAnswers503AndRecovers(t *testing.T) {
	pg := testenv.Postgres(t)
	base, _ := url.Parse(pg)
	proxy := testenv.NewProxy(t, base.Host)
	viaProxy := strings.Replace(pg, base.Host, proxy.Addr, 1)
	sink := newCountingSink(t, 0)
	ps := startReplicas(t, 1, replicaConfig(t, viaProxy, "", sink.URL))
	p := ps[0]
	want := map[string]bool{}
	for _, id := range ids("before", 50) {
		if code, body := sendEvent(t, p.URL, id); code != 200 {
			t.Fatalf("before the outage: %d %s", code, body)
		}
		want["stripe:"+id] = true
	}

	proxy.Stop()
	for _, id := range ids("during", 30) {
		if code, body := sendEvent(t, p.URL, id); code != http.StatusServiceUnavailable {
			t.Fatalf("during the outage %s: %d %s, want 503", id, code, body)
		}
	}
	if resp, err := http.Get(p.URL + "/readyz"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz during the outage: %v %v", resp, err)
	}

	proxy.Start(t)
	if !testenv.WaitFor(20*time.Second, func() bool {
		resp, err := http.Get(p.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatal("/readyz never recovered")
	}
	// The provider retries what got 503; new events flow again.
	for _, id := range append(ids("during", 30), ids("after", 30)...) {
		if code, body := sendEvent(t, p.URL, id); code != 200 {
			t.Fatalf("after recovery %s: %d %s", id, code, body)
		}
		want["stripe:"+id] = true
	}
	if st := pgStats(t, pg); st.Events != 110 {
		t.Fatalf("stored %d events, want 110", st.Events)
	}
	waitDeliveredOnce(t, sink, want)
}
