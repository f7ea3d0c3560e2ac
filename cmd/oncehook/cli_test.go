package main_test

// The CLI's answers to an operator's mistakes: each one exits non-zero and
// says what is wrong, and no secret reaches a terminal or a log.

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// oncehook runs the binary in dir with env added, and returns its combined
// output and whether it exited 0.
func oncehook(t *testing.T, dir string, env []string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	out, err := cmd.CombinedOutput()
	timer.Stop()
	return string(out), err == nil
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `store: sqlite://./x.db
sources: [{name: stripe, preset: stripe, secrets: [whsec_x], destinations: [app]}, {name: gh, preset: github, secrets: [x]}]
destinations: [{name: app, url: "http://127.0.0.1:9000"}]
`)
	out, ok := oncehook(t, dir, nil, "validate", "--config", good)
	if !ok || !strings.Contains(out, "is valid: sqlite store, 2 sources, 1 destination") || !strings.Contains(out, "sources[1] (gh) has no destinations") {
		t.Fatalf("validate of a good config:\n%s", out)
	}
	cases := []struct{ text, want string }{
		{"", "the config is empty"},
		{"sources: [{name: s, presett: stripe}]\n", "sources[0].presett: unknown field"},
		{"sources: [{name: s, preset: stripe, secrets: [x], tolerance: 0s}]\n", "sources[0].tolerance"},
	}
	for _, c := range cases {
		out, ok := oncehook(t, dir, nil, "validate", "--config", write("bad.yaml", c.text))
		if ok || !strings.Contains(out, c.want) {
			t.Errorf("validate of %q exited ok=%v:\n%s\nwant it to fail saying %q", c.text, ok, out, c.want)
		}
	}
	// ONCEHOOK_CONFIG names the file the same way.
	if out, ok := oncehook(t, dir, []string{"ONCEHOOK_CONFIG=" + good}, "validate"); !ok || !strings.Contains(out, "is valid") {
		t.Fatalf("validate with ONCEHOOK_CONFIG:\n%s", out)
	}
}

// A deployment must be able to require its config: a named config that is
// missing is an error, never the demo; and the demo, whose secret is public,
// refuses a non-loopback address unless asked for by name.
func TestServeNeverFallsBackToTheDemoByAccident(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yaml")
	if out, ok := oncehook(t, dir, nil, "serve", "--config", missing); ok || !strings.Contains(out, "nope.yaml") {
		t.Fatalf("serve --config with a missing file:\n%s", out)
	}
	if out, ok := oncehook(t, dir, []string{"ONCEHOOK_CONFIG=" + missing}, "serve", "--listen", "127.0.0.1:0"); ok || !strings.Contains(out, "nope.yaml") {
		t.Fatalf("serve with ONCEHOOK_CONFIG naming a missing file:\n%s", out)
	}
	out, ok := oncehook(t, dir, nil, "serve", "--listen", "0.0.0.0:0")
	if ok || !strings.Contains(out, "--demo") {
		t.Fatalf("the demo on a public address:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "oncehook.db")); err == nil {
		t.Fatal("a refused demo created a store")
	}
	p := startProcess(t, dir, "--listen", "127.0.0.1:0")
	if !strings.Contains(p.stdout.String(), "DEMO mode") {
		t.Fatalf("the demo does not say it is the demo:\n%s", p.stdout)
	}
}

// No password of a store or Redis URL is printed: not in the banner, not
// in the log, not in an error.
func TestCredentialsAreNeverPrinted(t *testing.T) {
	const password = "s3cret-pw"
	pg, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	pg.User = url.UserPassword(pg.User.Username(), password) // trust auth: any password is let in
	redisURL := "redis://:" + password + "@" + strings.TrimPrefix(testenv.Redis(t), "redis://")
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	cfg := writeConfig(t, dir, pg.String(), redisURL, sink.URL)
	p := startProcess(t, dir, "--config", cfg, "--log-level", "debug")
	sendEvent(t, p.URL, "evt_redacted")
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	for name, text := range map[string]string{"stdout": p.stdout.String(), "stderr": p.stderr.String()} {
		if strings.Contains(text, password) {
			t.Errorf("%s shows the password:\n%s", name, text)
		}
	}
	if !strings.Contains(p.stdout.String(), "xxxxx@") {
		t.Errorf("banner does not show the redacted store URL:\n%s", p.stdout)
	}
	bad := writeConfig(t, t.TempDir(), "mysql://root:"+password+"@db/x", "", sink.URL)
	if out, ok := oncehook(t, dir, nil, "validate", "--config", bad); ok || strings.Contains(out, password) {
		t.Fatalf("a config error shows the password (ok=%v):\n%s", ok, out)
	}
}

// SIGHUP reloads the config and does not stop the gateway; SIGTERM then
// drains it: in-flight work finishes, the process exits 0.
func TestSIGHUPReloadsAndSIGTERMDrains(t *testing.T) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	p := startProcess(t, dir, "--config", cfg)
	if status, _ := sendEvent(t, p.URL, "evt_hup"); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	if !testenv.WaitFor(5*time.Second, func() bool { return p.reloads() == 1 }) {
		t.Fatalf("SIGHUP did not reload:\n%s", p.stderr)
	}
	if status, _ := sendEvent(t, p.URL, "evt_after_hup"); status != http.StatusOK || p.cmd.ProcessState != nil {
		t.Fatalf("after SIGHUP: status %d\n%s", status, p.stderr)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := p.cmd.Wait()
	if err != nil || !strings.Contains(p.stderr.String(), "stopped") {
		t.Fatalf("after SIGTERM: %v\n%s", err, p.stderr)
	}
	if !testenv.WaitFor(time.Second, func() bool { return len(sink.ByKey()) == 2 }) {
		t.Errorf("delivered %v, want both events", sink.ByKey())
	}
}

func TestSendExitsNonZeroWhenRefused(t *testing.T) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", sink.URL)
	p := startProcess(t, dir, "--config", cfg)
	body := `{"id":"evt_send","object":"event"}`
	out, ok := oncehook(t, dir, nil, "send", "--url", p.URL+"/in/stripe", "--preset", "stripe", "--secret", "wrong", "--body", body, "--repeat", "2")
	if ok || !strings.Contains(out, "2 of 2 requests were not answered 2xx") {
		t.Fatalf("send with a wrong secret (ok=%v):\n%s", ok, out)
	}
	out, ok = oncehook(t, dir, nil, "send", "--url", "http://127.0.0.1:1/in/stripe", "--preset", "stripe", "--secret", secret, "--body", body)
	if ok {
		t.Fatalf("send to nowhere exited 0:\n%s", out)
	}
	if out, ok = oncehook(t, dir, nil, "send", "--url", p.URL+"/in/stripe", "--preset", "stripe", "--secret", secret, "--body", body); !ok {
		t.Fatalf("send of a good event:\n%s", out)
	}
}

// GitHub's deliveries, reproduced: a UUID delivery id, X-GitHub-Event, and
// a Content-Type the user chose (form-encoded) kept under the signature.
func TestSendSignsAsGitHubDoes(t *testing.T) {
	sink := testenv.NewSink(t)
	out, ok := oncehook(t, t.TempDir(), nil, "send", "--url", sink.URL, "--preset", "github", "--secret", "s",
		"--header", "Content-Type: application/x-www-form-urlencoded", "--body", "payload=%7B%7D")
	if !ok {
		t.Fatalf("send: %s", out)
	}
	h := sink.Deliveries()[0].Header
	if ct := h.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type %q: the user's was overwritten", ct)
	}
	if id := h.Get("X-GitHub-Delivery"); len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Errorf("X-GitHub-Delivery %q: want a UUID", id)
	}
	if h.Get("X-GitHub-Event") == "" || !strings.HasPrefix(h.Get("X-Hub-Signature-256"), "sha256=") {
		t.Errorf("headers %v", h)
	}
}

func TestReplayRefusesUnknownNames(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", "http://127.0.0.1:9")
	// Before any store: replay says there is none (it creates none), and
	// migrate, a deploy step, makes it.
	if out, ok := oncehook(t, dir, nil, "replay", "--config", cfg, "--dead"); ok || !strings.Contains(out, "no store at") {
		t.Fatalf("replay before any store (ok=%v):\n%s", ok, out)
	}
	if out, ok := oncehook(t, dir, nil, "migrate", "--config", cfg); !ok {
		t.Fatalf("migrate: %s", out)
	}
	for _, args := range [][]string{{"--dead", "--destination", "nope"}, {"--source", "nosuch", "--key", "k"}} {
		out, ok := oncehook(t, dir, nil, append([]string{"replay", "--config", cfg}, args...)...)
		if ok || !strings.Contains(out, "no such") || !strings.Contains(out, "known:") {
			t.Errorf("replay %v (ok=%v):\n%s", args, ok, out)
		}
	}
	out, ok := oncehook(t, dir, nil, "replay", "--config", cfg, "--dead")
	if !ok || !strings.Contains(out, "requeued 0 deliveries") {
		t.Fatalf("replay --dead: %s", out)
	}
}

// Issue 41, item 16: `stats --source nope` and `events ls --source nope`
// printed nothing and exited 0. A source neither the config has nor any
// stored event is under is an error naming the configured sources, exit 1;
// a configured source without events is still an empty answer, exit 0.
func TestListsRefuseAnUnknownSource(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sqlite://./events.db", "", "http://127.0.0.1:9")
	if out, ok := oncehook(t, dir, nil, "migrate", "--config", cfg); !ok {
		t.Fatalf("migrate: %s", out)
	}
	for _, args := range [][]string{{"stats", "--source", "nope"}, {"events", "ls", "--source", "nope"}, {"dead", "ls", "--source", "nope"}} {
		out, ok := oncehook(t, dir, nil, append(args, "--config", cfg)...)
		if ok || !strings.Contains(out, `no such source "nope"`) || !strings.Contains(out, "known: stripe") {
			t.Errorf("%v (ok=%v):\n%s", args, ok, out)
		}
	}
	if out, ok := oncehook(t, dir, nil, "events", "ls", "--source", "stripe", "--config", cfg); !ok || !strings.Contains(out, "no events match") {
		t.Errorf("events ls of a configured source without events (ok=%v):\n%s", ok, out)
	}
	if out, ok := oncehook(t, dir, nil, "stats", "--source", "stripe", "--config", cfg); !ok || !strings.Contains(out, "stripe") {
		t.Errorf("stats of a configured source without traffic (ok=%v):\n%s", ok, out)
	}
}

// Every command and subcommand prints its help and exits 0 on --help
// (and some on -h), before it opens a store or dials anything. Before, "events
// --help" and "dead --help" exited 1.
func TestEveryCommandsHelpExitsZero(t *testing.T) {
	dir := t.TempDir()
	commands := [][]string{
		{"serve"}, {"validate"}, {"health"}, {"init"}, {"send"}, {"migrate"}, {"replay"},
		{"events"}, {"events", "ls"}, {"events", "show"}, {"events", "replay"}, {"events", "deliver"}, {"events", "skip"},
		{"dead"}, {"dead", "ls"}, {"dead", "retry"}, {"dead", "purge"},
		{"destinations"}, {"destinations", "ls"}, {"destinations", "pause"}, {"destinations", "resume"},
		{"destinations", "open-breaker"}, {"destinations", "close-breaker"},
		{"destinations", "create"}, {"destinations", "show"}, {"destinations", "update"}, {"destinations", "rm"},
		{"sources"}, {"sources", "ls"}, {"sources", "create"}, {"sources", "show"}, {"sources", "update"}, {"sources", "rm"},
		{"stats"}, {"reload"}, {"doctor"}, {"transform"}, {"transform", "test"}, {"listen"}, {"export"}, {"apply"},
	}
	subcommands := map[string][]string{
		"events":       {"ls", "show", "replay", "deliver", "skip"},
		"dead":         {"ls", "retry", "purge"},
		"destinations": {"ls", "pause", "resume", "open-breaker", "close-breaker", "create", "show", "update", "rm"},
		"sources":      {"ls", "create", "show", "update", "rm"},
		"transform":    {"test"},
	}
	for _, c := range commands {
		helps := []string{"--help"}
		if len(c) == 1 && (c[0] == "events" || c[0] == "dead" || c[0] == "stats" || c[0] == "destinations" || c[0] == "sources") {
			helps = append(helps, "-h") // the flag package's own spelling
		}
		for _, h := range helps {
			args := append(append([]string{}, c...), h)
			out, ok := oncehook(t, dir, []string{"ONCEHOOK_API=", "ONCEHOOK_API_TOKEN="}, args...)
			if !ok || !strings.Contains(strings.ToLower(out), "usage") {
				t.Errorf("oncehook %s: exit 0 = %v, want 0 with its usage:\n%s", strings.Join(args, " "), ok, out)
				continue
			}
			// Found from outside: destinations --help named no
			// subcommand; each command's help names all of its own.
			for _, sub := range subcommands[strings.Join(c, " ")] {
				if !strings.Contains(out, sub) {
					t.Errorf("oncehook %s: want its subcommand %s named:\n%s", strings.Join(args, " "), sub, out)
				}
			}
			// Found from outside: show's help named only flags.
			if len(c) == 2 && c[0] == "events" && c[1] == "show" && !strings.Contains(out, "ID | SOURCE KEY") {
				t.Errorf("oncehook %s: want what it takes besides flags (ID | SOURCE KEY):\n%s", strings.Join(args, " "), out)
			}
		}
	}
}

// migrate finds its config as every other command does: --config, else
// $ONCEHOOK_CONFIG, else ./oncehook.yaml. The compose file and the image name
// the config only through ONCEHOOK_CONFIG, so `oncehook migrate` run there as
// a deploy step answered "open oncehook.yaml: no such file or directory".
func TestMigrateReadsONCEHOOK_CONFIG(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sqlite://"+filepath.Join(dir, "events.db"), "", "http://127.0.0.1:9")
	elsewhere := t.TempDir() // no oncehook.yaml here
	out, ok := oncehook(t, elsewhere, []string{"ONCEHOOK_CONFIG=" + cfg}, "migrate")
	if !ok || !strings.Contains(out, "schema is up to date") {
		t.Fatalf("migrate with ONCEHOOK_CONFIG (ok=%v):\n%s", ok, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "events.db")); err != nil {
		t.Fatalf("the store ONCEHOOK_CONFIG names was not migrated: %v", err)
	}
}

// A command that takes only flags refuses a stray argument instead of
// ignoring it. `oncehook validate new.yaml` (without --config) validated
// ./oncehook.yaml instead and said "oncehook.yaml is valid", exit 0, however
// broken new.yaml was; `serve new.yaml` ran the demo; `migrate new.yaml`
// migrated whatever ./oncehook.yaml names.
func TestAStrayArgumentIsRefusedNotIgnored(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "sqlite://"+filepath.Join(dir, "events.db"), "", "http://127.0.0.1:9") // ./oncehook.yaml, valid
	if err := os.WriteFile(filepath.Join(dir, "new.yaml"), []byte("sources: [{name: s, presett: stripe}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ONCEHOOK_CONFIG=", "ONCEHOOK_API=", "ONCEHOOK_API_TOKEN="}
	for _, args := range [][]string{
		{"validate", "new.yaml"},
		{"serve", "--listen", "127.0.0.1:0", "new.yaml"},
		{"migrate", "new.yaml"},
		{"replay", "--dead", "new.yaml"},
		{"health", "new.yaml"},
		{"reload", "new.yaml"},
		{"send", "--url", "http://127.0.0.1:9/in/s", "--preset", "stripe", "--secret", "x", "--body", "{}", "new.yaml"},
	} {
		out, ok := oncehook(t, dir, env, args...)
		reads := args[0] != "reload" && args[0] != "send" // a config: point the file to --config
		if ok || !strings.Contains(out, `takes no argument (got "new.yaml")`) || (reads && !strings.Contains(out, "--config new.yaml")) {
			t.Errorf("oncehook %s: exit 0 = %v, want a refusal naming the argument (and --config):\n%s", strings.Join(args, " "), ok, out)
		}
	}
	// init takes a path, and its --force after it too, as its refusal says.
	if out, ok := oncehook(t, dir, env, "init", "new.yaml"); ok || !strings.Contains(out, "use --force") {
		t.Fatalf("init over an existing file: %s", out)
	}
	if out, ok := oncehook(t, dir, env, "init", "new.yaml", "--force"); !ok || !strings.Contains(out, "wrote new.yaml") {
		t.Fatalf("init new.yaml --force (ok=%v): %s", ok, out)
	}
	if out, ok := oncehook(t, dir, env, "init", "a.yaml", "b.yaml"); ok || !strings.Contains(out, "one path") {
		t.Fatalf("init with two paths (ok=%v): %s", ok, out)
	}
}

// reload is the running gateway's: its help must not offer --config as a way
// to "work on its store directly", which it refuses.
func TestReloadsHelpDoesNotOfferTheStore(t *testing.T) {
	out, ok := oncehook(t, t.TempDir(), []string{"ONCEHOOK_API=", "ONCEHOOK_API_TOKEN="}, "reload", "--help")
	if !ok || strings.Contains(out, "work on its store directly") || !strings.Contains(out, "SIGHUP") {
		t.Fatalf("reload --help (ok=%v):\n%s", ok, out)
	}
}
