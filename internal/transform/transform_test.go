package transform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	destURL, _ = url.Parse("https://api.example.com/v1/orders?tenant=7")
	received   = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
)

func stripeRequest(body string) Request {
	return Request{
		URL: destURL,
		Header: http.Header{
			"Idempotency-Key":    {"stripe:evt_1"},
			"X-Oncehook-Source":  {"stripe"},
			"X-Oncehook-Attempt": {"1"},
			"User-Agent":         {"oncehook"},
		},
		ContentType: "application/json",
		Body:        []byte(body),
	}
}

func event(key string) Event {
	return Event{Source: "stripe", Key: key, Type: "checkout.session.completed", Destination: "orders", Attempt: 1, ReceivedAt: received}
}

func mustCompile(t testing.TB, name, src string, o Options) *Script {
	t.Helper()
	s, err := Compile(name, src, o)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	t.Cleanup(s.Close)
	return s
}

// hostileScript is one transformation that behaves for most events and, for the event that asks, does one
// of the things a sandbox must survive: the point is that they share the script, its pool and its runtimes
// with the normal events running beside them.
const hostileScript = `addHandler("transform", (request, context) => {
  const b = request.body;
  switch (b.evil) {
  case "loop":
    for (;;) {}
  case "string":
    let s = "x";
    for (let i = 0; i < 30; i++) s = s + s; // 1 GiB
    b.s = s;
    break;
  case "alloc":
    const a = [];
    for (;;) a.push("y".repeat(4096) + a.length);
  case "recurse":
    const f = (n) => f(n + 1) + 1;
    f(0);
    break;
  case "throw":
    throw new Error("the order has no id");
  case "output":
    request.body = "z".repeat(6 << 20); // 6 MiB, over the 4 MiB output limit
    return request;
  }
  request.body = { order: b.id, total: b.amount / 100 };
  return request;
});
`

// TestHostileEventsFailOnlyThemselves: invariant 21 (bounded, fails only its own event) and 13. Each hostile
// event fails with an error that says which bound and where, while normal events through the same script run
// beside it and all succeed, with a p99 under a stated bound.
func TestHostileEventsFailOnlyThemselves(t *testing.T) {
	// A generous memory limit so that "alloc" is stopped by it and not by the clock.
	// p99Bound is what the normal events keep while a hostile one runs beside them on the 2 cores: a run
	// takes about 0.1 ms alone; the bound leaves room for the hostile run's core being taken, not for a
	// normal run waiting on a hostile one (it is a tenth of the time limit the hostile loop runs into).
	// Under the race detector, on a shared machine (a load of 10 on 2 cores), QuickJS is some 40 times
	// slower: a run's p50 was 9 to 13 ms and its p99 up to 1.1 s. There the time limit is 2 s and the bound
	// is that limit: no normal run waited for the hostile one to end. The cases stopped by another bound
	// (memory, stack, output) run there under a 60 s clock, so that it is their own bound that stops them:
	// recursing until "too deep" took 15 s under the race detector with the machine loaded.
	timeout, p99Bound := 500*time.Millisecond, 50*time.Millisecond
	otherTimeout := timeout
	if raceEnabled {
		timeout, p99Bound, otherTimeout = 2*time.Second, 2*time.Second, time.Minute
	}
	clocked := mustCompile(t, "transforms/orders.js", hostileScript, Options{Timeout: timeout, MaxMemory: 32 << 20})
	bounded := mustCompile(t, "transforms/orders.js", hostileScript, Options{Timeout: otherTimeout, MaxMemory: 32 << 20})
	cases := []struct {
		evil string
		kind Kind
		line int
		want string
	}{
		{"loop", KindTimeout, 0, "took over " + timeout.String()},
		{"string", KindMemory, 0, "memory limit"},
		{"alloc", KindMemory, 0, "allocated over 32 MiB"},
		{"recurse", KindStack, 15, "too deep"},
		{"throw", KindRuntime, 19, "Error: the order has no id"},
		{"output", KindOutput, 0, "over the limit"},
	}
	for _, c := range cases {
		t.Run(c.evil, func(t *testing.T) {
			s := bounded
			if c.kind == KindTimeout {
				s = clocked
			}
			ctx := context.Background()
			stop := make(chan struct{})
			var mu sync.Mutex
			var lat []time.Duration
			var failures []error
			var wg sync.WaitGroup
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						start := time.Now()
						out, err := s.Run(ctx, stripeRequest(fmt.Sprintf(`{"id":"o_%d","amount":4990}`, i)), event("evt_ok"))
						d := time.Since(start)
						mu.Lock()
						lat = append(lat, d)
						if err != nil {
							failures = append(failures, err)
						} else if want := fmt.Sprintf(`{"order":"o_%d","total":49.9}`, i); string(out.Body) != want {
							failures = append(failures, fmt.Errorf("body %s, want %s", out.Body, want))
						}
						mu.Unlock()
					}
				}()
			}
			time.Sleep(20 * time.Millisecond)
			start := time.Now()
			_, err := s.Run(ctx, stripeRequest(`{"id":"o_evil","amount":1,"evil":"`+c.evil+`"}`), event("evt_evil"))
			took := time.Since(start)
			time.Sleep(20 * time.Millisecond)
			// At least ten normal runs, however fast the hostile one was
			// stopped and however slow a loaded machine runs them (CI saw
			// 8 in a hostile run's 8 ms and the 40 ms around it).
			for give := time.Now().Add(30 * time.Second); time.Now().Before(give); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				enough := len(lat) >= 10
				mu.Unlock()
				if enough {
					break
				}
			}
			close(stop)
			wg.Wait()

			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("hostile %s: err %v (%T), want a *transform.Error", c.evil, err, err)
			}
			if raceEnabled && c.evil == "alloc" && se.Kind == KindTimeout {
				// Under the race detector QuickJS is some 40 times slower: the clock stops it first.
				c.kind, c.want = KindTimeout, "took over"
			}
			if se.Kind != c.kind || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "transforms/orders.js") {
				t.Errorf("hostile %s: %q (kind %s), want kind %s mentioning %q, naming the script", c.evil, err, se.Kind, c.kind, c.want)
			}
			if c.line > 0 && se.Line != c.line {
				t.Errorf("hostile %s: line %d, want %d (%v)", c.evil, se.Line, c.line, err)
			}
			if len(failures) > 0 {
				t.Fatalf("%d of %d normal runs beside it failed, first: %v", len(failures), len(lat), failures[0])
			}
			slices.Sort(lat)
			p99 := lat[len(lat)*99/100]
			t.Logf("hostile %s stopped after %s: %v; %d normal runs beside it, p50 %s, p99 %s",
				c.evil, took.Round(time.Millisecond), err, len(lat), lat[len(lat)/2], p99)
			if len(lat) < 10 {
				t.Errorf("only %d normal runs beside it", len(lat))
			}
			if p99 > p99Bound {
				t.Errorf("normal runs' p99 %s beside the hostile one, over %s", p99, p99Bound)
			}
		})
	}
}

// rss is the process's resident memory: QuickJS allocates outside Go's heap, so the Go heap alone would
// not see a runtime's growth.
func rss(t testing.TB) uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	var size, res uint64
	fmt.Sscan(string(b), &size, &res)
	return res * uint64(os.Getpagesize())
}

// TestMemoryStaysBoundedOverAThousandAllocatingRuns: invariant 21. A script that builds 4 MiB of strings per
// event, 1,000 times (and every tenth time runs past its 16 MiB limit), leaves the process's memory under a
// stated bound: what a run allocated is freed with it, and a runtime that went past its limit is closed.
// Under the race detector QuickJS runs some 40 times slower, so there the runs build 256 KiB and every
// fiftieth goes past a 2 MiB limit: the same 1,000 runs, smaller.
func TestMemoryStaysBoundedOverAThousandAllocatingRuns(t *testing.T) {
	limit, normal, over, every, wantFailed := int64(16<<20), 4<<10, 64<<10, 10, 100
	if raceEnabled {
		limit, normal, over, every, wantFailed = 2<<20, 128, 4<<10, 50, 20
	}
	s := mustCompile(t, "alloc.js", `addHandler("transform", (request) => {
  const parts = [];
  const n = request.body.n;
  for (let i = 0; i < n; i++) parts.push("p".repeat(1024) + i);
  request.body = { count: parts.length, last: parts[parts.length - 1].length };
  return request;
});`, Options{MaxMemory: limit, Timeout: 5 * time.Second})
	runtime.GC()
	before := rss(t)
	var ms runtime.MemStats
	peak, peakHeap := before, uint64(0)
	failed := 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				n := normal // KiB of strings (twice as many as QuickJS allocates them)
				if i%every == 0 {
					n = over // over the limit
				}
				_, err := s.Run(context.Background(), stripeRequest(fmt.Sprintf(`{"n":%d}`, n)), event("k"))
				r := rss(t)
				runtime.ReadMemStats(&ms)
				mu.Lock()
				if err != nil {
					var se *Error
					if !errors.As(err, &se) || se.Kind != KindMemory {
						t.Errorf("run %d: %v", i, err)
					}
					failed++
				}
				peak = max(peak, r)
				peakHeap = max(peakHeap, ms.HeapAlloc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	grew := int64(peak-before) >> 20
	t.Logf("1,000 runs (%d past the limit): resident memory grew by at most %d MiB, Go heap peaked at %d MiB", failed, grew, peakHeap>>20)
	if failed != wantFailed {
		t.Errorf("%d runs failed on the memory limit, want %d", failed, wantFailed)
	}
	// Bound: two runtimes at their 16 MiB limit at once, plus what their allocator keeps, plus slack for the
	// race detector's shadow memory.
	if grew > 160 {
		t.Errorf("resident memory grew by %d MiB over 1,000 runs, want at most 160", grew)
	}
}

// TestSameEventSameBytes: invariant 21. The same event through the same script gives byte-identical output
// on every run, on a second compiled copy (another replica's pool) and on a fresh runtime, even when the
// script reads the clock and randomness and tries to keep state between events.
func TestSameEventSameBytes(t *testing.T) {
	const src = `let calls = 0;
addHandler("transform", (request, context) => {
  calls++;
  globalThis.seen = (globalThis.seen || 0) + 1;
  try { Array.prototype.extra = 1 } catch (e) {}
  try { __oncehook_run = null } catch (e) {}
  try { __oncehook_factory = null } catch (e) {}
  try { Math.random = () => 0; Date.now = () => 1 } catch (e) {}
  const hidden = typeof globalThis.hidden, proto = typeof globalThis.viaProto;
  try { Object.defineProperty(globalThis, "hidden", { value: 1, configurable: true }) } catch (e) {}
  try { Object.setPrototypeOf(globalThis, { viaProto: 1 }) } catch (e) {}
  try { globalThis.__proto__ = { viaProto: 1 } } catch (e) {}
  try { JSON = { stringify: () => "{}" } } catch (e) {}
  request.body = {
    ...request.body,
    calls, seen: globalThis.seen, extra: [].extra ?? null, hidden, proto,
    now: Date.now(), iso: new Date().toISOString(), r: [Math.random(), Math.random()],
    received: context.received_at, key: context.key, attempt: context.attempt,
    noFetch: typeof fetch, noRequire: typeof require, noTimers: typeof setTimeout,
  };
  return request;
});`
	a := mustCompile(t, "det.js", src, Options{})
	b := mustCompile(t, "det.js", src, Options{Concurrency: 1})
	req := stripeRequest(`{"id":"evt_1","amount":4990}`)
	var first *Output
	var want string
	for i := 0; i < 20; i++ {
		s := a
		if i%2 == 1 {
			s = b
		}
		out, err := s.Run(context.Background(), req, event("evt_1"))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first, want = out, out.Digest()
			continue
		}
		if got := out.Digest(); got != want {
			t.Fatalf("run %d: digest %s, want %s\n got %s\nwant %s", i, got, want, out.Body, first.Body)
		}
	}
	body := string(first.Body)
	for _, w := range []string{`"calls":1`, `"seen":1`, `"extra":null`, `"now":` + fmt.Sprint(received.UnixMilli()),
		`"iso":"2026-12-02T03:00:00.000Z"`, `"hidden":"undefined"`, `"proto":"undefined"`, `"noFetch":"undefined"`, `"noRequire":"undefined"`, `"noTimers":"undefined"`} {
		if !strings.Contains(body, w) {
			t.Errorf("body %s lacks %s", body, w)
		}
	}
	// A third attempt (another X-Oncehook-Attempt, as the worker sends it) sends the same bytes.
	third := stripeRequest(`{"id":"evt_1","amount":4990}`)
	third.Header.Set("X-Oncehook-Attempt", "3")
	if out, err := a.Run(context.Background(), third, event("evt_1")); err != nil || out.Digest() != want {
		t.Errorf("attempt 3: digest %s (%v), want %s", out.Digest(), err, want)
	}
	// Another key: another random sequence (seeded from the key), the same clock.
	other, err := a.Run(context.Background(), req, event("evt_2"))
	if err != nil {
		t.Fatal(err)
	}
	if other.Digest() == want {
		t.Errorf("another key gave the same bytes: Math.random is not seeded from the key")
	}
}

// svixRedirect is Svix's example transformation, run twice below: to a URL
// on the destination's host, and to another host.
const svixRedirect = `function handler(webhook) {
  if (webhook.payload.customUrl) {
    webhook.url = webhook.payload.customUrl;
  }
  return webhook;
}`

// TestCompatibleWithHookdeckAndSvixExamples runs the examples of Hookdeck's and Svix's transformation docs
// unchanged: what they do is what oncehook sends, or the error says why oncehook does not do it.
func TestCompatibleWithHookdeckAndSvixExamples(t *testing.T) {
	cases := []struct {
		name, cite, src, body string
		check                 func(t *testing.T, o *Output, err error)
	}{
		{
			name: "Hookdeck: add a header",
			cite: "https://hookdeck.com/docs/transformations (the overview's first example)",
			src: `addHandler('transform', (request, context) => {
  request.headers['example-header'] = 'Hello World';
  return request;
});`,
			body: `{"type":"order.created"}`,
			check: func(t *testing.T, o *Output, err error) {
				if err != nil || o.Header.Get("Example-Header") != "Hello World" || string(o.Body) != `{"type":"order.created"}` {
					t.Errorf("%+v %v", o, err)
				}
				if o.Header.Get("Idempotency-Key") != "stripe:evt_1" {
					t.Errorf("Idempotency-Key lost: %v", o.Header)
				}
			},
		},
		{
			name: "Hookdeck: the event type as a header",
			cite: "https://hookdeck.com/docs/transformations (Add a transformation via the API, add-event-type-header)",
			src:  `addHandler("transform", (request, context) => { request.headers["x-event-type"] = request.body.type; return request; });`,
			body: `{"type":"order.created"}`,
			check: func(t *testing.T, o *Output, err error) {
				if err != nil || o.Header.Get("X-Event-Type") != "order.created" {
					t.Errorf("%+v %v", o, err)
				}
			},
		},
		{
			name: "Svix: redirect to a URL in the payload, same host",
			cite: "https://docs.svix.com/ingest/transformations (An example Transformation)",
			src:  svixRedirect,
			body: `{"customUrl":"https://api.example.com/v2/special?x=1"}`,
			check: func(t *testing.T, o *Output, err error) {
				if err != nil || o.Path != "/v2/special" || o.Query.Get("x") != "1" {
					t.Errorf("%+v %v", o, err)
				}
			},
		},
		{
			name: "Svix: the same example to another host says why not",
			cite: "https://docs.svix.com/ingest/transformations (An example Transformation)",
			src:  svixRedirect,
			body: `{"customUrl":"https://elsewhere.example.net/hook"}`,
			check: func(t *testing.T, o *Output, err error) {
				if err == nil || !strings.Contains(err.Error(), "not its scheme or host") {
					t.Errorf("err %v, want one that says a transformation cannot change the host", err)
				}
			},
		},
		{
			name: "Svix: cancel",
			cite: "https://docs.svix.com/ingest/transformations (cancel, a boolean which controls whether or not to cancel the dispatch)",
			src: `function handler(webhook) {
  if (webhook.eventType === "checkout.session.completed") {
    webhook.cancel = true;
  }
  return webhook;
}`,
			body: `{}`,
			check: func(t *testing.T, o *Output, err error) {
				if err != nil || !o.Skip {
					t.Errorf("%+v %v, want skipped", o, err)
				}
			},
		},
		{
			name: "Svix: headers set over the endpoint's, payload reshaped",
			cite: "https://docs.svix.com/ingest/transformations (headers ... take precedence over endpoint headers)",
			src: `function handler(webhook) {
  webhook.headers = { "x-custom": "1" };
  webhook.payload = { kind: webhook.eventType, data: webhook.payload };
  return webhook;
}`,
			body: `{"a":1}`,
			check: func(t *testing.T, o *Output, err error) {
				if err != nil || o.Header.Get("X-Custom") != "1" || o.Header.Get("User-Agent") != "oncehook" ||
					string(o.Body) != `{"kind":"checkout.session.completed","data":{"a":1}}` {
					t.Errorf("%+v body %s %v", o, o.Body, err)
				}
			},
		},
		{
			name: "Hooklistener/Hookdeck: return null to drop the webhook",
			cite: "https://docs.hooklistener.com/transformation-examples (2. Filter Webhooks by Event Type; Hookdeck-compatible addHandler)",
			src: `addHandler('transform', async (request, context) => {
const allowedEvents = ['user.created', 'user.updated', 'payment.succeeded'];
if (!request.body.event_type || !allowedEvents.includes(request.body.event_type)) {
console.log(` + "`Filtering out event: ${request.body.event_type}`" + `);
return null;
}
return request;
});`,
			body: `{"event_type":"user.deleted"}`,
			check: func(t *testing.T, o *Output, err error) {
				// An async handler returns a promise, which Hookdeck does not support either ("does not
				// support promises and async/await"): the error says so.
				if err == nil || !strings.Contains(err.Error(), "promise") {
					t.Errorf("%+v %v, want an error about the promise", o, err)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustCompile(t, "example.js", c.src, Options{})
			o, err := s.Run(context.Background(), stripeRequest(c.body), event("evt_1"))
			c.check(t, o, err)
		})
	}
}

// TestReservedHeadersAreNotSent: invariant 8 (the key travels end to end), and what a transport reads as
// its own. A script's value for a reserved header is dropped, and said so, and the event goes on with the
// request's own value: a script that sets one sets it for every event, and refusing would dead-letter
// every event of its destination.
func TestReservedHeadersAreNotSent(t *testing.T) {
	nats := func(canonical string) string {
		if strings.HasPrefix(canonical, "Nats-") {
			return "JetStream's"
		}
		return ""
	}
	for _, c := range []struct {
		set, canonical string
		transport      func(string) string
		why            string
	}{
		{"Idempotency-Key", "Idempotency-Key", nil, "the key the destination dedupes on"},
		{"webhook-signature", "Webhook-Signature", nil, "it signs what is sent"},
		{"Transfer-Encoding", "Transfer-Encoding", nil, "hop-by-hop"},
		{"Host", "Host", nil, "set from the URL"},
		{"Content-Length", "Content-Length", nil, "set from the URL and the body"},
		{"X-Oncehook-Attempt", "X-Oncehook-Attempt", nil, "oncehook's own"},
		{"x-oncehook-delivery-id", "X-Oncehook-Delivery-Id", nil, "oncehook's own"},
		{"connection", "Connection", nil, "hop-by-hop"},
		{"nats-rollup", "Nats-Rollup", nats, "JetStream's"},
		{"Nats-Expected-Stream", "Nats-Expected-Stream", nats, "JetStream's"},
		{"Nats-Msg-Id", "Nats-Msg-Id", nats, "JetStream's"},
		// Nor under the name a server that reads _ as - would take for one.
		{"Idempotency_Key", "Idempotency_key", nil, "reads _ as - would take it for Idempotency-Key"},
		{"X_Oncehook_Source", "X_oncehook_source", nil, "reads _ as - would take it for X-Oncehook-Source"},
		{"Nats_Rollup", "Nats_rollup", nats, "reads _ as - would take it for Nats-Rollup"},
	} {
		s := mustCompile(t, "h.js", `addHandler("transform", (r) => { r.headers["`+c.set+`"] = "forged"; r.headers["x-kept"] = "yes"; return r; });`, Options{Transport: c.transport})
		o, err := s.Run(context.Background(), stripeRequest(`{}`), event("k"))
		if err != nil {
			t.Errorf("%s: %v, want the event sent without it", c.set, err)
			continue
		}
		if len(o.Dropped) != 1 || o.Dropped[0].Header != c.canonical || !strings.Contains(o.Dropped[0].Why, c.why) {
			t.Errorf("%s: dropped %+v, want %s (%s)", c.set, o.Dropped, c.canonical, c.why)
		}
		for k, v := range o.Header {
			if slices.Contains(v, "forged") {
				t.Errorf("%s: sent as %s: %q", c.set, k, v)
			}
		}
		if o.Header.Get("Idempotency-Key") != "stripe:evt_1" || o.Header.Get("X-Kept") != "yes" {
			t.Errorf("%s: headers %v, want the request's Idempotency-Key and the script's X-Kept", c.set, o.Header)
		}
	}
	// The same name where the transport reserves nothing is the message's.
	s := mustCompile(t, "h.js", `addHandler("transform", (r) => { r.headers["nats-rollup"] = "sub"; return r; });`, Options{})
	if o, err := s.Run(context.Background(), stripeRequest(`{}`), event("k")); err != nil || o.Header.Get("Nats-Rollup") != "sub" || len(o.Dropped) != 0 {
		t.Errorf("Nats-Rollup to HTTP: %+v, %v", o, err)
	}
	// Handing a reserved header back as it came drops nothing.
	s = mustCompile(t, "h.js", `addHandler("transform", (r) => { r.headers["idempotency-key"] = r.headers["idempotency-key"]; return r; });`, Options{})
	if o, err := s.Run(context.Background(), stripeRequest(`{}`), event("k")); err != nil || len(o.Dropped) != 0 {
		t.Errorf("Idempotency-Key handed back: %+v, %v", o, err)
	}
	// Replacing every header keeps the reserved ones (Hookdeck), and so does a Svix script's headers.
	for _, src := range []string{
		`addHandler("transform", (r) => { r.headers = { "x-only": "1" }; return r; });`,
		`function handler(w) { w.headers = { "x-only": "1", "Idempotency-Key": "forged" }; return w; }`,
	} {
		s := mustCompile(t, "h.js", src, Options{})
		o, err := s.Run(context.Background(), stripeRequest(`{}`), event("k"))
		if err != nil {
			t.Fatal(err)
		}
		if o.Header.Get("Idempotency-Key") != "stripe:evt_1" || o.Header.Get("X-Only") != "1" {
			t.Errorf("%s: headers %v", src, o.Header)
		}
	}
}

// TestSyntaxAndRuntimeErrorsNameFileAndLine: the operator reads where the script failed.
func TestSyntaxAndRuntimeErrorsNameFileAndLine(t *testing.T) {
	_, err := Compile("transforms/capi.js", "addHandler('transform', (r) => {\n  const x = ;\n});", Options{})
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindSyntax || se.Line != 2 || !strings.HasPrefix(err.Error(), "transforms/capi.js:2:") {
		t.Errorf("syntax error: %v", err)
	}
	s := mustCompile(t, "transforms/capi.js", "addHandler('transform', (r) => {\n  return {\n    body: r.body.missing.field,\n  };\n});", Options{})
	_, err = s.Run(context.Background(), stripeRequest(`{}`), event("k"))
	if !errors.As(err, &se) || se.Line != 3 || !strings.HasPrefix(err.Error(), "transforms/capi.js:3:") || !strings.Contains(err.Error(), "TypeError") {
		t.Errorf("runtime error: %v", err)
	}
	// A script that leaves a brace open ends inside the wrapper oncehook adds after it: the error names the
	// script's last line and says so, never a line past the end of the file.
	_, err = Compile("open.js", "addHandler('transform', (r) => {\n  return r;\n", Options{})
	if !errors.As(err, &se) || se.Kind != KindSyntax || se.Line != 3 || !strings.HasPrefix(err.Error(), "open.js:3: SyntaxError: ") ||
		!strings.Contains(err.Error(), "at the end of the script") {
		t.Errorf("unclosed brace: %v", err)
	}
	_, err = Compile("empty.js", "const x = 1;", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s = mustCompile(t, "empty.js", "const x = 1;", Options{})
	_, err = s.Run(context.Background(), stripeRequest(`{}`), event("k"))
	if err == nil || !strings.Contains(err.Error(), "defines no transformation") {
		t.Errorf("no handler: %v", err)
	}
}

// TestBodyShapes: a JSON body is parsed, anything else is a string; an unchanged body is sent as it came
// (no re-encoding of its numbers), a string body keeps its content type, an object body is JSON.
func TestBodyShapes(t *testing.T) {
	pass := mustCompile(t, "p.js", `addHandler("transform", (r) => { r.headers["x-kind"] = typeof r.body; return r; });`, Options{})
	raw := `{"id": 12345678901234567890, "n": 1.0}`
	o, err := pass.Run(context.Background(), stripeRequest(raw), event("k"))
	if err != nil || string(o.Body) != raw || o.Header.Get("X-Kind") != "object" || o.ContentType != "application/json" {
		t.Errorf("unchanged JSON body: %+v %s %v", o, o.Body, err)
	}
	form := Request{URL: destURL, ContentType: "application/x-www-form-urlencoded", Body: []byte("a=1&b=%FF")}
	o, err = pass.Run(context.Background(), form, event("k"))
	if err != nil || string(o.Body) != "a=1&b=%FF" || o.Header.Get("X-Kind") != "string" || o.ContentType != "application/x-www-form-urlencoded" {
		t.Errorf("form body: %+v %s %v", o, o.Body, err)
	}
	toJSON := mustCompile(t, "j.js", `addHandler("transform", (r) => { r.body = Object.fromEntries(new URLSearchParams(r.body)); return r; });`, Options{})
	if _, err := toJSON.Run(context.Background(), Request{URL: destURL, ContentType: "text/plain", Body: []byte("a=1")}, event("k")); err == nil {
		// URLSearchParams is not ECMAScript: QuickJS has none, and says so.
		t.Log("URLSearchParams exists")
	}
	// A form turned into JSON is sent as JSON, though the script handed request.headers (with the form's
	// content-type) back; a content-type the script sets is the one sent.
	formToJSON := mustCompile(t, "f.js", `addHandler("transform", (r) => ({ ...r, body: { raw: r.body } }))`, Options{})
	o, err = formToJSON.Run(context.Background(), form, event("k"))
	if err != nil || o.ContentType != "application/json" || string(o.Body) != `{"raw":"a=1&b=%FF"}` {
		t.Errorf("form to JSON: %q %s %v", o.ContentType, o.Body, err)
	}
	setCT := mustCompile(t, "c.js", `addHandler("transform", (r) => { r.headers["content-type"] = "application/cloudevents+json"; r.body = {a: 1}; return r; })`, Options{})
	o, err = setCT.Run(context.Background(), form, event("k"))
	if err != nil || o.ContentType != "application/cloudevents+json" {
		t.Errorf("a content type the script sets: %q %v", o.ContentType, err)
	}
	q := mustCompile(t, "q.js", `addHandler("transform", (r) => { r.path = "/v2" + r.path; r.query = "tenant=8&x=a%20b"; return r; });`, Options{})
	o, err = q.Run(context.Background(), stripeRequest(`{}`), event("k"))
	if err != nil || o.Path != "/v2/v1/orders" || o.Query.Get("tenant") != "8" || o.Query.Get("x") != "a b" {
		t.Errorf("path/query: %+v %v", o, err)
	}
}

func BenchmarkRun(b *testing.B) {
	s := mustCompile(b, "bench.js", `addHandler("transform", (request, context) => {
  const o = request.body.data.object;
  request.body = { event_name: "Purchase", event_id: o.id ?? request.body.id, value: o.amount_total / 100, currency: o.currency?.toUpperCase(), tags: { ...o.metadata } };
  return request;
});`, Options{})
	req := stripeRequest(`{"id":"evt_1","data":{"object":{"id":"cs_1","amount_total":4990,"currency":"brl","metadata":{"a":"1","b":"2"}}}}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Run(context.Background(), req, event("evt_1")); err != nil {
				b.Fatal(err)
			}
		}
	})
}
