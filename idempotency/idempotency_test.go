package idempotency_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/redis"
	"github.com/oncehook/oncehook/store/sqlite"
)

// ledgers are the effects ledger on every backend: SQLite, PostgreSQL,
// and Redis in front of SQLite.
func ledgers(t *testing.T) map[string]effect.Ledger {
	ctx := context.Background()
	open := func(s store.Store, err error) store.Store {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	lite := open(sqlite.Open(ctx, filepath.Join(t.TempDir(), "i.db"), sqlite.Options{}))
	pg := open(postgres.Open(ctx, testenv.Postgres(t), postgres.Options{}))
	var b [6]byte
	rand.Read(b[:])
	hot := open(redis.Open(testenv.Redis(t), open(sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"), sqlite.Options{})),
		redis.Options{Prefix: "oncehook-idem-" + hex.EncodeToString(b[:]) + ":"}))
	return map[string]effect.Ledger{"sqlite": effect.New(lite, effect.Options{}), "postgres": effect.New(pg, effect.Options{}), "redis": effect.New(hot, effect.Options{})}
}

// api is a payments endpoint that counts what it really did.
type api struct {
	runs   atomic.Int32
	status atomic.Int32 // answer with this, once, when set
	block  chan struct{}
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.runs.Add(1)
	if a.block != nil {
		<-a.block
	}
	body, _ := io.ReadAll(r.Body)
	if s := a.status.Swap(0); s != 0 {
		if s == 999 {
			panic("the handler failed")
		}
		w.WriteHeader(int(s))
		fmt.Fprintf(w, `{"error":"try later","run":%d}`, n)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/pay_1")
	w.Header().Set("X-Request-Cost", "ignored")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"pay_1","run":%d,"echo":%q}`, n, body)
}

type answer struct {
	status            int
	body, replayed    string
	location, retryAt string
}

func call(t *testing.T, url, method, key, auth, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, url+"/payments", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed"), resp.Header.Get("Location"), resp.Header.Get("Retry-After")}
}

// The middleware's rules, on every backend.
func TestRules(t *testing.T) {
	for name, ledger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			a := &api{}
			srv := httptest.NewServer(idempotency.New(ledger, idempotency.Options{Name: "payments", RequireKey: true})(a))
			defer srv.Close()
			u := srv.URL
			first := call(t, u, "POST", "k-1", "Bearer alice", `{"amount":100}`)
			if first.status != 201 || first.replayed != "" || !strings.Contains(first.body, `"run":1`) {
				t.Fatalf("first: %+v", first)
			}
			again := call(t, u, "POST", "k-1", "Bearer alice", `{"amount":100}`)
			if again.status != 201 || again.body != first.body || again.replayed != "true" || again.location != "/payments/pay_1" || a.runs.Load() != 1 {
				t.Fatalf("retry: %+v (runs %d); want the stored answer byte for byte", again, a.runs.Load())
			}
			// The draft's structured-field string is the same key.
			if q := call(t, u, "POST", `"k-1"`, "Bearer alice", `{"amount":100}`); q.replayed != "true" || q.body != first.body {
				t.Fatalf("quoted key: %+v", q)
			}
			if other := call(t, u, "POST", "k-1", "Bearer alice", `{"amount":999}`); other.status != 422 || !strings.Contains(other.body, "key_reused") {
				t.Fatalf("same key, another body: %+v", other)
			}
			// Another client's k-1 is another key.
			if bob := call(t, u, "POST", "k-1", "Bearer bob", `{"amount":100}`); bob.status != 201 || bob.replayed != "" || a.runs.Load() != 2 {
				t.Fatalf("another client: %+v", bob)
			}
			if none := call(t, u, "POST", "", "Bearer alice", `{}`); none.status != 400 || !strings.Contains(none.body, "missing_key") {
				t.Fatalf("no key on a route that requires one: %+v", none)
			}
			if get := call(t, u, "GET", "", "", ""); get.status != 201 || a.runs.Load() != 3 {
				t.Fatalf("GET passes through: %+v", get)
			}
			// A 5xx releases the key: the retry runs again, and its answer stays.
			a.status.Store(503)
			if failed := call(t, u, "POST", "k-2", "Bearer alice", `{}`); failed.status != 503 {
				t.Fatalf("503: %+v", failed)
			}
			if retried := call(t, u, "POST", "k-2", "Bearer alice", `{}`); retried.status != 201 || retried.replayed != "" || a.runs.Load() != 5 {
				t.Fatalf("after a 503 the retry runs again: %+v (runs %d)", retried, a.runs.Load())
			}
			// A 4xx is final: the retry gets the same 4xx.
			a.status.Store(409)
			c409 := call(t, u, "POST", "k-3", "Bearer alice", `{}`)
			if again := call(t, u, "POST", "k-3", "Bearer alice", `{}`); again.status != 409 || again.body != c409.body || again.replayed != "true" {
				t.Fatalf("a 4xx is final: %+v then %+v", c409, again)
			}
			// A 500 is the handler's answer: stored, as Stripe does.
			a.status.Store(500)
			c500 := call(t, u, "POST", "k-5", "Bearer alice", `{}`)
			if again := call(t, u, "POST", "k-5", "Bearer alice", `{}`); c500.status != 500 || again.status != 500 || again.body != c500.body || again.replayed != "true" {
				t.Fatalf("a 500 is stored: %+v then %+v", c500, again)
			}
			// A panic is a 500, and nobody knows how far it got: the key
			// stays held until its lease runs out.
			a.status.Store(999)
			if p := call(t, u, "POST", "k-4", "Bearer alice", `{}`); p.status != 500 {
				t.Fatalf("panic: %+v", p)
			}
			if p := call(t, u, "POST", "k-4", "Bearer alice", `{}`); p.status != 409 || p.retryAt == "" {
				t.Fatalf("after a panic the key is held until its lease: %+v", p)
			}
			if bad := call(t, u, "POST", "kä", "Bearer alice", `{}`); bad.status != 400 {
				t.Fatalf("a key that is not printable ASCII: %+v", bad)
			}
		})
	}
}

// 50 clients send one key at once: the handler runs once; every client
// that waited gets its answer, the rest 409 with Retry-After.
func TestOneKeyFromFiftyClientsAtOnce(t *testing.T) {
	for name, ledger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			for _, wait := range []time.Duration{0, 5 * time.Second} {
				a := &api{block: make(chan struct{})}
				srv := httptest.NewServer(idempotency.New(ledger, idempotency.Options{Name: fmt.Sprintf("w%s", wait), Wait: wait})(a))
				var wg sync.WaitGroup
				var returned atomic.Int32
				answers := make([]answer, 50)
				for i := range answers {
					wg.Go(func() {
						answers[i] = call(t, srv.URL, "POST", "same", "Bearer c", `{"amount":1}`)
						returned.Add(1)
					})
				}
				for a.runs.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				if wait == 0 {
					// Every other request is answered (409) while the first runs.
					testenv.WaitFor(10*time.Second, func() bool { return returned.Load() == 49 })
				} else {
					time.Sleep(200 * time.Millisecond) // the others are waiting; a late one gets the stored answer
				}
				close(a.block)
				wg.Wait()
				srv.Close()
				if n := a.runs.Load(); n != 1 {
					t.Fatalf("wait %s: the handler ran %d times", wait, n)
				}
				created, busy := 0, 0
				for _, ans := range answers {
					switch {
					case ans.status == 201 && strings.Contains(ans.body, `"run":1`):
						created++
					case ans.status == 409 && ans.retryAt != "":
						busy++
					default:
						t.Fatalf("wait %s: answer %+v", wait, ans)
					}
				}
				if wait > 0 && created != 50 {
					t.Fatalf("waiting clients: %d got the answer, %d a 409", created, busy)
				}
				if wait == 0 && (created != 1 || busy != 49) {
					t.Fatalf("without waiting: %d answers, %d 409s; want 1 and 49", created, busy)
				}
			}
		})
	}
}

// The ledger down: 503 in the one error shape, and the handler does not
// run (it cannot be made once without the ledger).
func TestLedgerDownAnswers503AndRunsNothing(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "down.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{}
	srv := httptest.NewServer(idempotency.New(effect.New(s, effect.Options{}), idempotency.Options{})(a))
	defer srv.Close()
	s.Close()
	if got := call(t, srv.URL, "POST", "k-1", "Bearer alice", `{}`); got.status != 503 || !strings.Contains(got.body, `"reason":"unavailable"`) || a.runs.Load() != 0 {
		t.Fatalf("ledger down: %+v, handler ran %d times", got, a.runs.Load())
	}
}

// A 409's Retry-After is how long the running request is likely still to
// take, not what is left of its lease (59 s for a 3 s call with the
// default lease of a minute): the first request of an API is given as
// long again as it has run, a later one what a typical request took less
// what it has run, a replica that did not see it start times it from its
// claim in the ledger, and none is told to wait past its lease.
func TestRetryAfterIsHowLongTheRequestIsLikelyToTake(t *testing.T) {
	secs := func(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }
	for name, ledger := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, took := range []time.Duration{1200 * time.Millisecond, 3 * time.Second} {
				up := &gatedHandler{}
				opts := idempotency.Options{Name: fmt.Sprintf("pace%s", took)}
				front := httptest.NewServer(idempotency.New(ledger, opts)(up))
				replica := httptest.NewServer(idempotency.New(ledger, opts)(up))
				// probe sends key, and again about at into its run, to
				// front and to the replica: their Retry-After, and how long
				// the request had run when they were sent and answered.
				// The request is let go once it has run hold.
				probe := func(key string, at, hold time.Duration) (here, there int, sent, answered, ran time.Duration) {
					done := make(chan answer, 1)
					go func() { done <- call(t, front.URL, "POST", key, "Bearer c", `{}`) }()
					start := up.wait(key)
					time.Sleep(at - time.Since(start))
					sent = time.Since(start)
					a := call(t, front.URL, "POST", key, "Bearer c", `{}`)
					b := call(t, replica.URL, "POST", key, "Bearer c", `{}`)
					answered = time.Since(start)
					time.Sleep(hold - time.Since(start))
					ran = up.release(key)
					if first := <-done; first.status != http.StatusCreated {
						t.Fatalf("the first request of %s: %+v", key, first)
					}
					if a.status != http.StatusConflict || b.status != http.StatusConflict {
						t.Fatalf("%s while it runs: %+v and, at the replica, %+v; want 409 twice", key, a, b)
					}
					fmt.Sscan(a.retryAt, &here)
					fmt.Sscan(b.retryAt, &there)
					return here, there, sent, answered, ran
				}
				// The API's first request: as long again as it has run, at
				// least a second, here and at the replica (from its claim).
				here, there, sent, answered, typical := probe("first", took/3, took)
				if lo, hi := secs(sent), secs(answered); here < lo || here > hi || there < lo || there > hi+1 {
					t.Errorf("%s, the first request, %s to %s into it: Retry-After %d here and %d at the replica; want %d to %d", took, sent, answered, here, there, lo, hi)
				}
				// Once one has been answered, what it took less what the
				// running one has run; the replica, which answered none,
				// still says as long again as it has run.
				here, there, sent, answered, _ = probe("second", took/3, took)
				if lo, hi := secs(typical-answered), secs(typical-sent)+1; here < lo || here > hi || there < secs(sent) || there > secs(answered)+1 {
					t.Errorf("%s, typically %s, %s to %s into the second request: Retry-After %d here and %d at the replica; want %d to %d, and %d to %d", took, typical, sent, answered, here, there, lo, hi, secs(sent), secs(answered)+1)
				}
				front.Close()
				replica.Close()
			}
			// A request that runs past what its lease has left: never a
			// wait past the lease (renewed every third of it).
			up := &gatedHandler{}
			srv := httptest.NewServer(idempotency.New(ledger, idempotency.Options{Name: "short-lease", Lease: 2 * time.Second})(up))
			defer srv.Close()
			done := make(chan answer, 1)
			go func() { done <- call(t, srv.URL, "POST", "long", "Bearer c", `{}`) }()
			up.wait("long")
			time.Sleep(4 * time.Second)
			a := call(t, srv.URL, "POST", "long", "Bearer c", `{}`)
			up.release("long")
			<-done
			var got int
			fmt.Sscan(a.retryAt, &got)
			if a.status != http.StatusConflict || got < 1 || got > 2 {
				t.Errorf("4 s into a request under a 2 s lease: %+v; want 409 with Retry-After 1 or 2", a)
			}
		})
	}
}

// gatedHandler answers 201 once the test releases the request of its key.
type gatedHandler struct {
	mu    sync.Mutex
	calls map[string]*gatedCall
}

type gatedCall struct {
	start   time.Time
	started chan struct{}
	release chan struct{}
}

func (h *gatedHandler) call(key string) *gatedCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]*gatedCall{}
	}
	c, ok := h.calls[key]
	if !ok {
		c = &gatedCall{started: make(chan struct{}), release: make(chan struct{})}
		h.calls[key] = c
	}
	return c
}

// wait returns when the request of key started.
func (h *gatedHandler) wait(key string) time.Time {
	c := h.call(key)
	<-c.started
	return c.start
}

// release lets the request of key answer, and says how long it ran.
func (h *gatedHandler) release(key string) time.Duration {
	c := h.call(key)
	close(c.release)
	return time.Since(c.start)
}

func (h *gatedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.call(r.Header.Get(idempotency.Header))
	c.start = time.Now()
	close(c.started)
	<-c.release
	w.WriteHeader(http.StatusCreated)
}
