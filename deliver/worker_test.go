package deliver_test

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/groupcommit"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	return openStoreAt(t, filepath.Join(t.TempDir(), "deliver.db"))
}

// openStoreAt opens the SQLite store at path, closed when the test ends;
// a test that reads the file with its own SQL names it.
func openStoreAt(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func claim(t *testing.T, s store.Store, key string, dests ...string) {
	t.Helper()
	now := time.Now()
	_, err := store.ClaimEvents(context.Background(), s, []store.NewEvent{{
		Source: "src", Key: key, ContentType: "application/json", Body: []byte(`{"id":"` + key + `"}`),
		ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: dests,
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// runWorker runs a worker over s until the test ends.
func runWorker(t *testing.T, s store.Store, dest deliver.Destination, lease time.Duration) *deliver.Worker {
	t.Helper()
	if dest.Name == "" {
		dest.Name = "app"
	}
	if dest.Timeout == 0 {
		dest.Timeout = 2 * time.Second
	}
	if dest.Retry.MaxAttempts == 0 {
		dest.Retry = deliver.RetryPolicy{MaxAttempts: 5, BaseDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond}
	}
	w, _ := startWorker(t, s, deliver.Options{Destinations: []deliver.Destination{dest}, Lease: lease, ShutdownGrace: time.Second})
	return w
}

// startWorker runs a worker over s, with the writer it commits through (as
// the gateway wires them), until the test ends or stop is called: stop
// ends the worker, then commits its last outcomes.
func startWorker(t *testing.T, s store.Store, opts deliver.Options) (*deliver.Worker, func()) {
	t.Helper()
	c := groupcommit.New(s.Commit, groupcommit.Options{Lease: opts.Lease})
	opts.Writer = c
	w := deliver.New(s, opts)
	c.Attach(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			c.Close()
		})
	}
	t.Cleanup(stop)
	return w, stop
}

func waitStats(t *testing.T, s store.Store, cond func(store.Stats) bool) store.Stats {
	t.Helper()
	var st store.Stats
	ok := testenv.WaitFor(10*time.Second, func() bool {
		var err error
		st, err = s.Stats(context.Background())
		return err == nil && cond(st)
	})
	if !ok {
		t.Fatalf("stats never matched: %+v", st)
	}
	return st
}

func TestServerErrorsAreRetriedUntilDelivered(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, _ *http.Request, n int) {
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	claim(t, s, "evt_1", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL}, time.Minute)
	st := waitStats(t, s, func(st store.Stats) bool { return st.Delivered == 1 })
	if st.Attempts != 3 {
		t.Fatalf("attempts recorded = %d, want 3", st.Attempts)
	}
	ds := sink.Deliveries()
	if len(ds) != 3 {
		t.Fatalf("%d requests, want 3", len(ds))
	}
	for i, d := range ds {
		// Invariant 8: the key is stable across attempts.
		if d.Key != "src:evt_1" || d.Attempt != string(rune('1'+i)) {
			t.Errorf("request %d: Idempotency-Key %q attempt %q", i+1, d.Key, d.Attempt)
		}
		if d.Header.Get("Content-Type") != "application/json" || d.Header.Get("X-Oncehook-Source") != "src" {
			t.Errorf("request %d headers: %v", i+1, d.Header)
		}
	}
}

// Invariant 7: permanent failures are not retried.
func TestPermanentFailureIsDeadLetteredAfterOneAttempt(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 410, 422} {
		s := openStore(t)
		sink := testenv.NewSink(t)
		sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(code) }
		claim(t, s, "evt_perm", "app")
		runWorker(t, s, deliver.Destination{URL: sink.URL}, time.Minute)
		waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
		time.Sleep(60 * time.Millisecond) // longer than the largest backoff
		if n := len(sink.Deliveries()); n != 1 {
			t.Errorf("HTTP %d: %d attempts, want 1", code, n)
		}
	}
}

func TestRetriesAreBoundedThenDeadLettered(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusBadGateway) }
	claim(t, s, "evt_down", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL}, time.Minute)
	st := waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
	if st.Attempts != 5 || len(sink.Deliveries()) != 5 {
		t.Fatalf("%d attempts recorded, %d made; want 5 (max_attempts)", st.Attempts, len(sink.Deliveries()))
	}
}

// retryAfterOnce answers a sink's first request with status and
// Retry-After: value, and every later one with 200.
func retryAfterOnce(status int, value string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", value)
			w.WriteHeader(status)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	sink.Respond = retryAfterOnce(http.StatusTooManyRequests, "2")
	claim(t, s, "evt_slow_down", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL,
		Retry: deliver.RetryPolicy{MaxAttempts: 5, BaseDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Second}}, time.Minute)
	waitStats(t, s, func(st store.Stats) bool { return st.Delivered == 1 })
	ds := sink.Deliveries()
	if len(ds) != 2 {
		t.Fatalf("%d attempts, want 2", len(ds))
	}
	if gap := ds[1].At.Sub(ds[0].At); gap < 2*time.Second {
		t.Fatalf("second attempt %s after a 429 with Retry-After: 2", gap)
	}
}

// A Retry-After longer than the destination's max_delay (a day, or a value
// that used to overflow to nothing) waits max_delay: neither parked for a
// day nor retried at once.
func TestRetryAfterIsCappedAtMaxDelay(t *testing.T) {
	for _, ra := range []string{"86400", "9300000000", "18446744074", "99999999999999999999999"} {
		t.Run(ra, func(t *testing.T) {
			s := openStore(t)
			sink := testenv.NewSink(t)
			sink.Respond = retryAfterOnce(http.StatusServiceUnavailable, ra)
			claim(t, s, "evt_parked", "app")
			runWorker(t, s, deliver.Destination{URL: sink.URL,
				Retry: deliver.RetryPolicy{MaxAttempts: 5, BaseDelay: 10 * time.Millisecond, MaxDelay: 700 * time.Millisecond}}, time.Minute)
			waitStats(t, s, func(st store.Stats) bool { return st.Delivered == 1 })
			ds := sink.Deliveries()
			if gap := ds[1].At.Sub(ds[0].At); gap < 650*time.Millisecond || gap > 5*time.Second {
				t.Fatalf("second attempt %s after Retry-After: %s; want max_delay (700ms)", gap, ra)
			}
		})
	}
}

// A redirect is a misconfigured destination: dead at once, with where it
// pointed, instead of max_attempts retries of the same redirect.
func TestRedirectIsDeadLetteredAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "redirect.db")
	s := openStoreAt(t, path)
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Location", "https://app.example.com/webhooks/")
		w.WriteHeader(http.StatusPermanentRedirect)
	}
	claim(t, s, "evt_moved", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL}, time.Minute)
	waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
	if n := len(sink.Deliveries()); n != 1 {
		t.Fatalf("%d attempts at a redirecting destination, want 1", n)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var lastErr string
	if err := db.QueryRow(`SELECT last_error FROM deliveries`).Scan(&lastErr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lastErr, "https://app.example.com/webhooks/") || !strings.Contains(lastErr, "308") {
		t.Fatalf("dead letter error %q: want the status and the Location", lastErr)
	}
}

// A redirect's Location often echoes the request's query, where a
// destination's API key stands: the stored error shows where it pointed,
// its secrets masked, whatever form they take.
func TestRedirectErrorHidesTheLocationsSecrets(t *testing.T) {
	for location, want := range map[string]string{
		"https://app.example.com/hook?api_key=S3CRET":  "https://app.example.com/hook?api_key=xxxxx",
		"https://app.example.com/hook?S3CRET":          "https://app.example.com/hook?xxxxx",
		"https://S3CRET@app.example.com/hook":          "https://xxxxx@app.example.com/hook",
		"https://u:S3CRET@app.example.com/hook#S3CRET": "https://u:xxxxx@app.example.com/hook",
		"/hook/?token=S3CRET":                          "/hook/?token=xxxxx",
	} {
		t.Run(location, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "redirect.db")
			s := openStoreAt(t, path)
			sink := testenv.NewSink(t)
			sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Location", location)
				w.WriteHeader(http.StatusFound)
			}
			claim(t, s, "evt_moved", "app")
			runWorker(t, s, deliver.Destination{URL: sink.URL}, time.Minute)
			waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range []string{`SELECT last_error FROM deliveries`, `SELECT error FROM attempts`} {
				var stored string
				if err := db.QueryRow(q).Scan(&stored); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(stored, "S3CRET") || !strings.Contains(stored, want) {
					t.Errorf("%s: %q, want %s and no secret", q, stored, want)
				}
			}
		})
	}
}

func TestTimeoutsAreRetried(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusOK)
	}
	claim(t, s, "evt_timeout", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL, Timeout: 200 * time.Millisecond}, time.Minute)
	st := waitStats(t, s, func(st store.Stats) bool { return st.Delivered == 1 })
	if st.Attempts != 2 {
		t.Fatalf("attempts = %d, want 2 (a timeout, then success)", st.Attempts)
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	url := sink.URL
	sink.Close() // nothing listens there now
	claim(t, s, "evt_refused", "app")
	runWorker(t, s, deliver.Destination{URL: url}, time.Minute)
	st := waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })
	if st.Attempts != 5 {
		t.Fatalf("attempts = %d, want 5", st.Attempts)
	}
}

// Deliveries are signed the Standard Webhooks way when the destination has
// a secret, with a webhook-id that is stable across attempts.
func TestDeliveriesAreSignedForTheDestination(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, _ := provider.DecodeStandardSecret(secret)
	s := openStore(t)
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	claim(t, s, "wamid.HBg.dots", "app")
	runWorker(t, s, deliver.Destination{URL: sink.URL, SigningKey: key}, time.Minute)
	waitStats(t, s, func(st store.Stats) bool { return st.Delivered == 1 })
	verifier, err := provider.New("standard-webhooks", provider.Options{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	ds := sink.Deliveries()
	for _, d := range ds {
		if err := verifier.Verify(&provider.Request{Header: d.Header, Body: d.Body}, time.Now()); err != nil {
			t.Fatalf("delivery does not verify as Standard Webhooks: %v", err)
		}
	}
	if ds[0].Header.Get("webhook-id") != ds[1].Header.Get("webhook-id") {
		t.Fatal("webhook-id changed between attempts")
	}
}

// Invariant 6: an abandoned lease is taken over once it expires.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	claim(t, s, "evt_abandoned", "app")
	// A worker leases the delivery and dies without a word.
	leased, err := store.LeaseDeliveries(context.Background(), s, time.Now(), 300*time.Millisecond, 10)
	if err != nil || len(leased) != 1 {
		t.Fatalf("lease: %v %v", leased, err)
	}
	start := time.Now()
	runWorker(t, s, deliver.Destination{URL: sink.URL}, time.Minute)
	waitStats(t, s, func(st store.Stats) bool { return st.Delivered == 1 })
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("delivered after %s, before the abandoned lease expired", took)
	}
	// The dead worker's late outcome must not overwrite the new owner's.
	err = store.CompleteDeliveries(context.Background(), s, []store.Outcome{{
		DeliveryID: leased[0].ID, LeaseToken: leased[0].LeaseToken, Kind: store.OutcomeDead, Attempt: 1, Error: "late",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(context.Background()); st.Delivered != 1 || st.Dead != 0 {
		t.Fatalf("stale lease overwrote the outcome: %+v", st)
	}
}

// Every retry is jittered, the first one too: deliveries that failed
// together (a destination that was down) come back spread over half the
// ceiling, not at one instant.
func TestBackoffGrowsWithJitterOnEveryRetry(t *testing.T) {
	p := deliver.RetryPolicy{MaxAttempts: 12, BaseDelay: time.Second, MaxDelay: time.Minute}
	top := func(n int64) int64 { return n - 1 }
	bottom := func(int64) int64 { return 0 }
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := p.Backoff(i+1, top); got != w {
			t.Errorf("attempt %d: ceiling %s, want %s", i+1, got, w)
		}
		if got := p.Backoff(i+1, bottom); got != w/2 {
			t.Errorf("attempt %d: floor %s, want half the ceiling (%s)", i+1, got, w/2)
		}
	}
	if got := p.Backoff(500, top); got != time.Minute {
		t.Errorf("attempt 500: %s, want the max delay", got)
	}
	first := map[time.Duration]bool{}
	for range 50 {
		first[p.Backoff(1, rand.Int64N)] = true
	}
	if len(first) < 10 {
		t.Errorf("50 first retries took %d distinct delays: the first retry is not jittered", len(first))
	}
}

// Graceful shutdown: an attempt still running when the grace period ends is
// cut and its lease released at once (uncounted), so the next worker need
// not wait for the lease to expire.
func TestShutdownReleasesLeasesOfCutAttempts(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }
	claim(t, s, "evt_slow", "app")
	_, stop := startWorker(t, s, deliver.Options{
		Destinations:  []deliver.Destination{{Name: "app", URL: sink.URL, Timeout: time.Minute, Retry: deliver.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second}}},
		Lease:         time.Hour,
		ShutdownGrace: 100 * time.Millisecond,
	})
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatal("the attempt never started")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the grace period")
	}
	st, _ := s.Stats(context.Background())
	if st.Pending != 1 || st.Attempts != 0 {
		t.Fatalf("stats %+v: want the delivery pending with no attempt counted", st)
	}
	// Released: leasable now, not in an hour.
	leased, err := store.LeaseDeliveries(context.Background(), s, time.Now(), time.Minute, 10)
	if err != nil || len(leased) != 1 || leased[0].Attempt != 1 {
		t.Fatalf("after shutdown: %+v %v, want the delivery leasable at once as attempt 1", leased, err)
	}
}

// An operator fixes the destination and replays a dead letter from another
// process: the idle worker finds it by itself and delivers it under the
// same Idempotency-Key.
func TestReplayedDeadLetterIsDelivered(t *testing.T) {
	s := openStore(t)
	sink := testenv.NewSink(t)
	var broken atomic.Bool
	broken.Store(true)
	sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
		if broken.Load() {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	claim(t, s, "evt_replay", "app")
	startWorker(t, s, deliver.Options{
		Destinations: []deliver.Destination{{Name: "app", URL: sink.URL, Timeout: time.Second, Retry: deliver.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}}},
		IdlePoll:     100 * time.Millisecond,
	})
	waitStats(t, s, func(st store.Stats) bool { return st.Dead == 1 })

	broken.Store(false)
	if n, err := s.Replay(context.Background(), store.Replay{Events: store.EventQuery{Source: "src", Key: "evt_replay"}, Now: time.Now()}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	// No Notify: the worker has to find it.
	waitStats(t, s, func(st store.Stats) bool { return st.Delivered == 1 })
	ds := sink.Deliveries()
	if len(ds) != 2 || ds[0].Key != ds[1].Key || ds[1].Key != "src:evt_replay" {
		t.Fatalf("deliveries %+v: want the dead attempt and the replay, with one Idempotency-Key", ds)
	}
}
