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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/alert"
	"github.com/oncehook/oncehook/internal/alert/channel"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// A duplicate spike against the trailing baseline opens one issue,
// notified once, even with two replicas checking every minute and six
// restarts; its end is notified once, across restarts too (invariant 27);
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

	rx := newReceiver(t)
	var clock atomic.Pointer[time.Time]
	set := func(t time.Time) { clock.Store(&t) }
	now := func() time.Time { return *clock.Load() }
	set(hour.Add(20 * time.Minute))
	ledger := effect.New(st, effect.Options{Now: now})
	reg := prometheus.NewRegistry()
	replicas := make([]*alert.Alerter, 2)
	for i := range replicas {
		opts := alert.Options{Channels: rx.channels(t), Store: st, Ledger: ledger, Now: now}
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
	got := rx.notices()
	if len(got) != 2 || got[0].Event != "opened" || got[1].Event != "opened" || got[0].Name+got[1].Name != "stripecrm" && got[0].Name+got[1].Name != "crmstripe" {
		t.Fatalf("notices in the hour: %+v", got)
	}
	var dup notice
	for _, p := range got {
		if p.Kind == alert.KindDuplicateRate {
			dup = p
		}
	}
	if dup.Baseline == nil || math.Abs(*dup.Baseline-10.0/510) > 1e-9 || dup.Threshold != 0.06 || dup.Value != 0.4 || dup.Volume != 500 || !strings.Contains(dup.Message, "40.0%") || dup.Issue == "" {
		t.Fatalf("notice %+v", dup)
	}
	if got := firingSum(t, reg); got != 2 {
		t.Fatalf("oncehook_alert_firing sums to %v", got)
	}
	if told := sumOf(t, reg, "oncehook_alerts_total"); told > 2 {
		t.Fatalf("oncehook_alerts_total %v on one of two replicas; want at most the 2 notices", told)
	}
	if f := replicas[0].Firing(store.ScopeSource, "stripe"); len(f) != 1 || f[0] != alert.KindDuplicateRate {
		t.Fatalf("Firing: %v", f)
	}

	// A gateway restarted (a new Alerter on the same store, six times
	// over) finds the issues open and notified: firing still, but
	// neither notified, logged nor counted again.
	for i := range 6 {
		var logged bytes.Buffer
		reg := prometheus.NewRegistry()
		restarted, err := alert.New(alert.Options{Channels: rx.channels(t), Store: st, Ledger: ledger, Now: now, Registerer: reg,
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
	if got := rx.notices(); len(got) != 2 {
		t.Fatalf("notices after six restarts: %d, want the 2 told before", len(got))
	}

	// The next hour, the spike goes on: the same issue, nothing told;
	// crm's dead letters stopped: one notice says its issue resolved.
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
	got = rx.notices()
	if len(got) != 3 || got[2].Name != "crm" || got[2].Event != "resolved" || !got[2].Resolved || got[2].By != "" || got[2].Kind != alert.KindDeadLetters {
		t.Fatalf("notices after the hour turned: %+v", got)
	}

	// The spike ends while the gateway is down; the gateway that starts
	// finds its issue open in the store, resolves it and says so once.
	later := next.Add(20 * time.Minute)
	if _, err := st.Commit(ctx, store.Batch{Stats: []store.StatDelta{
		{Hour: next, Scope: store.ScopeSource, Name: "stripe", Metric: "events.accepted", Value: 5000},
	}, Shard: "seed"}); err != nil {
		t.Fatal(err)
	}
	set(later)
	for range 3 {
		restarted, err := alert.New(alert.Options{Channels: rx.channels(t), Store: st, Ledger: ledger, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := restarted.Check(ctx); err != nil || len(got) != 0 {
			t.Fatalf("after the spike ended: %+v %v", got, err)
		}
	}
	got = rx.notices()
	if len(got) != 4 || got[3].Name != "stripe" || got[3].Event != "resolved" || got[3].Issue != dup.Issue {
		t.Fatalf("notices after the spike ended across restarts: %+v", got[3:])
	}
	issues, err := st.Issues(ctx, store.IssueQuery{})
	if err != nil || len(issues) != 2 || issues[0].State != store.IssueResolved || issues[1].State != store.IssueResolved {
		t.Fatalf("issues: %+v %v", issues, err)
	}
}

// An open issue is reminded of once per quiet period; an acknowledged
// one is told nothing more until it resolves, and its resolution (by an
// operator here) is told once, naming who resolved it.
func TestReminderAndAcknowledgement(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "o.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hour := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	if _, err := st.Commit(ctx, store.Batch{Stats: []store.StatDelta{
		{Hour: hour, Scope: store.ScopeDestination, Name: "crm", Metric: "attempts.dead", Value: 12},
		{Hour: hour, Scope: store.ScopeDestination, Name: "erp", Metric: "attempts.dead", Value: 30},
	}, Shard: "seed"}); err != nil {
		t.Fatal(err)
	}
	rx := newReceiver(t)
	var clock atomic.Pointer[time.Time]
	set := func(t time.Time) { clock.Store(&t) }
	set(hour)
	now := func() time.Time { return *clock.Load() }
	a, err := alert.New(alert.Options{Channels: rx.channels(t), Store: st, Ledger: effect.New(st, effect.Options{Now: now}),
		Now: now, RemindAfter: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for m := range 26 { // a check a minute, 25 minutes
		set(hour.Add(time.Duration(m) * time.Minute))
		if _, err := a.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if m == 0 {
			issues, _ := st.Issues(ctx, store.IssueQuery{})
			for _, is := range issues {
				if is.Name == "erp" {
					if _, _, err := st.AcknowledgeIssue(ctx, is.ID, store.AuditEntry{At: now(), Actor: "ops", Action: "acknowledge"}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	var told []string
	for _, n := range rx.notices() {
		told = append(told, n.Name+":"+n.Event)
	}
	want := "crm:opened erp:opened crm:reminder crm:reminder"
	if strings.Join(told, " ") != want && strings.Join(told, " ") != "erp:opened crm:opened crm:reminder crm:reminder" {
		t.Fatalf("told %q over 25 minutes; want %q (erp acknowledged after its opening)", told, want)
	}
	issues, _ := st.Issues(ctx, store.IssueQuery{States: []string{store.IssueAcknowledged}})
	if len(issues) != 1 {
		t.Fatalf("acknowledged: %+v", issues)
	}
	if _, _, err := st.ResolveIssue(ctx, issues[0].ID, now(), "ops", store.AuditEntry{At: now(), Actor: "ops", Action: "resolve"}); err != nil {
		t.Fatal(err)
	}
	// Its resolution is told once, naming who; erp's condition still
	// holds, so a new issue opens (acknowledge, not resolve, silences).
	for range 3 {
		if _, err := a.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := rx.notices()
	if len(got) != 6 || got[4].Name != "erp" || got[4].Event != "resolved" || got[4].By != "ops" ||
		got[5].Name != "erp" || got[5].Event != "opened" || got[5].Issue == got[4].Issue {
		t.Fatalf("after erp was resolved by hand: %+v", got[4:])
	}
}

// notice is what the json channel POSTs.
type notice struct {
	Event, Issue, Kind, Scope, Name, Message, By string
	Value, Threshold                             float64
	Baseline                                     *float64
	Volume                                       int64
	Resolved                                     bool
	key, tenant                                  string
}

// receiver is a real HTTP receiver of the json channel's POSTs.
type receiver struct {
	url  string
	mu   sync.Mutex
	got  []notice
	fail atomic.Bool
}

func newReceiver(t *testing.T) *receiver {
	rx := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rx.fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var n notice
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &n); err != nil {
			t.Errorf("notice %s: %v", body, err)
		}
		n.key = r.Header.Get("Idempotency-Key")
		var tenant struct{ Tenant string }
		json.Unmarshal(body, &tenant)
		n.tenant = tenant.Tenant
		rx.mu.Lock()
		rx.got = append(rx.got, n)
		rx.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	rx.url = srv.URL
	return rx
}

// channels are the alerts' channels with the receiver's URL as
// alerts.url.
func (rx *receiver) channels(t *testing.T) []channel.Channel {
	chs, err := channel.FromConfig(config.Alerts{URL: rx.url}, channel.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return chs
}

func (rx *receiver) notices() []notice {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return slices.Clone(rx.got)
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
	chans := func(url string) []channel.Channel {
		chs, err := channel.FromConfig(config.Alerts{URL: url}, channel.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		return chs
	}
	a, err := alert.New(alert.Options{Channels: chans(hook.URL + "/?key=S3CRET"), Store: st, Ledger: ledger})
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
	b, _ := alert.New(alert.Options{Channels: chans(downURL + "/?key=S3CRET"), Store: st, Ledger: ledger})
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
	if !strings.Contains(shown, "channel url") {
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

// A tenant's channel is told of its tenant's issues only, each notice
// naming the tenant; a channel of no tenant (the operator's) of every
// issue.
func TestATenantsChannelIsToldOfItsOwnIssuesOnly(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "o.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hour := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	var deltas []store.StatDelta
	for _, d := range []string{"acme-crm", "globex-crm", "crm"} {
		deltas = append(deltas, store.StatDelta{Hour: hour, Scope: store.ScopeDestination, Name: d, Metric: "attempts.dead", Value: 12})
	}
	if _, err := st.Commit(ctx, store.Batch{Stats: deltas, Shard: "seed"}); err != nil {
		t.Fatal(err)
	}
	ops, acme := newReceiver(t), newReceiver(t)
	chs, err := channel.FromConfig(config.Alerts{Channels: []config.AlertChannel{
		{Name: "ops", Kind: "json", URL: ops.url}, {Name: "acme", Kind: "json", URL: acme.url, Tenant: "acme"}}}, channel.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return hour.Add(20 * time.Minute) }
	tenants := map[string]string{"acme-crm": "acme", "globex-crm": "globex"}
	a, err := alert.New(alert.Options{Channels: chs, ChannelTenants: map[string]string{"ops": "", "acme": "acme"},
		TenantOf: func(scope, name string) string { return tenants[name] },
		Store:    st, Ledger: effect.New(st, effect.Options{Now: now}), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Check(ctx); err != nil {
		t.Fatal(err)
	}
	names := func(rx *receiver) string {
		var out []string
		for _, n := range rx.notices() {
			out = append(out, n.Name+"/"+n.tenant)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := names(ops); got != "acme-crm/acme crm/ globex-crm/globex" {
		t.Errorf("the operator's channel was told of %s", got)
	}
	if got := names(acme); got != "acme-crm/acme" {
		t.Errorf("acme's channel was told of %s", got)
	}
}
