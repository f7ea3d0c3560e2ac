package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store"
)

// rateCase is one destination of the rate sweep: its rate and the backlog
// it has when it is let go.
type rateCase struct {
	rate, backlog int
	name          string
	sink          *testenv.Sink
}

// sentIn counts the deliveries sink received in [from, to).
func sentIn(sink *testenv.Sink, from, to time.Time) int {
	n := 0
	for _, d := range sink.Deliveries() {
		if !d.At.Before(from) && d.At.Before(to) {
			n++
		}
	}
	return n
}

// checkPace asserts that each case's destination sent at its rate over
// [from, from+window): not stopped (at least half of rate × window, or of
// what was left: a loaded machine delays some sends, a stopped backlog
// sends nothing), and never above the rate (a send woken late can only
// land a fifth of a second's worth into the window's end).
func checkPace(t *testing.T, when string, cases []*rateCase, left func(*rateCase) int, from time.Time, window time.Duration) {
	t.Helper()
	for _, c := range cases {
		got := sentIn(c.sink, from, from.Add(window))
		t.Logf("%s: %s sent %d in %s", when, c.name, got, window)
		want := float64(c.rate) * window.Seconds()
		if l := left(c); float64(l) < want {
			want = float64(l)
		}
		if most := float64(c.rate)*(window+200*time.Millisecond).Seconds() + 2; float64(got) < 0.5*want || float64(got) > most {
			t.Errorf("%s: %s (%d/s, backlog %d) sent %d in %s, want about %.0f (at most %.0f)", when, c.name, c.rate, c.backlog, got, window, want, most)
		}
	}
}

// A rate-limited destination with a backlog sends at its rate for as long
// as anything is due, whatever the rate and the backlog: after a pause is
// lifted, and after a breaker is closed. Held is a state, never a drop:
// a slot not used is never lost, so the backlog does not stop after the
// first few seconds' worth (at 5/s it stopped after 26 for good, its
// slots and its deliveries pushed ahead of each other every few seconds).
func TestARateLimitedBacklogDrainsAtItsRate(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of pacing")
	}
	for _, rate := range []int{1, 5, 20, 100} {
		t.Run(fmt.Sprintf("%d/s", rate), func(t *testing.T) {
			t.Parallel()
			testBacklogPace(t, rate)
		})
	}
}

// testBacklogPace runs one gateway whose destinations have one rate and
// backlogs of 10, 500 and 5,000. (One gateway per rate: a lease takes
// the oldest due deliveries whatever their destination, so a slow one's
// big backlog fills the room a fast one's slots wait in.)
func testBacklogPace(t *testing.T, rate int) {
	var cases []*rateCase
	var dests strings.Builder
	for _, backlog := range []int{10, 500, 5000} {
		c := &rateCase{rate: rate, backlog: backlog, name: fmt.Sprintf("r%d_b%d", rate, backlog), sink: testenv.NewSink(t)}
		cases = append(cases, c)
		fmt.Fprintf(&dests, "  - {name: %s, url: %s, rate: %d/s}\n", c.name, c.sink.URL, rate)
	}
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
delivery: {concurrency: 512}
api: {tokens: [{name: ops, token: `+flowToken+`}]}
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [`+cases[0].name+`]}
destinations:
`+dests.String())
	ctx := context.Background()
	c := api.NewClient(gw.APIURL, flowToken, nil)
	for _, rc := range cases {
		if _, err := c.SetPaused(ctx, rc.name, true); err != nil {
			t.Fatal(err)
		}
	}
	// The backlogs, stored while paused (as a provider's retries would
	// pile up during an outage), in batches.
	now := time.Now()
	var batch []store.NewEvent
	flush := func() {
		if _, err := store.ClaimEvents(ctx, gw.Store(), batch); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for _, rc := range cases {
		for i := range rc.backlog {
			key := fmt.Sprintf("%s_%d", rc.name, i)
			batch = append(batch, store.NewEvent{Source: "stripe", Key: key, ContentType: "application/json", Body: []byte(`{"id":"` + key + `"}`),
				ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{rc.name}})
			if len(batch) == 1000 {
				flush()
			}
		}
	}
	flush()
	// The operator sees why nothing goes: paused.
	says := func(when string, want map[string]string) {
		t.Helper()
		ds, err := c.Destinations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if w, ok := want[d.Name]; ok && d.State != w {
				t.Errorf("%s: %s's state is %q (%d pending), want %q", when, d.Name, d.State, d.Pending, w)
			}
		}
	}
	all := func(state string) map[string]string {
		m := map[string]string{}
		for _, rc := range cases {
			m[rc.name] = state
		}
		return m
	}
	says("paused", all("paused"))

	const window = 3 * time.Second
	resumed := time.Now()
	for _, rc := range cases {
		if _, err := c.SetPaused(ctx, rc.name, false); err != nil {
			t.Fatal(err)
		}
	}
	// A second to get going, then the window.
	from := resumed.Add(time.Second)
	time.Sleep(time.Until(from.Add(window)))
	// Sending at its rate, more than a second's worth left: rate-limited,
	// and how long it takes to drain.
	ds, err := c.Destinations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Pending > int64(2*rate) && (d.State != "rate_limited" || d.Rate != fmt.Sprintf("%d/s", rate) || d.DrainSeconds < float64(d.Pending)/float64(rate)-1) {
			t.Errorf("%s with %d pending at %d/s: state %q, rate %q, drain %.0f s", d.Name, d.Pending, rate, d.State, d.Rate, d.DrainSeconds)
		}
	}
	checkPace(t, "after a resume", cases, func(rc *rateCase) int { return rc.backlog - sentIn(rc.sink, resumed, from) }, from, window)
	for _, rc := range cases {
		if rc.backlog == 10 && rc.rate >= 5 && len(rc.sink.ByKey()) != 10 {
			t.Errorf("%s: %d of 10 delivered in %s", rc.name, len(rc.sink.ByKey()), time.Since(resumed).Round(time.Millisecond))
		}
	}

	// A breaker opened by hand holds the rest; closed, they go at the
	// rate again.
	var large []*rateCase
	for _, rc := range cases {
		if rc.backlog >= 500 {
			large = append(large, rc)
		}
	}
	for _, rc := range large {
		if _, err := c.SetBreaker(ctx, rc.name, true); err != nil {
			t.Fatal(err)
		}
	}
	opened := time.Now()
	says("breaker opened by hand", func() map[string]string {
		m := map[string]string{}
		for _, rc := range large {
			m[rc.name] = "breaker_open"
		}
		return m
	}())
	time.Sleep(time.Second)
	closed := time.Now()
	for _, rc := range large {
		// Attempts admitted before the open may still land just after it.
		if n := sentIn(rc.sink, opened.Add(300*time.Millisecond), closed); n != 0 {
			t.Errorf("%s: %d deliveries through an open breaker", rc.name, n)
		}
		if _, err := c.SetBreaker(ctx, rc.name, false); err != nil {
			t.Fatal(err)
		}
	}
	from = closed.Add(time.Second)
	time.Sleep(time.Until(from.Add(window)))
	checkPace(t, "after a breaker closed", large, func(rc *rateCase) int { return rc.backlog - len(rc.sink.ByKey()) }, from, window)
	for _, rc := range cases {
		for key, n := range rc.sink.ByKey() {
			if n != 1 {
				t.Fatalf("%s: %s delivered %d times", rc.name, key, n)
			}
		}
	}
}

// Three replicas on one PostgreSQL schema share a destination's 20/s
// while events keep arriving at 30/s on all three: together they send at
// 20/s, steadily (it sent ~300, then nothing for minutes, its slots run
// ahead of its deliveries by the three replicas' batches).
func TestThreeReplicasShareARateWhileEventsArrive(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of pacing")
	}
	dsn := testenv.Postgres(t)
	sink := testenv.NewSink(t)
	cfg := `
store: ` + dsn + `
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [crm]}
destinations:
  - {name: crm, url: ` + sink.URL + `, rate: 20/s}
`
	var gws []*oncehooktest.Gateway
	for range 3 {
		gws = append(gws, oncehooktest.Start(t, cfg))
	}
	send := func(i int) {
		body := fmt.Sprintf(`{"id":"evt_%04d","object":"event","type":"invoice.paid"}`, i)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gws[i%3].URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("intake: %v %v", resp, err)
			return
		}
		resp.Body.Close()
	}
	// A burst of 150 (a provider catching up), then 30/s on the three.
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 150 {
		wg.Go(func() { send(i) })
	}
	wg.Wait()
	const arrivals = 10 * time.Second
	tick := time.NewTicker(time.Second / 30)
	for i := 150; time.Since(start) < arrivals; i++ {
		<-tick.C
		wg.Go(func() { send(i) })
	}
	tick.Stop()
	wg.Wait()
	// From the fifth second on: it stopped in the seventh.
	from, window := start.Add(5*time.Second), 5*time.Second
	got := sentIn(sink, from, from.Add(window))
	var perSecond []int
	for s := start; s.Before(time.Now()); s = s.Add(time.Second) {
		perSecond = append(perSecond, sentIn(sink, s, s.Add(time.Second)))
	}
	t.Logf("three replicas sent %d in %s (%d in all; each second: %v)", got, window, len(sink.Deliveries()), perSecond)
	if want := 20 * window.Seconds(); float64(got) < 0.5*want || float64(got) > 20*(window+200*time.Millisecond).Seconds()+2 {
		t.Errorf("three replicas sent %d in %s at 20/s with more due, want about %.0f", got, window, want)
	}
	for key, n := range sink.ByKey() {
		if n != 1 {
			t.Fatalf("%s delivered %d times", key, n)
		}
	}
}
