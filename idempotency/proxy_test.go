package idempotency_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store/sqlite"
)

// proxied is an upstream API behind the middleware over a real reverse
// proxy, as the gateway fronts one: upstream's answers go through the
// network twice.
func proxied(t *testing.T, ledger effect.Ledger, opts idempotency.Options, upstream http.Handler) string {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			idempotency.Unanswered(r)
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
		},
		ErrorLog: nil,
	}
	srv := httptest.NewServer(idempotency.New(ledger, opts)(rp))
	t.Cleanup(srv.Close)
	return srv.URL
}

func sqliteLedger(t *testing.T) effect.Ledger {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return effect.New(s, effect.Options{})
}

// slowAPI takes d to answer, and counts the answers it gave.
type slowAPI struct {
	d        time.Duration
	started  atomic.Int32
	finished atomic.Int32
	mu       sync.Mutex
	bodies   []string
}

func (a *slowAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.started.Add(1)
	io.Copy(io.Discard, r.Body)
	time.Sleep(a.d) // not r.Context(): a charge, once sent, is made
	body := fmt.Sprintf(`{"charge":"ch_%d","at":%q}`, n, time.Now().Format(time.RFC3339Nano))
	a.mu.Lock()
	a.bodies = append(a.bodies, body)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, body)
	a.finished.Add(1)
}

type attempt struct {
	status   int
	body     string
	replayed string
	err      error
}

func post(url, key, auth string, timeout time.Duration) attempt {
	req, _ := http.NewRequest("POST", url+"/charges", strings.NewReader(`{"amount":4990}`))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", auth)
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return attempt{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return attempt{status: resp.StatusCode, body: string(b), replayed: resp.Header.Get(idempotency.ReplayedHeader), err: err}
}

// A checkout page times out and retries with the same key, over and over:
// the upstream runs once, whatever the client's timeout (shorter than the
// upstream, about half of it, longer) and however often it retries. While
// it runs a retry gets 409; once its answer is there, every retry gets it
// byte for byte.
func TestClientThatGivesUpChangesNothing(t *testing.T) {
	const upstream = 400 * time.Millisecond
	for _, factor := range []float64{0.1, 0.5, 1.2} {
		for _, retries := range []int{1, 3, 8} {
			t.Run(fmt.Sprintf("timeout%.1fx/retries%d", factor, retries), func(t *testing.T) {
				t.Parallel()
				ledger := sqliteLedger(t)
				a := &slowAPI{d: upstream}
				u := proxied(t, ledger, idempotency.Options{Name: "pay"}, a)
				timeout := time.Duration(factor * float64(upstream))
				var during []attempt
				for i := 0; i <= retries && a.finished.Load() == 0; i++ {
					at := post(u, "order-1", "Bearer shop", timeout)
					during = append(during, at)
					if at.err == nil {
						time.Sleep(timeout) // the page waits, then tries again
					}
				}
				deadline := time.Now().Add(10 * time.Second)
				for a.finished.Load() == 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if a.finished.Load() != 1 {
					t.Fatal("the upstream never answered")
				}
				want := a.bodies[0]
				key := "idem:pay:" + idempotency.AuthorizationClient(authorized("Bearer shop")) + ":order-1"
				for time.Now().Before(deadline) { // the proxy stores what it got
					if rec, err := ledger.Get(context.Background(), key); err == nil && rec.State != "pending" {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				for i, at := range during {
					var ne net.Error
					switch {
					case at.err != nil && errors.As(at.err, &ne) && ne.Timeout():
					case at.err != nil:
						t.Fatalf("attempt %d: %v", i, at.err)
					case at.status == http.StatusConflict && strings.Contains(at.body, "in_progress"):
					case at.status == http.StatusCreated && at.body == want:
					default:
						t.Fatalf("attempt %d while the upstream ran: %d %q (replayed %q)", i, at.status, at.body, at.replayed)
					}
				}
				// Once the answer is there, every retry gets it.
				for i := range retries {
					at := post(u, "order-1", "Bearer shop", 10*time.Second)
					if at.err != nil || at.status != http.StatusCreated || at.body != want || at.replayed != "true" {
						t.Fatalf("retry %d after the answer: %+v; want 201 %q, replayed", i, at, want)
					}
				}
				if n := a.started.Load(); n != 1 {
					t.Fatalf("the upstream ran %d times for one key", n)
				}
				rec, err := ledger.Get(context.Background(), key)
				if err != nil || rec.State != "done" || len(rec.Attempts) != 1 || rec.Attempts[0].Outcome != "done" {
					t.Fatalf("the key's record: %+v, %v; want done after one attempt", rec, err)
				}
			})
		}
	}
}

func authorized(auth string) *http.Request {
	r, _ := http.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", auth)
	return r
}

// What each upstream outcome does to the key: an answer is a result and
// is stored, 5xx included; 429 and 503 say the upstream did not start and
// release it; a broken connection (before the answer, or in the middle of
// its body) leaves it held until the lease runs out, then a retry runs
// again.
func TestUpstreamOutcomes(t *testing.T) {
	const lease = 2 * time.Second
	cases := []struct {
		name    string
		answer  func(w http.ResponseWriter) // nil: break the connection
		partial bool                        // break it after the headers and a part of the body
		want    string                      // stored, released, held
	}{
		{"201", func(w http.ResponseWriter) { w.WriteHeader(201); io.WriteString(w, "made") }, false, "stored"},
		{"400", func(w http.ResponseWriter) { w.WriteHeader(400); io.WriteString(w, "bad card") }, false, "stored"},
		{"500", func(w http.ResponseWriter) { w.WriteHeader(500); io.WriteString(w, "crashed after charging") }, false, "stored"},
		{"502 of its own", func(w http.ResponseWriter) { w.WriteHeader(502); io.WriteString(w, "bank down") }, false, "stored"},
		{"503", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			io.WriteString(w, "not now")
		}, false, "released"},
		{"429", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			io.WriteString(w, "slow down")
		}, false, "released"},
		{"connection broken", nil, false, "held"},
		{"connection broken mid-body", nil, true, "held"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				io.Copy(io.Discard, r.Body)
				if n > 1 {
					w.WriteHeader(201)
					io.WriteString(w, "made on the retry")
					return
				}
				if c.answer != nil {
					c.answer(w)
					return
				}
				if c.partial {
					w.Header().Set("Content-Length", "1000")
					w.WriteHeader(201)
					io.WriteString(w, "part of it")
					w.(http.Flusher).Flush()
				}
				conn, buf, _ := w.(http.Hijacker).Hijack()
				buf.Flush()
				conn.Close()
			})
			u := proxied(t, sqliteLedger(t), idempotency.Options{Name: "pay", Lease: lease}, up)
			first := post(u, "k", "Bearer shop", 5*time.Second)
			second := post(u, "k", "Bearer shop", 5*time.Second)
			switch c.want {
			case "stored":
				if first.err != nil || second.status != first.status || second.body != first.body || second.replayed != "true" || runs.Load() != 1 {
					t.Fatalf("want it stored: first %+v, retry %+v, %d runs", first, second, runs.Load())
				}
			case "released":
				if second.status != 201 || second.body != "made on the retry" || runs.Load() != 2 {
					t.Fatalf("want it released: first %+v, retry %+v, %d runs", first, second, runs.Load())
				}
			case "held":
				if second.status != http.StatusConflict || runs.Load() != 1 {
					t.Fatalf("want it held until the lease: first %+v, retry %+v, %d runs", first, second, runs.Load())
				}
				time.Sleep(lease + 300*time.Millisecond)
				third := post(u, "k", "Bearer shop", 5*time.Second)
				if third.status != 201 || third.body != "made on the retry" || runs.Load() != 2 {
					t.Fatalf("after the lease the retry runs again: %+v, %d runs", third, runs.Load())
				}
			}
		})
	}
}

// Keys are scoped by the credential the upstream knows its clients by,
// whatever its kind; one client never gets another's answer, and one
// credential written three ways is one client.
func TestScopeIsTheClientsCredential(t *testing.T) {
	ledger := sqliteLedger(t)
	var runs atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.WriteHeader(201)
		fmt.Fprintf(w, "answer %d for %s%s%s", n, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.Header.Get("Cookie"))
	})
	u := proxied(t, ledger, idempotency.Options{Name: "pay", Client: idempotency.Credentials([]string{"Authorization", "X-Api-Key"}, []string{"session"})}, up)
	send := func(set func(h http.Header)) attempt {
		req, _ := http.NewRequest("POST", u+"/charges", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "same-key")
		set(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return attempt{status: resp.StatusCode, body: string(b), replayed: resp.Header.Get(idempotency.ReplayedHeader)}
	}
	header := func(name string, values ...string) []func(http.Header) {
		var fs []func(http.Header)
		for _, v := range values {
			fs = append(fs, func(h http.Header) { h.Set(name, v) })
		}
		return fs
	}
	kinds := []struct {
		name string
		// each a client: the first two are two clients; the rest write the
		// first client's credential another way.
		clients []func(http.Header)
	}{
		{"bearer", header("Authorization", "Bearer alice", "Bearer bob", "bearer alice", "Bearer  alice", " BEARER alice ")},
		{"basic", header("Authorization", "Basic YWxpY2U6cHc=", "Basic Ym9iOnB3", "basic YWxpY2U6cHc=")},
		{"x-api-key", header("X-Api-Key", "key-alice", "key-bob", " key-alice")},
		{"session cookie", header("Cookie", "session=s-alice", "session=s-bob", "theme=dark; session=s-alice")},
	}
	for _, k := range kinds {
		before := runs.Load()
		first := send(k.clients[0])
		other := send(k.clients[1])
		if first.status != 201 || other.status != 201 || other.replayed != "" || other.body == first.body {
			t.Fatalf("%s: another client got %+v after %+v; want its own answer", k.name, other, first)
		}
		for i, same := range k.clients[2:] {
			if again := send(same); again.replayed != "true" || again.body != first.body {
				t.Fatalf("%s: the first client's credential written another way (%d) got %+v; want its answer replayed", k.name, i, again)
			}
		}
		if got := runs.Load() - before; got != 2 {
			t.Fatalf("%s: %d runs for two clients", k.name, got)
		}
	}
	// No credential: no client to keep the answer for.
	if none := send(func(http.Header) {}); none.status != 400 || !strings.Contains(none.body, "no_client") {
		t.Fatalf("no credential: %+v; want 400 no_client", none)
	}
	if other := send(func(h http.Header) { h.Set("Cookie", "theme=dark") }); other.status != 400 {
		t.Fatalf("an unrelated cookie is no credential: %+v", other)
	}
	// A single-tenant API needs none: its callers share one scope.
	single := proxied(t, ledger, idempotency.Options{Name: "internal", SingleTenant: true}, up)
	a1 := post(single, "k", "", 5*time.Second)
	a2 := post(single, "k", "Bearer whoever", 5*time.Second)
	if a1.status != 201 || a2.replayed != "true" || a2.body != a1.body {
		t.Fatalf("single tenant: %+v then %+v", a1, a2)
	}
}

// A key is an RFC 8941 string, or a bare token: nothing else passes, and
// a quoted key means what RFC 8941 says it means.
func TestKeyIsAStructuredFieldString(t *testing.T) {
	good := map[string]string{
		`"order-987"`:                          "order-987",
		`order-987`:                            "order-987",
		`8e03978e-40d5-43e8-bc93-6894a57f9324`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`"a b c"`:                              "a b c",
		`"say \"hi\" \\ bye"`:                  `say "hi" \ bye`,
		`  "padded"  `:                         "padded",
		`*tok:en/1`:                            "*tok:en/1",
		`"\x73ame"`:                            "", // refused below
	}
	delete(good, `"\x73ame"`)
	for raw, want := range good {
		if got, err := idempotency.ParseKey([]string{raw}); err != nil || got != want {
			t.Errorf("ParseKey(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	bad := map[string]string{
		`"\x73ame"`:              "backslash",
		`"\n"`:                   "backslash",
		`"tab\	x"`:               "backslash",
		`a b c`:                  "bare key",
		`k"ey`:                   "bare key",
		`"unclosed`:              "closing quote",
		`"k";p=1`:                "follow the closing quote",
		`"k" "j"`:                "follow the closing quote",
		`""`:                     "1 to 255",
		``:                       "1 to 255",
		`"caf` + "\u00e9" + `"`:  "printable ASCII",
		strings.Repeat("k", 256): "1 to 255",
	}
	for raw, want := range bad {
		if got, err := idempotency.ParseKey([]string{raw}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKey(%s) = %q, %v; want an error saying %q", raw, got, err, want)
		}
	}
	if _, err := idempotency.ParseKey([]string{"a", "b"}); err == nil {
		t.Error("two Idempotency-Key headers were accepted")
	}
	// Through the middleware: 400 with the reason, and the upstream not run.
	var runs atomic.Int32
	u := proxied(t, sqliteLedger(t), idempotency.Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) }))
	if at := post(u, `"\x73ame"`, "Bearer a", 5*time.Second); at.status != 400 || !strings.Contains(at.body, "backslash") || runs.Load() != 0 {
		t.Fatalf("a Go escape in a quoted key: %+v", at)
	}
}

// The upstream gets the key as the proxy holds it, whatever spelling the
// client used: bare when it is made of token characters ("ord_q1" and
// ord_q1 both reach it as ord_q1, and the second is the first's replay),
// an RFC 8941 string otherwise; FormatKey's form reads back as the key.
func TestUpstreamGetsTheKeyInOneForm(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	u := proxied(t, sqliteLedger(t), idempotency.Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, strings.Join(r.Header.Values(idempotency.Header), "|"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	for _, c := range []struct{ sent, upstream string }{
		{`"ord_q1"`, "ord_q1"},
		{`ord_q1`, ""}, // a replay: the upstream is not asked again
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{`"order 987"`, `"order 987"`},
		{`"say \"hi\" \\ bye"`, `"say \"hi\" \\ bye"`},
		{`"a,b"`, `"a,b"`},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		at := post(u, c.sent, "Bearer a", 5*time.Second)
		mu.Lock()
		got := seen
		mu.Unlock()
		switch {
		case at.err != nil || at.status != http.StatusCreated:
			t.Errorf("%s: %+v", c.sent, at)
		case c.upstream == "" && (len(got) != 0 || at.replayed != "true"):
			t.Errorf("%s after its quoted spelling: the upstream saw %q, replayed %q; want a replay", c.sent, got, at.replayed)
		case c.upstream != "" && (len(got) != 1 || got[0] != c.upstream):
			t.Errorf("%s: the upstream saw %q, want %q", c.sent, got, c.upstream)
		}
	}
	// Every key ParseKey takes is written so that it reads back as itself.
	for _, key := range []string{"k", "ord_q1", "a b", `"`, `\`, `"quoted"`, " lead", "trail ", "a,b", "x;y=1", "~!#$%&'*+-.^_|:/", strings.Repeat("z", 255)} {
		if back, err := idempotency.ParseKey([]string{idempotency.FormatKey(key)}); err != nil || back != key {
			t.Errorf("FormatKey(%q) = %s reads back as %q, %v", key, idempotency.FormatKey(key), back, err)
		}
	}
}

// An answer over the stored-answer limit streams to the client as the
// upstream sends it, with memory flat, and is not kept: the key is done,
// and a retry gets 422 answer_not_kept instead of running it again.
func TestLargeAnswerStreamsAndIsNotKept(t *testing.T) {
	const size = 32 << 20
	chunk := []byte(strings.Repeat("x", 64<<10))
	firstSeen := make(chan struct{})
	var runs atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(200)
		w.Write(chunk)
		w.(http.Flusher).Flush()
		select { // the client sees the start before the upstream goes on
		case <-firstSeen:
		case <-time.After(5 * time.Second):
		}
		for sent := len(chunk); sent < size; sent += len(chunk) {
			w.Write(chunk)
		}
	})
	u := proxied(t, sqliteLedger(t), idempotency.Options{Name: "export", MaxStored: 256 << 10}, up)
	req, _ := http.NewRequest("POST", u+"/charges", strings.NewReader(`{"amount":4990}`))
	req.Header.Set("Idempotency-Key", "exp-1")
	req.Header.Set("Authorization", "Bearer a")
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.Peek(1); err != nil {
		t.Fatal(err)
	}
	close(firstSeen) // before the upstream's end: streamed, not buffered
	n, err := io.Copy(io.Discard, br)
	resp.Body.Close()
	runtime.ReadMemStats(&m1)
	if err != nil || n != size || resp.StatusCode != 200 {
		t.Fatalf("the large answer: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
	if grew := m1.TotalAlloc - m0.TotalAlloc; grew > size/4 {
		t.Fatalf("a %d-byte answer allocated %d bytes on its way: it was held, not streamed", size, grew)
	}
	t.Logf("a %d MiB answer allocated %.1f MiB on its way (client, proxy and upstream)", size>>20, float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20))
	again := post(u, "exp-1", "Bearer a", 5*time.Second)
	if again.status != http.StatusUnprocessableEntity || !strings.Contains(again.body, "answer_not_kept") || runs.Load() != 1 {
		t.Fatalf("retry of an answer not kept: %+v, %d runs", again, runs.Load())
	}
}

// A ledger that keeps less than the middleware's MaxStored (its
// MaxResult, or a gateway's effects.max_result, set lower) refuses the
// answer: it is then not kept, as one over MaxStored, where the key was
// left held and the request ran again once its lease ran out.
func TestAnswerOverTheLedgersLimitIsNotKeptAndRunsOnce(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var runs atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, strings.Repeat("x", 5000))
	})
	u := proxied(t, effect.New(s, effect.Options{MaxResult: 4096}), idempotency.Options{Lease: time.Second}, up)
	first := post(u, "k-1", "Bearer a", 5*time.Second)
	time.Sleep(1200 * time.Millisecond) // past the first one's lease
	again := post(u, "k-1", "Bearer a", 5*time.Second)
	if first.status != http.StatusCreated || len(first.body) != 5000 || again.status != http.StatusUnprocessableEntity ||
		!strings.Contains(again.body, "answer_not_kept") || runs.Load() != 1 {
		t.Fatalf("first %d (%d bytes), retry %d %.200s; the upstream ran %d times: want 201, then 422 answer_not_kept, once",
			first.status, len(first.body), again.status, again.body, runs.Load())
	}
}

// A lease of a few nanoseconds does not take the server down: its
// renewal ticker panicked in a goroutine of its own.
func TestTinyLeaseDoesNotPanic(t *testing.T) {
	var runs atomic.Int32
	u := proxied(t, sqliteLedger(t), idempotency.Options{Lease: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		time.Sleep(5 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	}))
	if a := post(u, "tiny-1", "Bearer a", 5*time.Second); a.status != http.StatusCreated || runs.Load() != 1 {
		t.Fatalf("with a 2ns lease: %+v, %d runs", a, runs.Load())
	}
}

// A ledger over HTTP out of reach for a moment as the answer is recorded
// (a gateway restarting): the answer is stored once it answers again,
// while the lease lasts, where the key was left held and the retry after
// the lease ran the request again.
func TestAnswerIsStoredAcrossALedgerOutOfReachForAMoment(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ledgerAPI := effect.Handler(effect.New(s, effect.Options{}), nil)
	// The first three completes' connections break before the ledger
	// sees them.
	front, cuts := testenv.CutFirst(t, ledgerAPI, "/complete", 3)
	var runs atomic.Int32
	u := proxied(t, effect.NewClient(front.URL, "t", nil), idempotency.Options{Lease: 3 * time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"charge":1}`)
	}))
	first := post(u, "blip-1", "Bearer a", 10*time.Second)
	time.Sleep(3200 * time.Millisecond) // past the lease
	again := post(u, "blip-1", "Bearer a", 10*time.Second)
	if first.status != http.StatusCreated || again.status != http.StatusCreated || again.replayed != "true" || runs.Load() != 1 || cuts() != 3 {
		t.Fatalf("first %+v, retry %+v, %d runs, %d connections cut: want the answer stored and replayed, once", first, again, runs.Load(), cuts())
	}
}

// An upstream that compresses its answer when the client accepts it (most
// frameworks do) is answered to a retry as it was the first time: the body
// with its Content-Encoding, so the client decodes it again. Go's own
// client asks for gzip on its own and decodes it only when the answer says
// so; without the header the retry got gzip bytes as JSON.
func TestCompressedAnswerIsReplayedWithItsEncoding(t *testing.T) {
	var runs atomic.Int32
	url := proxied(t, sqliteLedger(t), idempotency.Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		body := fmt.Sprintf(`{"charge":"ch_%d"}`, runs.Add(1))
		w.Header().Set("Content-Type", "application/json")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Vary", "Accept-Encoding")
		w.WriteHeader(http.StatusCreated)
		zw := gzip.NewWriter(w)
		io.WriteString(zw, body)
		zw.Close()
	}))
	first := post(url, "order-gz", "Bearer shop", 5*time.Second)
	if first.err != nil || first.status != http.StatusCreated || first.body != `{"charge":"ch_1"}` {
		t.Fatalf("first: %+v", first)
	}
	for i := range 3 {
		retry := post(url, "order-gz", "Bearer shop", 5*time.Second)
		if retry.err != nil || retry.status != http.StatusCreated || retry.replayed != "true" || retry.body != first.body {
			t.Fatalf("retry %d: status %d replayed %q body %q (%v); want the first answer %q", i+1, retry.status, retry.replayed, retry.body, retry.err, first.body)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
}
