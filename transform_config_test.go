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
