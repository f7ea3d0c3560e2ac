package main_test

// These tests run the real binary as a separate process, so that "crash"
// means kill -9 and not a polite shutdown.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
)

var binary string

func TestMain(m *testing.M) {
	if os.Getenv("ONCEHOOK_EFFECT_HOLDER") != "" {
		effectHolder() // a child of TestKilledEffectHolderIsTakenOverOnce
		return
	}
	var remove func()
	var err error
	if binary, remove, err = testenv.BuildOncehook("."); err != nil {
		fmt.Fprintln(os.Stderr, "build oncehook:", err)
		os.Exit(1)
	}
	code := m.Run()
	remove()
	os.Exit(code)
}

// process is a running `oncehook serve`.
type process struct {
	cmd    *exec.Cmd
	URL    string
	stdout *syncBuffer
	stderr *syncBuffer
}

type syncBuffer = testenv.Buffer

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcess runs `oncehook serve` in dir with args and waits until it is
// ready.
func startProcess(t *testing.T, dir string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	// The first line says where it listens.
	out := bufio.NewReader(stdoutPipe)
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("no banner: %v\nstderr: %s", err, p.stderr)
	}
	p.stdout.Write([]byte(first))
	go io.Copy(p.stdout, out)
	m := regexp.MustCompile(`listening on (http://[^ ]+)`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("banner %q", first)
	}
	p.URL = m[1]
	// Ready once migrated and consuming; a loaded CI machine (the race
	// detector, two cores shared) has taken over 10 s.
	if !testenv.WaitFor(30*time.Second, func() bool {
		resp, err := http.Get(p.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("never ready; stderr: %s", p.stderr)
	}
	return p
}

// kill sends SIGKILL: no shutdown code runs.
func (p *process) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

const secret = "whsec_crash_secret"

// writeConfig writes, into dir, a config with one Stripe source delivering
// to sinkURL, on storeURL (and Redis in front when redisURL is set). The
// lease (4s) outlasts the destination timeout (3s), as it must.
func writeConfig(t *testing.T, dir, storeURL, redisURL, sinkURL string) string {
	t.Helper()
	path := filepath.Join(dir, "oncehook.yaml")
	redisLine := ""
	if redisURL != "" {
		redisLine = "redis: " + redisURL + "\n"
	}
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
store: %q
%sdelivery:
  lease: 4s
sources:
  - name: stripe
    preset: stripe
    secrets: [%q]
    destinations: [app]
destinations:
  - name: app
    url: %s
    timeout: 3s
    retry: {max_attempts: 20, base_delay: 50ms, max_delay: 200ms}
`, storeURL, redisLine, secret, sinkURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func sendEvent(t *testing.T, url, id string) (int, string) {
	return roundTrip(testenv.SignedRequest(t, url+"/in/stripe", "stripe", secret, []byte(`{"id":"`+id+`","object":"event"}`), ""))
}

// roundTrip sends req and returns the answer's status and body, or 0 and
// the error when there was no answer (a process killed, a port closed).
func roundTrip(req *http.Request) (int, string) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// okSink records the keys it answered 200 to, once open; until then it holds
// every request until the client goes away.
type okSink struct {
	*testenv.Sink
	open atomic.Bool
	mu   sync.Mutex
	ok   map[string]int
}

func newOKSink(t *testing.T) *okSink {
	s := &okSink{Sink: testenv.NewSink(t), ok: map[string]int{}}
	s.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		if !s.open.Load() {
			<-r.Context().Done()
			return
		}
		s.mu.Lock()
		s.ok[r.Header.Get("Idempotency-Key")]++
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
	return s
}

func (s *okSink) delivered() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.ok))
	for k, v := range s.ok {
		out[k] = v
	}
	return out
}

// Invariant 6: kill -9 after events are acknowledged but before they are
// delivered (some mid-attempt, holding leases; some not yet leased); after a
// restart every acknowledged event is delivered, once.
func TestKillNineLosesNothingAcknowledged(t *testing.T) {
	dir := t.TempDir()
	sink := newOKSink(t)
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	p := startProcess(t, dir, "--config", cfg)

	const events = 200
	var acked sync.Map
	requests := testenv.NewStorm(16)
	for i := range events {
		requests.Go(func() {
			id := fmt.Sprintf("evt_crash_%03d", i)
			if status, _ := sendEvent(t, p.URL, id); status == 200 {
				acked.Store("stripe:"+id, true)
			} else {
				t.Errorf("%s: %d", id, status)
			}
		})
	}
	requests.Wait()
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) >= 64 }) {
		t.Fatalf("only %d attempts in flight before the crash", len(sink.Deliveries()))
	}
	p.kill()
	if len(sink.delivered()) != 0 {
		t.Fatal("something was delivered before the destination opened")
	}

	sink.open.Store(true)
	p2 := startProcess(t, dir, "--config", cfg)
	defer p2.kill()
	want := 0
	acked.Range(func(any, any) bool { want++; return true })
	if want != events {
		t.Fatalf("%d acknowledged, want %d", want, events)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(sink.delivered()) == events }) {
		t.Fatalf("after restart, %d of %d acknowledged events delivered; stderr:\n%s", len(sink.delivered()), events, p2.stderr)
	}
	time.Sleep(300 * time.Millisecond)
	for key, n := range sink.delivered() {
		if _, ok := acked.Load(key); !ok {
			t.Errorf("delivered %s, which was never acknowledged", key)
		}
		if n != 1 {
			t.Errorf("%s delivered %d times after the restart", key, n)
		}
	}
}

// A restart between two copies of a duplicate storm does not produce a
// second delivery: the key is durable, not in memory.
func TestRestartDoesNotLetADuplicateThrough(t *testing.T) {
	dir := t.TempDir()
	sink := newOKSink(t)
	sink.open.Store(true)
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	p := startProcess(t, dir, "--config", cfg)
	if status, body := sendEvent(t, p.URL, "evt_once"); status != 200 || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("first: %d %s", status, body)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return sink.delivered()["stripe:evt_once"] == 1 }) {
		t.Fatal("not delivered")
	}
	p.kill()
	p2 := startProcess(t, dir, "--config", cfg)
	for range 5 {
		if status, body := sendEvent(t, p2.URL, "evt_once"); status != 200 || !strings.Contains(body, `"duplicate"`) {
			t.Fatalf("after restart: %d %s, want 200 duplicate", status, body)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := sink.delivered()["stripe:evt_once"]; n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}

// The README's quick start: `oncehook serve` with no config file starts on
// SQLite in the working directory with a demo source, prints how to send a
// test event, and that command works: accepted, then duplicate, then the
// demo sink logs one delivery.
func TestQuickStartDemoMode(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir, "--listen", "127.0.0.1:0")
	if _, err := os.Stat(filepath.Join(dir, "oncehook.db")); err != nil {
		t.Fatalf("no SQLite file in the working directory: %v", err)
	}
	testenv.WaitFor(2*time.Second, func() bool { return strings.Contains(p.stdout.String(), "oncehook init") })
	banner := p.stdout.String()
	m := regexp.MustCompile(`oncehook (send --url \S+ --preset stripe --secret \S+) \\\n\s+--body '([^']+)'`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("banner has no send command:\n%s", banner)
	}
	args := append(strings.Fields(m[1]), "--body", m[2])
	for _, want := range []string{`"status":"accepted"`, `"status":"duplicate"`} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "200 ") || !strings.Contains(string(out), want) {
			t.Fatalf("oncehook %s: %v\n%s\nwant %s", strings.Join(args, " "), err, out, want)
		}
	}
	if !testenv.WaitFor(5*time.Second, func() bool {
		return strings.Count(p.stderr.String(), "demo sink received a delivery") == 1
	}) {
		t.Fatalf("demo sink log:\n%s", p.stderr)
	}
	// Found from outside: with the demo running, the operator commands in
	// the same folder failed on the missing oncehook.yaml. They use the
	// demo's store, and the banner's command for another folder works.
	if out, ok := oncehook(t, dir, nil, "events", "ls"); !ok || !strings.Contains(out, "evt_demo_1") {
		t.Fatalf("events ls beside the demo: ok=%v\n%s", ok, out)
	}
	cmd := regexp.MustCompile(`oncehook (events ls --api \S+ --token \S+)`).FindStringSubmatch(banner)
	if cmd == nil {
		t.Fatalf("the banner has no operator command:\n%s", banner)
	}
	if out, ok := oncehook(t, t.TempDir(), nil, strings.Fields(cmd[1])...); !ok || !strings.Contains(out, "evt_demo_1") {
		t.Fatalf("oncehook %s elsewhere: ok=%v\n%s", cmd[1], ok, out)
	}
	if out, ok := oncehook(t, t.TempDir(), nil, "events", "ls"); ok || !strings.Contains(out, "--api") {
		t.Fatalf("events ls with neither a config nor a demo: ok=%v, want advice on --api\n%s", ok, out)
	}
}

// `serve --demo --listen 0.0.0.0:8080`, as the README runs it in a
// container: the API listens where intake does, so that the banner's
// one-time link and token work from outside the machine (the container),
// and the banner prints addresses a browser here can open.
func TestDemoOnAWildcardAddressServesItsAPIThere(t *testing.T) {
	outside := nonLoopbackIPv4(t)
	dir := t.TempDir()
	p := startProcess(t, dir, "--demo", "--listen", "0.0.0.0:0")
	testenv.WaitFor(5*time.Second, func() bool { return strings.Contains(p.stdout.String(), "oncehook init") })
	banner := p.stdout.String()
	m := regexp.MustCompile(`dashboard: http://(\S+?)(/ui/login/\S+)`).FindStringSubmatch(banner)
	tok := regexp.MustCompile(`events ls --api http://(\S+) --token (\S+)`).FindStringSubmatch(banner)
	if m == nil || tok == nil {
		t.Fatalf("the banner has no dashboard link or operator command:\n%s", banner)
	}
	host, port, err := net.SplitHostPort(m[1])
	if err != nil || host != "127.0.0.1" || tok[1] != m[1] {
		t.Fatalf("the banner's API address %q (%q): want one a browser here can open, 127.0.0.1\n%s", m[1], tok[1], banner)
	}
	from := net.JoinHostPort(outside, port)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get("http://" + from + m[2])
	if err != nil {
		t.Fatalf("the one-time link at %s: %v\n%s", from, err, banner)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("the one-time link at %s: %d %s", from, resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, err := browser.Get("http://" + from + "/ui/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the dashboard at %s after the link: %v %v", from, resp, err)
	}
	if out, ok := oncehook(t, t.TempDir(), nil, "events", "ls", "--api", "http://"+from, "--token", tok[2]); !ok {
		t.Fatalf("events ls against %s with the banner's token: %s", from, out)
	}
}

// nonLoopbackIPv4 is an address of this machine that is not loopback: how
// another machine (or a container's host) reaches it.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no address but loopback")
	return ""
}

// An operator replays dead letters with the CLI while the gateway runs: the
// gateway delivers them, under the same Idempotency-Key.
func TestReplayCommandRedeliversDeadLetters(t *testing.T) {
	dir := t.TempDir()
	var fixed atomic.Bool
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
		if !fixed.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity) // permanent: straight to the dead letters
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	p := startProcess(t, dir, "--config", cfg)
	if status, body := sendEvent(t, p.URL, "evt_dead"); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatal("no first attempt")
	}
	fixed.Store(true)
	// The dead letter is recorded a moment after the attempt: replay until
	// there is one.
	var out []byte
	var err error
	if !testenv.WaitFor(5*time.Second, func() bool {
		cmd := exec.Command(binary, "replay", "--config", cfg, "--dead")
		cmd.Dir = dir // the config's store path is relative to it, as for serve
		out, err = cmd.CombinedOutput()
		return err != nil || !strings.Contains(string(out), "requeued 0 ")
	}) || err != nil || !strings.Contains(string(out), "requeued 1 delivery") {
		t.Fatalf("oncehook replay --dead: %v\n%s", err, out)
	}
	if !testenv.WaitFor(15*time.Second, func() bool { return len(sink.Deliveries()) == 2 }) {
		t.Fatalf("replayed dead letter not delivered; stderr:\n%s", p.stderr)
	}
	ds := sink.Deliveries()
	if ds[0].Key != "stripe:evt_dead" || ds[1].Key != ds[0].Key {
		t.Fatalf("keys %q then %q: want the same Idempotency-Key", ds[0].Key, ds[1].Key)
	}
	cmd := exec.Command(binary, "replay", "--config", cfg, "--source", "stripe", "--key", "nope")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no such event") {
		t.Fatalf("replay of an unknown key: %v\n%s", err, out)
	}
}

// One writer: outcomes ride the writer's next commit. kill -9 after the
// destination answered but before those outcomes committed (the writer is
// held by another process's write lock on the database): after a restart,
// exactly the attempts that went unrecorded are made again, each once, with
// the same Idempotency-Key and the next X-Oncehook-Attempt, and nothing
// else repeats.
func TestKillNineBeforeOutcomesCommitRepeatsOnlyThoseAttempts(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	var mu sync.Mutex
	seen := map[string][]string{} // key → X-Oncehook-Attempt of each delivery
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")] = append(seen[r.Header.Get("Idempotency-Key")], r.Header.Get("X-Oncehook-Attempt"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	p := startProcess(t, dir, "--config", cfg)
	const events = 50
	for i := range events {
		if status, body := sendEvent(t, p.URL, fmt.Sprintf("evt_unrecorded_%02d", i)); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == events }) {
		t.Fatalf("%d attempts in flight, want %d", len(sink.Deliveries()), events)
	}
	// Another process takes the database's write lock: the gateway's
	// writer can commit nothing from here on.
	unlock := sqlitetest.Lock(t, filepath.Join(dir, "events.db"))
	close(release) // the destination answers 200 to every attempt
	if !testenv.WaitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == events }) {
		t.Fatal("the destination did not answer every attempt")
	}
	time.Sleep(200 * time.Millisecond) // the outcomes wait for the writer
	p.kill()
	unlock()

	p2 := startProcess(t, dir, "--config", cfg)
	defer p2.kill()
	if !testenv.WaitFor(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, attempts := range seen {
			if len(attempts) < 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("after the restart the unrecorded attempts were not made again; stderr:\n%s", p2.stderr)
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for key, attempts := range seen {
		if len(attempts) != 2 || attempts[0] != "1" || attempts[1] != "2" {
			t.Errorf("%s delivered as attempts %v; want 1 before the crash, then 2 once", key, attempts)
		}
	}
}

// metrics.listen moves GET /metrics off the intake listener: intake is for
// providers, on the internet, and the metrics name every source and
// destination and show queue depths.
func TestMetricsListenMovesMetricsOffIntake(t *testing.T) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "metrics: {listen: 127.0.0.1:0}")
	f.Close()
	p := startProcess(t, dir, "--config", cfg)
	re := regexp.MustCompile(`metrics: (http://\S+/metrics)`)
	if !testenv.WaitFor(5*time.Second, func() bool { return re.MatchString(p.stdout.String()) }) {
		t.Fatalf("no metrics line:\n%s", p.stdout)
	}
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get(re.FindStringSubmatch(p.stdout.String())[1]); status != 200 || !strings.Contains(body, "oncehook_") {
		t.Fatalf("metrics on metrics.listen: %d %.200s", status, body)
	}
	if status, _ := get(p.URL + "/metrics"); status != http.StatusNotFound {
		t.Fatalf("metrics still on intake: %d", status)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, PEM, and
// returns their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oncehook test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// tls: serve runs every listener over TLS, for users without a reverse
// proxy: intake takes a signed event over https, the dashboard's session
// cookie is then Secure and __Host- prefixed, and plain HTTP is refused.
func TestServeOverTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	sink := testenv.NewSink(t)
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	f, _ := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "tls: {cert_file: %q, key_file: %q}\napi:\n  listen: 127.0.0.1:0\n  tokens: [{name: ops, token: ops-token-0123456789}]\n", certFile, keyFile)
	f.Close()
	cmd := exec.Command(binary, "serve", "--config", cfg)
	cmd.Dir = dir
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	re := regexp.MustCompile(`listening on (https://\S+)[\s\S]*api: +(https://\S+)`)
	if !testenv.WaitFor(10*time.Second, func() bool { return re.MatchString(out.String()) }) {
		t.Fatalf("no https banner:\n%s", out)
	}
	m := re.FindStringSubmatch(out.String())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req := testenv.SignedRequest(t, m[1]+"/in/stripe", "stripe", secret, []byte(`{"id":"evt_tls","object":"event"}`), "")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a signed event over TLS: %v %v", resp, err)
	}
	resp.Body.Close()
	if !testenv.WaitFor(5*time.Second, func() bool { return sink.ByKey()["stripe:evt_tls"] == 1 }) {
		t.Fatal("not delivered")
	}
	resp, err = client.PostForm(m[2]+"/ui/login", url.Values{"token": {"ops-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var secure bool
	for _, c := range resp.Cookies() {
		secure = secure || c.Name == "__Host-oncehook_session" && c.Secure && c.Path == "/"
	}
	if !secure {
		t.Fatalf("the session cookie over TLS: %v", resp.Header["Set-Cookie"])
	}
	if resp, err := http.Get(strings.Replace(m[1], "https://", "http://", 1) + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Fatal("plain HTTP answered on a TLS listener")
	}
	// Over TLS too, a header over net/http's limit is intake's answer,
	// counted; and plain HTTP is told it reached an HTTPS listener.
	req = testenv.SignedRequest(t, m[1]+"/in/stripe", "stripe", secret, []byte(`{"id":"evt_tls_big","object":"event"}`), "")
	req.Header.Set("X-Padding", strings.Repeat("a", 2<<20))
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("a 2 MB header over TLS: %v %v", resp, err)
	}
	if resp, err := http.Get(strings.Replace(m[1], "https://", "http://", 1) + "/healthz"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the TLS listener: %v %v, want net/http's 400", resp, err)
	}
}
