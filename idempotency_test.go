package oncehook_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store"
)

// The user's own API behind the binary's Idempotency-Key proxy: 50
// clients retrying one POST at once reach the upstream once and all get
// its answer; another client's same key is its own; a second API on a
// listener of its own works the same.
func TestIdempotencyProxyInFrontOfAnAPI(t *testing.T) {
	var charges atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		time.Sleep(100 * time.Millisecond) // a payment provider takes its time
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d,"path":%q,"key":%q,"body":%q}`, n, r.URL.Path, r.Header.Get("Idempotency-Key"), body)
	}))
	defer upstream.Close()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
apis:
  - {name: payments, prefix: /payments, upstream: `+upstream.URL+`, idempotency: {require_key: true, wait: 5s}}
  - {name: orders, listen: "127.0.0.1:0", upstream: `+upstream.URL+`}
`)
	post := func(base, key, auth string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, base, strings.NewReader(`{"amount":4990}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
	}
	var wg sync.WaitGroup
	bodies := make([]string, 50)
	replayed := atomic.Int32{}
	for i := range bodies {
		wg.Go(func() {
			code, body, rep := post(gw.URL+"/payments/charges", "order-987", "Bearer shop")
			if code != 201 {
				t.Errorf("answer %d %s", code, body)
			}
			if rep == "true" {
				replayed.Add(1)
			}
			bodies[i] = body
		})
	}
	wg.Wait()
	if n := charges.Load(); n != 1 {
		t.Fatalf("the upstream charged %d times for one key", n)
	}
	for _, b := range bodies {
		if b != bodies[0] || !strings.Contains(b, `"path":"/payments/charges"`) || !strings.Contains(b, `"key":"order-987"`) {
			t.Fatalf("answers differ or lost the path or key: %q vs %q", b, bodies[0])
		}
	}
	if code, _, _ := post(gw.URL+"/payments/charges", "order-987", "Bearer other-shop"); code != 201 || charges.Load() != 2 {
		t.Fatalf("another client's key: %d, %d charges", code, charges.Load())
	}
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/payments/charges", strings.NewReader(`{}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Fatalf("no key on a route that requires one: %v %v", resp, err)
	}
	var addr string
	testenv.WaitFor(2*time.Second, func() bool { addr = gw.UpstreamAddr("orders"); return addr != "" })
	for range 2 {
		if code, _, _ := post("http://"+addr+"/orders", "o-1", "Bearer shop"); code != 201 {
			t.Fatalf("orders API: %d", code)
		}
	}
	if n := charges.Load(); n != 3 {
		t.Fatalf("%d upstream calls after the orders API's retry, want 3", n)
	}
	// The rollups count the answers per API and hour: 52 new, 50 replayed
	// (49 of the storm and the orders API's retry).
	if !testenv.WaitFor(5*time.Second, func() bool {
		rows, _ := gw.Store().Rollups(context.Background(), store.RollupQuery{Scope: store.ScopeAPI, From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
		got := map[string]int64{}
		for _, r := range rows {
			got[r.Name+" "+r.Metric] += r.Value
		}
		return got["payments answers.new"] == 2 && got["payments answers.replayed"] == 49 && got["orders answers.new"] == 1 && got["orders answers.replayed"] == 1
	}) {
		rows, _ := gw.Store().Rollups(context.Background(), store.RollupQuery{Scope: store.ScopeAPI, From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
		t.Fatalf("answers in the rollups: %+v", rows)
	}
	// The dashboard's effects page lists the stored answers, by API.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if resp, err := browser.Get(gw.APIURL + gw.DashboardLoginLink(gw.APIToken, time.Minute)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("login: %v %v", resp, err)
	}
	resp, err := browser.Get(gw.APIURL + "/ui/effects")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `id="api-answers"`) || !strings.Contains(string(page), "order-987") || !strings.Contains(string(page), "<td>201</td>") {
		t.Fatalf("the effects page does not list the API's answers:\n%.2000s", page)
	}
	t.Logf("%d of 50 concurrent retries were served from the ledger", replayed.Load())
}

// The upstream down: 502 in the one error shape. One that could not be
// reached never got the request: the key is released, and the retry once
// it is back runs. One whose connection broke may have acted: the key is
// held until its lease (409 meanwhile), then the retry runs. The log
// names the API once.
func TestIdempotencyProxyWhenTheUpstreamIsDown(t *testing.T) {
	var up atomic.Bool
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close() // the connection dies: no answer at all
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"ok":true}`)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens yet
	logs := &testenv.Buffer{}
	gw := oncehooktest.StartWith(t, `
store: sqlite://$DIR/oncehook.db
apis: [{name: payments, prefix: /payments, upstream: http://`+addr+`, idempotency: {lease: 3s}}]
`, oncehook.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	post := func(key string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/payments", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", "Bearer shop")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
	}
	if code, body, _ := post("k-down"); code != http.StatusBadGateway || !strings.Contains(body, "upstream_unavailable") {
		t.Fatalf("upstream not listening: %d %s", code, body)
	}
	if l := logs.String(); strings.Count(l, "upstream=payments") != 1 || !strings.Contains(l, "could not be reached") {
		t.Fatalf("the log line: want upstream=payments once:\n%s", l)
	}
	upstream.Listener.Close()
	upstream.Listener, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	upstream.Start()
	defer upstream.Close()
	// The connection breaks: the key is held until its lease.
	if code, body, _ := post("k-broken"); code != http.StatusBadGateway || !strings.Contains(body, "upstream_unavailable") {
		t.Fatalf("upstream's connection broken: %d %s", code, body)
	}
	if code, body, _ := post("k-broken"); code != http.StatusConflict {
		t.Fatalf("a broken connection's key within its lease: %d %s; want 409", code, body)
	}
	up.Store(true)
	if code, body, rep := post("k-down"); code != 201 || rep != "" {
		t.Fatalf("after the upstream is back: %d %s (replayed %q): a request it never got must not hold its key", code, body, rep)
	}
	if code, _, rep := post("k-down"); code != 201 || rep != "true" {
		t.Fatalf("the retry of the kept answer: %d replayed %q", code, rep)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { code, _, _ := post("k-broken"); return code == 201 }) {
		t.Fatal("after its lease the broken connection's key never ran again")
	}
}

// Bodies on a proxy prefix are held within intake's in-flight budget: the
// APIs get half of it, and a body past that waits, then gets 503 with
// Retry-After, instead of adding to memory.
func TestIdempotencyProxyBodiesKeepTheBudget(t *testing.T) {
	release := make(chan struct{})
	var holding atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "held-") {
			holding.Add(1)
		}
		<-release
		w.WriteHeader(http.StatusCreated)
	}))
	defer upstream.Close()
	defer close(release)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
max_body_size: 256KiB
max_inflight_bytes: 1MiB
apis: [{name: payments, prefix: /payments, upstream: `+upstream.URL+`}]
`)
	post := func(key string, size int) (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/payments", bytes.NewReader(make([]byte, size)))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", "Bearer shop")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error(), ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
	}
	// Two bodies of 256 KiB fill the APIs' half; they wait on the upstream.
	for i := range 2 {
		go post(fmt.Sprintf("held-%d", i), 256<<10)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return holding.Load() == 2 }) {
		t.Fatal("the two bodies never reached the upstream")
	}
	for i, size := range []int{1, 64 << 10, 256 << 10} {
		if code, body, retry := post(fmt.Sprintf("one-more-%d", i), size); code != http.StatusServiceUnavailable || !strings.Contains(body, "overloaded") || retry == "" {
			t.Fatalf("a %d-byte body past the APIs' share of the budget: %d %s; want 503 overloaded with Retry-After", size, code, body)
		}
	}
}

// Found from outside: Go's transport resends a request that has no body
// and carries an Idempotency-Key when the kept-alive connection it reused
// breaks, taking the header's word that a repeat is harmless; the proxy
// dropped the empty body, so a bodiless POST (a /capture) reached the
// upstream twice while the client got one answer. The upstream here
// answers each connection's first request, and reads a later one and
// hangs up; every method that can act must reach it once.
func TestABodilessRequestIsNeverResentByTheTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	seen := map[string]int{} // method and path → requests read
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					mu.Lock()
					seen[req.Method+" "+req.URL.Path]++
					mu.Unlock()
					if n > 0 && !strings.HasSuffix(req.URL.Path, "/ok") {
						return // read, maybe acted on, and the connection dies
					}
					io.WriteString(conn, "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
apis: [{name: pay, prefix: /pay, upstream: http://`+ln.Addr().String()+`, idempotency: {methods: [POST, PUT, PATCH, DELETE], lease: 3s}}]
`)
	for i, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, body := range []string{"", `{"amount":1}`} {
			send := func(path, key string) int {
				req, _ := http.NewRequest(method, gw.URL+path, strings.NewReader(body))
				req.Header.Set("Idempotency-Key", key)
				req.Header.Set("Authorization", "Bearer shop")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			key := fmt.Sprintf("k%d-%d", i, len(body))
			if code := send("/pay/ok", key+"-warm"); code != 201 { // opens the connection the next one reuses
				t.Fatalf("%s warm-up: %d", method, code)
			}
			path := "/pay/capture" + key
			code := send(path, key)
			mu.Lock()
			n := seen[method+" "+path]
			mu.Unlock()
			if n != 1 {
				t.Errorf("%s with body %q: the upstream read it %d times (the client got %d); want once", method, body, n, code)
			}
			if code != http.StatusBadGateway {
				t.Errorf("%s with body %q: %d, want 502 (the upstream may have acted: the key is held)", method, body, code)
			}
		}
	}
}

// A prefix is the part of the API a config puts on intake's listener, which
// faces the internet: a path whose dot segments, spelt encoded (%2e%2e,
// ..%2f, ..%5c) so that neither the mux nor the proxy resolves them, would
// leave it on an upstream that decodes and resolves them (nginx and Apache
// do) and reach what the prefix keeps out. Such a path is refused (400) and
// never forwarded; other paths under the prefix, encoded or not, are.
func TestIdempotencyProxyKeepsRequestsUnderItsPrefix(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.URL.RequestURI())
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer upstream.Close()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
upstreams: [{name: payments, prefix: /payments, upstream: `+upstream.URL+`}]
`)
	host := strings.TrimPrefix(gw.URL, "http://")
	send := func(target string) int {
		t.Helper()
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer shop\r\nIdempotency-Key: k-%d\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", target, host, time.Now().UnixNano())
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, target := range []string{
		"/payments/%2e%2e/internal/users",
		"/payments/%2E%2E/internal/users",
		"/payments/..%2finternal/users",
		"/payments/.%2e/internal/users",
		"/payments/x/..%5c..%5cinternal/users",
		"/payments/%2e/charges",
	} {
		if code := send(target); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", target, code)
		}
	}
	for _, target := range []string{"/payments/charges", "/payments/a%2fb", "/payments/..charges", "/payments/charges?next=../../x"} {
		if code := send(target); code != http.StatusCreated {
			t.Errorf("%s: %d, want 201 from the upstream", target, code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 4 || slices.ContainsFunc(reached, func(p string) bool { return strings.Contains(strings.ToLower(p), "internal") }) {
		t.Fatalf("the upstream was sent %q", reached)
	}
}
