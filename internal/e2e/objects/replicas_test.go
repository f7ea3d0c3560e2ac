package objects_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
)

const (
	// sampled: every sampled-th create, update and delete is timed on the
	// two replicas that did not take it.
	sampled = 10
	// preexisting sources take traffic from the start; each changes once.
	preexisting = 9
	// trafficWorkers send signed events all along, each every pause.
	trafficWorkers = 4
	pause          = 5 * time.Millisecond
)

// objectCount is how many sources and destinations the run creates: 200
// by default, or ONCEHOOK_E2E_OBJECTS; the numbers are 1,000
// (BENCHMARKS.md, "Runtime objects across replicas"). Every change
// rebuilds the whole config on the replica that takes it, and each other
// replica reads and parses every object anew to apply it, so a run's CPU
// grows with the square of the count: 1,000
// took 4 minutes of CPU, over 8 minutes on this 2-core machine shared
// with other work; 200, the default, under a minute.
func objectCount(t *testing.T) int {
	n := 200
	if s := os.Getenv("ONCEHOOK_E2E_OBJECTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 30 || n%10 != 0 {
			t.Fatalf("ONCEHOOK_E2E_OBJECTS=%q: want a multiple of 10, at least 30", s)
		}
	}
	return n
}

// startReplica starts a gateway from the config file at path, with its
// own listeners, until the test ends; its warnings and errors go to logs.
func startReplica(t *testing.T, path string, logs *testenv.Buffer) (intake, api string) {
	t.Helper()
	cfg, err := oncehook.LoadConfig(path, kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	env := func(name string) string {
		if name == "ONCEHOOK_SECRET_KEYS" {
			return secretKeys
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err := oncehook.New(ctx, cfg, oncehook.Options{
		Kinds: kinds.All(), ConfigFile: path, Getenv: env, ShutdownTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	apiLn, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, ln, apiLn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), "http://" + apiLn.Addr().String()
}

// secretOf is source name's secret, the first or, rotated, the second.
func secretOf(name string, n int) string { return fmt.Sprintf("whsec_%s_%d", name, n) }

// The first proof (#45): three replicas on one PostgreSQL under
// continuous signed traffic, on every replica, to sources that exist
// before the run and to each source as soon as its create is answered;
// meanwhile a client creates a thousand destinations and a thousand
// sources through the API, round-robin across the replicas, changes a
// fifth of the sources (a secret rotated, after which traffic signs with
// the new one; a route changed; a filter added), deletes a tenth of the
// sources and then the destinations they routed to. Every answer is held
// against the versions the source had (ledger): no request fails, nor is
// answered by an old version once the bound has passed. Every tenth
// change is timed until both other replicas serve it (a signed event 200
// to a new source, 200 with a rotated secret, 404 after a delete): p50
// and max, each within the bound. Every event accepted is delivered
// exactly once to the destinations its route had when it was accepted,
// and nothing else is delivered.
func TestThreeReplicasTakeObjectsUnderTraffic(t *testing.T) {
	testenv.SlowUnderRace(t)
	// The numbers (#45), at 1,000: that many sources and
	// destinations created, a fifth of the sources changed, a tenth of
	// each removed.
	objects := objectCount(t)
	updated, removed := objects/5, objects/10
	began := time.Now()
	sink := testenv.NewSink(t)
	url := func(dest string) string { return sink.URL + "/d/" + dest }
	path := filepath.Join(t.TempDir(), "oncehook.yaml")
	yaml := `store: "` + testenv.Postgres(t) + `"
api: {tokens: [{name: ops, token: ` + ops + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [` + secretOf("filed", 1) + `], destinations: [filed-app]}
destinations:
  - {name: filed-app, url: "` + url("filed-app") + `"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	defer func() {
		if t.Failed() {
			out := logs.String()
			t.Logf("the replicas' warnings (last 4 KiB):\n%s", out[max(0, len(out)-4096):])
		}
	}()
	var intakes, apis []string
	for range 3 {
		intake, api := startReplica(t, path, logs)
		intakes, apis = append(intakes, intake), append(apis, api)
	}
	l := newLedger()
	l.existing("filed", version{secret: secretOf("filed", 1), dests: []string{"filed-app"}})

	// The sources that exist before the run, each with a destination of
	// its own and one to be routed to: created on replica 0, and served
	// by all three before the traffic starts.
	var pre []string
	for k := range preexisting {
		name, dest, alt := fmt.Sprintf("pre-%d", k), fmt.Sprintf("pre-d-%d", k), fmt.Sprintf("pre-alt-%d", k)
		for _, d := range []string{dest, alt} {
			if a := call("POST", apis[0]+"/v1/destinations", `{"name": "`+d+`", "url": "`+url(d)+`"}`); a.status != 201 {
				t.Fatalf("create %s: %d %s", d, a.status, a.body)
			}
		}
		if a := call("POST", apis[0]+"/v1/sources", `{"name": "`+name+`", "preset": "stripe", "secrets": ["`+secretOf(name, 1)+`"], "destinations": ["`+dest+`"]}`); a.status != 201 {
			t.Fatalf("create %s: %d %s", name, a.status, a.body)
		}
		l.existing(name, version{secret: secretOf(name, 1), dests: []string{dest}})
		pre = append(pre, name)
	}
	for _, api := range apis {
		if !testenv.WaitFor(bound, func() bool { return call("GET", api+"/v1/sources/"+pre[len(pre)-1], "").status == 200 }) {
			t.Fatalf("%s does not have the sources made before the run", api)
		}
	}
	pre = append(pre, "filed")
	for i := range objects {
		l.absent(fmt.Sprintf("s-%04d", i))
	}

	// The traffic: every worker sends, in turn, to a source of before the
	// run and to one created in it (once its create is answered), on each
	// replica in turn; amounts of 500 and 2,000, for the filters.
	ctx, stopTraffic := context.WithCancel(context.Background())
	var traffic sync.WaitGroup
	var sent atomic.Int64
	for w := range trafficWorkers {
		traffic.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				name := pre[(n/2+w)%len(pre)]
				if n%2 == 1 {
					name = fmt.Sprintf("s-%04d", rand.IntN(objects))
				}
				secret, ok := l.current(name)
				if !ok {
					continue
				}
				amount := 500 + 1500*(n/2%2)
				l.send(t, intakes, (n+w)%3, name, secret, fmt.Sprintf("evt_t%d_%d", w, n), amount, "traffic")
				sent.Add(1)
				time.Sleep(pause)
			}
		})
	}
	defer func() { stopTraffic(); traffic.Wait() }()

	// A timing: from a change's answer on replica on until each other
	// replica answers want to a signed event (secret) for source name,
	// polled every 2 ms; past the bound it is a failure.
	var timings sync.WaitGroup
	var mu sync.Mutex
	took := map[string][]time.Duration{}
	var late []string
	timeIt := func(what string, on int, name, secret string, want int) {
		answered := time.Now()
		for r := range 3 {
			if r == on {
				continue
			}
			timings.Go(func() {
				for n := 0; ; n++ {
					id := fmt.Sprintf("evt_probe_%s_%s_%d_%d", what, name, r, n)
					if l.send(t, intakes, r, name, secret, id, 2000, "probe") == want {
						break
					}
					if time.Since(answered) > bound {
						mu.Lock()
						late = append(late, fmt.Sprintf("%s %s: not %d on replica %d within %s", what, name, want, r, bound))
						mu.Unlock()
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				mu.Lock()
				took[what] = append(took[what], time.Since(answered))
				mu.Unlock()
			})
		}
	}

	// The client: three workers, worker w taking the objects i ≡ w (mod
	// 3) to replica w. Each step's failures are the test's.
	var steps sync.Map // step name → how long it took
	step := func(name string, each func(w, i int) answer, want int, from, to int) {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := from; i < to; i++ {
					if i%3 != w {
						continue
					}
					if a := each(w, i); a.status != want {
						t.Errorf("%s %d on replica %d: %d %s", name, i, w, a.status, a.body)
					}
				}
			})
		}
		wg.Wait()
		steps.Store(name, time.Since(start))
		t.Logf("%s: %d in %s", name, to-from, time.Since(start).Round(time.Millisecond))
	}
	step("create destinations", func(w, i int) answer {
		d := fmt.Sprintf("d-%04d", i)
		return call("POST", apis[w]+"/v1/destinations", `{"name": "`+d+`", "url": "`+url(d)+`"}`)
	}, 201, 0, objects)
	step("create sources", func(w, i int) answer {
		name, secret := fmt.Sprintf("s-%04d", i), secretOf(fmt.Sprintf("s-%04d", i), 1)
		dest := fmt.Sprintf("d-%04d", i)
		a := l.change(name, w, func(version) version { return version{secret: secret, dests: []string{dest}} }, func() answer {
			return call("POST", apis[w]+"/v1/sources", `{"name": "`+name+`", "preset": "stripe", "secrets": ["`+secret+`"], "destinations": ["`+dest+`"]}`)
		})
		if i%sampled == 0 && a.status == 201 {
			timeIt("create", w, name, secret, 200)
		}
		return a
	}, 201, 0, objects)
	if t.Failed() {
		t.FailNow()
	}

	// The deletes first, so that the updates' time covers the bound
	// before the destinations go.
	firstRemoved := objects - removed
	step("delete sources", func(w, i int) answer {
		name := fmt.Sprintf("s-%04d", i)
		a := l.change(name, w, func(v version) version { v.deleted = true; return v }, func() answer {
			return call("DELETE", apis[w]+"/v1/sources/"+name, "")
		})
		if i%sampled == 0 && a.status == 204 {
			timeIt("delete", w, name, secretOf(name, 1), 404)
		}
		return a
	}, 204, firstRemoved, objects)
	deletesAnswered := l.lastAnswer()

	// A fifth of the sources, and the ones before the run, changed: kind
	// (i/3)%3 so that each replica takes each kind.
	filter := `{"body": {"data": {"object": {"amount": {"$gte": 1000}}}}}`
	update := func(w int, name, dest, alt string, kind int) answer {
		var patch string
		next := func(v version) version {
			switch kind {
			case 0:
				v.secret = secretOf(name, 2)
			case 1:
				v.dests = []string{alt}
			case 2:
				v.filter = true
			}
			return v
		}
		switch kind {
		case 0:
			patch = `{"secrets": ["` + secretOf(name, 2) + `"]}`
		case 1:
			patch = `{"destinations": ["` + alt + `"]}`
		case 2:
			patch = `{"destinations": [{"name": "` + dest + `", "filter": ` + filter + `}]}`
		}
		return l.change(name, w, next, func() answer { return call("PATCH", apis[w]+"/v1/sources/"+name, patch) })
	}
	step("update sources before the run", func(w, i int) answer {
		return update(w, pre[i], fmt.Sprintf("pre-d-%d", i), fmt.Sprintf("pre-alt-%d", i), i%3)
	}, 200, 0, preexisting)
	step("update sources", func(w, i int) answer {
		name := fmt.Sprintf("s-%04d", i)
		// The route changed goes to the destination of a source created
		// on the same replica (i+3*removed: below the removed ones), and
		// not itself updated.
		a := update(w, name, fmt.Sprintf("d-%04d", i), fmt.Sprintf("d-%04d", i+3*removed), i/3%3)
		if i/3%3 == 0 && i%sampled == 0 && a.status == 200 {
			timeIt("rotation", w, name, secretOf(name, 2), 200)
		}
		return a
	}, 200, 0, updated)

	// The removed sources' destinations go once no replica takes their
	// events any more and what they took is delivered: a destination
	// removed drops what it holds (held, marked removed).
	time.Sleep(time.Until(deletesAnswered.Add(bound)))
	toRemoved := func(a acceptance) bool {
		return a.source >= fmt.Sprintf("s-%04d", firstRemoved) && strings.HasPrefix(a.source, "s-")
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(l.misdelivered(delivered(sink.Deliveries()), toRemoved)) == 0 }) {
		t.Fatalf("the removed sources' events are not delivered: %v", first(l.misdelivered(delivered(sink.Deliveries()), toRemoved), 10))
	}
	step("delete destinations", func(w, i int) answer {
		return call("DELETE", apis[w]+"/v1/destinations/"+fmt.Sprintf("d-%04d", i), "")
	}, 204, firstRemoved, objects)
	timings.Wait()

	// Past the bound, every replica: a rotated source refuses its old
	// secret, a deleted one is 404, through the ledger.
	time.Sleep(time.Until(l.lastAnswer().Add(bound)))
	for i := range updated {
		if i/3%3 == 0 {
			for r := range 3 {
				l.send(t, intakes, r, fmt.Sprintf("s-%04d", i), secretOf(fmt.Sprintf("s-%04d", i), 1), fmt.Sprintf("evt_old_%d_%d", i, r), 2000, "old secret after the bound")
			}
		}
	}
	for i := firstRemoved; i < objects; i++ {
		for r := range 3 {
			l.send(t, intakes, r, fmt.Sprintf("s-%04d", i), secretOf(fmt.Sprintf("s-%04d", i), 1), fmt.Sprintf("evt_gone_%d_%d", i, r), 2000, "deleted, after the bound")
		}
	}
	stopTraffic()
	traffic.Wait()
	changesDone := time.Since(began)

	// Every replica lists the same objects: the file's and the API's.
	var lists []string
	for _, api := range apis {
		var names []string
		for _, kind := range []string{"sources", "destinations"} {
			a := call("GET", api+"/v1/"+kind, "")
			list, _ := a.json[kind].([]any)
			for _, o := range list {
				names = append(names, fmt.Sprint(o.(map[string]any)["name"]))
			}
		}
		slices.Sort(names)
		lists = append(lists, strings.Join(names, " "))
	}
	if want := 1 + preexisting + objects - removed + 1 + 2*preexisting + objects - removed; len(strings.Fields(lists[0])) != want || lists[1] != lists[0] || lists[2] != lists[0] {
		t.Errorf("the replicas list %d, %d and %d objects (want %d each, the same)", len(strings.Fields(lists[0])), len(strings.Fields(lists[1])), len(strings.Fields(lists[2])), want)
	}

	// Every event accepted is delivered once, where its route sent it;
	// a second after, nothing more has come.
	if !testenv.WaitFor(60*time.Second, func() bool { return len(l.misdelivered(delivered(sink.Deliveries()), nil)) == 0 }) {
		t.Errorf("events not delivered once to their route's destinations (%d): %v", len(l.misdelivered(delivered(sink.Deliveries()), nil)), first(l.misdelivered(delivered(sink.Deliveries()), nil), 20))
	}
	time.Sleep(time.Second)
	if wrong := l.misdelivered(delivered(sink.Deliveries()), nil); len(wrong) > 0 {
		t.Errorf("deliveries after the rest (%d): %v", len(wrong), first(wrong, 20))
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) > 0 || len(late) > 0 {
		t.Errorf("%d answers no version of their source gives, %d changes not served within %s: %v %v", len(l.failures), len(late), bound, first(l.failures, 20), first(late, 20))
	}
	for _, what := range []string{"create", "delete", "rotation"} {
		if len(took[what]) == 0 {
			t.Errorf("no %s timed", what)
			continue
		}
		if m := slices.Max(took[what]); m > bound {
			t.Errorf("a %s took %s to reach a replica, over the bound (%s)", what, m, bound)
		}
	}
	if t.Failed() {
		return
	}
	took1 := func(what string) string {
		return fmt.Sprintf("p50 %s max %s (%d)", p50(took[what]), top(took[what]), len(took[what]))
	}
	stepTook := func(name string) time.Duration {
		d, _ := steps.Load(name)
		return d.(time.Duration).Round(time.Millisecond)
	}
	accepted, filtered := 0, 0
	for _, a := range l.accepted {
		accepted++
		if slices.Equal(a.may, []string{""}) {
			filtered++
		}
	}
	t.Logf("3 replicas, one PostgreSQL: %d destinations created in %s, %d sources in %s, %d deleted in %s, %d updated in %s; each served by the two other replicas: create %s, rotation %s, delete %s",
		objects, stepTook("create destinations"), objects, stepTook("create sources"), removed, stepTook("delete sources"), updated, stepTook("update sources"),
		took1("create"), took1("rotation"), took1("delete"))
	t.Logf("traffic: %d signed requests (by status %v), none failed nor answered by an old version after the bound; %d events accepted (traffic and probes), %d of them filtered out, the rest delivered once each to their route's destinations (%d deliveries); changes done in %s, all delivered in %s",
		sent.Load(), l.statuses, accepted, filtered, len(sink.Deliveries()), changesDone.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// first is s's first n.
func first(s []string, n int) []string { return s[:min(n, len(s))] }
