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
