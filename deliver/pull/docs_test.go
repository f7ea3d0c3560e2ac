package pull_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/oncehooktest"
)

// docsPullSection is docs/api.md's "Pull destinations" section.
func docsPullSection(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(doc), "\n## Pull destinations\n")
	if !ok {
		t.Fatal("docs/api.md has no Pull destinations section")
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// codeBlock is the section's one fenced block in lang.
func codeBlock(t *testing.T, section, lang string) string {
	t.Helper()
	m := regexp.MustCompile("(?s)\n```"+lang+"\n(.*?)\n```").FindAllStringSubmatch(section, -1)
	if len(m) != 1 {
		t.Fatalf("docs/api.md's Pull destinations section has %d %s blocks, want 1", len(m), lang)
	}
	return m[0][1]
}

const docsToken = "docs-consumer-token-0123456789"

// docsGateway is a gateway with the docs' pull destination, billing,
// and a consumer's token for it; it delivers what is posted to /in/shop.
func docsGateway(t *testing.T) *oncehooktest.Gateway {
	return oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: billing-svc, token: `+docsToken+`, pull: [billing]}
sources:
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], destinations: [billing]}
destinations:
  - name: billing
    pull: {}
    retry: {max_attempts: 5, base_delay: 10ms, max_delay: 50ms}
`)
}

// runExample runs cmd (the example, with a handle that prints each key it
// is given and fails ev_fail's first time) against a gateway that has three
// events, and checks what it handled: every event once, and ev_fail again,
// under the same key, after its failure was acked as a retry.
func runExample(t *testing.T, gw *oncehooktest.Gateway, cmd *exec.Cmd) {
	t.Helper()
	cmd.Env = append(os.Environ(), "ONCEHOOK_API="+gw.APIURL, "ONCEHOOK_API_TOKEN="+docsToken)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	for _, id := range []string{"ev_1", "ev_fail", "ev_2"} {
		resp, err := http.Post(gw.URL+"/in/shop", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("post %s: %d", id, resp.StatusCode)
		}
	}
	want := []string{"failed shop:ev_fail", "handled shop:ev_1", "handled shop:ev_2", "handled shop:ev_fail"}
	var got []string
	deadline := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the example exited after %q: %s", got, stderr.String())
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("the example handled %q in 30s: %s", got, stderr.String())
		}
	}
	// Acked: nothing comes again.
	select {
	case l := <-lines:
		got = append(got, l)
	case <-time.After(500 * time.Millisecond):
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the example handled %q, want %q; stderr: %s", got, want, stderr.String())
	}
}

// docs/api.md's two examples of a service's loop, in Go and in Python's
// standard library, run as written against a gateway: each event handled
// once, a failure retried under the same Idempotency-Key.
func TestAPIDocsPullExamplesRun(t *testing.T) {
	section := docsPullSection(t)
	t.Run("go", func(t *testing.T) {
		// The example is built as a package of oncehook's own module (under
		// testdata, which ./... leaves out), with its go.mod and go.sum: a
		// module of its own made the go command look up go.mod files
		// oncehook's build never reads, which only a module cache warmed by
		// other builds had (a fresh machine's CI failed with GOPROXY=off).
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("testdata", "docexample")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		files := map[string]string{
			"main.go": codeBlock(t, section, "go"),
			"handle.go": `package main

import (
	"errors"
	"fmt"
)

var failed = map[string]bool{}

func handle(key string, body []byte) error {
	if key == "shop:ev_fail" && !failed[key] {
		failed[key] = true
		fmt.Println("failed", key)
		return errors.New("the database was down")
	}
	fmt.Println("handled", key)
	return nil
}
`,
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "go", "build", "-o", "example", ".")
		build.Dir = dir
		build.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("docs/api.md's Go example does not build: %v\n%s", err, out)
		}
		runExample(t, docsGateway(t), exec.Command(filepath.Join(dir, "example")))
	})
	t.Run("python", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("python3 is needed under CI")
			}
			t.Skip("no python3")
		}
		handle := `import sys
failed = set()
def handle(key, body):
    if key == "shop:ev_fail" and key not in failed:
        failed.add(key)
        print("failed", key, flush=True)
        raise RuntimeError("the database was down")
    print("handled", key, flush=True)
`
		file := filepath.Join(t.TempDir(), "example.py")
		if err := os.WriteFile(file, []byte(handle+codeBlock(t, section, "python")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		runExample(t, docsGateway(t), exec.Command("python3", file))
	})
}
