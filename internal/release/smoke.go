package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// smokeRun is this platform's release binary in an empty folder, run as a
// user who just downloaded it would: no config and no environment.
type smokeRun struct{ dir, bin string }

func newSmoke(exe []byte) (*smokeRun, error) {
	dir, err := os.MkdirTemp("", "oncehook-smoke")
	if err != nil {
		return nil, err
	}
	s := &smokeRun{dir: dir, bin: filepath.Join(dir, "oncehook")}
	if err := os.WriteFile(s.bin, exe, 0o755); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *smokeRun) close() { os.RemoveAll(s.dir) }

func (s *smokeRun) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir, cmd.Env = s.dir, []string{"HOME=" + s.dir}
	return cmd
}

// versionLines read `oncehook version`'s stamps: the release, the commit
// (with -dirty for a modified tree) and the build's date.
var versionLines = regexp.MustCompile(`^oncehook (\S+)\n  commit  ([0-9a-f]{40}(?:-dirty)?)\n  built   (\S+)\n`)

// version runs `oncehook version` and returns the stamps it names.
func (s *smokeRun) version(ctx context.Context, log io.Writer) (Stamps, error) {
	out, err := s.command(ctx, "version").CombinedOutput()
	if err != nil {
		return Stamps{}, fmt.Errorf("oncehook version: %w\n%s", err, out)
	}
	m := versionLines.FindStringSubmatch(string(out))
	if m == nil || !semver.MatchString(m[1]) {
		return Stamps{}, fmt.Errorf("oncehook version names no release, commit and date:\n%s", out)
	}
	if _, err := time.Parse(time.RFC3339, m[3]); err != nil {
		return Stamps{}, fmt.Errorf("oncehook version's date: %w\n%s", err, out)
	}
	fmt.Fprintf(log, "smoke: oncehook version\n%s", out)
	return Stamps{Version: m[1], Commit: m[2], Date: m[3]}, nil
}

// serve runs the demo: a Stripe-signed event sent with the binary's own
// send command is accepted (200), its repeat is a duplicate, the demo sink
// receives it once, and serve stops cleanly on SIGTERM.
func (s *smokeRun) serve(ctx context.Context, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	oncehook := func(args ...string) *exec.Cmd { return s.command(ctx, args...) }
	serve := oncehook("serve", "--listen", "127.0.0.1:0")
	var banner, logs testenv.Buffer
	serve.Stdout, serve.Stderr = &banner, &logs
	if err := serve.Start(); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			serve.Process.Kill()
			serve.Wait()
		}
	}()
	listening := regexp.MustCompile(`listening on http://(\S+) in DEMO mode`)
	var addr string
	if !testenv.WaitFor(30*time.Second, func() bool {
		if m := listening.FindStringSubmatch(banner.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}) {
		return fmt.Errorf("serve never said where it listens:\n%s\n%s", banner.String(), logs.String())
	}
	fmt.Fprintf(log, "smoke: serve (the demo) on %s\n", addr)

	body := `{"id":"evt_release_smoke","object":"event","type":"release.smoke"}`
	for _, status := range []string{"accepted", "duplicate"} {
		out, err := oncehook("send", "--url", "http://"+addr+"/in/demo", "--preset", "stripe", "--secret", "whsec_demo", "--body", body).CombinedOutput()
		want := `200 {"status":"` + status + `"`
		if err != nil || !strings.Contains(string(out), want) {
			return fmt.Errorf("oncehook send: %v, want %s:\n%s\nserve's log:\n%s", err, want, out, logs.String())
		}
		fmt.Fprintf(log, "smoke: oncehook send: %s", out)
	}
	delivered := "idempotency_key=demo:evt_release_smoke"
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(logs.String(), delivered) }) {
		return fmt.Errorf("the demo sink never received the event:\n%s", logs.String())
	}
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	stopped = true
	if err := serve.Wait(); err != nil {
		return fmt.Errorf("serve, stopped by SIGTERM: %w\n%s", err, logs.String())
	}
	if n := strings.Count(logs.String(), delivered); n != 1 {
		return fmt.Errorf("the demo sink received the event %d times:\n%s", n, logs.String())
	}
	fmt.Fprintln(log, "smoke: delivered once to the demo sink; serve stopped cleanly")
	return nil
}
