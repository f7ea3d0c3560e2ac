package transform

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

const renameScript = `addHandler("transform", (request, context) => {
  request.body = { order: request.body.id, type: context.type };
  return request;
});`

// A compiled script holds no runtime until it runs, keeps the one it ran on for the next event, and gives it
// back once it has waited unused for IdleRelease; it runs as before afterwards, on a new one.
func TestARuntimeIsMadeAtTheFirstRunAndReleasedWhenIdle(t *testing.T) {
	for _, idle := range []time.Duration{30 * time.Millisecond, 150 * time.Millisecond} {
		t.Run(idle.String(), func(t *testing.T) {
			s := mustCompile(t, "rename.js", renameScript, Options{Concurrency: 2, IdleRelease: idle})
			if n := s.idleRuntimes(); n != 0 {
				t.Fatalf("compiled, not run: %d runtimes kept, want 0", n)
			}
			want := `{"order":"evt_1","type":"checkout.session.completed"}`
			run := func() {
				t.Helper()
				out, err := s.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1"))
				if err != nil {
					t.Fatal(err)
				}
				if string(out.Body) != want {
					t.Fatalf("body %s, want %s", out.Body, want)
				}
			}
			run()
			if n := s.idleRuntimes(); n != 1 {
				t.Fatalf("after one run: %d runtimes kept, want 1", n)
			}
			// Runs closer together than idle keep it.
			for range 3 {
				time.Sleep(idle / 3)
				run()
			}
			if n := s.idleRuntimes(); n != 1 {
				t.Fatalf("running steadily: %d runtimes kept, want 1", n)
			}
			deadline := time.Now().Add(idle + 2*time.Second)
			for s.idleRuntimes() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("unused for %s and more: %d runtimes kept, want 0", idle, s.idleRuntimes())
				}
				time.Sleep(5 * time.Millisecond)
			}
			run()
			if n := s.idleRuntimes(); n != 1 {
				t.Fatalf("run again after the release: %d runtimes kept, want 1", n)
			}
		})
	}
}

// A closed script's timer does not bring its runtimes back, and it still runs (on a runtime of its own).
func TestAClosedScriptKeepsNoRuntime(t *testing.T) {
	s, err := Compile("rename.js", renameScript, Options{IdleRelease: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Run(context.Background(), stripeRequest(`{"id":"evt_2"}`), event("evt_2")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if n := s.idleRuntimes(); n != 0 {
		t.Fatalf("closed: %d runtimes kept, want 0", n)
	}
}

// Many destinations that transform and do not send cost their bytecode, not a runtime each: before, a
// compiled script kept the runtime it was checked on, about 430 KiB of the process's memory each (outside
// Go's heap, where QuickJS allocates).
func TestCompiledScriptsThatDoNotRunHoldLittleMemory(t *testing.T) {
	testenv.SlowUnderRace(t)
	if testing.Short() {
		t.Skip("compiles 100 scripts")
	}
	const n = 100
	runtime.GC()
	debug.FreeOSMemory()
	before := residentKiB(t)
	scripts := make([]*Script, n)
	for i := range scripts {
		// Each its own source, as each destination's own script is.
		scripts[i] = mustCompile(t, fmt.Sprintf("d%d.js", i), renameScript+"\n// "+strconv.Itoa(i), Options{})
	}
	runtime.GC()
	debug.FreeOSMemory()
	each := (residentKiB(t) - before) / n
	t.Logf("%d compiled scripts: %d KiB of resident memory each", n, each)
	if each > 128 {
		t.Fatalf("%d KiB of resident memory per compiled script that never ran, want at most 128", each)
	}
	runtime.KeepAlive(scripts)
}

func residentKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status here:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Skip("no VmRSS in /proc/self/status")
	return 0
}
