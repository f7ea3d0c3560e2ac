// Package oncehooktest starts a real oncehook gateway inside a test: real
// HTTP on a loopback port, a real SQLite file in the test's temporary
// directory, delivery running. Use it to test a webhook handler behind
// oncehook (retries, duplicates, signatures) without mocking either side:
//
//	func TestMyHandler(t *testing.T) {
//		app := httptest.NewServer(myHandler)
//		defer app.Close()
//		gw := oncehooktest.Start(t, `
//	store: sqlite://$DIR/oncehook.db
//	sources:
//	  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [app]}
//	destinations:
//	  - {name: app, url: `+app.URL+`}
//	`)
//		// POST Stripe-signed events to gw.URL + "/in/stripe" (provider.SignHTTP
//		// signs them as Stripe does), as many times as Stripe would.
//	}
package oncehooktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/kinds"
)

// Gateway is a running gateway. It stops when the test ends.
type Gateway struct {
	*oncehook.Gateway
	// URL is where it listens, e.g. http://127.0.0.1:41234; sources are at
	// URL + "/in/" + name.
	URL string
	// APIURL is its API listener (the effects ledger, the admin API), and
	// APIToken a token with every scope: the config's first, or one made up.
	APIURL   string
	APIToken string
	stop     func()
}

// Start runs a gateway from YAML configuration. "$DIR" in it is replaced by
// a fresh temporary directory, so `store: sqlite://$DIR/oncehook.db` gives
// each test its own store; listen is ignored (a free loopback port is used).
// ${ENV} references are not expanded: write secrets in the YAML.
func Start(t testing.TB, yaml string) *Gateway {
	t.Helper()
	return StartWith(t, yaml, oncehook.Options{})
}

// StartWith is Start with gateway options (a short SweepInterval, say).
// Without Kinds, the gateway has every kind oncehook ships (kinds.All).
func StartWith(t testing.TB, yaml string, opts oncehook.Options) *Gateway {
	t.Helper()
	if opts.Kinds.Stores == nil && opts.Kinds.Brokers == nil {
		opts.Kinds = kinds.All()
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	yaml = strings.ReplaceAll(yaml, "$DIR", t.TempDir())
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("oncehooktest: config: %v", err)
	}
	if len(cfg.API.Tokens) == 0 {
		var b [16]byte
		rand.Read(b[:])
		cfg.API.Tokens = []config.APIToken{{Name: "oncehooktest", Token: hex.EncodeToString(b[:])}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err := oncehook.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatalf("oncehooktest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		gw.Close()
		t.Fatalf("oncehooktest: %v", err)
	}
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		ln.Close()
		gw.Close()
		t.Fatalf("oncehooktest: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, ln, apiLn) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("oncehooktest: Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &Gateway{Gateway: gw, URL: "http://" + ln.Addr().String(), APIURL: "http://" + apiLn.Addr().String(),
		APIToken: cfg.API.Tokens[0].Token, stop: stop}
}

// Stop shuts the gateway down gracefully now, instead of when the test ends.
func (g *Gateway) Stop() { g.stop() }
