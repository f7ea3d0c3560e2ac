package oncehook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// Reloads race everything that reads the config while it runs: intake's
// sources, the worker's destinations and their rates, the holds, the
// API's tokens (under the race detector in CI). 50 reloads rotate the
// secret and the API token, toggle a destination and change a rate
// while senders and API readers run: every event is answered 200, or 401
// when signed with a secret already retired, and delivered to app once;
// an API call with the token in use is never refused.
func TestReloadRacesTrafficAndTheAPI(t *testing.T) {
	dir := t.TempDir()
	app, audit := testenv.NewSink(t), testenv.NewSink(t)
	yaml := func(i int) string {
		secrets := fmt.Sprintf("[whsec_%d]", i/2) // even i: the old one retired
		if i%2 == 1 {
			secrets = fmt.Sprintf("[whsec_%d, whsec_%d]", i/2, i/2+1) // odd i: the new one beside the old
		}
		routes, auditDest := "[app]", ""
		if i%4 >= 2 {
			routes, auditDest = "[app, audit]", "\n  - {name: audit, url: "+audit.URL+"}"
		}
		return fmt.Sprintf(`
store: sqlite://%s/oncehook.db
api: {tokens: [{name: ops, token: token-%02d-0123456789}, {name: next, token: token-%02d-0123456789}]}
sources:
  - {name: stripe, preset: stripe, secrets: %s, destinations: %s}
destinations:
  - {name: app, url: %s, rate: "%d/s", retry: {base_delay: 10ms, max_delay: 50ms}}%s
`, dir, i, i+1, secrets, routes, app.URL, 5000+i, auditDest)
	}
	parse := func(i int) *config.Config {
		cfg, err := config.Parse([]byte(yaml(i)), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	gw := oncehooktest.Start(t, yaml(0))

	var signWith, retiredBelow, tokenN atomic.Int64 // the secret in use; below it, retired; the token in use
	var acceptedN atomic.Int64                      // 200s so far: each reload waits for traffic since the last one
	var mu sync.Mutex
	accepted := map[string]bool{}
	var bad []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("evt_race_%05d", seq.Add(1))
				for range 5 {
					k := signWith.Load()
					req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", fmt.Sprintf("whsec_%d", k), []byte(`{"id":"`+id+`","object":"event"}`), "")
					resp, err := http.DefaultClient.Do(req)
					status := 0
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						status = resp.StatusCode
					}
					mu.Lock()
					switch {
					case status == http.StatusOK:
						accepted["stripe:"+id] = true
						acceptedN.Add(1)
					case status == http.StatusUnauthorized && k < retiredBelow.Load():
					default:
						bad = append(bad, fmt.Sprintf("%s signed with whsec_%d: %d", id, k, status))
					}
					mu.Unlock()
					if status == http.StatusOK {
						break
					}
				}
			}
		})
	}
	wg.Go(func() { // an operator's reads, with the token in use
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodGet, gw.APIURL+"/v1/destinations", nil)
			n := tokenN.Load()
			req.Header.Set("Authorization", fmt.Sprintf("Bearer token-%02d-0123456789", n))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// A token the reader took just before a reload retired it is
			// refused: the defined answer. The token in use never is.
			if resp.StatusCode != http.StatusOK && !(resp.StatusCode == http.StatusUnauthorized && n < tokenN.Load()) {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("GET /v1/destinations with token %d: %d", n, resp.StatusCode))
				mu.Unlock()
			}
		}
	})

	ctx := context.Background()
	for i := 1; i <= 50; i++ {
		// Traffic between every two reloads, however slow the machine
		// (the race detector, CI's parallel packages).
		since := acceptedN.Load()
		for start := time.Now(); acceptedN.Load() < since+3 && time.Since(start) < 5*time.Second; {
			time.Sleep(5 * time.Millisecond)
		}
		if i%2 == 0 {
			retiredBelow.Store(int64(i / 2)) // about to be retired: a 401 is its answer from now
		}
		// The token in use is one both the old and the new config name.
		tokenN.Store(int64(i))
		if _, err := gw.Reload(ctx, parse(i)); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		if i%2 == 1 {
			signWith.Store(int64(i/2 + 1)) // taken beside the old one: senders move to it
		}
	}
	close(stop)
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	if len(accepted) < 100 {
		t.Fatalf("only %d events accepted", len(accepted))
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return len(app.ByKey()) >= len(accepted) }) {
		t.Fatalf("app got %d of %d events", len(app.ByKey()), len(accepted))
	}
	for key, n := range app.ByKey() {
		if !accepted[key] || n != 1 {
			t.Errorf("app: %s delivered %d times (accepted: %v)", key, n, accepted[key])
		}
	}
	for key, n := range audit.ByKey() {
		if n != 1 {
			t.Errorf("audit: %s delivered %d times", key, n)
		}
	}
}
