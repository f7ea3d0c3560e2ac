package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// objects.poll (#45), the config's key, on two gateway processes sharing
// one SQLite file (no NOTIFY there: the poll alone): a source created
// through one's API is served by the other within its poll and a little,
// at 200 ms and at 1.5 s. The creates follow each other as soon as the
// last was served, just after the replica's poll read the mark, so the
// next waits about a whole poll: at 1.5 s the slowest is well over the
// 200 ms one's, which shows the key, not a default (30 s), is the bound.
func TestObjectsPollFromTheConfig(t *testing.T) {
	for _, poll := range []time.Duration{200 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(poll.String(), func(t *testing.T) {
			dir := t.TempDir()
			sink := testenv.NewSink(t)
			common := `listen: 127.0.0.1:0
store: "sqlite://` + filepath.Join(dir, "shared.db") + `"
api:
  listen: 127.0.0.1:0
  tokens: [{name: ops, token: ` + objectsToken + `}]
sources:
  - {name: filed, preset: stripe, secrets: [whsec_filed], destinations: [app]}
destinations:
  - {name: app, url: "` + sink.URL + `"}
`
			for name, text := range map[string]string{"a.yaml": common, "b.yaml": common + fmt.Sprintf("objects: {poll: %s}\n", poll)} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("ONCEHOOK_SECRET_KEYS", objectsKey)
			a := startProcess(t, dir, "--config", filepath.Join(dir, "a.yaml"))
			b := startProcess(t, dir, "--config", filepath.Join(dir, "b.yaml"))
			env := []string{"ONCEHOOK_API=" + a.apiURL(t), "ONCEHOOK_API_TOKEN=" + objectsToken}
			var slowest time.Duration
			for i := range 3 {
				name := fmt.Sprintf("polled-%d", i)
				spec := filepath.Join(dir, name+".yaml")
				if err := os.WriteFile(spec, []byte("name: "+name+"\npreset: stripe\nsecrets: [whsec_polled]\ndestinations: [app]\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if out, ok := oncehook(t, dir, env, "sources", "create", "-f", spec); !ok {
					t.Fatalf("create on a:\n%s", out)
				}
				start := time.Now()
				served := testenv.WaitFor(poll+3*time.Second, func() bool {
					code, _ := roundTrip(testenv.SignedRequest(t, b.URL+"/in/"+name, "stripe", "whsec_polled", []byte(`{"id":"evt_`+name+`","object":"event"}`), ""))
					return code == 200
				})
				took := time.Since(start)
				if !served || took > poll+time.Second {
					t.Fatalf("b (objects.poll %s) served %s created on a after %s (served: %v), want within the poll and a second", poll, name, took, served)
				}
				slowest = max(slowest, took)
			}
			t.Logf("objects.poll %s: the slowest of 3 creates served by the other process in %s", poll, slowest)
			if poll > time.Second && slowest < poll/3 {
				t.Errorf("objects.poll %s: every create served within %s: is the poll the key's?", poll, slowest)
			}
		})
	}
}
