// Package testenv holds what oncehook's own tests share: a recording
// destination server and helpers to sign and send provider requests.
package testenv

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/provider"
)

// Delivery is one request a Sink received.
type Delivery struct {
	Key     string // Idempotency-Key
	Attempt string // X-Oncehook-Attempt
	Path    string // the request's URL path
	Header  http.Header
	Body    []byte
	At      time.Time
}

// Sink is a real HTTP destination that records every delivery. Respond
// decides each answer; by default it is 200.
type Sink struct {
	*httptest.Server
	mu         sync.Mutex
	deliveries []Delivery
	// Respond, when set, writes the answer for the n-th request (from 1).
	Respond func(w http.ResponseWriter, r *http.Request, n int)
}

// NewSink starts a Sink; it is closed when the test ends.
func NewSink(t testing.TB) *Sink {
	s := &Sink{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.deliveries = append(s.deliveries, Delivery{
		Key: r.Header.Get("Idempotency-Key"), Attempt: r.Header.Get("X-Oncehook-Attempt"), Path: r.URL.Path,
		Header: r.Header.Clone(), Body: body, At: time.Now(),
	})
	n := len(s.deliveries)
	respond := s.Respond
	s.mu.Unlock()
	if respond != nil {
		respond(w, r, n)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Deliveries returns a copy of what was received so far.
func (s *Sink) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// ByKey counts deliveries per Idempotency-Key.
func (s *Sink) ByKey() map[string]int {
	counts := map[string]int{}
	for _, d := range s.Deliveries() {
		counts[d.Key]++
	}
	return counts
}

// CheckEachOnce fails the test for every key the sink received more than
// once (exactly once per key is what every delivery test wants).
func (s *Sink) CheckEachOnce(t testing.TB) {
	t.Helper()
	for key, n := range s.ByKey() {
		if n != 1 {
			t.Errorf("%s delivered %d times", key, n)
		}
	}
}

// WaitFor polls until cond holds or the timeout passes, and reports whether
// it held.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SignedRequest builds a POST to url signed as preset does with secret.
func SignedRequest(t testing.TB, url, preset, secret string, body []byte, id string) *http.Request {
	t.Helper()
	p, err := provider.New(preset, provider.Options{Secrets: []string{secret}, Key: []string{"json:id"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.SignHTTP(p, req, body, secret, time.Now(), id); err != nil {
		t.Fatal(err)
	}
	return req
}

// Buffer is a bytes.Buffer safe for concurrent writers: a process's output
// or a gateway's log, read by the test while it is being written.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CPUTime is this process's user+system CPU time so far: a benchmark
// reads it before and after to report CPU per message.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Writes is how many write system calls (write, pwrite: a WAL frame is
// two, a checkpointed page one more) the process has made so far, and the
// bytes they wrote, from /proc/self/io (syscw, wchar); zeros where there
// is no such file. A store's cost per event on a machine whose system
// calls are dear, as a VM's with page-table isolation are.
func Writes() (calls, bytes int64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		switch name {
		case "syscw":
			calls = n
		case "wchar":
			bytes = n
		}
	}
	return calls, bytes
}

// CutFirst is a server in front of next that breaks the connection of the
// first n requests whose path ends in suffix before next sees them (a
// network cut, a server restarting), and passes every other request on;
// cuts says how many it broke so far.
func CutFirst(t testing.TB, next http.Handler, suffix string, n int) (front *httptest.Server, cuts func() int) {
	var mu sync.Mutex
	cut := 0
	front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		drop := strings.HasSuffix(r.URL.Path, suffix) && cut < n
		if drop {
			cut++
		}
		mu.Unlock()
		if drop {
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front, func() int {
		mu.Lock()
		defer mu.Unlock()
		return cut
	}
}

// SlowUnderRace skips a test of bytes or memory, not of interleavings,
// when the race detector is on: it would take minutes and measure the
// detector's shadow memory. .ci/run runs it once without -race (the
// packages under internal/e2e/, and the tests it names by -run).
func SlowUnderRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("a sweep of bytes or memory, not of interleavings: run without the race detector (as .ci/run does)")
	}
}
