package main_test

import (
	"encoding/json"
	"errors"
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

// The operator commands, on the store directly (--config) and on a running
// gateway's API (--api), against a gateway that is running: what they
// print, what they change, and how they refuse.
func TestOperatorCommands(t *testing.T) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	sink.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		if strings.Contains(string(sink.Deliveries()[n-1].Body), "refuse") {
			w.WriteHeader(http.StatusGone)
			w.Write([]byte("\x00\x1b[31mERR\u202e")) // bytes a terminal would obey
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	const token = "ops-token-0123456789"
	yaml := fmt.Sprintf(`store: sqlite://%s/oncehook.db
api:
  tokens: [{name: ops, token: %s}]
sources:
  - {name: stripe, preset: stripe, secrets: [%s], destinations: [app]}
destinations:
  - {name: app, url: %s}
`, dir, token, secret, sink.URL)
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := oncehooktest.Start(t, yaml)
	post := func(t *testing.T, body string) {
		req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(body), "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	for i := range 6 {
		kind := "ok"
		if i < 2 {
			kind = "refuse"
		}
		post(t, fmt.Sprintf(`{"id":"evt_%d","kind":%q}`, i, kind))
		post(t, fmt.Sprintf(`{"id":"evt_%d","kind":%q}`, i, kind)) // a resend
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		d, _ := gw.Admin().Destinations(t.Context())
		return len(sink.Deliveries()) == 6 && d[0].Dead == 2 && d[0].Pending == 0
	}) {
		t.Fatal("seed never settled")
	}
	api := []string{"--api", gw.APIURL, "--token", token}
	store := []string{"--config", cfg}
	run := func(t *testing.T, wantOK bool, args ...string) string {
		t.Helper()
		out, ok := oncehook(t, dir, nil, args...)
		if ok != wantOK {
			t.Fatalf("oncehook %s: ok=%v\n%s", strings.Join(args, " "), ok, out)
		}
		return out
	}

	var id string     // the event events ls finds, which the replays act on
	var eventID int64 // the same, as a number
	t.Run("ListPageAndShow", func(t *testing.T) {
		for _, how := range [][]string{store, api} {
			out := run(t, true, append([]string{"events", "ls", "--state", "dead"}, how...)...)
			if !strings.Contains(out, "evt_0") || !strings.Contains(out, "evt_1") || strings.Contains(out, "evt_2") || !strings.Contains(out, "DELIVERIES") {
				t.Fatalf("events ls --state dead (%s):\n%s", how[0], out)
			}
			out = run(t, true, append([]string{"dead", "ls"}, how...)...)
			if strings.Count(out, "HTTP 410") != 2 {
				t.Fatalf("dead ls (%s):\n%s", how[0], out)
			}
		}
		out := run(t, true, append([]string{"events", "ls", "--limit", "4"}, api...)...)
		if !strings.Contains(out, "more: --cursor c") {
			t.Fatalf("paging:\n%s", out)
		}
		var page struct {
			Events []struct {
				ID  int64  `json:"id"`
				Key string `json:"key"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(run(t, true, append([]string{"events", "ls", "--key-prefix", "evt_3", "--json"}, store...)...)), &page); err != nil || len(page.Events) != 1 {
			t.Fatalf("events ls --json: %v %+v", err, page)
		}
		eventID = page.Events[0].ID
		id = fmt.Sprint(eventID)
		if out := run(t, true, append([]string{"events", "show", id}, api...)...); !strings.Contains(out, "delivery to app: delivered after 1 attempt") || !strings.Contains(out, `"id":"evt_3"`) {
			t.Fatalf("events show:\n%s", out)
		}
	})
	t.Run("SearchByContent", func(t *testing.T) {
		// Issue 46: --where takes a route's filter as the config writes it,
		// on the store and through the API alike, says how far it read,
		// names a bad operator, and a bulk replay counts what it found.
		for _, how := range [][]string{store, api} {
			out := run(t, true, append([]string{"events", "ls", "--where", `{"body":{"kind":"refuse"}}`}, how...)...)
			if !strings.Contains(out, "evt_0") || !strings.Contains(out, "evt_1") || strings.Contains(out, "evt_2") ||
				!strings.Contains(out, "search: read 6 events, every one the other parameters select; 2 matched") {
				t.Fatalf("events ls --where (%s):\n%s", how[0], out)
			}
			out = run(t, true, append([]string{"events", "ls", "--where", `{"body":{"id":{"$in":["evt_2","evt_5"]}}}`, "--scan", "2"}, how...)...)
			if !strings.Contains(out, "evt_5") || strings.Contains(out, "evt_2") || !strings.Contains(out, "older ones were not read") || !strings.Contains(out, "more: --cursor c") {
				t.Fatalf("events ls --where --scan 2 (%s):\n%s", how[0], out)
			}
			// Nothing found within the bound still says where to go on.
			out = run(t, true, append([]string{"events", "ls", "--where", `{"body":{"id":"evt_0"}}`, "--scan", "2"}, how...)...)
			if !strings.Contains(out, "no events match") || !strings.Contains(out, "more: --cursor c") {
				t.Fatalf("events ls --where with nothing in its bound (%s):\n%s", how[0], out)
			}
			if out := run(t, false, append([]string{"events", "ls", "--where", `{"body":{"id":{"$bogus":1}}}`}, how...)...); !strings.Contains(out, "where") || !strings.Contains(out, "$bogus") {
				t.Fatalf("a bad operator (%s):\n%s", how[0], out)
			}
			out = run(t, true, append([]string{"events", "replay", "--where", `{"body":{"id":"evt_4"}}`, "--dry-run"}, how...)...)
			if !strings.Contains(out, "would requeue 1 delivery (dry run)") || !strings.Contains(out, "search: read 6 events") {
				t.Fatalf("events replay --where --dry-run (%s):\n%s", how[0], out)
			}
			// Narrowed to a destination, and to its dead letters: evt_4
			// was delivered to app, so there is none to retry.
			out = run(t, true, append([]string{"events", "replay", "--where", `{"body":{"id":"evt_4"}}`, "--destination", "app", "--dry-run"}, how...)...)
			if !strings.Contains(out, "would requeue 1 delivery (dry run)") {
				t.Fatalf("events replay --where --destination app --dry-run (%s):\n%s", how[0], out)
			}
			out = run(t, true, append([]string{"events", "replay", "--where", `{"body":{"id":"evt_4"}}`, "--destination", "app", "--dead", "--dry-run"}, how...)...)
			if !strings.Contains(out, "would requeue 0 deliveries (dry run)") {
				t.Fatalf("events replay --where --destination app --dead --dry-run (%s):\n%s", how[0], out)
			}
			if out := run(t, false, append([]string{"events", "replay", "--where", `{"body":{"id":"evt_4"}}`, "--destination", "nope", "--dry-run"}, how...)...); !strings.Contains(out, "nope") || !strings.Contains(out, "not found") {
				t.Fatalf("events replay --destination nope (%s):\n%s", how[0], out)
			}
		}
	})
	t.Run("ReplayAndDeadRetry", func(t *testing.T) {
		// Replay one event through the API; the destination gets it again.
		before := sink.ByKey()["stripe:evt_3"]
		if out := run(t, true, append([]string{"events", "replay", id}, api...)...); !strings.Contains(out, "requeued 1 delivery") {
			t.Fatalf("events replay:\n%s", out)
		}
		if !testenv.WaitFor(5*time.Second, func() bool { return sink.ByKey()["stripe:evt_3"] == before+1 }) {
			t.Fatal("the replay never arrived")
		}
		// The older `oncehook replay` is the same replay, and reaches the API
		// (once the first replay's outcome is recorded: a leased delivery is
		// its worker's).
		if !testenv.WaitFor(5*time.Second, func() bool {
			e, err := gw.Admin().Event(t.Context(), eventID)
			return err == nil && e.State == "delivered"
		}) {
			t.Fatal("the replay's outcome was never recorded")
		}
		if out := run(t, true, append([]string{"replay", "--source", "stripe", "--key", "evt_3"}, api...)...); !strings.Contains(out, "requeued 1 delivery") {
			t.Fatalf("replay --api:\n%s", out)
		}
		if !testenv.WaitFor(5*time.Second, func() bool { return sink.ByKey()["stripe:evt_3"] == before+2 }) {
			t.Fatal("the second replay never arrived")
		}
		if out := run(t, false, append([]string{"replay", "--source", "stripe", "--key", "evt_none"}, api...)...); !strings.Contains(out, "no such event") {
			t.Fatalf("replay --api of an unknown key:\n%s", out)
		}
		if out := run(t, true, append([]string{"events", "replay", "--state", "dead", "--dry-run"}, store...)...); !strings.Contains(out, "would requeue 2 deliveries (dry run)") {
			t.Fatalf("replay dry run:\n%s", out)
		}
		// An empty filter is refused, not "everything".
		// In the CLI's words (--all), whichever refused it.
		for _, how := range [][]string{store, api} {
			if out := run(t, false, append([]string{"dead", "purge"}, how...)...); !strings.Contains(out, "the filter is empty: pass --all to act on every dead letter") {
				t.Fatalf("dead purge with no filter (%s):\n%s", how[0], out)
			}
			if out := run(t, false, append([]string{"events", "replay"}, how...)...); !strings.Contains(out, "pass --all to replay every stored event") {
				t.Fatalf("events replay with no filter (%s):\n%s", how[0], out)
			}
		}
		if out := run(t, true, append([]string{"dead", "retry", "--destination", "app", "--dry-run"}, store...)...); !strings.Contains(out, "would requeue 2 dead letters") {
			t.Fatalf("dead retry --dry-run:\n%s", out)
		}

	})
	t.Run("PauseAndResume", func(t *testing.T) {
		// Pause on the store directly: the running gateway holds within 2s.
		if out := run(t, true, append([]string{"destinations", "pause", "app"}, store...)...); !strings.Contains(out, "app paused") {
			t.Fatalf("pause:\n%s", out)
		}
		time.Sleep(2500 * time.Millisecond)
		n := len(sink.Deliveries())
		post(t, `{"id":"evt_held","kind":"ok"}`)
		time.Sleep(500 * time.Millisecond)
		if len(sink.Deliveries()) != n {
			t.Fatal("a destination paused from the CLI still received")
		}
		if out := run(t, true, append([]string{"destinations"}, api...)...); !strings.Contains(out, "paused since") {
			t.Fatalf("destinations:\n%s", out)
		}
		if out := run(t, true, append([]string{"destinations", "resume", "app"}, api...)...); !strings.Contains(out, "app resumed") {
			t.Fatalf("resume:\n%s", out)
		}
		if !testenv.WaitFor(5*time.Second, func() bool { return sink.ByKey()["stripe:evt_held"] == 1 }) {
			t.Fatal("resume did not drain")
		}

	})
	t.Run("CountsDoctorAudit", func(t *testing.T) {
		// The hourly counts, the doctor, the audit trail's actors.
		if !testenv.WaitFor(12*time.Second, func() bool {
			out := run(t, true, append([]string{"stats", "--source", "stripe"}, api...)...)
			return strings.Contains(strings.Join(strings.Fields(out), " "), "stripe total 13 7 6 0 0 46.2%")
		}) {
			t.Fatalf("stats:\n%s", run(t, true, append([]string{"stats", "--source", "stripe"}, api...)...))
		}
		if out := run(t, true, append([]string{"doctor"}, store...)...); !strings.Contains(out, "stripe: 7 recent events") || !strings.Contains(out, "ok: keys look right") {
			t.Fatalf("doctor:\n%s", out)
		}
	})
	t.Run("FoundFromOutside", func(t *testing.T) {
		// Found from outside: the README's own stats command, --help, the
		// doctor's exit, a show by key, an unknown destination, raw bytes.
		if out := run(t, true, append([]string{"stats", "--source", "stripe", "--since", "7d", "--granularity", "1d"}, api...)...); !strings.Contains(out, "stripe") {
			t.Fatalf("stats --since 7d:\n%s", out)
		}
		for _, c := range [][]string{{"events", "ls", "--help"}, {"stats", "-h"}, {"--help"}} {
			if out, ok := oncehook(t, dir, nil, c...); !ok || !strings.Contains(out, "sage") {
				t.Errorf("oncehook %v: ok=%v, want exit 0 with the usage:\n%s", c, ok, out)
			}
		}
		out := run(t, true, append([]string{"events", "show", "stripe", "evt_0"}, store...)...)
		if !strings.Contains(out, `"id":"evt_0"`) || !strings.Contains(out, `\x1b[31mERR\u202e`) || strings.ContainsAny(out, "\x00\x1b\u202e") {
			t.Fatalf("events show SOURCE KEY, with a destination's raw answer escaped:\n%q", out)
		}
		// Found from outside: a key events ls prints percent-encoded is found
		// by events show as printed, and as the provider sent it; an empty
		// listing says so instead of printing a bare header (or nothing).
		post(t, `{"id":"evt_café","kind":"ok"}`)
		if out := run(t, true, append([]string{"events", "ls", "--key-prefix", "evt_caf"}, store...)...); !strings.Contains(out, "evt_caf%C3%A9") {
			t.Fatalf("events ls of a non-ASCII key:\n%s", out)
		}
		for _, key := range []string{"evt_caf%C3%A9", "evt_café"} {
			if out := run(t, true, append([]string{"events", "show", "stripe", key}, store...)...); !strings.Contains(out, `"id":"evt_café"`) {
				t.Fatalf("events show stripe %s:\n%s", key, out)
			}
		}
		if out := run(t, false, append([]string{"events", "show", "stripe", "evt_caf%C3%A8"}, store...)...); !strings.Contains(out, "no event with key") {
			t.Fatalf("events show of a key not stored:\n%s", out)
		}
		// Two events, one for each reading of a key (sent as evt_%41, stored
		// evt_%2541; and sent as evt_%2541): show takes the key as events ls
		// prints it, and names the other by its id (it refused both).
		post(t, `{"id":"evt_%41","kind":"ok"}`)
		post(t, `{"id":"evt_%2541","kind":"ok"}`)
		for _, how := range [][]string{store, api} {
			if out := run(t, true, append([]string{"events", "show", "stripe", "evt_%2541"}, how...)...); !strings.Contains(out, `"id":"evt_%41"`) ||
				!strings.Contains(out, "is shown; event") || !strings.Contains(out, `whose provider sent "evt_%2541"`) {
				t.Fatalf("events show of a key as events ls prints it, which another event's provider sent (%s):\n%s", how[0], out)
			}
			if out := run(t, true, append([]string{"events", "show", "stripe", "evt_%252541"}, how...)...); !strings.Contains(out, `"id":"evt_%2541"`) {
				t.Fatalf("events show of a key as stored (%s):\n%s", how[0], out)
			}
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		// From another folder, a config whose store is a relative path names
		// no store there: the command says so and creates none.
		elsewhere := t.TempDir()
		relative := filepath.Join(dir, "relative.yaml")
		if err := os.WriteFile(relative, []byte(strings.Replace(yaml, "store: sqlite://"+dir+"/oncehook.db", "store: sqlite://./oncehook.db", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, ok := oncehook(t, elsewhere, nil, "events", "ls", "--config", relative); ok || !strings.Contains(out, "no store at "+filepath.Join(elsewhere, "oncehook.db")) {
			t.Fatalf("events ls with a relative store from another folder: ok=%v\n%s", ok, out)
		}
		if _, err := os.Stat(filepath.Join(elsewhere, "oncehook.db")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("events ls created a store where there was none: %v", err)
		}
		for _, how := range [][]string{store, api} {
			// A name neither the config has nor the store holds events under
			// is an error naming the known ones (issue 41: it printed nothing
			// and exited 0): most often a typo.
			noSource := `no such source "nope" (known: stripe)`
			for _, args := range [][]string{{"events", "ls", "--source", "nope"}, {"dead", "ls", "--source", "nope"}, {"stats", "--source", "nope"}} {
				if out := run(t, false, append(args, how...)...); !strings.Contains(out, noSource) {
					t.Fatalf("%v (%s):\n%s", args, how[0], out)
				}
			}
			if out := run(t, false, append([]string{"dead", "ls", "--destination", "nope"}, how...)...); !strings.Contains(out, `no such destination "nope" (known: `) {
				t.Fatalf("dead ls --destination nope (%s):\n%s", how[0], out)
			}
			// stats of a destination neither the config has nor the range
			// counted is refused as the source is (it printed an empty chart
			// and exited 0).
			if out := run(t, false, append([]string{"stats", "--destination", "nope"}, how...)...); !strings.Contains(out, `no such destination "nope" (known: `) {
				t.Fatalf("stats --destination nope (%s):\n%s", how[0], out)
			}
			// A known name with nothing to show needs no hint.
			if out := run(t, true, append([]string{"events", "ls", "--source", "stripe", "--key", "evt_never"}, how...)...); strings.TrimSpace(out) != "no events match" {
				t.Fatalf("events ls of a known source with nothing to show (%s):\n%s", how[0], out)
			}
		}
		if out := run(t, false, append([]string{"dead", "retry", "--destination", "nope"}, api...)...); !strings.Contains(out, "nope") || !strings.Contains(out, "not found") {
			t.Fatalf("dead retry of an unknown destination:\n%s", out)
		}
		// A refusal reads the same through the API as from the store: the
		// API's reason code is for programs.
		// A flag an events command does not read is refused, not ignored: a
		// replay "to one destination" went to all of them.
		for args, want := range map[string]string{
			"events replay 1 --destination app": "events replay 1 replays that one event: it takes no --destination",
			"events ls --destination app":       "events ls does not take --destination",
			"events show 1 --dead":              "events show does not take --dead (events replay does)",
			"events ls --dry-run":               "events ls does not take --dry-run (events replay and deliver do)",
			"events show 1 --limit 5":           "events show does not take --limit (events ls does)",
			"events replay 1 --source stripe":   "events replay 1 replays that one event: it takes no --source",
			"events ls --limit 0":               "--limit 0: want 1 to 500",
			"dead ls --limit 0":                 "--limit 0: want 1 to 500",
			"events ls --since -1h":             "--since -1h0m0s: want a span back from now",
			"stats --since -1h":                 "--since -1h0m0s: want a span back from now",
			// A refusal names the flag, not the API's field (to, key_prefix).
			"events ls --from 2026-12-04T00:00:00Z --to 2026-12-03T00:00:00Z": "--to: must be after from",
			"stats --since 3000d":                    "--since: at most 2160 spans at a time (of --granularity 1h)",
			"dead ls --cursor zz":                    "--cursor: not a cursor this API gave",
			"order reset --source stripe --entity x": "--source: stripe does not order its events",
		} {
			before := countAudit(t, gw)
			if out := run(t, false, append(strings.Fields(args), store...)...); !strings.Contains(out, want) {
				t.Fatalf("oncehook %s:\n%s\nwant %q", args, out, want)
			}
			if countAudit(t, gw) != before {
				t.Fatalf("oncehook %s was refused and still acted", args)
			}
		}
	})
	t.Run("EventZeroAndAudit", func(t *testing.T) {
		// Event 0 is no event: to the store an id of 0 is no id at all, and
		// "events replay 0" on the store replayed every stored event.
		replayedBefore := countAudit(t, gw)
		for _, args := range [][]string{{"events", "replay", "0"}, {"events", "show", "0"}, {"events", "skip", "0", "--destination", "app"}, {"events", "deliver", "0", "--destination", "app"}} {
			fromStore, fromAPI := run(t, false, append(args, store...)...), run(t, false, append(args, api...)...)
			if fromStore != fromAPI || !strings.Contains(fromStore, "event 0: not found") {
				t.Fatalf("oncehook %s: from the store\n%s\nfrom the API\n%s", strings.Join(args, " "), fromStore, fromAPI)
			}
		}
		if n := countAudit(t, gw); n != replayedBefore {
			t.Fatalf("refused actions on event 0 left %d audit entries", n-replayedBefore)
		}
		for _, args := range [][]string{{"dead", "retry", "--destination", "nope"}, {"events", "show", "999999"}, {"events", "ls", "--state", "bogus"},
			{"dead", "purge"}, {"events", "replay"}, {"stats", "--since", "3000d"}, {"dead", "ls", "--cursor", "zz"},
			{"events", "ls", "--from", "2026-12-04T00:00:00Z", "--to", "2026-12-03T00:00:00Z"}} {
			fromStore, fromAPI := run(t, false, append(args, store...)...), run(t, false, append(args, api...)...)
			if fromStore != fromAPI || strings.Contains(fromAPI, "(not_found)") || strings.Contains(fromAPI, "(invalid") {
				t.Fatalf("oncehook %s: from the store\n%s\nfrom the API\n%s", strings.Join(args, " "), fromStore, fromAPI)
			}
		}
		audit, err := gw.Admin().Audit(t.Context(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		actors := map[string]bool{}
		for _, e := range audit.Entries {
			actors[strings.SplitN(e.Actor, ":", 2)[0]+":"+e.Action] = true
		}
		// Two replays (events replay, and the older replay), a pause and a
		// resume; the replay of an unknown key changed nothing and says nothing.
		if !actors["cli:pause"] || !actors["token:resume"] || !actors["token:replay"] || len(audit.Entries) != 4 {
			t.Fatalf("audit %+v", audit.Entries)
		}
		// Bad input says what is wrong.
		for _, c := range [][]string{{"events", "show", "abc"}, {"events", "ls", "--state", "bogus"}, {"destinations", "pause", "nope"}, {"stats", "--granularity", "5m"}} {
			out, ok := oncehook(t, dir, nil, append(c, store...)...)
			if ok || len(strings.TrimSpace(out)) == 0 {
				t.Errorf("oncehook %v: ok=%v %q", c, ok, out)
			}
		}
		if out, ok := oncehook(t, dir, nil, "events", "ls", "--api", gw.APIURL, "--token", "wrong-token-0000000"); ok || !strings.Contains(out, "bearer token") {
			t.Errorf("wrong token: %v %s", ok, out)
		}
	})
}

// countAudit is how many entries gw's audit log holds.
func countAudit(t *testing.T, gw *oncehooktest.Gateway) int {
	t.Helper()
	n, cursor := 0, ""
	for {
		page, err := gw.Admin().Audit(t.Context(), cursor, 500)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Entries)
		if page.NextCursor == "" {
			return n
		}
		cursor = page.NextCursor
	}
}

// Found from outside: events show of an event a destination's route passed over names that destination, as
// the API's "filtered" does, with the command that sends it there; before, a filtered event showed no
// delivery and no reason.
func TestEventsShowNamesTheDestinationsARoutePassedOver(t *testing.T) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	yaml := fmt.Sprintf(`store: sqlite://%s/oncehook.db
sources:
  - name: stripe
    preset: stripe
    secrets: [%s]
    destinations: [{name: billing, types: ["invoice.*"]}, {name: crm, filter: {body: {type: {$startsWith: "customer."}}}}, audit]
destinations:
  - {name: billing, url: %s}
  - {name: crm, url: %s}
  - {name: audit, url: %s}
`, dir, secret, sink.URL, sink.URL, sink.URL)
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := oncehooktest.Start(t, yaml)
	req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(`{"id":"evt_charge","type":"charge.succeeded"}`), "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST: %v %v", resp, err)
	}
	resp.Body.Close()
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatal("audit never got the event")
	}
	// The sink has it before the outcome's commit: show says pending
	// until then.
	var out string
	var ok bool
	testenv.WaitFor(10*time.Second, func() bool {
		out, ok = oncehook(t, dir, nil, "events", "show", "stripe", "evt_charge", "--config", cfg)
		return strings.Contains(out, "delivery to audit: delivered")
	})
	if !ok || !strings.Contains(out, "delivery to audit: delivered") ||
		!strings.Contains(out, "passed over by billing, crm (their types or filter)") ||
		!strings.Contains(out, "--destination D") {
		t.Fatalf("events show of an event two routes passed over:\n%s", out)
	}
}
