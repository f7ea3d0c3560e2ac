package oncehook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 41, item 16: `stats --source nope` and `events ls --source nope`
// printed nothing and exited 0, as if the source had had no traffic. A
// source filter that names a source neither the config has nor any
// stored event is under is now a 404 naming the configured ones, in the
// API (events, stats, dead letters) and the dashboard; a source removed
// from the config is still listed by the events stored under it.
func TestAFilterOnAnUnknownSourceSaysSo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "oncehook.db")
	config := func(sources string) string {
		return fmt.Sprintf(`
store: sqlite://%s
sources:
%s
destinations: [{name: app, url: "http://127.0.0.1:1/never"}]
api: {tokens: [{name: ops, token: ops-token-0123456789}]}
`, db, sources)
	}
	const shop = `  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], destinations: [app]}`
	before := startGateway(t, config(shop+"\n"+`  - {name: legacy, preset: generic, unsigned: true, key: ["json:id"], destinations: [app]}`))
	resp, err := http.Post(before.URL+"/in/legacy", "application/json", strings.NewReader(`{"id":"l1"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /in/legacy: %v %v", resp, err)
	}
	resp.Body.Close()
	before.Stop()

	gw := startGateway(t, config(shop)) // legacy removed; its event stays
	get := func(client *http.Client, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, gw.APIURL+path, nil)
		if !strings.HasPrefix(path, "/ui/") {
			req.Header.Set("Authorization", "Bearer ops-token-0123456789")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/events?source=nope", "/v1/stats?source=nope", "/v1/dead-letters?source=nope"} {
		code, body := get(http.DefaultClient, path)
		var e struct{ Error, Reason string }
		json.Unmarshal([]byte(body), &e)
		if code != http.StatusNotFound || e.Reason != "not_found" || !strings.Contains(e.Error, `"nope"`) || !strings.Contains(e.Error, "known: shop") {
			t.Errorf("GET %s: %d %s, want 404 not_found naming nope and the known sources", path, code, body)
		}
	}
	if code, body := get(http.DefaultClient, "/v1/events?source=legacy"); code != http.StatusOK || !strings.Contains(body, `"key":"l1"`) {
		t.Errorf("events of a source removed from the config: %d %s, want its stored event", code, body)
	}
	if code, body := get(http.DefaultClient, "/v1/stats?source=legacy"); code != http.StatusOK || !strings.Contains(body, `"name":"legacy"`) {
		t.Errorf("stats of a source removed from the config: %d %s, want its counts", code, body)
	}
	if code, body := get(http.DefaultClient, "/v1/events?source=shop"); code != http.StatusOK || !strings.Contains(body, `"events":[]`) {
		t.Errorf("a configured source without events: %d %s, want an empty page", code, body)
	}

	// The dashboard's filter: the page says the source is unknown.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err = browser.PostForm(gw.APIURL+"/ui/login", url.Values{"token": {"ops-token-0123456789"}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dashboard login: %v %v", resp, err)
	}
	resp.Body.Close()
	if code, body := get(browser, "/ui/events?source=nope"); code != http.StatusNotFound || !strings.Contains(body, "No source is named &#34;nope&#34;") || !strings.Contains(body, `<select name="source">`) {
		t.Errorf("the dashboard's events under an unknown source: %d, want 404 saying so above the filter\n%s", code, body)
	}
	if code, body := get(browser, "/ui/events?source=legacy"); code != http.StatusOK || !strings.Contains(body, "l1") {
		t.Errorf("the dashboard's events of a removed source: %d, want its event listed", code)
	}
}
