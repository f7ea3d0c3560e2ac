package main_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

const listenToken = "listen-token-0123456789"

// listenEvents is how many events the listen tests send: 1,000 keeps CI
// short; ONCEHOOK_LISTEN_EVENTS=5000 is the figure.
func listenEvents() int {
	if n, err := strconv.Atoi(os.Getenv("ONCEHOOK_LISTEN_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// localApp is the developer's app: it counts each Idempotency-Key it
// answered. While down it fails before answering (the connection is
// closed, nothing counted), as an app that crashed would.
type localApp struct {
	*httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	got  map[string]int
}

func newLocalApp(t *testing.T) *localApp {
	a := &localApp{got: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.down.Load() {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		a.mu.Lock()
		a.got[r.Header.Get("Idempotency-Key")]++
		a.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *localApp) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got)
}

// listenGateway runs a gateway (in this process, race detector on) with a
// generic source delivering to the pull destination laptop.
func listenGateway(t *testing.T) *oncehooktest.Gateway {
	return oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: dev, token: `+listenToken+`, pull: [laptop]}
sources:
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], type: ["json:type"], destinations: [laptop]}
destinations:
  - {name: laptop, pull: {}, timeout: 20s, retry: {max_attempts: 100000, base_delay: 100ms, max_delay: 1s}}
`)
}

func postEvents(t *testing.T, gw *oncehooktest.Gateway, n int) {
	t.Helper()
	s := testenv.NewStorm(8)
	var failed atomic.Int32
	for i := range n {
		s.Go(func() {
			resp, err := http.Post(gw.URL+"/in/shop", "application/json", strings.NewReader(fmt.Sprintf(`{"id":"ev_%d","type":"order.paid"}`, i)))
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
				return
			}
			resp.Body.Close()
		})
	}
	s.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d events not accepted", failed.Load())
	}
}

// listenProcess is a running `oncehook listen`.
type listenProcess struct {
	cmd *exec.Cmd
	out *syncBuffer
}

func startListen(t *testing.T, api, forward, journal string, extra ...string) *listenProcess {
	t.Helper()
	args := append([]string{"listen", "laptop", "--forward-to", forward, "--api", api, "--journal", journal, "--lease", "5s"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "ONCEHOOK_API_TOKEN="+listenToken)
	p := &listenProcess{cmd: cmd, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

func (p *listenProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// lines are the keys listen printed a line for, with their outcome.
func (p *listenProcess) lines() []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p.out.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), " attempt ") {
			out = append(out, sc.Text())
		}
	}
	return out
}

func waitCount(t *testing.T, app *localApp, n int, within time.Duration, out ...*listenProcess) {
	t.Helper()
	if !testenv.WaitFor(within, func() bool { return app.count() >= n }) {
		var logs []string
		for _, p := range out {
			logs = append(logs, p.out.String())
		}
		t.Fatalf("the app got %d keys, want %d; listen said:\n%s", app.count(), n, strings.Join(logs, "\n---\n"))
	}
}

// Invariant 26 and the promise: listen killed with SIGKILL
// mid-batch, the network between it and the gateway cut and restored,
// the local app down for a while: every event reaches the app, each once
// (the app never counts what it failed before answering), and listen's
// lines account for each.
func TestListenForwardsEachEventOnceThroughAKillACutAndADownApp(t *testing.T) {
	t.Parallel()
	n := listenEvents()
	gw := listenGateway(t)
	app := newLocalApp(t)
	network := testenv.NewProxy(t, strings.TrimPrefix(gw.APIURL, "http://"))
	api := "http://" + network.Addr
	journal := filepath.Join(t.TempDir(), "listen.journal")
	postEvents(t, gw, n)

	first := startListen(t, api, app.URL, journal)
	waitCount(t, app, n/5, 60*time.Second, first)
	first.kill() // mid-batch: what it forwarded and did not ack is in its journal

	second := startListen(t, api, app.URL, journal)
	waitCount(t, app, 2*n/5, 60*time.Second, first, second)
	network.Stop()
	time.Sleep(3 * time.Second)
	network.Start(t)
	waitCount(t, app, 3*n/5, 60*time.Second, first, second)
	if !strings.Contains(second.out.String(), "lost the gateway") || !strings.Contains(second.out.String(), "reconnected") {
		t.Errorf("listen did not say it lost the gateway and reconnected:\n%s", second.out)
	}
	app.down.Store(true)
	time.Sleep(3 * time.Second)
	app.down.Store(false)
	waitCount(t, app, n, 120*time.Second, first, second)

	app.mu.Lock()
	var twice []string
	for k, c := range app.got {
		if c != 1 {
			twice = append(twice, fmt.Sprintf("%s×%d", k, c))
		}
	}
	app.mu.Unlock()
	// A kill while forwards are in flight (the app answered, listen never
	// heard it, so neither its journal nor the gateway knows) forwards
	// those again, with the same key: at most the 8 listen forwards at
	// once. Everything answered before the kill is in the journal.
	if len(twice) > 8 {
		t.Errorf("%d keys reached the app more than once: %v", len(twice), twice)
	}
	t.Logf("%d events, %d reached the app twice (in flight at the kill): %v", n, len(twice), twice)
	// Every key has a line that says it reached the app (200), in one of
	// the two runs. One the first run forwarded and journaled but was
	// killed before printing is printed by the second, "answered before a
	// restart", once its lease is over and the gateway hands it out again:
	// after the app's count is complete, so wait for it.
	var missing string
	testenv.WaitFor(60*time.Second, func() bool {
		printed := map[string]bool{}
		for _, l := range append(first.lines(), second.lines()...) {
			f := strings.Fields(l)
			if len(f) > 4 && (strings.Contains(l, "[200]")) {
				printed[f[4]] = true
			}
		}
		missing = ""
		for i := range n {
			if k := "ev_" + strconv.Itoa(i); !printed[k] {
				missing = k
				return false
			}
		}
		return true
	})
	if missing != "" {
		t.Fatalf("no [200] line for %s", missing)
	}
	if !strings.Contains(second.out.String(), "[ERR]") {
		t.Errorf("the app's failures are not in listen's lines")
	}
}

// Two listen processes on one destination: each event forwarded by one of
// them, once.
func TestTwoListenersForwardEachEventOnce(t *testing.T) {
	n := listenEvents()
	gw := listenGateway(t)
	app := newLocalApp(t)
	dir := t.TempDir()
	a := startListen(t, gw.APIURL, app.URL, filepath.Join(dir, "a.journal"))
	b := startListen(t, gw.APIURL, app.URL, filepath.Join(dir, "b.journal"))
	postEvents(t, gw, n)
	waitCount(t, app, n, 120*time.Second, a, b)
	time.Sleep(time.Second) // anything forwarded twice would land by now
	app.mu.Lock()
	defer app.mu.Unlock()
	for k, c := range app.got {
		if c != 1 {
			t.Errorf("%s reached the app %d times", k, c)
		}
	}
	t.Logf("%d events: %d lines from one listener, %d from the other", n, len(a.lines()), len(b.lines()))
}

// The same journal cannot be two listeners' at once.
func TestListenRefusesAJournalInUse(t *testing.T) {
	gw := listenGateway(t)
	journal := filepath.Join(t.TempDir(), "j")
	a := startListen(t, gw.APIURL, "http://127.0.0.1:9/", journal)
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(a.out.String(), "listening") }) {
		t.Fatal(a.out.String())
	}
	out, err := exec.Command(binary, "listen", "laptop", "--forward-to", "http://127.0.0.1:9/", "--api", gw.APIURL, "--token", listenToken, "--journal", journal).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another listener's") {
		t.Fatalf("a second listener on the same journal: %v %s", err, out)
	}
}

// --type with an empty type in its list is refused: it matched no event,
// so every one was acked as skipped and none forwarded (a tester's ',').
func TestListenRefusesAnEmptyType(t *testing.T) {
	for _, types := range []string{",", "order.paid,", " , invoice.*"} {
		out, err := exec.Command(binary, "listen", "laptop", "--forward-to", "http://127.0.0.1:9/", "--api", "http://127.0.0.1:9",
			"--token", listenToken, "--journal", filepath.Join(t.TempDir(), "j"), "--type", types).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "an empty type in the list") {
			t.Errorf("--type %q: %v %s, want it refused", types, err, out)
		}
	}
}
