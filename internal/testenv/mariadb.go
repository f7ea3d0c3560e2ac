package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// MariaDB is a private mariadbd of a test's own, on a free loopback port
// with its data in the test's temporary directory: a test can kill it
// (kill -9) and start it again without touching the shared server. Root
// has no password; the database test exists.
type MariaDB struct {
	URL  string // mysql://root@127.0.0.1:<port>/test
	port int
	dir  string
	cmd  *exec.Cmd
	t    testing.TB
}

// StartMariaDB installs a data directory (about 5 s) and starts a
// mariadbd on it; it is killed when the test ends. A machine without
// mariadbd skips the test, and fails it under CI.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	for _, bin := range []string{"/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db"} {
		if _, err := os.Stat(bin); err != nil {
			unavailable(t, "MariaDB's "+filepath.Base(bin), err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	m := &MariaDB{URL: "mysql://root@127.0.0.1:" + strconv.Itoa(port) + "/test", port: port, dir: t.TempDir(), t: t}
	out, err := exec.Command("/usr/bin/mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"),
		"--user="+currentUser(), "--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	if err := os.Mkdir(filepath.Join(m.dir, "data", "test"), 0o700); err != nil { // the database test
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Kill)
	return m
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// Start starts the server (again), and returns once it takes connections.
func (m *MariaDB) Start() {
	m.t.Helper()
	m.cmd = exec.Command("/usr/sbin/mariadbd", "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"),
		"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(m.dir, "sock"),
		"--user="+currentUser(), "--pid-file="+filepath.Join(m.dir, "pid"), "--skip-log-bin",
		"--innodb-buffer-pool-size=16M", "--log-error="+filepath.Join(m.dir, "error.log"))
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start mariadbd: %v", err)
	}
	if err := listening(m.port, 30*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
		m.t.Fatalf("mariadbd on port %d did not start: %v\n%s", m.port, err, log)
	}
}

// listening waits until a loopback port takes connections: a server a
// test started is up.
func listening(port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill kills it (SIGKILL) and waits for it; nothing if it is not running.
func (m *MariaDB) Kill() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Kill()
	m.cmd.Wait()
	m.cmd = nil
}
