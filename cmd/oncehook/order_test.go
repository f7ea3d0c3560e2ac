package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
)

// Order per entity, as providers break it: 500 entities × 10 versions,
// every event sent twice, all in random order, 64 at once across three
// replicas of one PostgreSQL. With stale, what each entity's destination
// applies only goes up and ends at the highest version; with fifo, the
// destination sees each entity's versions in increasing order. Either way
// each version arrives at most once, and every event is delivered or
// marked stale: nothing lost.
func TestOrderPerEntityAcrossReplicas(t *testing.T) {
	for _, mode := range []string{"stale", "fifo"} {
		t.Run(mode, func(t *testing.T) { orderStorm(t, mode) })
	}
}

func orderStorm(t *testing.T, mode string) {
	pg := testenv.Postgres(t)
	const entities, versions = 500, 10
	var mu sync.Mutex
	seen := map[string][]int{}
	inflight := map[string]bool{}
	var overlaps []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Entity string `json:"entity"`
			V      int    `json:"v"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &ev) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		if inflight[ev.Entity] {
			overlaps = append(overlaps, ev.Entity)
		}
		inflight[ev.Entity] = true
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		mu.Lock()
		inflight[ev.Entity] = false
		seen[ev.Entity] = append(seen[ev.Entity], ev.V)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(sink.Close)
	cfgPath := filepath.Join(t.TempDir(), "oncehook.yaml")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
store: %q
sources:
  - name: shop
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v", mode: %s}
    destinations: [app]
destinations:
  - {name: app, url: %s}
`, pg, mode, sink.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := startReplicas(t, 3, cfgPath)

	var bodies []string
	for e := range entities {
		for v := 1; v <= versions; v++ {
			body := fmt.Sprintf(`{"id":"e%03d-v%02d","entity":"e%03d","v":%d}`, e, v, e, v)
			bodies = append(bodies, body, body)
		}
	}
	rand.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var bad []string
	for i, body := range bodies {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := http.Post(ps[i%len(ps)].URL+"/in/shop", "application/json", strings.NewReader(body))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != 200 {
				mu.Lock()
				bad = append(bad, fmt.Sprint(body, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d requests not answered 200, the first: %s", len(bad), bad[0])
	}
	var st store.Stats
	if !testenv.WaitFor(90*time.Second, func() bool {
		st = pgStats(t, pg)
		return st.Pending == 0
	}) {
		t.Fatalf("not done: %+v", st)
	}
	if st.Events != entities*versions || st.Delivered+st.Stale != st.Events || st.Dead != 0 {
		t.Fatalf("stats %+v: want %d events, each delivered or stale", st, entities*versions)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatalf("%d deliveries overlapped another of their entity (the first: %s)", len(overlaps), overlaps[0])
	}
	delivered := 0
	for e := range entities {
		entity := fmt.Sprintf("e%03d", e)
		got := seen[entity]
		delivered += len(got)
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("%s received the versions %v: an older one (or a copy) after a newer", entity, got)
			}
		}
		if len(got) == 0 || got[len(got)-1] != versions {
			t.Fatalf("%s received %v: the last applied must be the highest, %d", entity, got, versions)
		}
	}
	if int64(delivered) != st.Delivered {
		t.Fatalf("the destination got %d, the store says %d delivered", delivered, st.Delivered)
	}
	t.Logf("%s: %d delivered in order, %d stale (sent after a later version was delivered)", mode, st.Delivered, st.Stale)
}
