package oncehook

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/broker/nats"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/transform"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// testKinds are the kinds this package's own tests use (package kinds,
// which has them all, imports this one).
func testKinds() Kinds {
	return Kinds{Stores: []store.Kind{sqlite.Kind()}, Brokers: []broker.Kind{nats.Kind()}}
}

func writeConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "oncehook.yaml")
}

const withTransform = `
store: sqlite://./a.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_x], destinations: [capi, inline]}
destinations:
  - name: capi
    url: https://graph.example.com/v19.0/1/events
    transform: transforms/capi.js
  - name: inline
    url: https://app.example.com/hooks
    transform:
      inline: 'addHandler("transform", (r) => { r.body = {n: r.body.id}; return r; })'
      timeout: 20ms
      max_memory: 8MiB
`

const capiJS = `addHandler("transform", (request, context) => {
  request.body = { data: [{ event_name: "Purchase", event_id: request.body.id }] };
  return request;
});
`

// A destination's transform file is read beside the config, inline scripts
// from the config itself; both are compiled when the config is checked.
func TestTransformsAreReadBesideTheConfigAndCompiled(t *testing.T) {
	path := writeConfig(t, map[string]string{"oncehook.yaml": withTransform, "transforms/capi.js": capiJS})
	cfg, err := LoadConfig(path, testKinds())
	if err != nil {
		t.Fatal(err)
	}
	p, err := compile(cfg, testKinds())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	u, _ := url.Parse(cfg.Destinations[0].URL)
	for name, want := range map[string]string{
		"capi":   `{"data":[{"event_name":"Purchase","event_id":"evt_1"}]}`,
		"inline": `{"n":"evt_1"}`,
	} {
		s := p.scripts[name]
		if s == nil {
			t.Fatalf("%s: no script", name)
		}
		out, err := s.Run(context.Background(), transform.Request{URL: u, Header: http.Header{}, ContentType: "application/json", Body: []byte(`{"id":"evt_1"}`)},
			transform.Event{Source: "stripe", Key: "evt_1", ReceivedAt: time.Now()})
		if err != nil || string(out.Body) != want {
			t.Errorf("%s: %s %v, want %s", name, out.Body, err, want)
		}
	}
	if d := cfg.Destinations[0].Transform.Digest; !strings.HasPrefix(d, "sha256:") {
		t.Errorf("digest %q", d)
	}
	if p.scripts["nope"] != nil {
		t.Error("a destination without a transform has a script")
	}
}

// validate names the script's file and line of a syntax error, and the
// config's field and line that named the script.
func TestATransformsSyntaxErrorNamesFileAndLine(t *testing.T) {
	path := writeConfig(t, map[string]string{
		"oncehook.yaml":      withTransform,
		"transforms/capi.js": "addHandler(\"transform\", (request) => {\n  request.body = { ;\n  return request;\n});\n",
	})
	_, err := LoadConfig(path, testKinds())
	if err == nil {
		t.Fatal("a script that does not compile was taken")
	}
	msg := err.Error()
	for _, want := range []string{"destinations[0].transform", "transforms/capi.js:2:", "SyntaxError", "(line 8)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	path = writeConfig(t, map[string]string{"oncehook.yaml": withTransform})
	if _, err := LoadConfig(path, testKinds()); err == nil || !strings.Contains(err.Error(), "read the script") {
		t.Errorf("a missing script: %v", err)
	}
	_, err = config.Parse([]byte(strings.Replace(withTransform, "transform: transforms/capi.js", "transform: {file: a.js, inline: x, colour: red}", 1)), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "destinations[0].transform.colour: unknown field") {
		t.Errorf("unknown field: %v", err)
	}
}

// A reload takes a changed script (the destination is changed) and refuses
// one that does not compile, keeping the running config.
func TestAReloadSwapsScriptsAndABadScriptRefusesIt(t *testing.T) {
	path := writeConfig(t, map[string]string{"oncehook.yaml": withTransform, "transforms/capi.js": capiJS})
	old, err := LoadConfig(path, testKinds())
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(filepath.Dir(path), "transforms/capi.js")
	same, err := LoadConfig(path, testKinds())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := config.Reload(old, same, checker{kinds: testKinds(), parts: checkParts(testKinds())}); err != nil || len(r.Changed) != 0 {
		t.Errorf("the same script again: %+v %v, want nothing changed", r, err)
	}
	if err := os.WriteFile(script, []byte(strings.Replace(capiJS, "Purchase", "Lead", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	next, err := LoadConfig(path, testKinds())
	if err != nil {
		t.Fatal(err)
	}
	r, err := config.Reload(old, next, checker{kinds: testKinds(), parts: checkParts(testKinds())})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Changed, []string{"destination capi changed"}) {
		t.Errorf("changed %q", r.Changed)
	}
	if r.Config.Destinations[0].Transform.Digest == old.Destinations[0].Transform.Digest {
		t.Error("the reloaded config runs the old script")
	}
	if err := os.WriteFile(script, []byte("addHandler(\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path, testKinds()); err == nil || !strings.Contains(err.Error(), "transforms/capi.js:") {
		t.Errorf("a bad script on reload: %v, want refused naming the script", err)
	}
}

// Every change (a reload, a source created through the API) rebuilds the
// whole config. A transformation whose recipe is unchanged is not compiled
// again (a thousand took seconds a change) and keeps its runtimes; a
// changed one is compiled and the one it replaces closed; a refused
// reload, or one that changes nothing, closes nothing that runs.
func TestAReloadCompilesOnlyTheScriptsThatChanged(t *testing.T) {
	path := writeConfig(t, map[string]string{"oncehook.yaml": withTransform, "transforms/capi.js": capiJS})
	cfg, err := LoadConfig(path, testKinds())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gw, err := New(ctx, cfg, Options{Kinds: testKinds(), ConfigFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	running := func() (capi, inline *transform.Script) {
		s := gw.built.Load().scripts
		return s["capi"], s["inline"]
	}
	reload := func() error {
		next, err := LoadConfig(path, testKinds())
		if err != nil {
			return err
		}
		_, err = gw.Reload(ctx, next)
		return err
	}
	capi0, inline0 := running()

	if err := reload(); err != nil {
		t.Fatal(err)
	}
	if capi, inline := running(); capi != capi0 || inline != inline0 || capi0.Closed() || inline0.Closed() {
		t.Fatalf("the same config again: scripts compiled anew (%v %v) or closed (%v %v)", capi != capi0, inline != inline0, capi0.Closed(), inline0.Closed())
	}

	script := filepath.Join(filepath.Dir(path), "transforms/capi.js")
	if err := os.WriteFile(script, []byte(strings.Replace(capiJS, "Purchase", "Lead", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	capi1, inline1 := running()
	if capi1 == capi0 || !capi0.Closed() || capi1.Closed() {
		t.Fatalf("capi's script changed: new %v, old closed %v, new closed %v", capi1 != capi0, capi0.Closed(), capi1.Closed())
	}
	if inline1 != inline0 || inline0.Closed() {
		t.Fatalf("inline's script is unchanged: compiled anew %v, closed %v", inline1 != inline0, inline0.Closed())
	}
	u, _ := url.Parse("https://graph.example.com/v19.0/1/events")
	out, err := capi1.Run(ctx, transform.Request{URL: u, Header: http.Header{}, ContentType: "application/json", Body: []byte(`{"id":"evt_1"}`)},
		transform.Event{Source: "stripe", Key: "evt_1", ReceivedAt: time.Now()})
	if err != nil || !strings.Contains(string(out.Body), `"Lead"`) {
		t.Fatalf("the reloaded capi script: %s %v, want the new one's Lead", out.Body, err)
	}

	// The same through a reload of the file (SIGHUP, POST /v1/reload).
	_, finish, err := gw.reloadFile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	finish(true)
	if capi, inline := running(); capi != capi1 || inline != inline1 || capi1.Closed() || inline1.Closed() {
		t.Fatalf("the file reloaded unchanged: scripts compiled anew (%v %v) or closed (%v %v)", capi != capi1, inline != inline1, capi1.Closed(), inline1.Closed())
	}

	// The inline script's bounds are part of its recipe: another timeout
	// is another script.
	text := strings.Replace(withTransform, "timeout: 20ms", "timeout: 30ms", 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	capi2, inline2 := running()
	if capi2 != capi1 || inline2 == inline1 || !inline1.Closed() {
		t.Fatalf("inline's timeout changed: capi compiled anew %v; inline compiled anew %v, old closed %v", capi2 != capi1, inline2 != inline1, inline1.Closed())
	}

	// A config refused for another destination's script closes nothing.
	if err := os.WriteFile(path, []byte(text+"  - {name: bad, url: https://x.example.com/, transform: {inline: 'addHandler('}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reload(); err == nil {
		t.Fatal("a script that does not compile was taken")
	}
	// The same, past the file's own check: the gateway's build refuses it.
	bad, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Reload(ctx, bad); err == nil || !strings.Contains(err.Error(), "destinations[2].transform") {
		t.Fatalf("a script that does not compile, reloaded: %v, want refused", err)
	}
	if capi, inline := running(); capi != capi2 || inline != inline2 || capi2.Closed() || inline2.Closed() {
		t.Fatalf("after a refused reload: scripts swapped (%v %v) or closed (%v %v)", capi != capi2, inline != inline2, capi2.Closed(), inline2.Closed())
	}
}
