package objects_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// okSink is a destination server that, until open, holds every request
// until its client goes away (a delivery in flight when the gateway is
// killed), and once open answers 200 and records, by event id, the
// destinations (its path, /d/{name}) it answered.
type okSink struct {
	*httptest.Server
	open atomic.Bool
	mu   sync.Mutex
	ok   map[string][]string
}

func newOKSink(t *testing.T) *okSink {
	s := &okSink{ok: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !s.open.Load() {
			<-r.Context().Done()
			return
		}
		var e struct {
			ID string `json:"id"`
		}
		json.Unmarshal(body, &e)
		s.mu.Lock()
		s.ok[e.ID] = append(s.ok[e.ID], strings.TrimPrefix(r.URL.Path, "/d/"))
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

// answered is a copy of what the sink answered 200, by event id.
func (s *okSink) answered() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for id, ds := range s.ok {
		out[id] = slices.Sorted(slices.Values(ds))
	}
	return out
}

// gatewayProcess is a running `oncehook serve`.
type gatewayProcess struct {
	cmd         *exec.Cmd
	intake, api string
	out         *testenv.Buffer
}

// serve runs binary's `oncehook serve --config cfg`, with the secrets'
// key, and waits until it is ready.
func serve(t *testing.T, binary, cfg string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "ONCEHOOK_SECRET_KEYS="+secretKeys)
	p := &gatewayProcess{cmd: cmd, out: &testenv.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	banner := regexp.MustCompile(`listening on (http://\S+)[\s\S]*api: +(http://\S+)`)
	if !testenv.WaitFor(30*time.Second, func() bool { return banner.MatchString(p.out.String()) }) {
		t.Fatalf("no banner:\n%s", p.out)
	}
	m := banner.FindStringSubmatch(p.out.String())
	p.intake, p.api = m[1], m[2]
	if !testenv.WaitFor(30*time.Second, func() bool { return roundTrip(must(http.NewRequest("GET", p.intake+"/readyz", nil))).status == 200 }) {
		t.Fatalf("never ready:\n%s", p.out)
	}
	return p
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// kill sends SIGKILL: no shutdown code runs.
func (p *gatewayProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// oncehookBinary builds cmd/oncehook once for the package's tests (not in
// TestMain: under the race detector they are skipped, and build nothing).
func oncehookBinary(t *testing.T) string {
	buildOnce.Do(func() {
		var remove func()
		binary, remove, buildErr = testenv.BuildOncehook("../../../cmd/oncehook")
		if buildErr == nil {
			// The package's last test removes it: go test runs them in turn.
			t.Cleanup(remove)
		}
	})
	if buildErr != nil {
		t.Fatalf("build oncehook: %v", buildErr)
	}
	return binary
}

// The second proof (#45), on SQLite with one gateway, the real
// binary in a process of its own: sources and destinations created
// through the API, then a burst of creates from four clients under
// signed traffic, killed (SIGKILL) amid it while every delivery is held
// in flight, and restarted on the same database. Every create answered
// 201 is there (GET 200 at version 1, one create in the audit log, and a
// source serves a signed event, delivered to its destination); none
// answered an error is there at all; one the kill left unanswered is
// either wholly there or wholly absent (its GET, its intake and its audit
// agree). Every event accepted before the kill, the last ones just
// before it, is delivered exactly once after the restart; one the kill
// left unanswered, at most once.
func TestObjectsSurviveAKillOnSQLite(t *testing.T) {
	testenv.SlowUnderRace(t)
	bin := oncehookBinary(t)
	dir := t.TempDir()
	sink := newOKSink(t)
	url := func(dest string) string { return sink.URL + "/d/" + dest }
	cfg := filepath.Join(dir, "oncehook.yaml")
	yaml := `listen: 127.0.0.1:0
store: "sqlite://` + filepath.Join(dir, "oncehook.db") + `"
delivery: {lease: 4s}
api: {listen: 127.0.0.1:0, tokens: [{name: ops, token: ` + ops + `}]}
sources:
  - {name: filed, preset: stripe, secrets: [` + secretOf("filed", 1) + `], destinations: [filed-app]}
destinations:
  - {name: filed-app, url: "` + url("filed-app") + `", timeout: 3s}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := serve(t, bin, cfg)

	// status of each create, by object ("d-0001", "s-0001"): the answer's,
	// 0 when the kill left it unanswered; absent when never sent.
	var mu sync.Mutex
	status := map[string]int{}
	create := func(i int) bool {
		d, s := fmt.Sprintf("d-%04d", i), fmt.Sprintf("s-%04d", i)
		a := call("POST", p.api+"/v1/destinations", `{"name": "`+d+`", "url": "`+url(d)+`", "timeout": "3s"}`)
		mu.Lock()
		status[d] = a.status
		mu.Unlock()
		if a.status != 201 {
			return false
		}
		a = call("POST", p.api+"/v1/sources", `{"name": "`+s+`", "preset": "stripe", "secrets": ["`+secretOf(s, 1)+`"], "destinations": ["`+d+`"]}`)
		mu.Lock()
		status[s] = a.status
		mu.Unlock()
		return a.status == 201
	}
	const before = 30
	for i := range before {
		if !create(i) {
			t.Fatalf("create %d before the burst: %v", i, status)
		}
	}

	// Traffic to the file's source and to those created so far; each
	// event accepted must reach its destination (dest) once.
	accepted := map[string]string{}
	// unanswered are the events the kill left without an answer: stored
	// or not, each delivered at most once.
	unanswered := map[string]string{}
	var lastAccepted time.Time
	var stop atomic.Bool
	var traffic sync.WaitGroup
	for w := range 2 {
		traffic.Go(func() {
			for n := 0; !stop.Load(); n++ {
				name, dest := "filed", "filed-app"
				if n%2 == 1 {
					i := rand.IntN(before)
					name, dest = fmt.Sprintf("s-%04d", i), fmt.Sprintf("d-%04d", i)
				}
				id := fmt.Sprintf("evt_k%d_%d", w, n)
				a := webhook(t, p.intake, name, secretOf(name, 1), id, 2000)
				switch {
				case a.status == 200:
					mu.Lock()
					accepted[id], lastAccepted = dest, time.Now()
					mu.Unlock()
				case a.status == 0:
					mu.Lock()
					unanswered[id] = dest
					mu.Unlock()
				default:
					t.Errorf("%s before the kill: %d %s", name, a.status, a.body)
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}

	// The burst: four clients, each creating a destination and its
	// source until one is left unanswered. The kill comes once 40 more
	// creates were answered, amid the rest.
	var next, done atomic.Int64
	next.Store(before)
	var burst sync.WaitGroup
	for range 4 {
		burst.Go(func() {
			for {
				if !create(int(next.Add(1) - 1)) {
					return
				}
				done.Add(2)
			}
		})
	}
	if !testenv.WaitFor(60*time.Second, func() bool { return done.Load() >= 40 }) {
		t.Fatalf("the burst made %d creates in a minute: %v", done.Load(), status)
	}
	time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	p.kill()
	killed := time.Now()
	burst.Wait()
	stop.Store(true)
	traffic.Wait()

	sink.open.Store(true)
	p = serve(t, bin, cfg)

	// Each object as its create was answered.
	var entries []map[string]any
	for cursor := ""; ; {
		a := call("GET", p.api+"/v1/audit?limit=500&cursor="+cursor, "")
		list, _ := a.json["entries"].([]any)
		for _, e := range list {
			entries = append(entries, e.(map[string]any))
		}
		next, _ := a.json["next_cursor"].(string)
		if a.status != 200 || next == "" {
			break
		}
		cursor = next
	}
	audited := map[string]int{}
	for _, e := range entries {
		if action := fmt.Sprint(e["action"]); strings.HasSuffix(action, "_create") {
			audited[strings.TrimPrefix(fmt.Sprint(e["target"]), strings.TrimSuffix(action, "_create")+" ")]++
		}
	}
	counts := map[string]int{}
	for name, st := range status {
		kind := "destinations"
		if strings.HasPrefix(name, "s-") {
			kind = "sources"
		}
		a := call("GET", p.api+"/v1/"+kind+"/"+name, "")
		there := a.status == 200
		switch {
		case there && (a.json["version"] != 1.0 || a.json["managed_by"] != "api"):
			t.Errorf("%s after the restart: %s", name, a.body)
		case !there && a.status != 404:
			t.Errorf("GET %s after the restart: %d %s", name, a.status, a.body)
		case st == 201 && !there:
			t.Errorf("%s, answered 201 before the kill, is gone", name)
		case st != 201 && st != 0 && there:
			t.Errorf("%s, answered %d before the kill, is there", name, st)
		}
		if n := audited[name]; there && n != 1 || !there && n != 0 {
			t.Errorf("%s (there: %v) has %d creates in the audit log", name, there, n)
		}
		if kind == "sources" {
			id := "evt_after_" + name
			s := webhook(t, p.intake, name, secretOf(name, 1), id, 2000).status
			switch {
			case there && s == 200:
				accepted[id] = "d-" + strings.TrimPrefix(name, "s-")
			case there || s != 404:
				t.Errorf("%s (there: %v) answers a signed event %d", name, there, s)
			}
		}
		counts[fmt.Sprintf("%d/%v", st, there)]++
	}

	// Every event accepted, before the kill or after, delivered once.
	check := func() []string {
		got := sink.answered()
		var wrong []string
		for id, dest := range accepted {
			if d := strings.Join(got[id], ","); d != dest {
				wrong = append(wrong, fmt.Sprintf("%s to [%s], want %s", id, d, dest))
			}
		}
		for id, ds := range got {
			if _, ok := accepted[id]; !ok && (len(ds) > 1 || ds[0] != unanswered[id]) {
				wrong = append(wrong, fmt.Sprintf("%s, never accepted, delivered to %v", id, ds))
			}
		}
		return wrong
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(check()) == 0 }) {
		t.Fatalf("not delivered once each (%d): %v", len(check()), first(check(), 20))
	}
	time.Sleep(time.Second)
	if wrong := check(); len(wrong) > 0 {
		t.Fatalf("delivered again: %v", first(wrong, 20))
	}
	unansweredDelivered := 0
	for id := range unanswered {
		unansweredDelivered += len(sink.answered()[id])
	}
	t.Logf("SQLite, one process: %d creates sent, by answer before the kill and presence after the restart %v (0: unanswered); %d events accepted, the last %s before the kill, each delivered once after the restart; of %d the kill left unanswered, %d stored and delivered once",
		len(status), counts, len(accepted), killed.Sub(lastAccepted).Round(time.Microsecond), len(unanswered), unansweredDelivered)
}
