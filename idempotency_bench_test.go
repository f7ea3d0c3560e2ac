package oncehook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncehook/oncehook/oncehooktest"
)

// The Idempotency-Key proxy against a bare httputil.ReverseProxy to the
// same upstream, in one run: unique keys (each a claim and a completion in
// the ledger, SQLite FULL, on the gateway's group commit) and replayed
// keys (a claim that finds the stored answer).
//
//	go test -run '^$' -bench IdempotencyProxy -benchtime 5s .
func BenchmarkIdempotencyProxy(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"pay_1","status":"succeeded","amount":4990,"currency":"brl"}`)
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	bare := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	defer bare.Close()
	gw := oncehooktest.Start(b, `
store: sqlite://$DIR/oncehook.db
apis: [{name: payments, prefix: /payments, upstream: `+upstream.URL+`}]
`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	run := func(b *testing.B, url string, key func() string) {
		b.SetParallelism(16) // 16 × GOMAXPROCS clients
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":4990}`))
				if k := key(); k != "" {
					req.Header.Set("Idempotency-Key", k)
					req.Header.Set("Authorization", "Bearer shop") // a key is a client's
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
	var seq atomic.Int64
	b.Run("bare-reverse-proxy", func(b *testing.B) { run(b, bare.URL+"/payments", func() string { return "" }) })
	b.Run("unique-keys", func(b *testing.B) {
		run(b, gw.URL+"/payments", func() string { return fmt.Sprintf("k-%d", seq.Add(1)) })
	})
	b.Run("replayed-keys", func(b *testing.B) {
		run(b, gw.URL+"/payments", func() string { return fmt.Sprintf("r-%d", seq.Add(1)%64) })
	})
}
