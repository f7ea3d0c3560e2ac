package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
)

// After a storm across 3 replicas on PostgreSQL (copies of each event at
// the same moment on different replicas, forged and broken requests among
// them), /v1/stats on any one replica and /metrics summed over the
// replicas show the exact accepted, duplicate and rejected counts.
func TestStatsAcrossReplicasAreExact(t *testing.T) {
	pg := testenv.Postgres(t)
	sink := newCountingSink(t, 0)
	cfg := replicaConfig(t, pg, "", sink.URL)
	const token = "ops-token-0123456789"
	b, _ := os.ReadFile(cfg)
	b = append(b, []byte("api:\n  listen: 127.0.0.1:0\n  tokens: [{name: ops, token: "+token+"}]\n")...)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ps := startReplicas(t, 3, cfg)
	apiRE := regexp.MustCompile(`api: +(http://[^ ]+)`)
	var apis []string
	for _, p := range ps {
		if !testenv.WaitFor(5*time.Second, func() bool { return apiRE.MatchString(p.stdout.String()) }) {
			t.Fatalf("no api line: %s", p.stdout)
		}
		apis = append(apis, apiRE.FindStringSubmatch(p.stdout.String())[1])
	}

	const events, copies, forged, broken = 500, 4, 30, 20
	all := ids("stats", events)
	codes := storm(t, ps, all, copies, nil)
	allAnswered200(t, all, codes)
	var wg sync.WaitGroup
	for i := range forged + broken {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := ps[i%3].URL + "/in/stripe"
			var req *http.Request
			if i < forged {
				req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(`{"id":"evt_forged"}`))
				req.Header.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%064x", time.Now().Unix(), i))
			} else {
				req = testenv.SignedRequest(t, url, "stripe", secret, []byte(`{"id":`), "")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()

	want := admin.SourceCounts{Received: events * copies, Accepted: events, Duplicate: events * (copies - 1),
		Requests: events*copies + forged + broken, Rejected: map[string]int64{"unauthorized": forged, "malformed": broken}}
	client := api.NewClient(apis[1], token, nil)
	var got admin.SourceCounts
	// Each replica's counts ride its next commit, or its 10s flush.
	if !testenv.WaitFor(25*time.Second, func() bool {
		v, err := client.Stats(context.Background(), admin.StatsQuery{Source: "stripe"})
		if err != nil || len(v.Sources) != 1 {
			return false
		}
		got = v.Sources[0].Total
		return got.Received == want.Received && got.Requests == want.Requests
	}) {
		t.Fatalf("/v1/stats never reached the storm's counts: %+v, want %+v", got, want)
	}
	if got.Accepted != want.Accepted || got.Duplicate != want.Duplicate || got.Rejected["unauthorized"] != forged ||
		got.Rejected["malformed"] != broken || len(got.Rejected) != 2 {
		t.Fatalf("/v1/stats %+v, want %+v", got, want)
	}

	sum := map[string]float64{}
	for _, p := range ps {
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			name, value, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				sum[name] += v
			}
		}
	}
	for series, n := range map[string]float64{
		`oncehook_events_total{source="stripe",verdict="accepted"}`:       events,
		`oncehook_events_total{source="stripe",verdict="duplicate"}`:      events * (copies - 1),
		`oncehook_requests_total{outcome="unauthorized",source="stripe"}`: forged,
		`oncehook_requests_total{outcome="malformed",source="stripe"}`:    broken,
	} {
		if sum[series] != n {
			t.Errorf("%s summed over the replicas: %v, want %v", series, sum[series], n)
		}
	}
	// The store's own view is the same on every replica.
	for _, p := range ps {
		resp, _ := http.Get(p.URL + "/metrics")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `oncehook_destination_paused{destination="app"} 0`) {
			t.Errorf("%s: no paused gauge", p.URL)
		}
	}
}
