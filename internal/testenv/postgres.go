package testenv

import (
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// PrivatePostgres is a PostgreSQL server of a test's own (initdb and
// pg_ctl from /usr/lib/postgresql/*/bin), on a free loopback port, with
// trust auth and fsync off: a test can kill it (an immediate shutdown, as
// a crash) and start it again without touching the shared server. Its
// database is postgres.
type PrivatePostgres struct {
	URL  string // postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable
	port int
	dir  string
	bin  string
	t    testing.TB
}

// StartPostgres initdbs a data directory (about 4 s) and starts a server
// on it; it is stopped when the test ends. As root, the server runs as
// the postgres user (PostgreSQL refuses root). A machine without the
// binaries skips the test, and fails it under CI.
func StartPostgres(t testing.TB) *PrivatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		unavailable(t, "PostgreSQL's initdb", os.ErrNotExist)
	}
	sort.Strings(bins)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "oncehook-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &PrivatePostgres{URL: "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable",
		port: port, dir: dir, bin: filepath.Dir(bins[len(bins)-1]), t: t}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable(t, "the postgres user (PostgreSQL does not run as root)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := p.command("initdb", "-D", filepath.Join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.Start()
	t.Cleanup(p.Kill)
	return p
}

// command runs one of the server's binaries, as postgres when this is root.
func (p *PrivatePostgres) command(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(p.bin, name)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

// Start starts the server (again), and returns once it takes connections.
func (p *PrivatePostgres) Start() {
	p.t.Helper()
	opts := "-p " + strconv.Itoa(p.port) + " -k " + p.dir + " -c listen_addresses=127.0.0.1 -c fsync=off"
	if out, err := p.command("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-o", opts, "-l", filepath.Join(p.dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "log"))
		p.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	if err := listening(p.port, 30*time.Second); err != nil {
		p.t.Fatalf("PostgreSQL on port %d did not start: %v", p.port, err)
	}
}

// Kill stops the server at once (pg_ctl -m immediate: no checkpoint, as a
// crash; the next start recovers) and waits for it.
func (p *PrivatePostgres) Kill() {
	p.command("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop").Run()
}
