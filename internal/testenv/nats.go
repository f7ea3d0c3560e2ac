package testenv

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// NATSBase is the NATS server (with JetStream) tests use;
// ONCEHOOK_TEST_NATS overrides it.
func NATSBase() string {
	return fromEnv("ONCEHOOK_TEST_NATS", "nats://127.0.0.1:4222")
}

// NATS returns the test NATS server's URL, after checking it answers. A
// test makes its own stream (a unique name) and deletes it when done.
func NATS(t testing.TB) string {
	t.Helper()
	return reachable(t, "NATS", NATSBase())
}

// NATSServer is a nats-server of the test's own, with JetStream and a
// store in a temporary directory, that the test can stop, kill and start
// again on the same port and store: a broker that goes away and comes
// back, without touching the one other tests share.
type NATSServer struct {
	URL  string
	port int
	dir  string
	cmd  *exec.Cmd
	t    testing.TB
}

// natsServerBinary is where Debian's nats-server package puts it, or the
// one on PATH.
func natsServerBinary(t testing.TB) string {
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	p, err := exec.LookPath("nats-server")
	if err != nil {
		unavailable(t, "the nats-server binary", err)
	}
	return p
}

// StartNATSServer starts a nats-server on a free loopback port; it is
// killed when the test ends.
func StartNATSServer(t testing.TB) *NATSServer {
	t.Helper()
	natsServerBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &NATSServer{URL: "nats://127.0.0.1:" + strconv.Itoa(port), port: port, dir: t.TempDir(), t: t}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start starts the server (again), and returns once it takes connections.
func (s *NATSServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command(natsServerBinary(s.t), "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	if err := listening(s.port, 10*time.Second); err != nil {
		s.t.Fatalf("nats-server on port %d did not start: %v", s.port, err)
	}
}

// Stop shuts the server down (SIGTERM) and waits for it.
func (s *NATSServer) Stop() { s.signal(syscall.SIGTERM) }

// Kill kills it (SIGKILL) and waits for it; nothing if it is not running.
func (s *NATSServer) Kill() { s.signal(syscall.SIGKILL) }

func (s *NATSServer) signal(sig syscall.Signal) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	s.cmd.Wait()
	s.cmd = nil
}
