package oncehook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
)

func genericConfig(sinkURL, keys string) string {
	return fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - {name: acme, preset: generic, unsigned: true, key: [%s], destinations: [app]}
destinations:
  - name: app
    url: %s
    timeout: 2s
    retry: {max_attempts: 3, base_delay: 10ms, max_delay: 50ms}
`, keys, sinkURL)
}

func postJSON(t *testing.T, url, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return do(t, http.DefaultClient, req)
}

// Invariant 12: parts that contain ":" no longer run together. Before,
// {"a":"x:y","b":"z"} and {"a":"x","b":"y:z"} shared the key x:y:z, and
// the second event was answered "duplicate" and lost.
func TestCompositeKeysKeepDistinctEventsDistinct(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, genericConfig(sink.URL, `"json:a", "json:b"`))
	first := postJSON(t, gw.URL+"/in/acme", `{"a":"x:y","b":"z"}`)
	second := postJSON(t, gw.URL+"/in/acme", `{"a":"x","b":"y:z"}`)
	if first.Body.Status != receive.StatusAccepted || second.Body.Status != receive.StatusAccepted {
		t.Fatalf("answers %+v then %+v: want two accepted events", first.Body, second.Body)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.ByKey()) == 2 }) {
		t.Fatalf("delivered %v, want two events", sink.ByKey())
	}
}

// Invariant 12's second half: every key intake accepts can be delivered.
// Keys with CR LF, NUL, non-ASCII, invalid UTF-8 or a megabyte of id are
// accepted, stored with a header-safe key, deduplicated exactly, and
// delivered with that key as Idempotency-Key. Before, the first four failed
// every attempt ("invalid header field value") until dead-lettered, and the
// fifth was refused by the destination (431).
func TestEveryAcceptedKeyIsDeliverable(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, genericConfig(sink.URL, `"json:id"`))
	ids := map[string]string{
		`o2\r\nX-Evil: 1`:          "o2%0D%0AX-Evil:%201",
		`a\u0000b`:                 "a%00b",
		`café`:                     "caf%C3%A9",
		`\"\u00e9\" is not \ud800`: "",
		strings.Repeat("k", 1<<20): provider.SafeKey(strings.Repeat("k", 1<<20)),
	}
	want := map[string]bool{}
	for id, key := range ids {
		body := `{"id":"` + id + `"}`
		a := postJSON(t, gw.URL+"/in/acme", body)
		if a.Status != http.StatusOK || a.Body.Status != receive.StatusAccepted {
			t.Fatalf("id %.40q: %d %+v %+v", id, a.Status, a.Body, a.Error)
		}
		got := a.Body.Events[0].Key
		if key != "" && got != key {
			t.Errorf("id %.40q answered key %q, want %q", id, got, key)
		}
		if len(got) > provider.MaxKeyLen {
			t.Errorf("a key of %d bytes", len(got))
		}
		if b := postJSON(t, gw.URL+"/in/acme", body); b.Body.Status != receive.StatusDuplicate || b.Body.Events[0].Key != got {
			t.Errorf("id %.40q again: %+v, want a duplicate with the same key", id, b.Body)
		}
		want["acme:"+got] = true
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.ByKey()) == len(ids) }) {
		t.Fatalf("delivered %d of %d; stats %+v", len(sink.ByKey()), len(ids), stats(t, gw))
	}
	for key, n := range sink.ByKey() {
		if !want[key] || n != 1 {
			t.Errorf("delivered %q %d times", key, n)
		}
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return stats(t, gw).Delivered == int64(len(ids)) }) || stats(t, gw).Dead != 0 {
		t.Fatalf("stats %+v: every accepted event must be delivered", stats(t, gw))
	}
}

// Invariants 13 and 23 at intake: a Content-Type that no store or
// destination would take (invalid UTF-8) fails nothing, neither its
// request nor a commit batch: it is left out, and the event is stored and
// delivered with the one a JSON body without any gets. Before, the
// request was refused with 400.
func TestUnstorableContentTypeIsLeftOut(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, genericConfig(sink.URL, `"json:id"`))
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/acme", strings.NewReader(`{"id":"ct1"}`))
	req.Header.Set("Content-Type", "application/json; charset=\xff\xfe")
	if a := do(t, http.DefaultClient, req); a.Status != http.StatusOK || a.Body.Status != receive.StatusAccepted {
		t.Fatalf("got %d %+v %+v, want 200 accepted", a.Status, a.Body, a.Error)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatal("never delivered")
	}
	if d := sink.Deliveries()[0]; d.Key != "acme:ct1" || d.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("delivered %s with Content-Type %q, want acme:ct1 with application/json", d.Key, d.Header.Get("Content-Type"))
	}
}

// Every path outside the API answers 404 in the same JSON shape; a secret
// in the path is only for presets that take one.
func TestUnknownPathsAre404InOneShape(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, stripeConfig(sink.URL, `
  - {name: evo, preset: evolution, secrets: [evo_secret], destinations: [app]}
`))
	for _, path := range []string{"/in/stripe/anything", "/in/stripe/", "/in/stripe/a/b", "/nope", "/in/"} {
		req := testenv.SignedRequest(t, gw.URL+path, "stripe", stripeSecret, stripeEvent("evt_path"), "")
		a := do(t, http.DefaultClient, req)
		if a.Status != http.StatusNotFound || a.Error.Reason == "" {
			t.Errorf("POST %s: %d %+v, want a JSON 404", path, a.Status, a.Error)
		}
		resp, err := http.Post(gw.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("POST %s: the 404 (which echoes the path) has no nosniff", path)
		}
	}
	if st := stats(t, gw); st.Events != 0 {
		t.Fatalf("stored %d events from unknown paths", st.Events)
	}
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/evo/evo_secret", strings.NewReader(`{"event":"messages.upsert","instance":"i","data":{"key":{"id":"M1"}}}`))
	if a := do(t, http.DefaultClient, req); a.Status != 200 {
		t.Fatalf("a path secret where the preset takes one: %d %+v", a.Status, a.Error)
	}
}

// Invariant 13's memory half: however many large requests arrive at once,
// the bodies held stay within max_inflight_bytes; what is over it is told
// 503 with Retry-After (and retried by the provider), never dropped after a
// 200, and the process never runs out of memory. 48 concurrent 4 MiB
// bodies against a 16 MiB budget: the gateway's heap stays near the budget
// instead of near 200 MiB.
func TestMemoryIsBoundedUnderManyLargeBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("large bodies")
	}
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
max_body_size: 4MiB
max_inflight_bytes: 16MiB
sources:
  - {name: big, preset: generic, unsigned: true, key: ["header:X-Id"]}
`)
	const senders, size = 48, 4 << 20
	peakOf := sampleHeap(2*time.Millisecond, 0)
	base := heapInUse()
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: senders}}
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The body streams from a generator: the sender holds nothing.
			req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/big", io.LimitReader(zeros{}, size))
			req.ContentLength = size
			req.Header.Set("X-Id", fmt.Sprint("big-", i))
			resp, err := client.Do(req)
			if err != nil {
				// A body cut while it arrives (to make room for others) is
				// answered 503 and its connection closed; a sender still
				// writing may see the close before it reads the answer.
				// Either way it retries, and nothing was stored for it.
				mu.Lock()
				statuses[0]++
				mu.Unlock()
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		}()
	}
	wg.Wait()
	peak := peakOf()
	if statuses[200] == 0 || statuses[200]+statuses[503]+statuses[0] != senders || statuses[0] > senders/4 {
		t.Fatalf("answers %v: want 200s and 503s only (or, for a few bodies cut while they arrived, the connection closed: 0)", statuses)
	}
	if st := stats(t, gw); st.Events != int64(statuses[200]) {
		t.Fatalf("%d answered 200, %d stored", statuses[200], st.Events)
	}
	grew := int64(peak) - int64(base)
	t.Logf("answers %v; heap grew %d MiB at peak (bodies offered: %d MiB)", statuses, grew>>20, senders*size>>20)
	if grew > 64<<20 {
		t.Fatalf("heap grew %d MiB with a 16 MiB budget", grew>>20)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Invariant 1 at the readiness probe: a store that answers but cannot
// commit (its disk is full) is not ready. The database lives on a 4 MiB
// tmpfs, filled up once the gateway runs; intake answers 503 and /readyz
// 503 (before, /readyz said ready). Freed, both recover without a restart.
func TestReadinessFollowsWhetherTheStoreCanCommit(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot mount a small tmpfs (%v: %s): under CI the disk-full case must run", err, out)
		}
		t.Skipf("cannot mount a small tmpfs here (%v: %s); the disk-full case needs one", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	sink := testenv.NewSink(t)
	gw := startGateway(t, strings.ReplaceAll(stripeConfig(sink.URL, ""), "$DIR", dir))
	send := func(id string) int {
		body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","pad":%q}`, id, strings.Repeat("x", 256<<10)))
		return do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, body, "")).Status
	}
	ready := func() int { return readyStatus(t, gw.URL) }
	if s := send("evt_room"); s != 200 || ready() != 200 {
		t.Fatalf("before the disk filled: intake %d", s)
	}
	filler := filepath.Join(dir, "filler")
	f, _ := os.Create(filler)
	io.Copy(f, io.LimitReader(zeros{}, 8<<20)) // stops at ENOSPC
	f.Close()
	full := 0
	for i := range 5 {
		if send(fmt.Sprintf("evt_full_%d", i)) == http.StatusServiceUnavailable {
			full++
		}
	}
	if full == 0 {
		t.Fatal("the disk is full and intake still answered 200")
	}
	if s := ready(); s != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d while commits fail, want 503", s)
	}
	os.Remove(filler)
	if !testenv.WaitFor(15*time.Second, func() bool { return ready() == 200 }) {
		t.Fatal("/readyz never recovered once the disk had room")
	}
	if s := send("evt_after"); s != 200 {
		t.Fatalf("after the disk had room: intake %d", s)
	}
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// sampleHeap samples heapInUse every interval from now on, and returns
// what stops the sampling and gives the highest value seen (from, when
// none was higher): the peak a test's burst of requests made.
func sampleHeap(every time.Duration, from uint64) (stop func() (peak uint64)) {
	peak := from
	done := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(every):
				if h := heapInUse(); h > peak {
					peak = h
				}
			}
		}
	}()
	return func() uint64 {
		close(done)
		sampled.Wait()
		return peak
	}
}

// A commit that neither succeeds nor fails (another session holds a lock
// on the events table) makes /readyz say 503 once it has waited some
// seconds, though the store still takes the readiness probe's own write:
// a load balancer sends the next requests to another replica instead of
// queueing them behind it (they waited up to the 30 s commit timeout).
// Released, the request it held is answered 200 and /readyz is 200 again.
// (On SQLite a lock another connection holds is the one writer's, which
// any process serving the file would wait on: readiness stays 200 and
// names the wait, TestReadinessOfAnIdleGatewayWhileACallerHoldsTheWriteLock.)
func TestReadinessSaysSoWhenACommitWaits(t *testing.T) {
	pg := testenv.Postgres(t)
	sink := testenv.NewSink(t)
	gw := startGateway(t, strings.Replace(stripeConfig(sink.URL, ""), "sqlite://$DIR/oncehook.db", pg, 1))
	ready := func() int { return readyStatus(t, gw.URL) }
	if s := ready(); s != 200 {
		t.Fatalf("/readyz = %d before", s)
	}
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	held := make(chan int, 1)
	go func() {
		held <- do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent("evt_held"), "")).Status
	}()
	start := time.Now()
	if !testenv.WaitFor(9*time.Second, func() bool { return ready() == http.StatusServiceUnavailable }) {
		t.Fatal("/readyz stayed 200 while a commit waited 9 s for the store")
	}
	if waited := time.Since(start); waited < 4*time.Second {
		t.Fatalf("/readyz said 503 after %s: a commit of a few seconds is not stuck", waited)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if s := <-held; s != 200 {
		t.Fatalf("the held request: %d, want 200 once the lock went", s)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return ready() == 200 }) {
		t.Fatal("/readyz never recovered once the commit went through")
	}
}

// readyStatus is the status /readyz answers at the gateway at url.
func readyStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
