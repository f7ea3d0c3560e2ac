package oncehook_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/kinds"
)

// brokenConsumers is the NATS kind as the binary has it, except that it
// cannot build the consumer of a source named "broken": the last step of
// New that can fail, after the store (and Redis) opened, the tracer, the
// writer's goroutines and the publishers started. A kind is what a
// library user may pass (Options.Kinds), so New must survive one that
// fails.
type brokenConsumers struct{ broker.Kind }

func (k brokenConsumers) NewConsumer(src broker.Source, s config.ConsumeSettings) (broker.Consumer, error) {
	if src.Name == "broken" {
		return nil, errors.New("this build cannot consume for broken")
	}
	return k.Kind.NewConsumer(src, s)
}

func brokenKinds() oncehook.Kinds {
	k := kinds.All()
	for i, b := range k.Brokers {
		if b.Name() == "nats" {
			k.Brokers[i] = brokenConsumers{b}
		}
	}
	return k
}

// lateFailureConfig is a config whose gateway fails at its consumers:
// one source consumes NATS fine, the next ("broken") cannot be built; a
// destination publishes to NATS, so a publisher was built before.
func lateFailureConfig(store, extra string) string {
	nats := testenv.NATSBase()
	return `
store: ` + store + `
` + extra + `
sources:
  - name: fine
    preset: generic
    unsigned: true
    key: ["json:id"]
    consume: {nats: {url: ` + nats + `, stream: LEAK_FINE}}
    destinations: [app, queue]
  - name: broken
    preset: generic
    unsigned: true
    key: ["json:id"]
    consume: {nats: {url: ` + nats + `, stream: LEAK_BROKEN}}
    destinations: [app]
destinations:
  - {name: app, url: "http://127.0.0.1:1/never"}
  - {name: queue, publish: {nats: {url: ` + nats + `, subject: leak.out}}}
`
}

// newFails runs New on text and wants it to fail naming the broken
// source's consumer.
func newFails(t *testing.T, text string, kinds oncehook.Kinds) {
	t.Helper()
	cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gw, err := oncehook.New(context.Background(), cfg, oncehook.Options{Kinds: kinds})
	if err == nil {
		gw.Close()
		t.Fatal("New built a gateway whose consumer cannot be built")
	}
	if !strings.Contains(err.Error(), "sources[1].consume") {
		t.Fatalf("New: %v, want the broken source's consumer named", err)
	}
}

// goroutinesSettle waits until no more goroutines run than before (what
// New started has ended), and fails with their stacks if they do not
// within a generous bound.
func goroutinesSettle(t *testing.T, before int) {
	t.Helper()
	if testenv.WaitFor(20*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		return
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("%d goroutines run, %d before New: it left some behind\n%s", runtime.NumGoroutine(), before, buf)
}

// openFiles are the files under dir this process holds open (Linux's
// /proc; nil elsewhere).
func openFiles(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd: the files a process holds cannot be listed here")
	}
	var held []string
	for _, fd := range fds {
		if to, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(to, dir) {
			held = append(held, to)
		}
	}
	return held
}

// Issue 41, item 15, and issue 42, item 3: when a step of New failed after
// earlier steps had started things, those stayed: the group committer's
// goroutines, the publishers, the tracer's exporter, and on some paths the
// store and its file. New now stops what it started, in reverse order,
// before it returns the error: the goroutines end, the SQLite file is not
// held.
func TestNewThatFailsLeavesNothingRunning(t *testing.T) {
	// Tracing on, exporting nowhere: its batcher is one more goroutine
	// New starts before it fails (nothing is traced, so nothing is sent).
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	dir := t.TempDir()
	text := lateFailureConfig("sqlite://"+filepath.Join(dir, "oncehook.db"), "")
	runtime.GC()
	before := runtime.NumGoroutine()
	for range 3 { // a leak grows with each try, as a supervisor's restarts would
		newFails(t, text, brokenKinds())
	}
	goroutinesSettle(t, before)
	if held := openFiles(t, dir); len(held) > 0 {
		t.Fatalf("the store's files are still open after New failed: %v", held)
	}
	// What failed leaves a store a gateway opens again.
	cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gw, err := oncehook.New(context.Background(), cfg, oncehook.Options{Kinds: kinds.All()})
	if err != nil {
		t.Fatalf("New with kinds that build every consumer: %v", err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	goroutinesSettle(t, before)
	if held := openFiles(t, dir); len(held) > 0 {
		t.Fatalf("the store's files are still open after Close: %v", held)
	}
}

// The same on PostgreSQL behind Redis: the pool's connections are
// released (the server sees none under the test's application_name) and
// Redis's client closed.
func TestNewThatFailsReleasesPostgresConnections(t *testing.T) {
	redisURL := testenv.Redis(t)
	u, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	app := "oncehook-new-fails-" + hex.EncodeToString(b[:])
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	text := lateFailureConfig(u.String(), "redis: "+redisURL)

	conns := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, testenv.PostgresBase())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	runtime.GC()
	before := runtime.NumGoroutine()
	for range 3 {
		newFails(t, text, brokenKinds())
	}
	goroutinesSettle(t, before)
	if !testenv.WaitFor(10*time.Second, func() bool { return conns() == 0 }) {
		t.Fatalf("%d connections of the failed gateways are still open on PostgreSQL", conns())
	}
	// The check counts what it should: a gateway that runs holds some.
	cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gw, err := oncehook.New(context.Background(), cfg, oncehook.Options{Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	if n := conns(); n == 0 {
		t.Error("a built gateway holds no connection under the test's application_name: the check sees nothing")
	}
	gw.Close()
	if !testenv.WaitFor(10*time.Second, func() bool { return conns() == 0 }) {
		t.Fatalf("%d connections still open after Close", conns())
	}
}

// Serve that cannot start (an upstream's address is taken) closed the API
// listeners but neither intake's nor the gateway: the store stayed open
// and intake's port bound. It now closes all it was given, and the
// gateway, as when it stops.
func TestServeThatCannotStartClosesItsListenersAndTheGateway(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
store: sqlite://%s
sources: [{name: s, preset: generic, unsigned: true, key: ["json:id"], destinations: [app]}]
destinations: [{name: app, url: "http://127.0.0.1:1/never"}]
upstreams: [{name: payments, listen: %q, upstream: "http://127.0.0.1:1"}]
`, filepath.Join(dir, "oncehook.db"), taken.Addr().String())), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gw, err := oncehook.New(context.Background(), cfg, oncehook.Options{Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = gw.Serve(context.Background(), ln, api)
	if err == nil || !strings.Contains(err.Error(), "upstreams payments") {
		t.Fatalf("Serve: %v, want the taken address named", err)
	}
	for _, l := range []net.Listener{ln, api} {
		if c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections", l.Addr())
		}
	}
	if held := openFiles(t, dir); len(held) > 0 {
		t.Fatalf("the store's files are still open: %v", held)
	}
}
