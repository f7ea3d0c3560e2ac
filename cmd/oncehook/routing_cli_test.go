package main_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// The CLI's side of routing and flow control, on the store and through
// the API: events by type, an event sent where its route passed over, a
// breaker opened and closed by hand.
func TestRoutingAndBreakerCommands(t *testing.T) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	const token = "ops-token-0123456789"
	yaml := fmt.Sprintf(`store: sqlite://%s/oncehook.db
api:
  tokens: [{name: ops, token: %s}]
sources:
  - {name: stripe, preset: stripe, secrets: [%s], destinations: [{name: app, types: ["invoice.*"]}]}
destinations:
  - {name: app, url: %s}
`, dir, token, secret, sink.URL)
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := oncehooktest.Start(t, yaml)
	for i, typ := range []string{"invoice.paid", "charge.succeeded"} {
		req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(fmt.Sprintf(`{"id":"evt_%d","type":%q}`, i, typ)), "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	api := []string{"--api", gw.APIURL, "--token", token}
	run := func(wantOK bool, args ...string) string {
		t.Helper()
		out, ok := oncehook(t, dir, nil, args...)
		if ok != wantOK {
			t.Fatalf("oncehook %s: ok=%v\n%s", strings.Join(args, " "), ok, out)
		}
		return out
	}
	if out := run(true, append([]string{"events", "ls", "--type", "invoice.*"}, api...)...); !strings.Contains(out, "evt_0") || strings.Contains(out, "evt_1") || !strings.Contains(out, "invoice.paid") {
		t.Fatalf("events ls --type invoice.*:\n%s", out)
	}
	out := run(true, append([]string{"events", "ls", "--state", "filtered", "--json"}, "--config", cfg)...)
	if !strings.Contains(out, `"key": "evt_1"`) && !strings.Contains(out, `"key":"evt_1"`) {
		t.Fatalf("events ls --state filtered:\n%s", out)
	}
	id := strings.Fields(run(true, append([]string{"events", "ls", "--state", "filtered"}, api...)...))[8] // the first row's ID
	// A replay of it requeues nothing (its route passed over every
	// destination), and says why rather than a bare zero.
	if out := run(true, append([]string{"events", "replay", id}, api...)...); !strings.Contains(out, "requeued 0 deliveries: event "+id+" has none to requeue now") {
		t.Fatalf("events replay of an event with no delivery:\n%s", out)
	}
	if out := run(true, append([]string{"events", "deliver", id, "--destination", "app"}, api...)...); !strings.Contains(out, "added a delivery") {
		t.Fatalf("events deliver:\n%s", out)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return sink.ByKey()["stripe:evt_1"] == 1 }) {
		t.Fatal("the delivered event never arrived")
	}
	if out := run(true, append([]string{"events", "deliver", id, "--destination", "app"}, api...)...); !strings.Contains(out, "already has a delivery") {
		t.Fatalf("events deliver twice:\n%s", out)
	}
	// Every event a search finds, sent where its route passed over: the
	// dry run counts first (the one already there apart), then each
	// goes once.
	req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(`{"id":"evt_2","type":"charge.refunded"}`), "")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST: %v %v", resp, err)
	}
	where := []string{"events", "deliver", "--source", "stripe", "--where", `{"body":{"type":{"$in":["charge.succeeded","charge.refunded"]}}}`, "--destination", "app"}
	out = run(true, append(append(where, "--dry-run"), "--config", cfg)...)
	if !strings.Contains(out, "would add a delivery to app of 1 event (dry run); 1 event already had one there, left alone") || !strings.Contains(out, "search: read 3 events") {
		t.Fatalf("events deliver --where --dry-run:\n%s", out)
	}
	if out := run(true, append(where, api...)...); !strings.Contains(out, "added a delivery to app of 1 event;") {
		t.Fatalf("events deliver --where:\n%s", out)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return sink.ByKey()["stripe:evt_2"] == 1 }) {
		t.Fatal("the search's event never arrived")
	}
	if out := run(true, append(where, api...)...); !strings.Contains(out, "added a delivery to app of 0 events; 2 events already had one there") {
		t.Fatalf("events deliver --where again:\n%s", out)
	}
	if out := run(false, append([]string{"events", "deliver", id, "--destination", "app", "--dry-run"}, api...)...); !strings.Contains(out, "takes no --dry-run") {
		t.Fatalf("events deliver ID --dry-run:\n%s", out)
	}
	if out := run(false, append([]string{"events", "deliver", "--type", "charge.*"}, api...)...); !strings.Contains(out, "usage: oncehook events deliver --destination NAME") {
		t.Fatalf("events deliver without a destination:\n%s", out)
	}
	if out := run(false, append([]string{"events", "deliver", "--destination", "app"}, api...)...); !strings.Contains(out, "pass --all to deliver every stored event") {
		t.Fatalf("events deliver without a filter:\n%s", out)
	}
	if out := run(false, append([]string{"events", "deliver", "--type", "charge.*", "--destination", "ap"}, api...)...); !strings.Contains(out, `no such destination "ap" (known: app)`) {
		t.Fatalf("events deliver to a misspelt destination:\n%s", out)
	}
	// Skip (the way past a fifo head) has nothing to end once delivered,
	// on the store and through the API alike; it needs a destination.
	for _, where := range [][]string{api, {"--config", cfg}} {
		if out := run(true, append([]string{"events", "skip", id, "--destination", "app"}, where...)...); !strings.Contains(out, "no pending delivery to app") {
			t.Fatalf("events skip of a delivered event:\n%s", out)
		}
	}
	if out := run(false, append([]string{"events", "skip", id}, api...)...); !strings.Contains(out, "usage: oncehook events skip ID --destination NAME") {
		t.Fatalf("events skip without a destination:\n%s", out)
	}
	if out := run(true, append([]string{"destinations", "open-breaker", "app"}, "--config", cfg)...); !strings.Contains(out, "breaker open until you close it") {
		t.Fatalf("open-breaker:\n%s", out)
	}
	// Opened by hand, it holds until closed by hand, as the dashboard
	// says: not "until" a date a century away.
	for _, where := range [][]string{api, {"--config", cfg}} {
		out := run(true, append([]string{"destinations", "ls"}, where...)...)
		if !strings.Contains(out, "breaker open: held until closed by hand") || strings.Contains(out, fmt.Sprint(time.Now().Year()+100)) {
			t.Fatalf("destinations ls with a breaker opened by hand:\n%s", out)
		}
	}
	if out := run(true, append([]string{"destinations", "close-breaker", "app"}, api...)...); !strings.Contains(out, "breaker closed") {
		t.Fatalf("close-breaker:\n%s", out)
	}
	if out := run(false, append([]string{"destinations", "open-breaker", "nope"}, api...)...); !strings.Contains(out, "nope") {
		t.Fatalf("open-breaker of an unknown destination:\n%s", out)
	}
}
