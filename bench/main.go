// Command bench measures oncehook on this machine against a bare net/http
// server in the same run, so figures are ratios, not absolute numbers that
// mean nothing on another machine.
//
//	go run ./bench                 # all scenarios, 5s each, 64 connections
//	go run ./bench -duration 10s -conns 64
//
// Baselines (always run; every figure is a ratio to one of them):
//   - ceiling: a bare net/http server reading the same signed 1 KiB body
//   - relay:   a bare net/http handler that forwards each body to the same
//     local sink (keep-alive) and answers once the sink has: two HTTP
//     exchanges per event, like a gateway that delivers, with no
//     verification, no store and no durability
//
// Scenarios:
//   - dest:       the headline: unique Stripe-signed 1 KiB events into a
//     source with one destination, delivery running to a local sink,
//     SQLite synchronous=FULL; the delivery backlog left at the end is
//     reported
//   - randomkeys: the headline with sequential and with random event ids,
//     alternating twice (real providers' ids are random)
//   - unique:     the same with no destination (intake alone)
//   - duplicates: the same event again and again
//   - latency:    POST → delivery at a light fixed rate (-rate per second),
//     measured at the sink from the moment the request was sent
//   - delivery:   deliveries per second from a backlog in the store
//   - stored:     the headline with -stored events already in the store
//   - sweep:      the headline while -stored expired events are swept
//   - pgsweep:    the same on PostgreSQL, against sweeping nothing
//   - postgres:   the headline on PostgreSQL, one gateway
//   - postgres2:  the same with two gateways (replicas) on one database
//   - pgnodest:   unique events on PostgreSQL with no destination
//   - redis:      duplicates answered by Redis in front of PostgreSQL
//   - effects:    the effects ledger: claim→complete pairs per second over
//     HTTP and in process, and 64 concurrent claims of one hot key (SQLite)
//   - effectspg:  the same on PostgreSQL
//   - rollups:    the headline with the hourly rollups on and off,
//     alternating over 3 rounds: what they cost intake
//   - operator:   the dashboard's overview and events list and the admin
//     API's reads, one at a time, with -stored events in the store
//   - search:     a search by content (events ?where=) over -stored events
//     of 1 KiB: the default bound, every event, a time window (SQLite);
//     then a bulk delivery of every one to a destination against the bulk
//     replay of those deliveries
//   - pgsearch:   the same on PostgreSQL
//   - tracing:    the headline with OpenTelemetry tracing off and on (every
//     request and attempt sampled, the batches dropped), alternating twice
//   - manyobjects: the headline on a gateway with one source against one
//     with -many sources and destinations (a tenth of the destinations
//     transforming), in turn, twice: intake to one source, memory per
//     object, and the time one change through the API takes
//   - pgmanyobjects: a change through one replica's API until another
//     serves it, on PostgreSQL, with 2 and with -many sources and
//     destinations
//   - order:      the headline with order per entity (Stripe's default:
//     data.object.id, created) off, stale and fifo, over 10,000 entities
//     and over one hot entity; the drain time is the delivery cost
//
// The load generator runs in this process, on the same cores as the server.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/kinds"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
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
	stored := flag.Int("stored", 1_000_000, "events already in the store for the stored and sweep scenarios")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the scenarios (not the baselines) here; the cpu scenario's children write theirs beside it, with .relay and .gateway added, and what they allocated with .relay.allocs and .gateway.allocs")
	only := flag.String("only", "", "run only these scenarios, comma-separated: dest,randomkeys,unique,filters,duplicates,latency,delivery,stored,sweep,retention,cpu,postgres,postgres2,pgnodest,pgstored,pgsweep,redis,effects,effectspg,rollups,operator,search,pgsearch,order,tracing,transform,manyobjects,pgmanyobjects (the baselines always run)")
	many := flag.Int("many", 10_000, "sources and destinations of the manyobjects scenario's large gateway")
	flag.StringVar(&pgBase, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for the postgres scenarios (a fresh schema is made and dropped)")
	flag.StringVar(&redisBase, "redis", "redis://127.0.0.1:6379/0", "Redis for the redis scenario")
	child := flag.String("child", "", "internal: serve as the cpu scenario's child process (relay or gateway), then exit when stdin closes")
	childSink := flag.String("child-sink", "", "internal: the child's destination")
	childStore := flag.String("child-store", "", "internal: the gateway child's store")
	childProfile := flag.String("child-profile", "", "internal: the child's CPU profile, written when its stdin closes")
	flag.Parse()
	if *child != "" {
		if err := serveChild(*child, *childSink, *childStore, *childProfile); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	want := func(string) bool { return true }
	if *only != "" {
		set := map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			set[strings.TrimSpace(s)] = true
		}
		want = func(s string) bool { return set[s] }
	}
	b := &bench{duration: *duration, conns: *conns, rate: *rate, deliveries: *deliveries, stored: *stored, profile: *cpuProfile, many: *many}
	if err := b.run(want); err != nil {
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
	note      string // the backlog left, the events swept, ...
}

func (r result) rate() float64 { return float64(r.requests) / r.elapsed.Seconds() }

func (r result) pct(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	slices.Sort(r.latencies)
	return r.latencies[min(len(r.latencies)-1, int(float64(len(r.latencies))*p))]
}

type bench struct {
	duration                              time.Duration
	conns, rate, deliveries, stored, many int
	// notes are measurements that are not a rate (the disk body_retention
	// saves), printed after the table.
	notes          []string
	dir            string
	stripe         provider.Preset
	seq            atomic.Int64
	ceiling, relay result
	rows           []result
	profile        string
}

// body is a 1 KiB Stripe event with id.
// Its object (data.object.id, the entity a source ordered by entity reads)
// is object, and created (the version) is id.
func body(id, object int64) []byte {
	head := fmt.Sprintf(`{"id":"evt_%014d","object":"event","type":"bench","created":%d,"data":{"object":{"id":"obj_%014d"}},"pad":"`, id, id, object)
	return []byte(head + strings.Repeat("x", max(1024-len(head)-2, 0)) + `"}`)
}

// randomBody is body(id, id) with a random-looking event id, as GitHub's
// GUIDs and WhatsApp's ids are: each a bijection of id, so still unique.
func randomBody(id int64) []byte {
	k := uint64(id) * 0x9E3779B97F4A7C15 // odd: a bijection of uint64
	k ^= k >> 29
	head := fmt.Sprintf(`{"id":"evt_%016x","object":"event","type":"bench","created":%d,"data":{"object":{"id":"obj_%014d"}},"pad":"`, k, id, id)
	return []byte(head + strings.Repeat("x", max(1024-len(head)-2, 0)) + `"}`)
}

func (b *bench) signed(url string, id int64) *http.Request {
	return b.signedAbout(url, id, id)
}

// signedAbout is event id about object.
func (b *bench) signedAbout(url string, id, object int64) *http.Request {
	body := body(id, object)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	provider.SignHTTP(b.stripe, req, body, secret, time.Now(), "")
	return req
}

func (b *bench) unique(url string) func() *http.Request {
	return func() *http.Request { return b.signed(url, b.seq.Add(1)) }
}

// uniqueRandom is unique events with random-looking ids (randomBody).
func (b *bench) uniqueRandom(url string) func() *http.Request {
	return func() *http.Request {
		body := randomBody(b.seq.Add(1))
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		provider.SignHTTP(b.stripe, req, body, secret, time.Now(), "")
		return req
	}
}

// uniqueAbout is unique events about objects objects (0: each its own).
func (b *bench) uniqueAbout(url string, objects int64) func() *http.Request {
	if objects == 0 {
		return b.unique(url)
	}
	return func() *http.Request {
		id := b.seq.Add(1)
		return b.signedAbout(url, id, id%objects)
	}
}

// sink is a local destination that counts what it receives.
type sink struct {
	url      string
	stop     func()
	received atomic.Int64
	arrivals sync.Map // Idempotency-Key → time, when recording
	record   bool
}

func newSink() (*sink, error) {
	k := &sink{}
	url, stop, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if k.record {
			k.arrivals.Store(r.Header.Get("Idempotency-Key"), time.Now())
		}
		k.received.Add(1)
	}))
	k.url, k.stop = url, stop
	return k, err
}

func (b *bench) run(want func(string) bool) error {
	dir, err := os.MkdirTemp("", "oncehook-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b.dir = dir
	b.stripe, _ = provider.New("stripe", provider.Options{Secrets: []string{secret}})
	fmt.Printf("oncehook bench: %d connections, %s per scenario, 1 KiB Stripe-signed bodies, GOMAXPROCS=%d\n\n",
		b.conns, b.duration, runtime.GOMAXPROCS(0))

	// Baseline 1, the ceiling: a bare server reading the body.
	ceilURL, stopCeil, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"accepted"}` + "\n"))
	}))
	if err != nil {
		return err
	}
	b.ceiling = load("ceiling: bare net/http", b.conns, b.duration, b.unique(ceilURL+"/in/bench"))
	stopCeil()

	// Baseline 2, the relay: forwards each body to a local sink and answers
	// when the sink has.
	relaySink, err := newSink()
	if err != nil {
		return err
	}
	defer relaySink.stop()
	out := client(b.conns)
	relayURL, stopRelay, err := serve(relayHandler(out, relaySink.url))
	if err != nil {
		return err
	}
	b.relay = load("relay: bare net/http forwarding to the sink", b.conns, b.duration, b.unique(relayURL+"/in/bench"))
	stopRelay()

	// The prefills run before the profile starts: a profile of the stored
	// scenarios is theirs, not the prefill's INSERTs.
	storedPath, sweepPath := filepath.Join(dir, "stored.db"), filepath.Join(dir, "sweep.db")
	var storedNote, sweepNote string
	if want("stored") {
		if err := prefill(storedPath, b.stored, time.Hour*24*365); err != nil {
			return err
		}
		storedNote = prefilled
	}
	if want("sweep") {
		if err := prefill(sweepPath, b.stored, -time.Hour); err != nil {
			return err
		}
		sweepNote = prefilled
	}
	if b.profile != "" {
		f, err := os.Create(b.profile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	if want("dest") {
		r, err := b.withDestination("oncehook: unique events, one destination (SQLite FULL)", "sqlite://"+filepath.Join(dir, "dest.db"), gwOptions{})
		if err != nil {
			return err
		}
		b.rows = append(b.rows, r)
	}
	if want("randomkeys") {
		// Sequential ids flatter the store: each commit's keys share one
		// index leaf. Real ids (GitHub's GUIDs, WhatsApp's) are random:
		// the headline with both, alternating, each on a fresh file.
		for round := range 2 {
			for _, random := range []bool{false, true} {
				name := fmt.Sprintf("oncehook: the headline, %s event ids (round %d)", map[bool]string{false: "sequential", true: "random"}[random], round+1)
				r, err := b.withDestination(name, "sqlite://"+filepath.Join(dir, fmt.Sprintf("keys-%v-%d.db", random, round)), gwOptions{randomKeys: random})
				if err != nil {
					return err
				}
				b.rows = append(b.rows, r)
			}
		}
	}
	if want("tracing") {
		for round := range 2 {
			for _, traced := range []bool{false, true} {
				name := fmt.Sprintf("oncehook: the headline, tracing %s (round %d)", map[bool]string{false: "off", true: "on, 100% sampled"}[traced], round+1)
				r, err := b.withDestination(name, "sqlite://"+filepath.Join(dir, fmt.Sprintf("traced-%v-%d.db", traced, round)), gwOptions{traced: traced})
				if err != nil {
					return err
				}
				b.rows = append(b.rows, r)
			}
		}
	}
	if want("transform") {
		// The headline with a transforming destination, against the same
		// destination without one, in the same run, twice in turn.
		for round := range 2 {
			for _, script := range []string{"", benchTransform} {
				name := fmt.Sprintf("oncehook: the headline, %s (round %d)", map[bool]string{true: "no transformation", false: "the destination transforms (QuickJS)"}[script == ""], round+1)
				r, err := b.withDestination(name, "sqlite://"+filepath.Join(dir, fmt.Sprintf("transform-%v-%d.db", script != "", round)), gwOptions{transform: script})
				if err != nil {
					return err
				}
				b.rows = append(b.rows, r)
			}
		}
	}
	if want("order") {
		for _, c := range []struct {
			mode     string
			entities int64
		}{{"", 10_000}, {"stale", 10_000}, {"fifo", 10_000}, {"stale", 1}, {"fifo", 1}} {
			mode := c.mode
			if mode == "" {
				mode = "off"
			}
			name := fmt.Sprintf("oncehook: the headline, order %s, %d entities", mode, c.entities)
			r, err := b.withDestination(name, "sqlite://"+filepath.Join(dir, fmt.Sprintf("order-%s-%d.db", mode, c.entities)),
				gwOptions{order: c.mode, entities: c.entities})
			if err != nil {
				return err
			}
			b.rows = append(b.rows, r)
		}
	}
	if want("unique") || want("duplicates") {
		gw, err := startGateway("sqlite://"+filepath.Join(dir, "intake.db"), "", "", gwOptions{})
		if err != nil {
			return err
		}
		if want("unique") {
			r := load("oncehook: unique events, no destination (SQLite FULL)", b.conns, b.duration, b.unique(gw.url+"/in/bench"))
			r.note = fmt.Sprintf("batch %.1f", meanBatch(gw.url))
			b.rows = append(b.rows, r)
		}
		if want("duplicates") {
			same := func() *http.Request { return b.signed(gw.url+"/in/bench", 0) }
			b.rows = append(b.rows, load("oncehook: duplicates of one event", b.conns, b.duration, same))
		}
		gw.stop()
	}
	if want("filters") {
		gw, err := startGateway("sqlite://"+filepath.Join(dir, "filters.db"), "", "", gwOptions{routed: 10})
		if err != nil {
			return err
		}
		r := load("oncehook: unique events, 10 destinations whose filters pass (SQLite FULL)", b.conns, b.duration, b.unique(gw.url+"/in/bench"))
		r.note = "every event stored as filtered"
		b.rows = append(b.rows, r)
		gw.stop()
	}
	if want("stored") {
		path := storedPath
		r, err := b.withDestination(fmt.Sprintf("oncehook: the headline, %d events already stored", b.stored), "sqlite://"+path, gwOptions{})
		if err != nil {
			return err
		}
		r.note += "; " + storedNote
		b.rows = append(b.rows, r)
		os.Remove(path) // gigabytes at 10 million
		os.Remove(path + "-wal")
	}
	if want("cpu") {
		n, err := b.cpu(dir)
		if err != nil {
			return err
		}
		b.notes = append(b.notes, n)
	}
	if want("retention") {
		n, err := retention(filepath.Join(dir, "retention"), 200_000)
		if err != nil {
			return err
		}
		b.notes = append(b.notes, n)
	}
	if want("sweep") {
		path := sweepPath
		r, err := b.withDestination(fmt.Sprintf("oncehook: the headline while %d expired events are swept", b.stored), "sqlite://"+path,
			gwOptions{sweep: 50 * time.Millisecond})
		if err != nil {
			return err
		}
		left, err := countEvents(path)
		if err != nil {
			return err
		}
		r.note += fmt.Sprintf("; swept %d of %d during the run; %s", int64(b.stored)-(left-int64(r.requests)), b.stored, sweepNote)
		b.rows = append(b.rows, r)
	}
	if want("postgres") || want("postgres2") || want("pgnodest") || want("pgstored") || want("pgsweep") || want("redis") {
		if err := b.postgres(want); err != nil {
			return err
		}
	}
	// The scenarios that only add rows, in the order they are printed.
	one := func(scenario func() (result, error)) func() ([]result, error) {
		return func() ([]result, error) {
			r, err := scenario()
			return []result{r}, err
		}
	}
	for _, s := range []struct {
		name string
		run  func() ([]result, error)
	}{
		{"effects", func() ([]result, error) {
			return b.effects("SQLite FULL", "sqlite://"+filepath.Join(dir, "effects.db"))
		}},
		{"effectspg", b.effectsPostgres},
		{"rollups", b.rollups},
		{"operator", b.operatorPages},
		{"search", b.searchSQLite},
		{"manyobjects", b.manyObjectsScenario},
		{"pgmanyobjects", b.manyReplicasScenario},
		{"pgsearch", b.searchPostgres},
		{"latency", one(b.latency)},
		{"delivery", one(b.deliveryThroughput)},
	} {
		if !want(s.name) {
			continue
		}
		rows, err := s.run()
		if err != nil {
			return err
		}
		b.rows = append(b.rows, rows...)
	}
	b.print()
	return nil
}

// effectsPostgres is the effects scenario on a fresh PostgreSQL schema.
func (b *bench) effectsPostgres() ([]result, error) {
	pgURL, dropSchema, err := freshSchema(pgBase)
	if err != nil {
		return nil, fmt.Errorf("the effectspg scenario needs %s: %w", pgBase, err)
	}
	defer dropSchema()
	return b.effects("PostgreSQL", pgURL)
}

func (b *bench) print() {
	fmt.Printf("| scenario | requests/s | p50 | p99 | vs ceiling | vs relay | errors | notes |\n|---|---|---|---|---|---|---|---|\n")
	row := func(r result) {
		if r.elapsed == 0 {
			fmt.Printf("| %s | | %s | %s | | | %d | %s |\n", r.name, r.pct(0.50).Round(10*time.Microsecond), r.pct(0.99).Round(10*time.Microsecond), r.errors, r.note)
			return
		}
		fmt.Printf("| %s | %.0f | %s | %s | %.0f%% | %.0f%% | %d | %s |\n", r.name, r.rate(), r.pct(0.50).Round(10*time.Microsecond),
			r.pct(0.99).Round(10*time.Microsecond), 100*r.rate()/b.ceiling.rate(), 100*r.rate()/b.relay.rate(), r.errors, r.note)
	}
	row(b.ceiling)
	row(b.relay)
	for _, r := range b.rows {
		row(r)
	}
	for _, n := range b.notes {
		fmt.Println("\n" + n)
	}
}

// withDestination runs unique intake into a source that delivers to a
// local sink, and reports the delivery backlog left when the load stops
// (events accepted and not yet delivered), then how long it took to drain.
func (b *bench) withDestination(name, storeURL string, o gwOptions) (result, error) {
	k, err := newSink()
	if err != nil {
		return result{}, err
	}
	defer k.stop()
	gw, err := startGateway(storeURL, "", k.url, o)
	if err != nil {
		return result{}, err
	}
	defer gw.stop()
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	started := fmt.Sprintf("; ready in %s, heap %.0f MiB after start", gw.ready.Round(time.Millisecond), float64(mem.HeapInuse)/(1<<20))
	warm := k.received.Load()
	next := b.uniqueAbout(gw.url+"/in/bench", o.entities)
	if o.randomKeys {
		next = b.uniqueRandom(gw.url + "/in/bench")
	}
	r := load(name, b.conns, b.duration, next)
	// Accepted so far: the warm-up plus the measured requests.
	accepted := int64(r.requests) + int64(b.conns)
	backlog := accepted - (k.received.Load() - warm)
	start := time.Now()
	settled := func() bool { return k.received.Load()-warm >= accepted }
	if o.order != "" {
		// Stale events are never delivered: wait for the store to settle.
		settled = func() bool {
			st, err := gw.gw.Store().Stats(context.Background())
			return err == nil && st.Pending == 0
		}
	}
	poll := time.Millisecond
	if o.order != "" {
		poll = 100 * time.Millisecond // counting the store's rows is not free
	}
	for !settled() && time.Since(start) < time.Minute {
		time.Sleep(poll)
	}
	drain := time.Since(start)
	r.note = fmt.Sprintf("backlog at the end %d (%.2f s of traffic), drained in %s; batch %.1f", max(backlog, 0),
		float64(max(backlog, 0))/r.rate(), drain.Round(time.Millisecond), meanBatch(gw.url)) + started
	if o.order != "" {
		st, _ := gw.gw.Store().Stats(context.Background())
		r.note += fmt.Sprintf("; %d delivered, %d stale, %d pending", st.Delivered, st.Stale, st.Pending)
	} else if left := accepted - (k.received.Load() - warm); left > 0 {
		// Not drained within the minute (one hot entity: one delivery in
		// flight at a time): say how fast it went.
		r.note += fmt.Sprintf("; %d left, delivered at %.0f/s while draining", left, float64(max(backlog, 0)-left)/drain.Seconds())
	}
	return r, nil
}

// prefilledSchema makes a fresh PostgreSQL schema holding b.stored events
// (expired or not, their bodies in their rows or not: see
// prefillPostgres), and returns its URL and what drops it.
func (b *bench) prefilledSchema(expired, inRows bool) (string, func(), error) {
	url, drop, err := freshSchema(pgBase)
	if err != nil {
		return "", nil, err
	}
	if err := prefillPostgres(url, b.stored, expired, inRows); err != nil {
		drop()
		return "", nil, err
	}
	return url, drop, nil
}

func (b *bench) postgres(want func(string) bool) error {
	pgURL, dropSchema, err := freshSchema(pgBase)
	if err != nil {
		return fmt.Errorf("postgres scenarios need %s: %w", pgBase, err)
	}
	defer dropSchema()
	if want("postgres") {
		r, err := b.withDestination("oncehook: unique events, one destination (PostgreSQL, 1 replica)", pgURL, gwOptions{})
		if err != nil {
			return err
		}
		b.rows = append(b.rows, r)
	}
	if want("pgstored") {
		storedURL, dropStored, err := b.prefilledSchema(false, false)
		if err != nil {
			return err
		}
		defer dropStored()
		r, err := b.withDestination(fmt.Sprintf("oncehook: the headline, %d events already stored (PostgreSQL, 1 replica)", b.stored), storedURL, gwOptions{})
		if err != nil {
			return err
		}
		r.note += "; " + prefilled
		b.rows = append(b.rows, r)
	}
	if want("pgsweep") {
		// The same headline over the same number of stored events, whose
		// windows end tomorrow or ended yesterday (to sweep), each on a
		// schema of its own, in this run.
		quietURL, dropQuiet, err := b.prefilledSchema(false, false)
		if err != nil {
			return err
		}
		defer dropQuiet()
		quiet, err := b.withDestination(fmt.Sprintf("oncehook: the headline, %d events stored, sweeping nothing (PostgreSQL, 1 replica)", b.stored), quietURL,
			gwOptions{sweep: 50 * time.Millisecond})
		if err != nil {
			return err
		}
		b.rows = append(b.rows, quiet)
		for _, inRows := range []bool{true, false} {
			sweepURL, dropSweep, err := b.prefilledSchema(true, inRows)
			if err != nil {
				return err
			}
			defer dropSweep()
			note := prefilled
			how := "their bodies in their day's partition"
			if inRows {
				how = "their bodies in their rows, as before the partitions"
			}
			r, err := b.withDestination(fmt.Sprintf("oncehook: the headline while %d expired events are swept, %s (PostgreSQL, 1 replica)", b.stored, how), sweepURL,
				gwOptions{sweep: 50 * time.Millisecond})
			if err != nil {
				return err
			}
			left, bodies, err := pgLeft(sweepURL)
			if err != nil {
				return err
			}
			if inRows {
				bodies = left // each in its row
			}
			r.note += fmt.Sprintf("; %.0f%% of sweeping nothing; swept %d claims of %d during the run, %d bodies left; %s",
				100*r.rate()/quiet.rate(), int64(b.stored)-(left-int64(r.requests)), b.stored, bodies-int64(r.requests), note)
			b.rows = append(b.rows, r)
		}
	}
	if want("pgnodest") {
		gw, err := startGateway(pgURL, "", "", gwOptions{})
		if err != nil {
			return err
		}
		r := load("oncehook: unique events, no destination (PostgreSQL)", b.conns, b.duration, b.unique(gw.url+"/in/bench"))
		r.note = fmt.Sprintf("batch %.1f", meanBatch(gw.url))
		b.rows = append(b.rows, r)
		gw.stop()
	}
	if want("postgres2") {
		k, err := newSink()
		if err != nil {
			return err
		}
		defer k.stop()
		a, err := startGateway(pgURL, "", k.url, gwOptions{})
		if err != nil {
			return err
		}
		c, err := startGateway(pgURL, "", k.url, gwOptions{})
		if err != nil {
			return err
		}
		var turn atomic.Int64
		ua, uc := b.unique(a.url+"/in/bench"), b.unique(c.url+"/in/bench")
		r := load("oncehook: unique events, one destination (PostgreSQL, 2 replicas)", b.conns, b.duration, func() *http.Request {
			if turn.Add(1)%2 == 0 {
				return ua()
			}
			return uc()
		})
		b.rows = append(b.rows, r)
		a.stop()
		c.stop()
	}
	if want("redis") {
		gw, err := startGateway(pgURL, redisBase, "", gwOptions{hotKeys: -1})
		if err != nil {
			return err
		}
		same := func() *http.Request { return b.signed(gw.url+"/in/bench", 0) }
		b.rows = append(b.rows, load("oncehook: duplicates via Redis (PostgreSQL behind)", b.conns, b.duration, same))
		gw.stop()
	}
	return nil
}

// latency sends rate requests per second and measures, for each event, the
// time from the start of its POST to its arrival at the sink.
func (b *bench) latency() (result, error) {
	k, err := newSink()
	if err != nil {
		return result{}, err
	}
	defer k.stop()
	k.record = true
	gw, err := startGateway("sqlite://"+filepath.Join(b.dir, "latency.db"), "", k.url, gwOptions{})
	if err != nil {
		return result{}, err
	}
	defer gw.stop()
	c := client(4)
	res := result{name: fmt.Sprintf("POST → delivery at %d req/s (at the sink)", b.rate)}
	type sent struct {
		key string
		at  time.Time
	}
	var mu sync.Mutex
	var all []sent
	var answered []time.Duration // POST → 200, for comparison
	tick := time.NewTicker(time.Second / time.Duration(b.rate))
	defer tick.Stop()
	deadline := time.Now().Add(b.duration)
	var wg sync.WaitGroup
	for id := int64(1); time.Now().Before(deadline); id++ {
		<-tick.C
		req := b.signed(gw.url+"/in/bench", 1_000_000_000+id)
		key := fmt.Sprintf("bench:evt_%014d", 1_000_000_000+id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ok := send(c, req)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				res.errors++
				return
			}
			all = append(all, sent{key, t0})
			answered = append(answered, took)
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	for _, s := range all {
		if at, ok := k.arrivals.Load(s.key); ok {
			res.latencies = append(res.latencies, at.(time.Time).Sub(s.at))
		} else {
			res.errors++
		}
	}
	res.requests = len(res.latencies)
	ack := result{latencies: answered}
	res.note = fmt.Sprintf("POST → 200 p50 %s, p99 %s", ack.pct(0.5).Round(10*time.Microsecond), ack.pct(0.99).Round(10*time.Microsecond))
	fmt.Fprintf(os.Stderr, "%s: p50 %s\n", res.name, res.pct(0.5))
	return res, nil
}

// effects measures the effects ledger: claim→complete pairs per second over
// HTTP (64 connections) and in process, and storms of 64 concurrent claims
// of one hot key (each must have exactly one owner).
func (b *bench) effects(storeName, storeURL string) ([]result, error) {
	gw, err := startGateway(storeURL, "", "", gwOptions{})
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	transport := &http.Transport{MaxIdleConns: b.conns, MaxIdleConnsPerHost: b.conns}
	defer transport.CloseIdleConnections()
	ledgers := []struct {
		name string
		l    effect.Ledger
	}{
		{"over HTTP", effect.NewClient(gw.apiURL, apiToken, &http.Client{Transport: transport})},
		{"in process", gw.gw.Effects()},
	}
	var rows []result
	for _, lg := range ledgers {
		var seq atomic.Int64
		r := loop(fmt.Sprintf("effects: claim→complete pairs %s (%s)", lg.name, storeName), "/s", b.conns, b.duration, func() bool {
			key := fmt.Sprintf("bench:%s:%d", lg.name, seq.Add(1))
			c, err := lg.l.Claim(context.Background(), key, effect.ClaimOptions{Lease: time.Minute})
			if err != nil {
				return false
			}
			return lg.l.Complete(context.Background(), key, c.Token, json.RawMessage(`{"sent":true}`)) == nil
		})
		r.note = "pairs/s"
		rows = append(rows, r)
	}
	// Hot key: rounds of 64 concurrent claims of one fresh key.
	l := ledgers[0].l
	storm := result{name: fmt.Sprintf("effects: 64 concurrent claims of one hot key, over HTTP (%s)", storeName)}
	start := time.Now()
	wrong := 0
	for round := 0; time.Since(start) < b.duration; round++ {
		var wg sync.WaitGroup
		var owners atomic.Int64
		var mu sync.Mutex
		key := fmt.Sprintf("hot:%d", round)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				c, err := l.Claim(context.Background(), key, effect.ClaimOptions{Lease: time.Minute})
				took := time.Since(t0)
				if err == nil && !c.AlreadyDone {
					owners.Add(1)
				}
				mu.Lock()
				storm.latencies = append(storm.latencies, took)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if owners.Load() != 1 {
			wrong++
		}
		storm.requests += 64
	}
	storm.elapsed = time.Since(start)
	storm.errors = wrong
	storm.note = fmt.Sprintf("claims/s; %d rounds, each with exactly one owner unless counted in errors", storm.requests/64)
	fmt.Fprintf(os.Stderr, "%s: %.0f claims/s\n", storm.name, storm.rate())
	return append(rows, storm), nil
}

// loop runs conns closed loops of op for d, timing each successful op, and
// reports the rate on stderr in unit (what one op is: "/s", "req/s").
func loop(name, unit string, conns int, d time.Duration, op func() bool) result {
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
				if !op() {
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
	fmt.Fprintf(os.Stderr, "%s: %.0f%s\n", name, res.rate(), unit)
	return res
}

// prefill stores n events (no deliveries) whose windows end at now+window
// (in the past for a negative window), outside the timed part: the store's
// migrations first, then one INSERT ... SELECT over a recursive counter
// per million rows, straight into the file with synchronous OFF (10
// million 1 KiB events in minutes, not the hours of claims one by one).
func prefill(path string, n int, window time.Duration) error {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		return err
	}
	st.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		return err
	}
	defer db.Close()
	start, now := time.Now(), time.Now()
	received, expires := now.Add(-48*time.Hour).UnixMilli(), now.Add(window).UnixMilli()
	const chunk = 1_000_000
	for from := 0; from < n; from += chunk {
		to := min(n, from+chunk) - 1
		if _, err := db.ExecContext(ctx, `WITH RECURSIVE c(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM c WHERE x < ?)
			INSERT INTO events (source, key, content_type, body, received_at, expires_at)
			SELECT 'bench', printf('old_%09d', x), 'application/json', ?, ?, ? FROM c`, from, to, body(0, 0), received, expires); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	// With synchronous OFF the file's pages are still dirty in the OS's
	// cache: written back now, outside the timed part, or the gateway's
	// first checkpoint fsync pays for all of them (seconds, at 10 million).
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err != nil {
		return err
	} else if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	prefilled = fmt.Sprintf("%d events prefilled in %s, %.0f bytes each on disk (1 KiB bodies)", n, time.Since(start).Round(time.Second), float64(fi.Size())/float64(n))
	fmt.Fprintln(os.Stderr, prefilled)
	return nil
}

// prefillPostgres is prefill on PostgreSQL: the schema by the store's
// migrations and its day partitions (a sweep on the store makes them),
// then generate_series a million rows at a time, each event's claim row
// and its body in its day's partition, as intake writes them, and a
// CHECKPOINT and ANALYZE outside the timed part. The events' windows end
// tomorrow, or, expired, yesterday (for the sweep scenario).
//
// inRows stores the bodies in the claim rows instead, as before the
// partitions (migration 0017): such events are swept row by row, bodies
// and all, as every event was then.
func prefillPostgres(pgURL string, n int, expired, inRows bool) error {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgURL, postgres.Options{})
	if err != nil {
		return err
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	ends := day.Add(24 * time.Hour) // tomorrow
	if expired {
		ends = day.Add(-24 * time.Hour)
	}
	// A sweep the day before the windows end makes their day's partitions
	// (it deletes nothing: nothing is stored yet).
	if _, err := st.SweepExpired(ctx, ends.Add(-time.Hour), 1); err != nil {
		st.Close()
		return err
	}
	st.Close()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	start := time.Now()
	for from := 0; from < n && inRows; from += 1_000_000 {
		if _, err := conn.Exec(ctx, `INSERT INTO events (source, key, content_type, body, received_at, expires_at)
			SELECT 'bench', 'old_' || lpad(g::text, 9, '0'), 'application/json', $1, x.at - interval '72 hours', x.at
			FROM generate_series($2::bigint, $3::bigint) g, LATERAL (SELECT $4::timestamptz + (g % 86000) * interval '1 second' AS at) x`,
			body(0, 0), from, min(n, from+1_000_000)-1, ends); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
	}
	for from := 0; from < n && !inRows; from += 1_000_000 {
		if _, err := conn.Exec(ctx, `WITH e AS (
				INSERT INTO events (source, key, content_type, body, received_at, expires_at, body_at, body_size)
				SELECT 'bench', 'old_' || lpad(g::text, 9, '0'), 'application/json', '', x.at - interval '72 hours', x.at, x.at, length($1::bytea)
				FROM generate_series($2::bigint, $3::bigint) g, LATERAL (SELECT $4::timestamptz + (g % 86000) * interval '1 second' AS at) x
				RETURNING id, body_at
			)
			INSERT INTO event_bodies (event_id, drop_at, body) SELECT id, body_at, $1 FROM e`,
			body(0, 0), from, min(n, from+1_000_000)-1, ends); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `ANALYZE events; ANALYZE event_bodies`); err != nil {
		return err
	}
	var bytes int64
	if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size('events') +
		(SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'event_bodies'::regclass)`).Scan(&bytes); err != nil {
		return err
	}
	prefilled = fmt.Sprintf("%d events prefilled in %s, %.0f bytes each (claims, bodies, indexes; 1 KiB bodies)", n, time.Since(start).Round(time.Second), float64(bytes)/float64(n))
	fmt.Fprintln(os.Stderr, prefilled)
	return nil
}

// relayHandler forwards each body to sinkURL and answers once the sink
// has: the relay baseline, in this process or in a child.
func relayHandler(out *http.Client, sinkURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		resp, err := out.Post(sinkURL, "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"accepted"}` + "\n"))
	})
}

// serveChild is the cpu scenario's child process: the relay or the
// gateway alone in a process, so that its CPU time is its own. It prints
// its URL and serves until its stdin closes. With a profile path, it
// profiles its CPU from start to end: what the gateway alone spends,
// without the load generator and the sink that share -cpuprofile's.
func serveChild(kind, sinkURL, storeURL, profile string) error {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
		// Beside it, what the child allocated (go tool pprof
		// -sample_index=alloc_space or alloc_objects), from its start.
		defer func() {
			if f, err := os.Create(profile + ".allocs"); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	var url string
	switch kind {
	case "relay":
		u, stop, err := serve(relayHandler(client(64), sinkURL))
		if err != nil {
			return err
		}
		defer stop()
		url = u
	case "gateway":
		gw, err := startGateway(storeURL, "", sinkURL, gwOptions{})
		if err != nil {
			return err
		}
		defer gw.stop()
		url = gw.url
	default:
		return fmt.Errorf("-child %q: want relay or gateway", kind)
	}
	fmt.Println(url)
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// cpu measures the CPU time per event of the gateway (one destination,
// SQLite FULL) against the relay's per forwarded request, each alone in
// a child process (the load generator and the sink stay in this one), by
// the process's own accounting (/proc/PID/stat: user and system time),
// over the load and, for the gateway, until its deliveries drained.
func (b *bench) cpu(dir string) (string, error) {
	measure := func(kind, storeURL string) (perEvent cpuTime, rate float64, err error) {
		k, err := newSink()
		if err != nil {
			return cpuTime{}, 0, err
		}
		defer k.stop()
		args := []string{"-child", kind, "-child-sink", k.url, "-child-store", storeURL}
		if b.profile != "" {
			args = append(args, "-child-profile", b.profile+"."+kind)
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return cpuTime{}, 0, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return cpuTime{}, 0, err
		}
		if err := cmd.Start(); err != nil {
			return cpuTime{}, 0, err
		}
		defer func() { stdin.Close(); cmd.Wait() }()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			return cpuTime{}, 0, fmt.Errorf("cpu: the %s child said nothing: %w", kind, err)
		}
		url := strings.TrimSpace(line)
		warm := load("warm-up", b.conns, time.Second, b.unique(url+"/in/bench"))
		for start := time.Now(); time.Since(start) < 10*time.Second && k.received.Load() < int64(warm.requests); {
			time.Sleep(time.Millisecond)
		}
		before, err := procCPU(cmd.Process.Pid)
		if err != nil {
			return cpuTime{}, 0, err
		}
		received := k.received.Load()
		r := load(kind, b.conns, b.duration, b.unique(url+"/in/bench"))
		for start := time.Now(); time.Since(start) < time.Minute && k.received.Load()-received < int64(r.requests); {
			time.Sleep(time.Millisecond)
		}
		after, err := procCPU(cmd.Process.Pid)
		if err != nil {
			return cpuTime{}, 0, err
		}
		delivered := k.received.Load() - received
		if delivered <= 0 {
			return cpuTime{}, 0, fmt.Errorf("cpu: the %s child delivered nothing", kind)
		}
		used := after.sub(before)
		return cpuTime{user: used.user / time.Duration(delivered), system: used.system / time.Duration(delivered)}, r.rate(), nil
	}
	relay, relayRate, err := measure("relay", "")
	if err != nil {
		return "", err
	}
	gw, gwRate, err := measure("gateway", "sqlite://"+filepath.Join(dir, "cpu.db"))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("CPU per event, each server alone in a process: the gateway (one destination, SQLite FULL) %.0f µs per delivered event (user %.0f, system %.0f) at %.0f/s, "+
		"the relay %.0f µs per forwarded request (user %.0f, system %.0f) at %.0f/s: %.2f×",
		us(gw.total()), us(gw.user), us(gw.system), gwRate, us(relay.total()), us(relay.user), us(relay.system), relayRate, float64(gw.total())/float64(relay.total())), nil
}

// procCPU is a process's user and system CPU time so far, from
// /proc/PID/stat (in clock ticks of 1/100 s, as Linux reports them).
func procCPU(pid int) (cpuTime, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTime{}, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields counted from after it.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return cpuTime{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return cpuTime{user: time.Duration(utime) * 10 * time.Millisecond, system: time.Duration(stime) * 10 * time.Millisecond}, nil
}

// cpuTime is a process's CPU time in its own code (user) and in the
// kernel on its behalf (system: its system calls, and the faults and
// interrupts it took). The split says how much of a cost is the calls a
// design makes, which cost more on a VM that isolates page tables.
type cpuTime struct{ user, system time.Duration }

func (c cpuTime) total() time.Duration { return c.user + c.system }

func (c cpuTime) sub(d cpuTime) cpuTime {
	return cpuTime{user: c.user - d.user, system: c.system - d.system}
}

// retention measures what body_retention saves on disk: n events of 1 KiB
// delivered and past their body_retention, their bodies dropped by the
// sweep, then n more arriving (the next days' traffic), against the same
// 2n with no body_retention, on SQLite (the file's size) and on
// PostgreSQL (the events table with its indexes and TOAST, after a
// VACUUM, as autovacuum would run between the two days).
func retention(dir string, n int) (string, error) {
	ctx := context.Background()
	fill := func(st store.Store, prefix string, bodyRetention bool, now time.Time) error {
		for i := 0; i < n; i += 5000 {
			batch := make([]store.NewEvent, 0, 5000)
			for j := i; j < min(n, i+5000); j++ {
				e := store.NewEvent{Source: "bench", Key: fmt.Sprintf("%s_%09d", prefix, j), ContentType: "application/json",
					Body: body(int64(j), 0), ReceivedAt: now, ExpiresAt: now.Add(72 * time.Hour)}
				if bodyRetention {
					e.BodyExpiresAt = now.Add(time.Hour)
				}
				batch = append(batch, e)
			}
			if _, err := store.ClaimEvents(ctx, st, batch); err != nil {
				return err
			}
		}
		return nil
	}
	// run fills one store twice, dropping the first day's bodies in
	// between when kept, and returns its size (between: what runs then).
	// The second fill comes a day later: PostgreSQL drops the bodies with
	// their day.
	run := func(st store.Store, kept bool, between func() error, size func() (int64, error)) (int64, error) {
		now := time.Now()
		next := now.Add(25 * time.Hour)
		if err := fill(st, "day1", kept, now); err != nil {
			return 0, err
		}
		for kept {
			dropped, err := st.SweepExpired(ctx, next, 5000)
			if err != nil {
				return 0, err
			}
			if dropped == 0 {
				break
			}
		}
		if err := between(); err != nil {
			return 0, err
		}
		if err := fill(st, "day2", kept, next); err != nil {
			return 0, err
		}
		return size()
	}
	var lite, pg [2]int64
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for i, kept := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("r%d.db", i))
		st, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: "OFF"})
		if err != nil {
			return "", err
		}
		lite[i], err = run(st, kept, func() error { return nil }, func() (int64, error) {
			st.Close()
			fi, err := os.Stat(path)
			if err != nil {
				return 0, err
			}
			return fi.Size(), nil
		})
		if err != nil {
			return "", err
		}
		pgURL, drop, err := freshSchema(pgBase)
		if err != nil {
			return "", fmt.Errorf("retention on PostgreSQL needs %s: %w", pgBase, err)
		}
		pst, err := postgres.Open(ctx, pgURL, postgres.Options{Horizon: 72 * time.Hour})
		if err != nil {
			drop()
			return "", err
		}
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			pst.Close()
			drop()
			return "", err
		}
		pg[i], err = run(pst, kept, func() error { _, err := conn.Exec(ctx, "VACUUM events, event_bodies"); return err }, func() (int64, error) {
			var b int64
			err := conn.QueryRow(ctx, `SELECT pg_total_relation_size('events') + (SELECT COALESCE(sum(pg_total_relation_size(inhrelid)), 0)
				FROM pg_inherits WHERE inhparent IN ('event_bodies'::regclass, 'attempts'::regclass))`).Scan(&b)
			return b, err
		})
		conn.Close(ctx)
		pst.Close()
		drop()
		if err != nil {
			return "", err
		}
	}
	line := func(store string, sz [2]int64) string {
		return fmt.Sprintf("%s %.0f MiB without body_retention, %.0f MiB with: %.0f%% saved, %.0f → %.0f bytes per stored event", store,
			float64(sz[0])/(1<<20), float64(sz[1])/(1<<20), 100*(1-float64(sz[1])/float64(sz[0])), float64(sz[0])/float64(2*n), float64(sz[1])/float64(2*n))
	}
	return fmt.Sprintf("body_retention: %d events of 1 KiB, their bodies dropped, then %d more.\n  %s\n  %s", n, n,
		line("SQLite:", lite), line("PostgreSQL:", pg)), nil
}

// prefilled says how the latest prefill went, for the scenario's note.
var prefilled string

func countEvents(path string) (int64, error) {
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	s, err := st.Stats(context.Background())
	return s.Events, err
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

type gwOptions struct {
	hotKeys   int
	sweep     time.Duration
	noRollups bool
	// routed, when set, gives the source that many destinations, each with
	// a filter on the body that the bench's events never match: every
	// event is decoded and matched that many times, stored as filtered,
	// and delivered nowhere (the filters' cost, alone).
	routed int
	// order, when set (stale or fifo), orders the source's events per
	// entity; entities is how many objects the events are about.
	order    string
	entities int64
	// traced traces every request and attempt (100% sampling), into an
	// exporter that drops the batches: the SDK's cost, not the network's.
	traced bool
	// randomKeys sends random-looking event ids (randomBody) instead of
	// sequential ones: each key lands on a leaf of the (source, key) index
	// of its own, as real providers' ids do.
	randomKeys bool
	// transform, when set, is the destination's transformation (inline).
	transform string
	// many, when set, adds that many sources, each with a destination of
	// its own that nothing is sent to (an address that refuses), one in
	// transformEvery of them with a transformation (each its own text):
	// the load still goes to the one source, bench.
	many, transformEvery int
}

// benchTransform is the typical transformation: the bench's Stripe event
// reshaped into Meta CAPI's Purchase, a header added.
const benchTransform = `addHandler("transform", (request, context) => {
  const o = request.body.data.object;
  request.body = { data: [{ event_name: "Purchase", event_id: request.body.id, event_time: Math.floor(Date.now() / 1000),
    custom_data: { value: o.amount / 100, currency: (o.currency ?? "usd").toUpperCase(), order_id: o.id } }] };
  request.headers["x-event-type"] = context.type;
  return request;
});`

type runningGateway struct {
	url    string
	apiURL string
	stop   func()
	gw     *oncehook.Gateway
	// ready is how long the gateway took from New to its first 200 on
	// /readyz: its start-up on the store it was given.
	ready time.Duration
}

const apiToken = "bench-api-token-0123456789"

func startGateway(storeURL, redisURL, sinkURL string, o gwOptions) (*runningGateway, error) {
	dests, destList := "", "[]"
	if sinkURL != "" {
		dests = fmt.Sprintf("destinations:\n  - name: sink\n    url: %s\n    timeout: 5s\n", sinkURL)
		if o.transform != "" {
			dests += fmt.Sprintf("    transform: {inline: %q}\n", o.transform)
		}
		destList = "[sink]"
	}
	if o.routed > 0 {
		var list, decl strings.Builder
		for i := range o.routed {
			fmt.Fprintf(&list, "\n      - {name: d%d, filter: {body: {data: {object: {amount: {$gte: %d}}}}}}", i, 1_000_000+i)
			fmt.Fprintf(&decl, "  - {name: d%d, url: \"http://127.0.0.1:9/\"}\n", i)
		}
		destList, dests = list.String(), "destinations:\n"+decl.String()
	}
	if redisURL != "" {
		dests = "redis: " + redisURL + "\n" + dests
	}
	extra := os.Getenv("ONCEHOOK_BENCH_CONFIG") // e.g. "delivery: {concurrency: 128}", for experiments
	order := ""                                 // the source's order, and the sources after it (many)
	if o.order != "" {
		order = fmt.Sprintf("    order: {mode: %s}\n", o.order)
	}
	if o.many > 0 {
		sources, decl := manyObjects(o.many, o.transformEvery)
		if dests == "" {
			dests = "destinations:\n"
		}
		dests += decl
		order += sources
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`store: %q
api: {listen: "127.0.0.1:0", tokens: [{name: bench, token: `+apiToken+`}]}
`+extra+`
sources:
  - name: bench
    preset: stripe
    secrets: [%q]
    destinations: %s
%s%s`, storeURL, secret, destList, order, dests)), os.LookupEnv)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	gopts := oncehook.Options{Kinds: kinds.All(), HotKeys: o.hotKeys, SweepInterval: o.sweep, NoRollups: o.noRollups}
	if o.traced {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(dropExporter{}))
		gopts.TracerProvider = tp
	}
	began := time.Now()
	gw, err := oncehook.New(ctx, cfg, gopts)
	if err != nil {
		cancel()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return nil, err
	}
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() { gw.Serve(ctx, ln, apiLn); close(done) }()
	url := "http://" + ln.Addr().String()
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
	return &runningGateway{url: url, apiURL: "http://" + apiLn.Addr().String(),
		stop: func() { cancel(); <-done }, gw: gw, ready: time.Since(began)}, nil
}

// dropExporter takes the SDK's batches and drops them.
type dropExporter struct{}

func (dropExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropExporter) Shutdown(context.Context) error                             { return nil }

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
	res := loop(name, " req/s", conns, d, func() bool { return send(c, next()) })
	c.CloseIdleConnections()
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

// deliveryThroughput stores n events, then times a gateway delivering them
// all from the store to a local sink.
func (b *bench) deliveryThroughput() (result, error) {
	ctx := context.Background()
	path := filepath.Join(b.dir, "delivery.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return result{}, err
	}
	now := time.Now()
	for i := 0; i < b.deliveries; i += 256 {
		batch := make([]store.NewEvent, 0, 256)
		for j := i; j < min(b.deliveries, i+256); j++ {
			batch = append(batch, store.NewEvent{Source: "bench", Key: fmt.Sprintf("evt_%d", j), ContentType: "application/json",
				Body: []byte(`{"id":"x"}`), ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"sink"}})
		}
		if _, err := store.ClaimEvents(ctx, st, batch); err != nil {
			return result{}, err
		}
	}
	st.Close()
	k, err := newSink()
	if err != nil {
		return result{}, err
	}
	defer k.stop()
	start := time.Now()
	gw, err := startGateway("sqlite://"+path, "", k.url, gwOptions{})
	if err != nil {
		return result{}, err
	}
	defer gw.stop()
	// Watch the sink, not the store: counting rows while the worker runs
	// would take CPU from what is measured. Then wait for the outcomes to be
	// recorded, which is part of delivering.
	for k.received.Load() < int64(b.deliveries) {
		time.Sleep(time.Millisecond)
	}
	for {
		s, err := gw.gw.Store().Stats(ctx)
		if err != nil {
			return result{}, err
		}
		if s.Delivered+s.Dead >= int64(b.deliveries) {
			res := result{name: "delivery from a backlog in the store to a local sink", requests: int(s.Delivered), errors: int(s.Dead), elapsed: time.Since(start)}
			fmt.Fprintf(os.Stderr, "%s: %.0f/s\n", res.name, res.rate())
			res.note = "deliveries/s"
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

// pgLeft counts the events and the bodies left in the schema at pgURL.
func pgLeft(pgURL string) (events, bodies int64, err error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM event_bodies)`).Scan(&events, &bodies)
	return events, bodies, err
}

// us is d in microseconds, for a figure printed as %.0f µs.
func us(d time.Duration) float64 { return float64(d) / 1e3 }
