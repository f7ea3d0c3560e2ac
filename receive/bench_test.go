package receive_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/internal/seen"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
)

// claimedAtOnce claims every event as new, without a store: the
// benchmark measures intake's own work per request (the store's claim is
// store/sqlite's BenchmarkClaimEvents). Its keys expire at once, so that
// the hot set, told of each, still finds the next request's key new,
// as the bench's unique events are.
type claimedAtOnce struct{}

func (claimedAtOnce) Claim(_ context.Context, evs []store.NewEvent) ([]store.Claim, error) {
	out := make([]store.Claim, len(evs))
	for i, e := range evs {
		out[i] = store.Claim{ExpiresAt: e.ReceivedAt}
	}
	return out, nil
}

// discardWriter is a ResponseWriter that keeps only the status and
// whether the answer says accepted, and takes read deadlines as the
// server's does.
type discardWriter struct {
	h        http.Header
	status   int
	wrote    bool
	accepted bool // the answer says accepted
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.wrote, w.accepted = true, bytes.HasPrefix(b, []byte(`{"status":"accepted"`))
	}
	return len(b), nil
}
func (w *discardWriter) WriteHeader(status int) { w.status = status }

// SetReadDeadline is the server's (http.ResponseController's), as readBody
// sets it on every read.
func (w *discardWriter) SetReadDeadline(time.Time) error { return nil }

// BenchmarkReceiveStripe is one Stripe-signed 1 KiB event through the
// receive handler, as the gateway wires it (Prometheus, the hourly
// rollups, the hot set), up to its 200: go test -bench ReceiveStripe
// -benchmem ./receive/.
func BenchmarkReceiveStripe(b *testing.B) {
	const secret = "whsec_bench"
	p, err := provider.New("stripe", provider.Options{Secrets: []string{secret}})
	if err != nil {
		b.Fatal(err)
	}
	m := metrics.New()
	m.Hourly, m.Copies = metrics.NewHourly(nil), metrics.NewCopies()
	h := receive.New(receive.Options{
		Sources: []receive.Source{{Name: "bench", Preset: p, Window: 96 * time.Hour, Routes: route.To("sink")}},
		Claimer: claimedAtOnce{}, Seen: seen.New(100_000), Metrics: m,
	})
	// The requests are signed beforehand: signing is the provider's work.
	const n = 4096
	type signed struct {
		body []byte
		sig  string
	}
	reqs := make([]signed, n)
	now := time.Now()
	for i := range reqs {
		head := fmt.Sprintf(`{"id":"evt_%014d","object":"event","type":"bench","created":%d,"data":{"object":{"id":"obj_%014d"}},"pad":"`, i, i, i)
		body := []byte(head + strings.Repeat("x", 1024-len(head)-2) + `"}`)
		r, _ := http.NewRequest(http.MethodPost, "http://gw/in/bench", nil)
		provider.SignHTTP(p, r, body, secret, now, "")
		reqs[i] = signed{body, r.Header.Get("Stripe-Signature")}
	}
	rd := bytes.NewReader(nil)
	req, _ := http.NewRequest(http.MethodPost, "http://gw/in/bench", io.NopCloser(rd))
	req.SetPathValue("source", "bench")
	req.RemoteAddr = "192.0.2.1:43210"
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s := reqs[i%n]
		rd.Reset(s.body)
		req.ContentLength = int64(len(s.body))
		req.Header["Stripe-Signature"] = []string{s.sig}
		clear(w.h)
		w.status, w.wrote, w.accepted = 0, false, false
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK || !w.accepted {
			b.Fatalf("status %d, accepted %t", w.status, w.accepted)
		}
	}
}
