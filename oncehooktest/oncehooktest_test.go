package oncehooktest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/provider"
)

// The package's use, as a user writes it: a handler behind a real gateway
// sees a provider's redelivery storm once.
func TestHandlerBehindTheGatewaySeesAStormOnce(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	handler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	defer handler.Close()

	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: github, preset: github, secrets: [s3cret], destinations: [app]}
destinations:
  - {name: app, url: `+handler.URL+`}
`)

	github, _ := provider.New("github", provider.Options{Secrets: []string{"s3cret"}})
	body := `{"action":"opened"}`
	for range 3 { // GitHub redelivering the same delivery
		req, _ := http.NewRequest("POST", gw.URL+"/in/github", strings.NewReader(body))
		provider.SignHTTP(github, req, []byte(body), "s3cret", time.Now(), "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(keys)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 1 || keys[0] != "github:72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("handler saw %v, want one delivery keyed github:72d3162e-…", keys)
	}
}
