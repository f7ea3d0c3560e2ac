package oncehook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store/sqlite"
)

// Issue 41, item 4: on SQLite a caller's open transaction (an outbox
// PublishTx, with _txlock=immediate) holds the one write lock, and every
// webhook's commit waits for it. At a73dba7 the writer's BEGIN gave up
// after SQLite's 10 s busy timeout and its webhooks were answered 503,
// /readyz answered 503 after 5 s (a load balancer drops the only replica),
// and nothing said why. Now a webhook waits for the lock as long as the
// commit bound (30 s), is answered 200 as soon as the caller's
// transaction ends, and is answered 503 only once it has waited the whole
// bound; readiness stays 200 and names the wait, as the metric and the
// doctor do.
//
// The range a user would hold a transaction, 100 ms to 60 s, is three
// regimes of the gateway's code: a hold under SQLite's busy timeout (one
// BEGIN waits), a hold past it and under the bound (the BEGIN is tried
// again after the busy handler gives up: where a73dba7 answered 503),
// and a hold past the bound (commits give up at it and their webhooks get
// 503; the next commit waits on). The first two run at full scale: 100
// ms, 1 s, 5 s and 12 s. The third depends on the hold only through its
// ratio to the bound, so CI runs it with the bound at 3 s and holds of
// 1.5 s and 6 s (twice the bound, as 60 s is for 30 s); with
// ONCEHOOK_LONG_HOLDS=1 it also runs at full scale (40 s and 60 s against
// 30 s), which costs a minute.
func TestACallersOpenSQLiteTransactionDelaysWebhooksUpToTheBound(t *testing.T) {
	type run struct {
		hold, bound time.Duration
		long        bool
	}
	runs := []run{
		{hold: 100 * time.Millisecond, bound: 30 * time.Second},
		{hold: time.Second, bound: 30 * time.Second},
		{hold: 5 * time.Second, bound: 30 * time.Second},
		{hold: 12 * time.Second, bound: 30 * time.Second},
		{hold: 1500 * time.Millisecond, bound: 3 * time.Second},
		{hold: 6 * time.Second, bound: 3 * time.Second},
		{hold: 40 * time.Second, bound: 30 * time.Second, long: true},
		{hold: 60 * time.Second, bound: 30 * time.Second, long: true},
	}
	for _, r := range runs {
		t.Run(fmt.Sprintf("hold %s, bound %s", r.hold, r.bound), func(t *testing.T) {
			if r.long && os.Getenv("ONCEHOOK_LONG_HOLDS") == "" {
				t.Skip("a full-scale hold past the bound: set ONCEHOOK_LONG_HOLDS=1 (its regime runs above with the bound at 3 s)")
			}
			t.Parallel()
			holdTheWriteLock(t, r.hold, r.bound)
		})
	}
}

// webhookAnswer is what one provider request saw.
type webhookAnswer struct {
	id       string
	sent     time.Duration // after the caller's transaction took the lock
	took     time.Duration
	status   int // 0: the provider gave up first (its own timeout)
	patience time.Duration
}

func holdTheWriteLock(t *testing.T, hold, bound time.Duration) {
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "oncehook.db")
	gw := oncehooktest.StartWith(t, `store: sqlite://`+path+`
api:
  tokens:
    - {name: ops, token: `+opsToken+`}
sources:
  - {name: orders, outbox: true, destinations: [app]}
  - {name: stripe, preset: stripe, secrets: [`+stripeSecret+`], destinations: [app]}
destinations:
  - {name: app, url: `+sink.URL+`}
`, oncehook.Options{CommitTimeout: bound})
	db := sqlitetest.Open(t, path)
	outbox := oncehook.GatewayOutbox(gw.Gateway, sqlite.TxDriver{})
	ctx := context.Background()
	send := func(id string, patience time.Duration) (int, error) {
		req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent(id), "")
		resp, err := (&http.Client{Timeout: patience}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if status, err := send("evt_warm", 5*time.Second); status != http.StatusOK {
		t.Fatalf("a webhook before the hold: %d %v", status, err)
	}
	// Its delivery recorded, the writer is idle: the first commit to wait
	// for the lock is a webhook's.
	if !testenv.WaitFor(5*time.Second, func() bool { st, err := gw.Store().Stats(ctx); return err == nil && st.Delivered == 1 }) {
		t.Fatal("the webhook before the hold was not delivered")
	}

	// The caller's transaction: BEGIN IMMEDIATE takes the write lock,
	// as a user's PublishTx does, and keeps it for hold.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	if _, err := outbox.PublishTx(ctx, tx, "orders", "order-held", []byte(`{"id":"order-held"}`), nil); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(hold - time.Since(locked))
		if err := tx.Commit(); err != nil {
			t.Error(err)
		}
	}()

	// Webhooks through the hold, and past it: every fifth from a provider
	// that waits 5 s at most (Shopify's patience), the rest 60 s.
	every := max(hold/60, 50*time.Millisecond)
	var mu sync.Mutex
	var answers []webhookAnswer
	var wg sync.WaitGroup
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; time.Since(locked) < hold+500*time.Millisecond; i++ {
			a := webhookAnswer{id: fmt.Sprintf("evt_%d", i), sent: time.Since(locked), patience: time.Minute}
			if i%5 == 4 {
				a.patience = 5 * time.Second
			}
			wg.Go(func() {
				start := time.Now()
				a.status, _ = send(a.id, a.patience)
				a.took = time.Since(start)
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
			time.Sleep(every)
		}
	}()
	if hold >= 3*time.Second {
		// What an operator sees during the hold, once the writer has
		// waited over a second (past readiness's 5 s for a stuck commit
		// in the 12 s hold, and before a scaled bound's first give-up).
		time.Sleep(time.Until(locked.Add(min(hold/2, bound-500*time.Millisecond))))
		checkTheWaitIsVisible(t, gw, time.Since(locked)-time.Second)
	}
	if hold > bound+1500*time.Millisecond {
		// Past the bound the commit that waited gave up, and the next one
		// waits on the same holder: the wait shown is the holder's.
		time.Sleep(time.Until(locked.Add(bound + time.Second)))
		if v := metricValue(t, gw, "oncehook_store_lock_wait_seconds"); v < (bound + 500*time.Millisecond).Seconds() {
			t.Errorf("oncehook_store_lock_wait_seconds is %v %s past the bound, want the wait since the hold began", v, time.Second)
		}
	}
	<-released
	<-sent
	wg.Wait()

	// What each provider saw: 200 as soon as the lock was released (and
	// within the bound); 503 only after waiting the whole bound.
	const margin = 2 * time.Second // the busy handler's 100 ms steps, a commit, a loaded CI machine
	var ok, refused, gaveUp int
	var retry, abandoned []string
	var late time.Duration // the most a 200 came after the release (or after it was sent, past the hold)
	for _, a := range answers {
		waitFor := max(hold-a.sent, 0) // until the caller's commit
		switch {
		case a.status == http.StatusOK:
			ok++
			late = max(late, a.took-waitFor)
			if a.took > min(waitFor, bound)+margin {
				t.Errorf("%s (sent %s into the hold) answered 200 after %s: want within %s of the release",
					a.id, a.sent.Round(time.Millisecond), a.took.Round(time.Millisecond), margin)
			}
		case a.status == http.StatusServiceUnavailable:
			refused++
			retry = append(retry, a.id)
			if hold < bound || a.took < bound-100*time.Millisecond {
				t.Errorf("%s (sent %s into a %s hold) answered 503 after %s: want 503 only past the %s bound",
					a.id, a.sent.Round(time.Millisecond), hold, a.took.Round(time.Millisecond), bound)
			}
		case a.status == 0 && a.patience < min(waitFor, bound)+margin:
			gaveUp++ // the provider's own timeout: it retries, or (GitHub) never does
			retry = append(retry, a.id)
			abandoned = append(abandoned, a.id)
		default:
			t.Errorf("%s (sent %s into the hold, patience %s) got %d after %s", a.id, a.sent.Round(time.Millisecond), a.patience, a.status, a.took.Round(time.Millisecond))
		}
		if hold >= bound && a.patience > bound && waitFor > bound+margin && a.status != http.StatusServiceUnavailable {
			t.Errorf("%s waited for a lock held %s past the bound and got %d: want 503 at the bound", a.id, waitFor-bound, a.status)
		}
	}
	t.Logf("hold %s, bound %s: %d webhooks: %d answered 200 (at most %s after the release), %d answered 503 at the bound, %d given up by their 5 s provider",
		hold, bound, len(answers), ok, late.Round(time.Millisecond), refused, gaveUp)

	// A webhook its provider gave up on was queued: it is stored (and
	// delivered) without a retry (invariant 22; GitHub never retries).
	if !testenv.WaitFor(10*time.Second, func() bool {
		got := sink.ByKey()
		for _, id := range abandoned {
			if got["stripe:"+id] == 0 {
				return false
			}
		}
		return true
	}) {
		t.Errorf("webhooks their providers gave up on were not all stored without a retry: %v", abandoned)
	}

	// The providers retry what they did not get 200 for: it is stored
	// once, whether or not its first copy was.
	for _, id := range retry {
		if status, err := send(id, 10*time.Second); status != http.StatusOK {
			t.Errorf("the retry of %s: %d %v", id, status, err)
		}
	}
	want := len(answers) + 2 // the warm-up and the caller's own event
	if !testenv.WaitFor(20*time.Second, func() bool { return len(sink.ByKey()) == want }) {
		t.Fatalf("%d events delivered, want %d", len(sink.ByKey()), want)
	}
	sink.CheckEachOnce(t)
	if st, err := gw.Store().Stats(ctx); err != nil || st.Events != int64(want) {
		t.Errorf("the store holds %d events (%v), want %d, each once", st.Events, err, want)
	}

	// Once the transaction ended, nothing waits, and the wait is counted.
	if v := metricValue(t, gw, "oncehook_store_lock_wait_seconds"); v != 0 {
		t.Errorf("oncehook_store_lock_wait_seconds is %v once the lock is released, want 0", v)
	}
	if v := metricValue(t, gw, "oncehook_store_lock_wait_seconds_total"); v < 0.5*min(hold, bound).Seconds() {
		t.Errorf("oncehook_store_lock_wait_seconds_total is %v after a %s hold", v, hold)
	}
	if rep, err := api.NewClient(gw.APIURL, opsToken, nil).Doctor(ctx, ""); err != nil || len(rep.Store) != 0 {
		t.Errorf("doctor once the lock is released: %+v %v, want no store finding", rep.Store, err)
	}
}

// checkTheWaitIsVisible checks, while a caller's transaction holds the
// write lock, that the writer has waited at least least and that the
// metric, /readyz (ready: the wait is its detail) and the doctor say so.
func checkTheWaitIsVisible(t *testing.T, gw *oncehooktest.Gateway, least time.Duration) {
	t.Helper()
	if v := metricValue(t, gw, "oncehook_store_lock_wait_seconds"); v < least.Seconds() {
		t.Errorf("oncehook_store_lock_wait_seconds is %v during the hold, want at least %v", v, least.Seconds())
	}
	resp, err := http.Get(gw.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Status    string `json:"status"`
		StoreLock struct {
			WaitedSeconds float64 `json:"waited_seconds"`
			Message       string  `json:"message"`
		} `json:"store_lock"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || ready.Status != "ready" || ready.StoreLock.WaitedSeconds < least.Seconds() ||
		!strings.Contains(ready.StoreLock.Message, "another connection holds") {
		t.Errorf("/readyz during the hold: %d %+v %v: want 200, ready, naming the lock and the wait", resp.StatusCode, ready, err)
	}
	rep, err := api.NewClient(gw.APIURL, opsToken, nil).Doctor(context.Background(), "")
	if err != nil || len(rep.Store) != 1 || rep.Store[0].Kind != admin.FindingStoreLockHeld ||
		!strings.Contains(rep.Store[0].Message, "another connection holds") || !strings.Contains(rep.Store[0].Message, "PublishTx") {
		t.Errorf("doctor during the hold: %+v %v: want a store_lock_held finding naming the holder", rep.Store, err)
	} else {
		t.Logf("doctor: %s", rep.Store[0].Message)
	}
}

// metricValue reads one unlabelled metric from the gateway's /metrics.
func metricValue(t *testing.T, gw *oncehooktest.Gateway, name string) float64 {
	t.Helper()
	resp, err := http.Get(gw.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// A gateway with nothing to commit probes the store for /readyz: a probe
// that waits for a lock a caller's transaction holds is not a store that
// cannot commit (at a73dba7 it answered 503 after 2 s). Readiness stays
// 200 and names the wait; once the caller commits, the probe writes.
func TestReadinessOfAnIdleGatewayWhileACallerHoldsTheWriteLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncehook.db")
	gw := oncehooktest.Start(t, `store: sqlite://`+path+`
sources:
  - {name: orders, outbox: true, destinations: [app]}
destinations:
  - {name: app, url: http://127.0.0.1:9/}
`)
	readyz := func() (int, map[string]any) {
		resp, err := http.Get(gw.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if status, body := readyz(); status != http.StatusOK {
		t.Fatalf("/readyz at start: %d %v", status, body)
	}
	db := sqlitetest.Open(t, path)
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// Within readyFresh (5 s) of the last commit readiness may answer
	// from it; past it, a commit waits for the lock, or a probe does.
	start := time.Now()
	var named map[string]any
	for time.Since(start) < 7*time.Second {
		status, body := readyz()
		if status != http.StatusOK {
			t.Fatalf("/readyz %s into the caller's hold: %d %v, want 200", time.Since(start).Round(time.Millisecond), status, body)
		}
		named, _ = body["store_lock"].(map[string]any)
		time.Sleep(250 * time.Millisecond)
	}
	if named == nil || named["waited_seconds"].(float64) < 1.5 || !strings.Contains(named["message"].(string), "another connection holds") {
		t.Fatalf("/readyz 7 s into the hold does not name the wait: %v", named)
	}
	tx.Commit()
	var status int
	var body map[string]any
	if !testenv.WaitFor(2*time.Second, func() bool { status, body = readyz(); return status == http.StatusOK && body["store_lock"] == nil }) {
		t.Fatalf("/readyz once the caller committed: %d %v", status, body)
	}
}
