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
	"slices"
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

// releaseBuild is the Dockerfile's build step: the release tool's binary
// command, the one definition of a release binary.
var releaseBuild = regexp.MustCompile(`^go run \./internal/release binary -o (\S+) `)

// The image's binary is a release binary, built as the archives' are and
// with the same Go, and it runs in the image's layout with nothing else.
func TestDockerfileBuildsTheReleaseBinary(t *testing.T) {
	t.Parallel()
	var run, final []string
	var builder string
	stage := 0
	for _, in := range dockerfile(t) {
		if strings.HasPrefix(in, "FROM ") {
			stage++
			final = nil
			if stage == 1 {
				builder = in
			}
		}
		final = append(final, in)
		if strings.HasPrefix(in, "RUN ") && strings.Contains(in, "go ") && !strings.Contains(in, "go mod download") {
			run = append(run, strings.TrimPrefix(in, "RUN "))
		}
	}
	if len(run) != 1 || stage != 2 {
		t.Fatalf("%d build steps in %d stages: want one build in a build stage, then the image", len(run), stage)
	}
	dm := releaseBuild.FindStringSubmatch(run[0])
	if dm == nil {
		t.Fatalf("the Dockerfile builds with %q, not the release tool (go run ./internal/release binary -o ...)", run[0])
	}
	// The archives are built with go.mod's Go (the release workflow's
	// setup-go reads it); the image's binary is the same only with the same.
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goLine == nil || !strings.Contains(builder, "golang:"+string(goLine[1])+"-") {
		t.Errorf("the build stage is %q: want go.mod's Go, golang:%s-...", builder, goLine[1])
	}
	if !strings.Contains(builder, "--platform=$BUILDPLATFORM") {
		t.Errorf("the build stage %q runs on the target's platform: a multi-arch image would build under emulation", builder)
	}
	image := strings.Join(final, "\n")
	for _, want := range []string{"FROM scratch", "USER 65532:65532", "WORKDIR /data", `HEALTHCHECK`, `CMD ["/oncehook", "health"]`, `ENTRYPOINT ["/oncehook"]`} {
		if !strings.Contains(image, want) {
			t.Errorf("the image stage lacks %q", want)
		}
	}

	// Build it as the Dockerfile does (BuildKit's TARGETOS and TARGETARCH
	// empty: this platform), with the stamps the release workflow passes,
	// and run it as the image would: the binary, an empty writable /data as
	// the working directory, no environment, and the config mounted as
	// /data/oncehook.yaml.
	root := t.TempDir()
	out := filepath.Join(root, "oncehook")
	const commit = "0123456789abcdef0123456789abcdef01234567"
	cmd := strings.Replace(run[0], dm[1], out, 1)
	for arg, value := range map[string]string{"TARGETOS": "", "TARGETARCH": "", "VERSION": "v9.8.7", "COMMIT": commit, "DATE": "2026-12-01T10:02:03Z"} {
		cmd = strings.ReplaceAll(cmd, "${"+arg+"}", value)
	}
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
	version, err := exec.Command(out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("oncehook version: %v\n%s", err, version)
	}
	for _, want := range []string{"oncehook v9.8.7\n", "commit  " + commit + "\n", "built   2026-12-01T10:02:03Z\n"} {
		if !strings.Contains(string(version), want) {
			t.Errorf("the image's binary says\n%s\nwithout %q", version, strings.TrimSpace(want))
		}
	}

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

// unitInstall is what the unit's header tells an operator to run, and the
// unit's own keys, read from deploy/systemd/oncehook.service.
type unitInstall struct {
	keys    map[string][]string      // Service keys, each value as written
	files   map[string]installedFile // by destination path, from its install lines
	groups  map[string]bool          // groupadd'ed groups
	envFile string                   // EnvironmentFile=, without its "-"
}

type installedFile struct {
	mode         os.FileMode
	owner, group string
}

func readUnit(t *testing.T) unitInstall {
	t.Helper()
	text, err := os.ReadFile("../../deploy/systemd/oncehook.service")
	if err != nil {
		t.Fatal(err)
	}
	u := unitInstall{keys: map[string][]string{}, files: map[string]installedFile{}, groups: map[string]bool{}}
	for _, line := range strings.Split(string(text), "\n") {
		if cmd, ok := strings.CutPrefix(line, "#   "); ok {
			f := strings.Fields(cmd)
			switch {
			case len(f) > 0 && f[0] == "groupadd":
				u.groups[f[len(f)-1]] = true
			case len(f) > 0 && f[0] == "install":
				file := installedFile{mode: 0o755, owner: "root", group: "root"}
				var args []string
				for i := 1; i < len(f); i++ {
					switch f[i] {
					case "-m", "-o", "-g":
						if i+1 == len(f) {
							t.Fatalf("install line %q: %s without a value", cmd, f[i])
						}
						v := f[i+1]
						switch f[i] {
						case "-m":
							var m uint32
							if _, err := fmt.Sscanf(v, "%o", &m); err != nil {
								t.Fatalf("install line %q: mode %q", cmd, v)
							}
							file.mode = os.FileMode(m)
						case "-o":
							file.owner = v
						case "-g":
							file.group = v
						}
						i++
					case "-D":
					default:
						args = append(args, f[i])
					}
				}
				if len(args) == 2 && !strings.HasSuffix(args[1], "/") {
					u.files[args[1]] = file
				}
			}
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			u.keys[k] = append(u.keys[k], v)
		}
	}
	if env := u.keys["EnvironmentFile"]; len(env) == 1 {
		u.envFile = strings.TrimPrefix(env[0], "-")
	}
	return u
}

// The unit runs as a dynamic user: its install lines must leave the config
// readable by that user (and by no one else), and the secrets the config
// names as ${NAME} need a file systemd hands over as the environment. As
// root (CI), the check is the real one: oncehook validate, run as a uid of
// no one with the unit's supplementary groups, reads the config the install
// lines made, with the environment file's secrets.
func TestSystemdUnitCanReadItsConfigAndSecrets(t *testing.T) {
	u := readUnit(t)
	exec0 := strings.Fields(strings.Join(u.keys["ExecStart"], ""))
	cfgPath := ""
	for i, a := range exec0 {
		if a == "--config" && i+1 < len(exec0) {
			cfgPath = exec0[i+1]
		}
	}
	if cfgPath == "" {
		t.Fatalf("ExecStart %q names no --config", exec0)
	}
	cfgFile, ok := u.files[cfgPath]
	if !ok {
		t.Fatalf("no install line puts the config at %s (installed: %v)", cfgPath, u.files)
	}
	if strings.Join(u.keys["DynamicUser"], "") != "yes" {
		t.Fatal("the unit is not DynamicUser=yes: this test checks for that user")
	}
	supplementary := strings.Fields(strings.Join(u.keys["SupplementaryGroups"], " "))
	if cfgFile.group != "root" && !u.groups[cfgFile.group] {
		t.Errorf("the config's group %s is never created (no groupadd line)", cfgFile.group)
	}
	readable := cfgFile.mode&0o004 != 0 || cfgFile.mode&0o040 != 0 && slices.Contains(supplementary, cfgFile.group)
	if !readable {
		t.Errorf("the config is installed %s:%s %o, and the dynamic user (groups %v) cannot read it", cfgFile.owner, cfgFile.group, cfgFile.mode, supplementary)
	}
	if cfgFile.mode&0o007 != 0 {
		t.Errorf("the config is installed %o: open to every user of the machine", cfgFile.mode)
	}
	if u.envFile == "" {
		t.Fatalf("no EnvironmentFile=: the config's ${NAME} secrets have nowhere to come from")
	}
	envFile, ok := u.files[u.envFile]
	if !ok || envFile.owner != "root" || envFile.mode&0o077 != 0 {
		t.Fatalf("the environment file %s is installed %+v: want it root's alone (systemd reads it as root)", u.envFile, envFile)
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the permissions were checked on paper, not by a process of another uid")
		return
	}
	// Lay the install lines' files out under a root of our own, and read
	// them as the unit's user would: a uid of no one, whose supplementary
	// groups are the unit's (each name a gid of its own here).
	root, err := os.MkdirTemp("", "oncehook-systemd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	gids := map[string]uint32{"root": 0}
	gid := func(name string) uint32 {
		if g, ok := gids[name]; ok {
			return g
		}
		gids[name] = uint32(61000 + len(gids))
		return gids[name]
	}
	place := func(path string, f installedFile, text string) string {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil { // install -D: 0755 under root's umask
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 0, int(gid(f.group))); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if fi, err := os.Stat(filepath.Dir(root)); err != nil || fi.Mode()&0o001 == 0 {
		t.Skipf("the temp folder %s is closed to other users: %v", filepath.Dir(root), err)
	}
	if err := os.Chmod(root, 0o755); err != nil { // traversable, as / is
		t.Fatal(err)
	}
	cfg := place(cfgPath, cfgFile, "store: sqlite://oncehook.db\nsources: [{name: stripe, preset: stripe, secrets: [\"${STRIPE_WEBHOOK_SECRET}\"]}]\n")
	place(u.envFile, envFile, "STRIPE_WEBHOOK_SECRET=whsec_from_env_file\n")
	bin := filepath.Join(root, "oncehook")
	if err := os.Link(binary, bin); err != nil {
		b, err := os.ReadFile(binary)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(bin, 0o755)
	var groups []uint32
	for _, g := range supplementary {
		groups = append(groups, gid(g))
	}
	cmd := exec.Command(bin, "validate", "--config", cfg)
	cmd.Dir = root
	cmd.Env = []string{"STRIPE_WEBHOOK_SECRET=whsec_from_env_file"} // as systemd hands the file over
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 61999, Gid: 61999, Groups: groups}}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "is valid") {
		t.Fatalf("oncehook validate as the unit's dynamic user (groups %v): %v\n%s", supplementary, err, out)
	}
	// And a user without the group is refused: the config is not open to all.
	cmd = exec.Command(bin, "validate", "--config", cfg)
	cmd.Dir = root
	cmd.Env = []string{"STRIPE_WEBHOOK_SECRET=whsec_from_env_file"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 61998, Gid: 61998, Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("another user read the config:\n%s", out)
	}
}

// The quick start's `go run ./cmd/oncehook` works only inside a checkout
// (elsewhere: "go.mod file not found"): the README has the reader clone
// and enter it before the first go run, not in a parenthetical after.
func TestQuickStartBeginsWithACheckout(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "## Quick start")
	if start < 0 {
		t.Fatal("the README has no quick start")
	}
	quick := text[start:]
	clone, cd, run := strings.Index(quick, "git clone https://github.com/oncehook/oncehook"), strings.Index(quick, "\ncd oncehook\n"), strings.Index(quick, "```sh\ngo run ./cmd/oncehook")
	if clone < 0 || cd < 0 || run < 0 || !(clone < cd && cd < run) {
		t.Fatalf("the quick start's first commands: git clone at %d, cd at %d, go run at %d: want clone, cd, then go run", clone, cd, run)
	}
}
