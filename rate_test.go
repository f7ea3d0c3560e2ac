package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
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
	from          time.Time // when the window measured begins
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
// its window [from, from+window): not stopped (at least half of rate ×
// window, or of what was left: a loaded machine delays some sends, a
// stopped backlog sends nothing; under the race detector, which sends a
// few hundred a second at most on two cores, a tenth), and never above
// the rate (a send woken late can only land a fifth of a second's worth
// into the window's end).
func checkPace(t *testing.T, when string, cases []*rateCase, left func(*rateCase) int, window time.Duration) {
	t.Helper()
	for _, c := range cases {
		time.Sleep(time.Until(c.from.Add(window)))
		got := sentIn(c.sink, c.from, c.from.Add(window))
		t.Logf("%s: %s sent %d in %s", when, c.name, got, window)
		want, least := float64(c.rate)*window.Seconds(), 0.5
		if testenv.Race {
			least = 0.1
		}
		if l := left(c); float64(l) < want {
			want = float64(l)
		}
		// The sink counts arrivals: a stall of the process (the race
		// detector on two loaded cores) delays sends that then land
		// together, so the bound allows that much jitter on top of the
		// window; the slots themselves are never closer than the rate.
		slack := 200 * time.Millisecond
		if testenv.Race {
			slack = 500 * time.Millisecond
		}
		if most := float64(c.rate)*(window+slack).Seconds() + 2; float64(got) < least*want || float64(got) > most {
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
// backlogs of 10, 500 and 5,000, on PostgreSQL (SQLite under the race
// detector takes most of a minute to store the backlogs; its slots pass
// the same conformance tests). One gateway per rate, with room for the
// deliveries that wait for their slots (rate × 2 s each): a lease takes
// the oldest due deliveries whatever their destination, so one backlog's
// waiting deliveries can fill the room another's would wait in.
func testBacklogPace(t *testing.T, rate int) {
	var cases []*rateCase
	var dests strings.Builder
	for _, backlog := range []int{10, 500, 5000} {
		c := &rateCase{rate: rate, backlog: backlog, name: fmt.Sprintf("r%d_b%d", rate, backlog), sink: testenv.NewSink(t)}
		cases = append(cases, c)
		fmt.Fprintf(&dests, "  - {name: %s, url: %s, rate: %d/s}\n", c.name, c.sink.URL, rate)
	}
	gw := oncehooktest.Start(t, `
store: `+testenv.Postgres(t)+`
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
			if len(batch) == 2500 {
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

	// One destination at a time (the race detector on two cores sends a
	// few hundred a second in all): resumed, it sends at its rate, says it
	// is rate-limited while more than a second's worth is left, and is
	// paused again. Its window starts half a second after the resume has
	// answered.
	const window = 2 * time.Second
	state := func(name string) (admin.DestinationView, bool) {
		ds, err := c.Destinations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Name == name {
				return d, true
			}
		}
		return admin.DestinationView{}, false
	}
	for _, rc := range cases {
		if _, err := c.SetPaused(ctx, rc.name, false); err != nil {
			t.Fatal(err)
		}
		rc.from = time.Now().Add(window / 4)
		checkPace(t, "after a resume", []*rateCase{rc}, func(rc *rateCase) int { return rc.backlog - sentIn(rc.sink, time.Time{}, rc.from) }, window)
		if d, _ := state(rc.name); d.Pending > int64(2*rate) && (d.State != "rate_limited" || d.Rate != fmt.Sprintf("%d/s", rate) || d.DrainSeconds < float64(d.Pending)/float64(rate)-1) {
			t.Errorf("%s with %d pending at %d/s: state %q, rate %q, drain %.0f s", d.Name, d.Pending, rate, d.State, d.Rate, d.DrainSeconds)
		}
		if rc.backlog == 10 && rc.rate >= 5 && len(rc.sink.ByKey()) != 10 {
			t.Errorf("%s: %d of 10 delivered in %s", rc.name, len(rc.sink.ByKey()), time.Since(rc.from).Round(time.Millisecond))
		}
		if _, err := c.SetPaused(ctx, rc.name, true); err != nil {
			t.Fatal(err)
		}
	}

	// A breaker opened by hand holds the rest; closed, they go at the
	// rate again.
	for _, rc := range cases {
		if rc.backlog < 500 {
			continue
		}
		if _, err := c.SetBreaker(ctx, rc.name, true); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetPaused(ctx, rc.name, false); err != nil {
			t.Fatal(err)
		}
		held := time.Now()
		if d, _ := state(rc.name); d.State != "breaker_open" {
			t.Errorf("%s: state %q behind a breaker opened by hand", rc.name, d.State)
		}
		time.Sleep(window / 4)
		// Attempts admitted before the pause may still land just after it.
		if n := sentIn(rc.sink, held.Add(-window/8), time.Now()); n != 0 {
			t.Errorf("%s: %d deliveries through an open breaker", rc.name, n)
		}
		if _, err := c.SetBreaker(ctx, rc.name, false); err != nil {
			t.Fatal(err)
		}
		rc.from = time.Now().Add(window / 4)
		checkPace(t, "after a breaker closed", []*rateCase{rc}, func(rc *rateCase) int { return rc.backlog - sentIn(rc.sink, time.Time{}, rc.from) }, window)
		if _, err := c.SetPaused(ctx, rc.name, true); err != nil {
			t.Fatal(err)
		}
	}
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
