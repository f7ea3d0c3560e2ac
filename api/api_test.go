package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

const (
	opsToken    = "ops-token-0123456789"
	viewerToken = "viewer-token-0123456789"
	secret      = "whsec_test"
)

// seeded is a gateway with a realistic day: Stripe events with resends,
// forged and broken requests, a destination that refuses some events for
// good, and one that takes everything.
type seeded struct {
	gw    *oncehooktest.Gateway
	app   *testenv.Sink
	flaky *testenv.Sink
	api   *api.Client
}

func seed(t *testing.T) *seeded {
	t.Helper()
	app := testenv.NewSink(t)
	flaky := testenv.NewSink(t)
	flaky.Respond = func(w http.ResponseWriter, r *http.Request, n int) {
		// The sink has read the body; it recorded it.
		if bytes.Contains(flaky.Deliveries()[n-1].Body, []byte(`"refuse"`)) {
			w.WriteHeader(http.StatusGone)
			io.WriteString(w, `{"error":"customer deleted"}`)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: ops, token: `+opsToken+`}
    - {name: viewer, token: `+viewerToken+`, read_only: true}
sources:
  - {name: stripe, preset: stripe, secrets: [`+secret+`], destinations: [app, flaky]}
  - {name: shop, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - {name: app, url: `+app.URL+`}
  - {name: flaky, url: `+flaky.URL+`, retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}}
`)
	s := &seeded{gw: gw, app: app, flaky: flaky, api: api.NewClient(gw.APIURL, opsToken, nil)}
	// 20 events; 5 of them resent twice more; 4 of them refused by flaky.
	for i := range 20 {
		kind := "ok"
		if i%5 == 0 {
			kind = "refuse"
		}
		copies := 1
		if i%4 == 0 {
			copies = 3
		}
		for range copies {
			s.post(t, "stripe", fmt.Sprintf(`{"id":"evt_%02d","type":"invoice.paid","data":{"kind":%q}}`, i, kind), 200)
		}
	}
	s.post(t, "shop", `{"id":"evt_shop","type":"order.created"}`, 200)
	// Two forged requests and one that is not JSON.
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/stripe", strings.NewReader(`{"id":"evt_forged"}`))
		req.Header.Set("Stripe-Signature", "t=1,v1=00")
		req.Header.Set("Content-Type", "application/json")
		expect(t, req, 401)
	}
	expect(t, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", secret, []byte(`{"id":`), ""), 400)

	if !testenv.WaitFor(20*time.Second, func() bool {
		d, err := s.api.Destinations(context.Background())
		return err == nil && len(app.ByKey()) == 21 && len(d) == 2 && d[1].Dead == 4 && d[1].Pending == 0 && d[0].Pending == 0
	}) {
		t.Fatalf("seed: app has %d keys, flaky %d deliveries", len(app.ByKey()), len(flaky.Deliveries()))
	}
	// The counters ride the writer's next commit or its periodic flush.
	if !testenv.WaitFor(15*time.Second, func() bool {
		src, err := s.api.Sources(context.Background())
		return err == nil && src[0].Last24h.Received == 30 && src[0].Last24h.RejectedTotal() == 3 &&
			src[1].Last24h.Received == 1
	}) {
		src, err := s.api.Sources(context.Background())
		t.Fatalf("rollups never showed the seed: %+v %v", src, err)
	}
	return s
}

func (s *seeded) post(t *testing.T, source, body string, want int) {
	t.Helper()
	expect(t, testenv.SignedRequest(t, s.gw.URL+"/in/"+source, "stripe", secret, []byte(body), ""), want)
}

func expect(t *testing.T, req *http.Request, want int) []byte {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL, resp.StatusCode, body, want)
	}
	return body
}

// call makes a raw API request and returns the status and the body.
func (s *seeded) call(t *testing.T, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, s.gw.APIURL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, out
}

func TestAPI(t *testing.T) {
	s := seed(t)
	ctx := context.Background()

	t.Run("tokens", func(t *testing.T) {
		// A wrong token is 401, until this address has had 10 of them
		// (the default limit): then 429, while the right token still
		// works. A missing one guesses nothing: 401 however often, and
		// never counted.
		failures := 0
		refused := func(what, path string, code int) {
			t.Helper()
			want := 401
			if failures >= 10 {
				want = 429
			}
			failures++
			if code != want {
				t.Errorf("GET %s %s: %d, want %d (after %d failures)", path, what, code, want, failures-1)
			}
		}
		for _, path := range []string{"/v1/sources", "/v1/stats", "/v1/events", "/v1/events/1", "/v1/dead-letters", "/v1/destinations", "/v1/audit", "/v1/doctor", "/v1/alerts/issues"} {
			for range 2 {
				if code, _ := s.call(t, "", "GET", path, ""); code != 401 {
					t.Errorf("GET %s without a token: %d, want 401 (after %d wrong ones)", path, code, failures)
				}
			}
			for _, wrong := range []string{"not-a-token-at-all", "not-the-viewer's-either"} {
				code, _ := s.call(t, wrong, "GET", path, "")
				refused("with a wrong token", path, code)
			}
			if code, body := s.call(t, viewerToken, "GET", path, ""); code != 200 {
				t.Errorf("GET %s read-only: %d %v", path, code, body)
			}
		}
		for _, c := range [][2]string{{"POST", "/v1/events/1/replay"}, {"POST", "/v1/events/replay"}, {"POST", "/v1/dead-letters/retry"},
			{"DELETE", "/v1/dead-letters?all=true"}, {"POST", "/v1/destinations/app/pause"}, {"POST", "/v1/destinations/app/resume"},
			{"POST", "/v1/alerts/issues/1/acknowledge"}, {"POST", "/v1/alerts/issues/1/resolve"}} {
			if code, body := s.call(t, viewerToken, c[0], c[1], `{"all":true}`); code != 403 || body["reason"] != "read_only" {
				t.Errorf("%s %s read-only: %d %v", c[0], c[1], code, body)
			}
		}
		if a, _ := s.api.Audit(ctx, "", 10); len(a.Entries) != 0 {
			t.Fatalf("refused requests changed something: %+v", a.Entries)
		}
	})

	t.Run("sources and stats", func(t *testing.T) {
		src, err := s.api.Sources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := src[0]
		if st.Name != "stripe" || st.Preset != "stripe" || st.Window != "4d" || len(st.Destinations) != 2 {
			t.Fatalf("stripe source %+v", st)
		}
		c := st.Last24h
		if c.Received != 30 || c.Accepted != 20 || c.Duplicate != 10 || c.Rejected["unauthorized"] != 2 || c.Rejected["malformed"] != 1 ||
			c.Requests != 33 || fmt.Sprintf("%.3f", c.DuplicateRate) != "0.333" {
			t.Fatalf("stripe last 24h %+v", c)
		}
		view, err := s.api.Stats(ctx, admin.StatsQuery{Source: "stripe"})
		if err != nil {
			t.Fatal(err)
		}
		if len(view.Sources) != 1 || len(view.Destinations) != 0 || len(view.Sources[0].Points) != 25 {
			t.Fatalf("stats shape: %d sources, %d destinations, %d points", len(view.Sources), len(view.Destinations), len(view.Sources[0].Points))
		}
		pts := view.Sources[0].Points
		last := pts[len(pts)-1]
		if !last.At.Equal(time.Now().UTC().Truncate(time.Hour)) || last.Duplicate != 10 || last.Accepted != 20 || pts[0].Received != 0 {
			t.Fatalf("stats points: last %+v first %+v", last, pts[0])
		}
		daily, err := s.api.Stats(ctx, admin.StatsQuery{Destination: "flaky", Granularity: admin.Daily})
		if err != nil || len(daily.Destinations) != 1 || len(daily.Sources) != 0 {
			t.Fatalf("daily %+v %v", daily, err)
		}
		d := daily.Destinations[0].Points[len(daily.Destinations[0].Points)-1]
		if d.Dead != 4 || d.Delivered != 16 {
			t.Fatalf("flaky today %+v", d)
		}
	})

	t.Run("events and pages", func(t *testing.T) {
		seen := map[string]bool{}
		f := admin.EventFilter{Source: "stripe", Limit: 7}
		pages := 0
		for {
			page, err := s.api.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, e := range page.Events {
				if seen[e.Key] {
					t.Fatalf("%s on two pages", e.Key)
				}
				seen[e.Key] = true
			}
			if page.NextCursor == "" {
				break
			}
			f.Cursor = page.NextCursor
		}
		if len(seen) != 20 || pages != 3 {
			t.Fatalf("%d events on %d pages", len(seen), pages)
		}
		dead, _ := s.api.Events(ctx, admin.EventFilter{State: "dead"})
		delivered, _ := s.api.Events(ctx, admin.EventFilter{State: "delivered", Source: "stripe"})
		prefix, _ := s.api.Events(ctx, admin.EventFilter{KeyPrefix: "evt_1"})
		if len(dead.Events) != 4 || len(delivered.Events) != 16 || len(prefix.Events) != 10 {
			t.Fatalf("filters: %d dead, %d delivered, %d with evt_1", len(dead.Events), len(delivered.Events), len(prefix.Events))
		}
		future, _ := s.api.Events(ctx, admin.EventFilter{From: time.Now().Add(time.Hour)})
		if len(future.Events) != 0 {
			t.Fatalf("events from the future: %d", len(future.Events))
		}

		e, err := s.api.Event(ctx, dead.Events[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e.Body, `"refuse"`) || !strings.HasPrefix(e.ContentType, "application/json") || e.Headers == nil || len(e.Deliveries) != 2 {
			t.Fatalf("event %+v", e)
		}
		fl := e.Deliveries[1]
		if fl.Destination != "flaky" || fl.State != "dead" || len(fl.History) != 1 || fl.History[0].Status != 410 ||
			fl.History[0].Response != `{"error":"customer deleted"}` || fl.History[0].Outcome != "dead" {
			t.Fatalf("flaky delivery %+v", fl)
		}
	})

	t.Run("bad input changes nothing", func(t *testing.T) {
		cases := []struct {
			method, path, body string
			code               int
			field              string
		}{
			{"GET", "/v1/events?state=bogus", "", 400, "state"},
			{"GET", "/v1/events?cursor=xyz", "", 400, "cursor"},
			{"GET", "/v1/events?cursor=c-5", "", 400, "cursor"},
			{"GET", "/v1/events?limit=100000", "", 400, "limit"},
			{"GET", "/v1/events?limit=ten", "", 400, "limit"},
			{"GET", "/v1/events?from=yesterday", "", 400, "from"},
			{"GET", "/v1/events?from=2026-11-30T10:00:00Z&to=2026-11-30T09:00:00Z", "", 400, "to"},
			{"GET", "/v1/events?sorce=stripe", "", 400, "sorce"},
			// A body pasted as a name is named cut, not answered back whole.
			{"GET", "/v1/events?" + url.QueryEscape(strings.Repeat("{\"body\":1}", 3000)), "", 400, strings.Repeat("{\"body\":1}", 7)[:64] + "..."},
			{"GET", "/v1/events?where=" + url.QueryEscape(`{"body":{"a":{"$bogus":1}}}`), "", 400, "where"},
			{"GET", "/v1/events?scan=20000000&where=%7B%7D", "", 400, "scan"},
			{"GET", "/v1/stats?granularity=5m", "", 400, "granularity"},
			{"GET", "/v1/stats?from=2000-01-01T00:00:00Z", "", 400, "from"},
			{"GET", "/v1/events/999999", "", 404, ""},
			{"GET", "/v1/events/abc", "", 404, ""},
			{"POST", "/v1/events/999999/replay", "", 404, ""},
			{"POST", "/v1/events/replay", `{}`, 400, "all"},
			{"POST", "/v1/events/replay", `{"state":"dead","cursor":"c5"}`, 400, "cursor"},
			{"POST", "/v1/events/replay", `{"stat":"dead"}`, 400, ""},
			{"POST", "/v1/events/replay", `{"state":"dead",` + strings.Repeat(" ", 70<<10) + `}`, 413, ""},
			{"POST", "/v1/dead-letters/retry", `{}`, 400, "all"},
			{"DELETE", "/v1/dead-letters", "", 400, "all"},
			{"DELETE", "/v1/dead-letters?all=maybe", "", 400, "all"},
			{"POST", "/v1/destinations/nope/pause", "", 404, ""},
			{"GET", "/v1/doctor?source=nope", "", 404, ""},
			{"GET", "/v1/nothing", "", 404, ""},
		}
		for _, c := range cases {
			code, body := s.call(t, opsToken, c.method, c.path, c.body)
			if code != c.code || (c.field != "" && body["field"] != c.field) || body["error"] == nil {
				t.Errorf("%s %s: %d %v, want %d field %q", c.method, c.path, code, body, c.code, c.field)
			}
		}
		if a, _ := s.api.Audit(ctx, "", 10); len(a.Entries) != 0 {
			t.Fatalf("bad requests changed something: %+v", a.Entries)
		}
		if d, _ := s.api.Destinations(ctx); d[0].Paused || d[1].Dead != 4 {
			t.Fatalf("bad requests changed something: %+v", d)
		}
	})

	t.Run("replay", func(t *testing.T) {
		page, _ := s.api.Events(ctx, admin.EventFilter{KeyPrefix: "evt_03"})
		before := s.app.ByKey()["stripe:evt_03"]
		n, err := s.api.ReplayEvent(ctx, page.Events[0].ID)
		if err != nil || n.Count != 2 {
			t.Fatalf("replay: %+v %v", n, err)
		}
		if !testenv.WaitFor(5*time.Second, func() bool { return s.app.ByKey()["stripe:evt_03"] == before+1 }) {
			t.Fatalf("the replay never arrived: %d", s.app.ByKey()["stripe:evt_03"])
		}
		// A bulk replay selects by filter; a dry run only counts.
		n, err = s.api.ReplayEvents(ctx, admin.EventFilter{State: "dead"}, true)
		if err != nil || n.Count != 8 || !n.DryRun {
			t.Fatalf("dry run %+v %v, want the 8 deliveries of the 4 dead events", n, err)
		}
		a, _ := s.api.Audit(ctx, "", 10)
		if len(a.Entries) != 1 || a.Entries[0].Actor != "token:ops" || a.Entries[0].Action != "replay" || a.Entries[0].Count != 2 {
			t.Fatalf("audit %+v", a.Entries)
		}
	})

	t.Run("dead letters", func(t *testing.T) {
		page, err := s.api.DeadLetters(ctx, admin.DeadFilter{Limit: 3})
		if err != nil || len(page.DeadLetters) != 3 || page.NextCursor == "" || page.DeadLetters[0].LastStatus != 410 {
			t.Fatalf("dead letters %+v %v", page, err)
		}
		next, _ := s.api.DeadLetters(ctx, admin.DeadFilter{Limit: 3, Cursor: page.NextCursor})
		if len(next.DeadLetters) != 1 {
			t.Fatalf("second page %+v", next)
		}
		n, err := s.api.RetryDeadLetters(ctx, admin.DeadFilter{Destination: "flaky"}, true)
		if err != nil || n.Count != 4 {
			t.Fatalf("retry dry run %+v %v", n, err)
		}
		flakyBefore := len(s.flaky.Deliveries())
		n, err = s.api.RetryDeadLetters(ctx, admin.DeadFilter{Destination: "flaky"}, false)
		if err != nil || n.Count != 4 {
			t.Fatalf("retry %+v %v", n, err)
		}
		// They are refused again, for good: back to dead letters.
		if !testenv.WaitFor(5*time.Second, func() bool {
			d, _ := s.api.Destinations(ctx)
			return len(s.flaky.Deliveries()) == flakyBefore+4 && d[1].Dead == 4
		}) {
			t.Fatalf("retried dead letters were not attempted: %d", len(s.flaky.Deliveries())-flakyBefore)
		}
		n, err = s.api.PurgeDeadLetters(ctx, admin.DeadFilter{Source: "stripe"}, false)
		if err != nil || n.Count != 4 {
			t.Fatalf("purge %+v %v", n, err)
		}
		if page, _ := s.api.DeadLetters(ctx, admin.DeadFilter{}); len(page.DeadLetters) != 0 {
			t.Fatalf("purged dead letters still listed: %+v", page)
		}
		a, _ := s.api.Audit(ctx, "", 2)
		if len(a.Entries) != 2 || a.Entries[0].Action != "purge" || a.Entries[0].Target != "source=stripe" || a.Entries[1].Action != "retry" || a.NextCursor == "" {
			t.Fatalf("audit %+v", a)
		}
	})

	t.Run("pause holds and resume drains", func(t *testing.T) {
		d, err := s.api.SetPaused(ctx, "app", true)
		if err != nil || !d.Paused || d.PausedSince == nil {
			t.Fatalf("pause %+v %v", d, err)
		}
		before := len(s.app.Deliveries())
		for i := range 3 {
			s.post(t, "shop", fmt.Sprintf(`{"id":"evt_paused_%d"}`, i), 200)
		}
		time.Sleep(500 * time.Millisecond)
		if n := len(s.app.Deliveries()); n != before {
			t.Fatalf("a paused destination received %d deliveries", n-before)
		}
		dests, _ := s.api.Destinations(ctx)
		if !dests[0].Paused || dests[0].Pending != 3 || dests[0].OldestPendingSeconds <= 0 {
			t.Fatalf("paused app %+v", dests[0])
		}
		metrics := scrape(t, s.gw.URL)
		for _, want := range []string{`oncehook_destination_paused{destination="app"} 1`, `oncehook_queue_depth{destination="app"} 3`,
			`oncehook_destination_paused{destination="flaky"} 0`, `oncehook_effects{state="failed"} 0`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if _, err := s.api.SetPaused(ctx, "app", false); err != nil {
			t.Fatal(err)
		}
		if !testenv.WaitFor(5*time.Second, func() bool { return len(s.app.Deliveries()) == before+3 }) {
			t.Fatalf("resume drained %d of 3", len(s.app.Deliveries())-before)
		}
		a, _ := s.api.Audit(ctx, "", 2)
		if a.Entries[0].Action != "resume" || a.Entries[1].Action != "pause" || a.Entries[1].Target != "destination app" {
			t.Fatalf("audit %+v", a.Entries)
		}
	})

	t.Run("the sample Grafana dashboard queries real metrics", func(t *testing.T) {
		b, err := os.ReadFile("../deploy/grafana-dashboard.json")
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct{ Targets []struct{ Expr string } }
		}
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatal(err)
		}
		metrics := scrape(t, s.gw.URL)
		names := regexp.MustCompile(`oncehook_[a-z_]+`)
		for _, p := range dash.Panels {
			for _, target := range p.Targets {
				for _, name := range names.FindAllString(target.Expr, -1) {
					if name == "oncehook_alert_firing" {
						continue // exported only while an alert fires
					}
					if !strings.Contains(metrics, "\n"+name+"{") && !strings.Contains(metrics, "\n"+name+" ") {
						t.Errorf("the dashboard queries %s, which /metrics does not export", name)
					}
				}
			}
		}
	})

	t.Run("client errors", func(t *testing.T) {
		_, err := s.api.Event(ctx, 424242)
		if !errors.Is(err, admin.ErrNotFound) {
			t.Fatalf("unknown event: %v", err)
		}
		_, err = s.api.Events(ctx, admin.EventFilter{State: "nope"})
		if !errors.Is(err, admin.ErrInvalid) {
			t.Fatalf("bad state: %v", err)
		}
	})
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The key doctor flags a key that holds a per-delivery value (resends get
// through as new events) and one too coarse (real changes dropped as
// duplicates), naming the fields involved.
func TestDoctor(t *testing.T) {
	app := testenv.NewSink(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: perdelivery, preset: stripe, secrets: [`+secret+`], key: ["json:delivery_id"], destinations: [app]}
  - {name: coarse, preset: stripe, secrets: [`+secret+`], destinations: [app]}
  - {name: healthy, preset: stripe, secrets: [`+secret+`], destinations: [app]}
destinations:
  - {name: app, url: `+app.URL+`}
`)
	post := func(source, body string) {
		expect(t, testenv.SignedRequest(t, gw.URL+"/in/"+source, "stripe", secret, []byte(body), ""), 200)
	}
	// The same order, resent 4 times, each with a new delivery id and time.
	for i := range 4 {
		post("perdelivery", fmt.Sprintf(`{"id":"order_1","delivery_id":"dlv_%d","sent_at":"2026-11-30T10:0%d:00Z","amount":100}`, i, i))
	}
	post("perdelivery", `{"id":"order_2","delivery_id":"dlv_9","sent_at":"2026-11-30T11:00:00Z","amount":250}`)
	// A payment whose status changes, keyed on its id alone.
	post("coarse", `{"id":"pay_1","status":"pending","amount":100,"created":1764496800}`)
	post("coarse", `{"id":"pay_1","status":"paid","amount":100,"created":1764496900}`)
	post("coarse", `{"id":"pay_2","status":"pending","amount":70}`)
	// Real resends, identical but for a timestamp: what dedup is for.
	for i := range 3 {
		post("healthy", `{"id":"evt_1","type":"invoice.paid","amount":100}`)
		post("healthy", fmt.Sprintf(`{"id":"evt_%d","type":"invoice.paid","amount":%d,"created":176449680%d}`, i+2, 100+i, i))
	}

	rep, err := api.NewClient(gw.APIURL, gw.APIToken, nil).Doctor(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 3 {
		t.Fatalf("report %+v", rep)
	}
	pd, co, ok := rep.Sources[0], rep.Sources[1], rep.Sources[2]
	if len(pd.Findings) != 1 || pd.Findings[0].Kind != admin.FindingPerDelivery || strings.Join(pd.Findings[0].Fields, ",") != "delivery_id,sent_at" ||
		pd.Findings[0].Events != 4 || pd.SampledEvents != 5 {
		t.Fatalf("per-delivery key: %+v", pd)
	}
	if len(co.Findings) != 1 || co.Findings[0].Kind != admin.FindingTooCoarse || strings.Join(co.Findings[0].Fields, ",") != "status" ||
		co.Findings[0].Keys[0] != "pay_1" || co.SampledDuplicates != 1 {
		t.Fatalf("coarse key: %+v", co)
	}
	if len(ok.Findings) != 0 || ok.SampledDuplicates != 2 {
		t.Fatalf("healthy source flagged: %+v", ok)
	}
}

// The store down: every read and every change answers 503 with
// Retry-After, and the dashboard's service says so, never 200 or 500.
func TestAPIWhenTheStoreIsDown(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "o.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := admin.New(admin.Options{Store: st, Sources: []admin.Source{{Name: "stripe", Preset: "stripe"}},
		Destinations: []admin.Destination{{Name: "app", URL: "http://127.0.0.1:9"}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux, svc, nil)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	st.Close() // the store goes away
	for _, c := range [][2]string{{"GET", "/v1/sources"}, {"GET", "/v1/events"}, {"GET", "/v1/events/1"}, {"GET", "/v1/dead-letters"},
		{"GET", "/v1/destinations"}, {"GET", "/v1/stats"}, {"POST", "/v1/destinations/app/pause"}, {"POST", "/v1/dead-letters/retry"}} {
		body := ""
		if strings.HasSuffix(c[1], "/retry") {
			body = `{"all":true}`
		}
		req, _ := http.NewRequest(c[0], srv.URL+c[1], strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var answer map[string]any
		json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || answer["reason"] != "unavailable" {
			t.Errorf("%s %s with the store down: %d %v", c[0], c[1], resp.StatusCode, answer)
		}
	}
	// The same named error on both paths: the Service in this process
	// (the CLI's --config) and its Client (--api).
	ctx := context.Background()
	for name, op := range map[string]admin.Operator{"service": svc, "client": api.NewClient(srv.URL, "t", nil)} {
		if _, err := op.Events(ctx, admin.EventFilter{}); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: events with the store down: %v; want store.ErrUnavailable", name, err)
		}
	}
}

// A source or destination removed from the config keeps its dead letters
// in the store, and dead ls lists them: retry and purge take the name
// too, while a name with nothing stored under it is still a typo.
func TestDeadLettersOfARemovedSourceAreActedOnByName(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "o.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if _, err := store.ClaimEvents(ctx, st, []store.NewEvent{{Source: "old", Key: "evt_1", ContentType: "application/json", Body: []byte(`{}`),
		ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"gone"}}}); err != nil {
		t.Fatal(err)
	}
	leased, err := store.LeaseDeliveries(ctx, st, now, time.Minute, 10)
	if err != nil || len(leased) != 1 {
		t.Fatalf("lease: %v %v", leased, err)
	}
	if err := store.CompleteDeliveries(ctx, st, []store.Outcome{{DeliveryID: leased[0].ID, LeaseToken: leased[0].LeaseToken, Kind: store.OutcomeDead,
		Attempt: 1, StartedAt: now, StatusCode: 410}}); err != nil {
		t.Fatal(err)
	}
	// The config now has neither.
	svc, err := admin.New(admin.Options{Store: st, Sources: []admin.Source{{Name: "stripe", Preset: "stripe"}},
		Destinations: []admin.Destination{{Name: "app", URL: "http://127.0.0.1:9"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []admin.DeadFilter{{Source: "olt"}, {Destination: "gon"}} {
		if _, err := svc.RetryDeadLetters(ctx, f, true); !errors.Is(err, admin.ErrNotFound) {
			t.Fatalf("retry %+v (a typo): %v, want not found", f, err)
		}
	}
	for _, f := range []admin.DeadFilter{{Source: "old"}, {Destination: "gone"}, {Source: "old", Destination: "gone"}} {
		if n, err := svc.RetryDeadLetters(ctx, f, true); err != nil || n.Count != 1 {
			t.Fatalf("retry %+v: %+v %v, want the one dead letter stored under it", f, n, err)
		}
	}
	if n, err := svc.PurgeDeadLetters(ctx, admin.DeadFilter{Source: "old"}, false); err != nil || n.Count != 1 {
		t.Fatalf("purge: %+v %v", n, err)
	}
	// Purged: the name has nothing left under it, and is refused again.
	if _, err := svc.PurgeDeadLetters(ctx, admin.DeadFilter{Source: "old"}, false); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("purge again: %v, want not found", err)
	}
}

// The key doctor runs on every source's page, over the source's 300 latest
// events. It read each of their bodies whole and flattened every field:
// a source of 4 MiB events made each view of its page read and hold
// gigabytes, seconds long. It now leaves out bodies over 64 KiB, as its
// duplicate samples always did: what a key holds shows in small events.
func TestDoctorReadsNoLargeBodies(t *testing.T) {
	testenv.SlowUnderRace(t) // 4 MiB bodies, one reader: bytes, not interleavings
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: big, preset: stripe, secrets: [`+secret+`]}
`)
	now := time.Now()
	var events []store.NewEvent
	add := func(key string, body []byte) {
		events = append(events, store.NewEvent{Source: "big", Key: key, ContentType: "application/json", Body: body, ReceivedAt: now, ExpiresAt: now.Add(time.Hour)})
	}
	for i := range 3 {
		add(fmt.Sprintf("evt_small_%d", i), fmt.Appendf(nil, `{"id":"evt_small_%d","amount":%d}`, i, i))
	}
	for i := range 8 {
		add(fmt.Sprintf("evt_big_%d", i), fmt.Appendf(nil, `{"id":"evt_big_%d","blob":[%s"x"]}`, i, strings.Repeat(`"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",`, 3<<20/48)))
	}
	if _, err := store.ClaimEvents(context.Background(), gw.Store(), events); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := api.NewClient(gw.APIURL, gw.APIToken, nil).Doctor(context.Background(), "big")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 1 || rep.Sources[0].SampledEvents != 3 {
		t.Fatalf("sampled %+v, want the 3 small events", rep.Sources)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("the doctor allocated %d MiB over 24 MiB of large bodies it needs none of", alloc>>20)
	}
}
