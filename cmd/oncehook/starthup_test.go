package main_test

import (
	"net"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// A SIGHUP that comes while serve is still starting (its PostgreSQL slow to
// answer, another replica's migrations holding the lock) must not kill it.
// serve listened for SIGHUP only once its store was open, and until then
// the signal's default action ended the process ("Hangup", exit 129): a
// `systemctl reload` right after a start stopped the gateway, and systemd
// counts a death by SIGHUP as clean, so Restart=on-failure left it down.
func TestSIGHUPWhileStartingDoesNotKillServe(t *testing.T) {
	// A "PostgreSQL" that accepts connections and never answers: serve
	// waits in its start for as long as the test needs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "postgres://oncehook@"+ln.Addr().String()+"/oncehook?sslmode=disable", "", "http://127.0.0.1:9")
	cmd := exec.Command(binary, "serve", "--config", cfg)
	cmd.Dir = dir
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{}) // closed once the process has ended
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	})
	if !testenv.WaitFor(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) > 0
	}) {
		t.Fatalf("serve never dialled its store:\n%s", out)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	select {
	case <-done:
		t.Fatalf("serve ended on a SIGHUP while starting: %v\n%s", waitErr, out)
	case <-time.After(2 * time.Second):
	}
	// SIGTERM still stops it while it starts.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM while starting:\n%s", out)
	}
}
