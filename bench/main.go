// Command bench measures oncehook on this machine against a bare net/http
// server in the same run, so figures are ratios, not absolute numbers that
// mean nothing on another machine.
//
//	go run ./bench                 # all scenarios, 5s each, 64 connections
//	go run ./bench -duration 10s -conns 64
//
// Scenarios:
//  1. ceiling:     a bare net/http server reading the same signed 1 KiB body
//  2. unique:      oncehook accepting unique Stripe-signed 1 KiB events, SQLite synchronous=FULL
//  3. duplicates:  oncehook answering the same event again and again
//  4. latency:     POST → delivery at a light fixed rate (-rate per second)
//  5. delivery:    deliveries per second from the store to a local sink
//  6. postgres:    unique events on PostgreSQL, one gateway
//  7. postgres2:   unique events on PostgreSQL, two gateways (replicas) on one database
//  8. redis:       duplicates answered by Redis in front of PostgreSQL
//
// The load generator runs in this process, on the same cores as the server.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

const secret = "whsec_bench_secret"

var pgBase, redisBase string

// freshSchema makes an empty schema on the server at base and returns a URL
// that uses it, and a func that drops it.
func freshSchema(base string) (string, func(), error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("oncehook_bench_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		if c, err := pgx.Connect(ctx, base); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	}, nil
}

func main() {
	duration := flag.Duration("duration", 5*time.Second, "how long each throughput scenario runs")
	conns := flag.Int("conns", 64, "concurrent connections for the throughput scenarios")
	rate := flag.Int("rate", 20, "requests per second for the latency scenario")
	deliveries := flag.Int("deliveries", 20000, "events delivered in the delivery scenario")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	only := flag.String("only", "", "run only these scenarios, comma-separated: unique,duplicates,latency,delivery,postgres,postgres2,redis (the ceiling always runs)")
	flag.StringVar(&pgBase, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for the postgres scenarios (a fresh schema is made and dropped)")
	flag.StringVar(&redisBase, "redis", "redis://127.0.0.1:6379/0", "Redis for the redis scenario")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	want := func(string) bool { return true }
	if *only != "" {
		set := map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			set[strings.TrimSpace(s)] = true
		}
		want = func(s string) bool { return set[s] }
	}
	if err := run(*duration, *conns, *rate, *deliveries, want); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

type result struct {
	name      string
	requests  int
	errors    int
	elapsed   time.Duration
	latencies []time.Duration
}

func (r result) rate() float64 { return float64(r.requests) / r.elapsed.Seconds() }

func (r result) pct(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	slices.Sort(r.latencies)
	return r.latencies[min(len(r.latencies)-1, int(float64(len(r.latencies))*p))]
}

func run(duration time.Duration, conns, rate, deliveries int, want func(string) bool) error {
	dir, err := os.MkdirTemp("", "oncehook-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stripe, _ := provider.New("stripe", provider.Options{Secrets: []string{secret}})
	pad := strings.Repeat("x", 1024-len(`{"id":"evt_00000000000000","object":"event","type":"bench","pad":""}`))
	body := func(id int) []byte {
		return []byte(fmt.Sprintf(`{"id":"evt_%014d","object":"event","type":"bench","pad":"%s"}`, id, pad))
	}
	var seq atomic.Int64
	unique := func(url string) *http.Request {
		b := body(int(seq.Add(1)))
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
		provider.SignHTTP(stripe, req, b, secret, time.Now(), "")
		return req
	}
	same := func(url string) *http.Request {
		b := body(0)
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
		provider.SignHTTP(stripe, req, b, secret, time.Now(), "")
		return req
	}
	fmt.Printf("oncehook bench: %d connections, %s per scenario, 1 KiB Stripe-signed bodies, GOMAXPROCS=%d\n\n",
		conns, duration, runtime.GOMAXPROCS(0))

	var throughput []result

	// 1. The ceiling. Always run: every other figure is a ratio to it.
	ceilURL, stopCeil, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"accepted"}` + "\n"))
	}))
	if err != nil {
		return err
	}
	ceiling := load("ceiling: bare net/http", conns, duration, func() *http.Request { return unique(ceilURL + "/in/bench") })
	throughput = append(throughput, ceiling)
	stopCeil()

	// 2 and 3. Intake on SQLite FULL, no destination: intake alone.
	if want("unique") || want("duplicates") {
		gwURL, stopGW, _, err := gateway("sqlite://"+filepath.Join(dir, "intake.db"), "", "", 0)
		if err != nil {
			return err
		}
		if want("unique") {
			throughput = append(throughput, load("oncehook: unique events (SQLite FULL)", conns, duration, func() *http.Request { return unique(gwURL + "/in/bench") }))
			fmt.Fprintf(os.Stderr, "  mean group-commit batch: %.1f events\n", meanBatch(gwURL))
		}
		if want("duplicates") {
			throughput = append(throughput, load("oncehook: duplicates", conns, duration, func() *http.Request { return same(gwURL + "/in/bench") }))
		}
		stopGW()
	}

	// 6-8. PostgreSQL: one gateway, two gateways (replicas) on the same
	// database, and duplicates answered by Redis (the in-memory set off, so
	// Redis is what is measured).
	if want("postgres") || want("postgres2") || want("redis") {
		pgURL, dropSchema, err := freshSchema(pgBase)
		if err != nil {
			return fmt.Errorf("postgres scenarios need %s: %w", pgBase, err)
		}
		defer dropSchema()
		if want("postgres") {
			gwURL, stopGW, _, err := gateway(pgURL, "", "", 0)
			if err != nil {
				return err
			}
			throughput = append(throughput, load("oncehook: unique events (PostgreSQL, 1 replica)", conns, duration, func() *http.Request { return unique(gwURL + "/in/bench") }))
			fmt.Fprintf(os.Stderr, "  mean group-commit batch: %.1f events\n", meanBatch(gwURL))
			stopGW()
		}
		if want("postgres2") {
			a, stopA, _, err := gateway(pgURL, "", "", 0)
			if err != nil {
				return err
			}
			b, stopB, _, err := gateway(pgURL, "", "", 0)
			if err != nil {
				return err
			}
			var turn atomic.Int64
			throughput = append(throughput, load("oncehook: unique events (PostgreSQL, 2 replicas)", conns, duration, func() *http.Request {
				if turn.Add(1)%2 == 0 {
					return unique(a + "/in/bench")
				}
				return unique(b + "/in/bench")
			}))
			stopA()
			stopB()
		}
		if want("redis") {
			gwURL, stopGW, _, err := gateway(pgURL, redisBase, "", -1)
			if err != nil {
				return err
			}
			throughput = append(throughput, load("oncehook: duplicates via Redis (PostgreSQL behind)", conns, duration, func() *http.Request { return same(gwURL + "/in/bench") }))
			stopGW()
		}
	}

	// 4. POST → delivery at a light fixed rate.
	var arrivals sync.Map // Idempotency-Key → time
	sinkURL, stopSink, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		arrivals.Store(r.Header.Get("Idempotency-Key"), time.Now())
	}))
	if err != nil {
		return err
	}
	defer stopSink()
	var lat, del *result
	if want("latency") {
		gwURL, stopGW, _, err := gateway("sqlite://"+filepath.Join(dir, "latency.db"), "", sinkURL, 0)
		if err != nil {
			return err
		}
		r := latency(gwURL+"/in/bench", rate, duration, func(id int) (*http.Request, string) {
			b := body(id)
			req, _ := http.NewRequest(http.MethodPost, gwURL+"/in/bench", bytes.NewReader(b))
			provider.SignHTTP(stripe, req, b, secret, time.Now(), "")
			return req, fmt.Sprintf("bench:evt_%014d", id)
		}, &arrivals)
		lat = &r
		stopGW()
	}

	// 5. Delivery throughput: events already stored, a worker drains them.
	if want("delivery") {
		var received atomic.Int64
		countURL, stopCount, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			received.Add(1)
		}))
		if err != nil {
			return err
		}
		defer stopCount()
		r, err := deliveryThroughput(filepath.Join(dir, "delivery.db"), countURL, deliveries, conns, &received)
		if err != nil {
			return err
		}
		del = &r
	}

	fmt.Printf("| scenario | requests/s | p50 | p99 | vs ceiling | errors |\n|---|---|---|---|---|---|\n")
	for _, r := range throughput {
		fmt.Printf("| %s | %.0f | %s | %s | %.0f%% | %d |\n", r.name, r.rate(), r.pct(0.50).Round(10*time.Microsecond),
			r.pct(0.99).Round(10*time.Microsecond), 100*r.rate()/ceiling.rate(), r.errors)
	}
	if lat != nil {
		fmt.Printf("| %s | %d/s offered | %s | %s | | %d |\n", lat.name, rate, lat.pct(0.50).Round(10*time.Microsecond), lat.pct(0.99).Round(10*time.Microsecond), lat.errors)
	}
	if del != nil {
		fmt.Printf("| %s | %.0f deliveries/s | | | | %d |\n", del.name, del.rate(), del.errors)
	}
	return nil
}

func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func gateway(storeURL, redisURL, sinkURL string, hotKeys int) (string, func(), *oncehook.Gateway, error) {
	dests, destList := "", "[]"
	if sinkURL != "" {
		dests = fmt.Sprintf("destinations:\n  - name: sink\n    url: %s\n    timeout: 5s\n", sinkURL)
		destList = "[sink]"
	}
	if redisURL != "" {
		dests = "redis: " + redisURL + "\n" + dests
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`store: %q
sources:
  - name: bench
    preset: stripe
    secrets: [%q]
    destinations: %s
%s`, storeURL, secret, destList, dests)), os.LookupEnv)
	if err != nil {
		return "", nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err := oncehook.New(ctx, cfg, oncehook.Options{HotKeys: hotKeys})
	if err != nil {
		cancel()
		return "", nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return "", nil, nil, err
	}
	done := make(chan struct{})
	go func() { gw.Serve(ctx, ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, gw, nil
}

func client(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, DisableCompression: true}}
}

// load runs conns closed loops for d and records each request's latency.
func load(name string, conns int, d time.Duration, next func() *http.Request) result {
	c := client(conns)
	// Warm up connections so the first second does not measure dialing.
	var warm sync.WaitGroup
	for range conns {
		warm.Add(1)
		go func() { defer warm.Done(); send(c, next()) }()
	}
	warm.Wait()
	var mu sync.Mutex
	res := result{name: name}
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lats := make([]time.Duration, 0, 4096)
			errs := 0
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if !send(c, next()) {
					errs++
					continue
				}
				lats = append(lats, time.Since(t0))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lats...)
			res.errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.requests = len(res.latencies)
	c.CloseIdleConnections()
	fmt.Fprintf(os.Stderr, "%s: %.0f req/s\n", name, res.rate())
	return res
}

func send(c *http.Client, req *http.Request) bool {
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// latency sends rate requests per second for d and measures, for each
// event, the time from the start of its POST to its arrival at the sink.
func latency(url string, rate int, d time.Duration, next func(id int) (*http.Request, string), arrivals *sync.Map) result {
	c := client(4)
	res := result{name: "POST → delivery"}
	type sent struct {
		key string
		at  time.Time
	}
	var mu sync.Mutex
	var all []sent
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for id := 1; time.Now().Before(deadline); id++ {
		<-tick.C
		req, key := next(1_000_000_000 + id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ok := send(c, req)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				res.errors++
				return
			}
			all = append(all, sent{key, t0})
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	for _, s := range all {
		if at, ok := arrivals.Load(s.key); ok {
			res.latencies = append(res.latencies, at.(time.Time).Sub(s.at))
		} else {
			res.errors++
		}
	}
	res.requests = len(res.latencies)
	res.elapsed = d
	fmt.Fprintf(os.Stderr, "%s: p50 %s\n", res.name, res.pct(0.5))
	return res
}

// deliveryThroughput stores n events, then times a worker delivering them all.
func deliveryThroughput(dbPath, sinkURL string, n, concurrency int, received *atomic.Int64) (result, error) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	now := time.Now()
	for i := 0; i < n; i += 256 {
		batch := make([]store.NewEvent, 0, 256)
		for j := i; j < min(n, i+256); j++ {
			batch = append(batch, store.NewEvent{Source: "bench", Key: fmt.Sprintf("evt_%d", j), ContentType: "application/json",
				Body: []byte(`{"id":"x"}`), ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"sink"}})
		}
		if _, err := st.ClaimEvents(ctx, batch); err != nil {
			return result{}, err
		}
	}
	w := deliver.New(st, deliver.Options{Concurrency: concurrency, Lease: time.Minute, Destinations: []deliver.Destination{{
		Name: "sink", URL: sinkURL, Timeout: 5 * time.Second, Retry: deliver.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second},
	}}})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() { w.Run(runCtx); close(done) }()
	// Watch the sink, not the store: counting rows while the worker runs
	// would take CPU from what is measured. Then wait for the outcomes to be
	// recorded, which is part of delivering.
	for received.Load() < int64(n) {
		time.Sleep(time.Millisecond)
	}
	for {
		s, err := st.Stats(ctx)
		if err != nil {
			cancel()
			return result{}, err
		}
		if s.Delivered+s.Dead >= int64(n) {
			res := result{name: "delivery to a local sink", requests: int(s.Delivered), errors: int(s.Dead), elapsed: time.Since(start)}
			cancel()
			<-done
			fmt.Fprintf(os.Stderr, "%s: %.0f/s\n", res.name, res.rate())
			return res, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// meanBatch reads the gateway's commit batch histogram from /metrics.
func meanBatch(url string) float64 {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	var sum, count float64
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, "oncehook_commit_batch_events_sum "); ok {
			fmt.Sscan(v, &sum)
		}
		if v, ok := strings.CutPrefix(line, "oncehook_commit_batch_events_count "); ok {
			fmt.Sscan(v, &count)
		}
	}
	if count == 0 {
		return 0
	}
	return sum / count
}
