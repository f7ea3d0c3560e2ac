package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// rollups measures what the hourly rollups cost intake: the headline (one
// destination, SQLite FULL) with them on and off, alternating, on fresh
// stores, so that the machine's drift falls on both alike.
func (b *bench) rollups() ([]result, error) {
	var on, off []result
	for round := range 3 {
		for _, disabled := range []bool{false, true} {
			name := fmt.Sprintf("rollups on, round %d", round+1)
			if disabled {
				name = fmt.Sprintf("rollups off, round %d", round+1)
			}
			path := filepath.Join(b.dir, fmt.Sprintf("rollups-%d-%v.db", round, disabled))
			r, err := b.withDestination("oncehook: the headline, "+name, "sqlite://"+path, gwOptions{noRollups: disabled})
			if err != nil {
				return nil, err
			}
			if disabled {
				off = append(off, r)
			} else {
				on = append(on, r)
			}
		}
	}
	sum := func(rs []result) (n int, d time.Duration) {
		for _, r := range rs {
			n += r.requests
			d += r.elapsed
		}
		return n, d
	}
	nOn, dOn := sum(on)
	nOff, dOff := sum(off)
	rateOn, rateOff := float64(nOn)/dOn.Seconds(), float64(nOff)/dOff.Seconds()
	rows := append(on, off...)
	rows[len(rows)-1].note += fmt.Sprintf("; over the 3 rounds: on %.0f req/s, off %.0f req/s: rollups cost %.1f%%",
		rateOn, rateOff, 100*(1-rateOn/rateOff))
	fmt.Fprintf(os.Stderr, "rollups: on %.0f, off %.0f req/s (%.1f%%)\n", rateOn, rateOff, 100*(1-rateOn/rateOff))
	return rows, nil
}

// operatorPages measures the dashboard's overview and the events list, and
// the admin API's reads, with b.stored events in the store and 7 days of
// hourly rollups, one request at a time: the latency an operator sees.
func (b *bench) operatorPages() ([]result, error) {
	path := filepath.Join(b.dir, "operator.db")
	if err := prefill(path, b.stored, 24*time.Hour*365); err != nil {
		return nil, err
	}
	if err := prefillRollups(path); err != nil {
		return nil, err
	}
	k, err := newSink()
	if err != nil {
		return nil, err
	}
	defer k.stop()
	gw, err := startGateway("sqlite://"+path, "", k.url, gwOptions{})
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	// A few hundred events with deliveries on top, some of them dead: what
	// the state filters look for.
	for i := range 300 {
		send(http.DefaultClient, b.signed(gw.url+"/in/bench", 2_000_000_000+int64(i)))
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.PostForm(gw.apiURL+"/ui/login", url.Values{"token": {apiToken}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	api := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, gw.apiURL+path, nil)
			req.Header.Set("Authorization", "Bearer "+apiToken)
			return req
		}
	}
	page := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, gw.apiURL+path, nil)
			return req
		}
	}
	// An id deep in the store, for a permalink and a deep cursor.
	deep := fmt.Sprintf("c%d", b.stored/2)
	cases := []struct {
		name string
		c    *http.Client
		next func() *http.Request
	}{
		{"dashboard: overview (/ui/)", browser, page("/ui/")},
		{"dashboard: events list (/ui/events)", browser, page("/ui/events")},
		{"dashboard: an event's page", browser, page(fmt.Sprintf("/ui/events/%d", b.stored/2))},
		{"API: GET /v1/sources", http.DefaultClient, api("/v1/sources")},
		{"API: GET /v1/stats (7 days, hourly)", http.DefaultClient, api("/v1/stats?from=" + url.QueryEscape(time.Now().Add(-7*24*time.Hour).UTC().Format(time.RFC3339)))},
		{"API: GET /v1/events (newest page)", http.DefaultClient, api("/v1/events")},
		{"API: GET /v1/events, a page halfway down", http.DefaultClient, api("/v1/events?cursor=" + deep)},
		{"API: GET /v1/events?key_prefix=", http.DefaultClient, api("/v1/events?source=bench&key_prefix=old_000500")},
		{"API: GET /v1/events?state=dead", http.DefaultClient, api("/v1/events?state=dead")},
		{"API: GET /v1/events?state=delivered", http.DefaultClient, api("/v1/events?state=delivered")},
	}
	var rows []result
	measure := func(c struct {
		name string
		c    *http.Client
		next func() *http.Request
	}, suffix string) result {
		r := result{name: fmt.Sprintf("%s, %d events stored%s", c.name, b.stored, suffix)}
		for range 200 {
			t0 := time.Now()
			resp, err := c.c.Do(c.next())
			if err != nil {
				r.errors++
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || strings.HasSuffix(resp.Request.URL.Path, "/login") {
				r.errors++
				continue
			}
			r.latencies = append(r.latencies, time.Since(t0))
		}
		r.requests = len(r.latencies)
		r.note = "one request at a time, 200 of them"
		fmt.Fprintf(os.Stderr, "%s: p99 %s\n", r.name, r.pct(0.99))
		return r
	}
	for _, c := range cases {
		rows = append(rows, measure(c, ""))
	}
	// The same while intake runs flat out (64 connections of unique events
	// into the same store): what an operator sees during a storm.
	stop := make(chan struct{})
	done := make(chan result)
	go func() {
		next := b.unique(gw.url + "/in/bench")
		c := client(b.conns)
		var sent int
		start := time.Now()
		sem := make(chan struct{}, b.conns)
		for {
			select {
			case <-stop:
				for range b.conns {
					sem <- struct{}{}
				}
				done <- result{requests: sent, elapsed: time.Since(start)}
				return
			case sem <- struct{}{}:
				sent++
				go func() { send(c, next()); <-sem }()
			}
		}
	}()
	for _, c := range cases[:6] {
		rows = append(rows, measure(c, ", under intake load"))
	}
	close(stop)
	bg := <-done
	rows[len(rows)-1].note += fmt.Sprintf("; intake meanwhile: %.0f req/s", float64(bg.requests)/bg.elapsed.Seconds())
	return rows, nil
}

// prefillRollups writes 7 days of hourly counters for the bench source.
func prefillRollups(path string) error {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Hour)
	var deltas []store.StatDelta
	for h := range 7 * 24 {
		hour := now.Add(-time.Duration(h) * time.Hour)
		for metric, v := range map[string]int64{"events.accepted": 6000, "events.duplicate": 300, "requests.accepted": 6000,
			"requests.duplicate": 300, "requests.unauthorized": 3} {
			deltas = append(deltas, store.StatDelta{Hour: hour, Scope: store.ScopeSource, Name: "bench", Metric: metric, Value: v})
		}
		for metric, v := range map[string]int64{"attempts.delivered": 6000, "latency.count": 6000, "latency.sum_ms": 30000} {
			deltas = append(deltas, store.StatDelta{Hour: hour, Scope: store.ScopeDestination, Name: "sink", Metric: metric, Value: v})
		}
	}
	_, err = st.Commit(ctx, store.Batch{Stats: deltas, Shard: "prefill"})
	return err
}
