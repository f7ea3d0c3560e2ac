package alert_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/alert"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// A duplicate spike against the trailing baseline raises exactly one alert
// POST per source and hour, even with two replicas checking every minute;
// quiet sources and steady high rates do not alert.
func TestDuplicateSpikeAlertsOncePerHour(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "o.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hour := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	var deltas []store.StatDelta
	add := func(h time.Time, source string, accepted, duplicate int64) {
		deltas = append(deltas,
			store.StatDelta{Hour: h, Scope: store.ScopeSource, Name: source, Metric: "events.accepted", Value: accepted},
			store.StatDelta{Hour: h, Scope: store.ScopeSource, Name: source, Metric: "events.duplicate", Value: duplicate})
	}
	for d := 1; d <= 7; d++ {
		day := hour.Add(-time.Duration(d) * 24 * time.Hour)
		add(day, "stripe", 500, 10) // 2% at this hour, every day
		add(day.Add(-time.Hour), "stripe", 500, 400)
		add(day, "steady", 500, 150) // 30%, every day
	}
	add(hour, "stripe", 300, 200) // 40% now: a spike
	add(hour, "steady", 300, 105) // 35%: within 3× its baseline
	add(hour, "quiet", 10, 40)    // 80%, but 50 events: below the minimum volume
	deltas = append(deltas, store.StatDelta{Hour: hour, Scope: store.ScopeDestination, Name: "crm", Metric: "attempts.dead", Value: 12})
	if _, err := st.Commit(ctx, store.Batch{Stats: deltas, Shard: "seed"}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var posts []alert.Alert
	var keys []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a alert.Alert
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("alert body %s: %v", body, err)
		}
		mu.Lock()
		posts = append(posts, a)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	defer hook.Close()

	var clock atomic.Pointer[time.Time]
	set := func(t time.Time) { clock.Store(&t) }
	now := func() time.Time { return *clock.Load() }
	set(hour.Add(20 * time.Minute))
	ledger := effect.New(st, effect.Options{Now: now})
	reg := prometheus.NewRegistry()
	replicas := make([]*alert.Alerter, 2)
	for i := range replicas {
		opts := alert.Options{URL: hook.URL, Store: st, Ledger: ledger, Now: now}
		if i == 0 {
			opts.Registerer = reg
		}
		replicas[i], err = alert.New(opts)
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func() []alert.Alert {
		var wg sync.WaitGroup
		var first []alert.Alert
		for i, a := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := a.Check(ctx)
				if err != nil {
					t.Errorf("check: %v", err)
				}
				if i == 0 {
					first = got
				}
			}()
		}
		wg.Wait()
		return first
	}
	for _, m := range []time.Duration{20, 21, 30, 45, 59} {
		set(hour.Add(m * time.Minute))
		firing := check()
		if len(firing) != 2 || firing[0].Kind != alert.KindDuplicateRate || firing[0].Name != "stripe" || firing[1].Kind != alert.KindDeadLetters {
			t.Fatalf("at :%02d firing %+v", m, firing)
		}
	}
	mu.Lock()
	if len(posts) != 2 || posts[0].Name+posts[1].Name != "stripecrm" && posts[0].Name+posts[1].Name != "crmstripe" {
		t.Fatalf("posts in the hour: %+v", posts)
	}
	var dup alert.Alert
	for _, p := range posts {
		if p.Kind == alert.KindDuplicateRate {
			dup = p
		}
	}
	if dup.Baseline == nil || math.Abs(*dup.Baseline-10.0/510) > 1e-9 || dup.Threshold != 0.06 || dup.Value != 0.4 || dup.Volume != 500 || !dup.Hour.Equal(hour) || !strings.Contains(dup.Message, "40.0%") {
		t.Fatalf("alert %+v", dup)
	}
	mu.Unlock()
	if got := firingSum(t, reg); got != 2 {
		t.Fatalf("oncehook_alert_firing sums to %v", got)
	}
	if f := replicas[0].Firing(store.ScopeSource, "stripe"); len(f) != 1 || f[0] != alert.KindDuplicateRate {
		t.Fatalf("Firing: %v", f)
	}

	// A gateway restarted within the hour (a new Alerter on the same
	// store, six times over) finds the alerts it told before it stopped:
	// firing still, but neither POSTed, logged nor counted again.
	for i := range 6 {
		var logged bytes.Buffer
		reg := prometheus.NewRegistry()
		restarted, err := alert.New(alert.Options{URL: hook.URL, Store: st, Ledger: ledger, Now: now, Registerer: reg,
			Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := restarted.Check(ctx); err != nil || len(got) != 2 {
			t.Fatalf("after a restart: %+v %v", got, err)
		}
		if f := restarted.Firing(store.ScopeSource, "stripe"); len(f) != 1 {
			t.Fatalf("after a restart, Firing: %v", f)
		}
		if told := sumOf(t, reg, "oncehook_alerts_total"); told != 0 || strings.Contains(logged.String(), "alert:") {
			t.Fatalf("start %d told the alerts again: oncehook_alerts_total %v, log:\n%s", i+2, told, logged.String())
		}
	}
	mu.Lock()
	if len(posts) != 2 {
		t.Fatalf("posts after six restarts within the hour: %d, want the 2 told before", len(posts))
	}
	mu.Unlock()

	// The next hour, the spike goes on: one more POST for it; crm's dead
	// letters stopped: one POST says its alert ended.
	next := hour.Add(time.Hour)
	if _, err := st.Commit(ctx, store.Batch{Stats: []store.StatDelta{
		{Hour: next, Scope: store.ScopeSource, Name: "stripe", Metric: "events.duplicate", Value: 300},
		{Hour: next, Scope: store.ScopeSource, Name: "stripe", Metric: "events.accepted", Value: 100},
	}, Shard: "seed"}); err != nil {
		t.Fatal(err)
	}
	set(next.Add(5 * time.Minute))
	check()
	check()
	mu.Lock()
	if len(posts) != 4 {
		t.Fatalf("posts after the hour turned: %+v", posts)
	}
	for i, p := range posts[2:] {
		switch {
		case p.Name == "stripe" && !p.Resolved && p.Hour.Equal(next) && keys[2+i] != keys[0] && keys[2+i] != keys[1]:
		case p.Name == "crm" && p.Resolved && p.Kind == alert.KindDeadLetters && p.Hour.Equal(hour):
		default:
			t.Fatalf("posts after the hour turned: %+v", posts[2:])
		}
	}
	mu.Unlock()

	// The spike ends while the gateway is down; the gateway that starts
	// finds it told (from the ledger) and says once that it ended.
	later := next.Add(20 * time.Minute)
	if _, err := st.Commit(ctx, store.Batch{Stats: []store.StatDelta{
		{Hour: next, Scope: store.ScopeSource, Name: "stripe", Metric: "events.accepted", Value: 5000},
	}, Shard: "seed"}); err != nil {
		t.Fatal(err)
	}
	set(later)
	for range 3 {
		restarted, err := alert.New(alert.Options{URL: hook.URL, Store: st, Ledger: ledger, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := restarted.Check(ctx); err != nil || len(got) != 0 {
			t.Fatalf("after the spike ended: %+v %v", got, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 5 || posts[4].Name != "stripe" || !posts[4].Resolved || !posts[4].Hour.Equal(next) {
		t.Fatalf("posts after the spike ended across restarts: %+v", posts[4:])
	}
}

// firingSum sums oncehook_alert_firing.
func firingSum(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return sumOf(t, reg, "oncehook_alert_firing")
}

// sumOf sums a gauge's or a counter's series.
func sumOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// Found from outside: the alert sender followed redirects (deliveries do
// not), and an alert URL's ?key= was logged and kept in the alert's effect
// record, which a read-only token may list. A redirect is now an error, as
// for deliveries, and what is stored hides the URL's secrets.
func TestAlertsFollowNoRedirectAndKeepNoSecret(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "o.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hour := time.Now().UTC().Truncate(time.Hour)
	if _, err := st.Commit(ctx, store.Batch{Stats: []store.StatDelta{{Hour: hour, Scope: store.ScopeDestination, Name: "crm", Metric: "attempts.dead", Value: 12}}, Shard: "seed"}); err != nil {
		t.Fatal(err)
	}
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Add(1) }))
	defer elsewhere.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	defer hook.Close()
	ledger := effect.New(st, effect.Options{})
	a, err := alert.New(alert.Options{URL: hook.URL + "/?key=S3CRET", Store: st, Ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	a.Check(ctx)
	if followed.Load() != 0 {
		t.Fatal("the alert sender followed a redirect")
	}
	// And a URL that does not answer: its error is stored without the key.
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	b, _ := alert.New(alert.Options{URL: downURL + "/?key=S3CRET", Store: st, Ledger: ledger})
	b.Check(ctx)
	recs, err := ledger.List(ctx, store.EffectQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no alert was attempted")
	}
	var shown string
	for _, r := range recs {
		shown += r.Error
		for _, at := range r.Attempts {
			shown += at.Error
		}
	}
	if !strings.Contains(shown, "key=xxxxx") {
		t.Fatalf("the alerts' errors do not say which URL failed: %q", shown)
	}
	for _, r := range recs {
		if strings.Contains(r.Error, "S3CRET") {
			t.Fatalf("the alert's effect record keeps the URL's secret: %q", r.Error)
		}
		for _, at := range r.Attempts {
			if strings.Contains(at.Error, "S3CRET") {
				t.Fatalf("an attempt keeps the URL's secret: %q", at.Error)
			}
		}
	}
}
