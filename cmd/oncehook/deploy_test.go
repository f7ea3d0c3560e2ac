package main_test

// What deploy/ and the Dockerfile promise, checked here, where no Docker
// daemon runs: the image's build is the README's, and the binary it copies
// runs in the layout it sets up, with nothing else.

import (
	"bufio"
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// dockerfile reads the repository's Dockerfile as its instructions, one
// per entry (continuation lines joined).
func dockerfile(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

var goBuild = regexp.MustCompile(`go build (.*?)-o (\S+) (\./cmd/oncehook)\b`)

func TestDockerfileBuildsTheREADMEsBinaryStatically(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rm := goBuild.FindStringSubmatch(string(readme))
	if rm == nil {
		t.Fatal("the README gives no go build command")
	}
	var run, final []string
	stage := 0
	for _, in := range dockerfile(t) {
		if strings.HasPrefix(in, "FROM ") {
			stage++
			final = nil
		}
		final = append(final, in)
		if strings.HasPrefix(in, "RUN ") && strings.Contains(in, "go build") {
			run = append(run, strings.TrimPrefix(in, "RUN "))
		}
	}
	if len(run) != 1 || stage != 2 {
		t.Fatalf("%d go build steps in %d stages: want one build in a build stage, then the image", len(run), stage)
	}
	dm := goBuild.FindStringSubmatch(run[0])
	if dm == nil || dm[3] != rm[3] {
		t.Fatalf("the Dockerfile builds %q; the README says %q", run[0], rm[0])
	}
	if !strings.HasPrefix(run[0], "CGO_ENABLED=0 ") {
		t.Fatalf("%q: the image has no libc, so cgo must be off", run[0])
	}
	image := strings.Join(final, "\n")
	for _, want := range []string{"FROM scratch", "USER 65532:65532", "WORKDIR /data", `HEALTHCHECK`, `CMD ["/oncehook", "health"]`, `ENTRYPOINT ["/oncehook"]`} {
		if !strings.Contains(image, want) {
			t.Errorf("the image stage lacks %q", want)
		}
	}

	// Build it as the Dockerfile does, and run it as the image would:
	// the binary, an empty writable /data as the working directory, no
	// environment, and the config mounted as /data/oncehook.yaml.
	root := t.TempDir()
	out := filepath.Join(root, "oncehook")
	cmd := strings.Replace(run[0], dm[2], out, 1)
	cmd = strings.ReplaceAll(cmd, "${VERSION}", "test")
	build := exec.Command("sh", "-c", cmd)
	build.Dir = "../.."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	bin, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary asks for a dynamic loader: it would not start on an empty base")
		}
	}
	bin.Close()

	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf("listen: %s\nstore: sqlite://oncehook.db\nsources:\n  - {name: hooks, preset: generic, unsigned: true, key: [\"json:id\"]}\n", addr)
	if err := os.WriteFile(filepath.Join(data, "oncehook.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(out, "serve")
	serve.Dir, serve.Env = data, []string{}
	var logs testenv.Buffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		serve.Process.Signal(syscall.SIGTERM)
		serve.Wait()
	}()
	health := func(args ...string) (string, bool) {
		c := exec.Command(out, append([]string{"health"}, args...)...)
		c.Dir, c.Env = data, []string{}
		b, err := c.CombinedOutput()
		return string(b), err == nil
	}
	if !testenv.WaitFor(20*time.Second, func() bool { _, ok := health(); return ok }) {
		msg, _ := health()
		t.Fatalf("health never passed: %s\nserve's log:\n%s", msg, logs.String())
	}
	if msg, ok := health("--probe", "livez"); !ok {
		t.Fatalf("livez: %s", msg)
	}
	resp, err := http.Post("http://"+addr+"/in/hooks", "application/json", strings.NewReader(`{"id":"first"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("an event: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(data, "oncehook.db")); err != nil {
		t.Fatalf("the store is not in /data: %v", err)
	}
	serve.Process.Signal(syscall.SIGTERM)
	serve.Wait()
	if msg, ok := health(); ok {
		t.Fatalf("health passed with the gateway stopped: %s", msg)
	}
}

// The systemd unit keeps the hardening it was written with; where
// systemd-analyze is installed, it also verifies the unit and rates its
// exposure (1.4, "OK", when written).
func TestSystemdUnitIsHardened(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/oncehook.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=oncehook", "WorkingDirectory=/var/lib/oncehook", "ProtectSystem=strict",
		"ProtectHome=yes", "NoNewPrivileges=yes", "PrivateTmp=yes", "PrivateDevices=yes", "CapabilityBoundingSet=\n",
		"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "SystemCallFilter=@system-service", "MemoryDenyWriteExecute=yes",
		"ExecReload=/bin/kill -HUP $MAINPID"} { // systemctl reload: serve reloads on SIGHUP
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the unit's keys were checked, not its exposure")
		return
	}
	// verify with the binary where ExecStart says it is: a copy of the
	// unit pointing at this test's build.
	dir := t.TempDir()
	copyUnit := filepath.Join(dir, "oncehook.service")
	if err := os.WriteFile(copyUnit, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/oncehook", binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", "--man=no", copyUnit).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command(analyze, "security", "--offline=true", "--threshold=20", copyUnit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security (exposure above 2.0): %v\n%s", err, out)
	}
}
