package receive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/internal/seen"
	"github.com/oncehook/oncehook/internal/testenv"
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

// BenchmarkReceiveFilters is one 4 MiB event through the receive handler,
// as BenchmarkReceiveStripe's (store aside), with 0, 1, 8 and 24 routes
// whose filters read the body: the cost of the filters against the same
// request without them (issue 41, item 5: 24 filters on a 100,000-item
// array took 1.15 s of CPU, 0.12 s without). Two shapes: an event whose
// 100,000 items each filter reads, and one whose array of 700,000 numbers
// each reads. go test -run '^$' -bench ReceiveFilters -benchmem ./receive/
func BenchmarkReceiveFilters(b *testing.B) {
	var items strings.Builder
	for i := 0; i < 100_000; i++ {
		if i > 0 {
			items.WriteByte(',')
		}
		fmt.Fprintf(&items, `{"id":"it_%06d","sku":"BR-%06d","qty":%d}`, i, i, i%7)
	}
	shapes := []struct {
		name, body, filter string
	}{
		{"items", `{"id":"evt_1","type":"order.paid","items":[` + items.String() + `]}`,
			`{"body":{"type":{"$startsWith":"order."},"items":{"sku":{"$in":["BR-x%d","none"]},"qty":{"$gte":%d}}}}`},
		{"numbers", `{"id":"evt_1","type":"order.paid","tags":[` + strings.Repeat(`12345,`, 700_000) + `1]}`,
			`{"body":{"type":{"$startsWith":"order."},"tags":{"$nin":[-%d]},"x%d":{"$exist":false}}}`},
	}
	for _, shape := range shapes {
		for _, n := range []int{0, 1, 8, 24} {
			b.Run(fmt.Sprintf("%s/filters=%d", shape.name, n), func(b *testing.B) {
				routes := route.To("sink")
				for i := range n {
					var spec any
					if err := json.Unmarshal(fmt.Appendf(nil, shape.filter, i, i), &spec); err != nil {
						b.Fatal(err)
					}
					f, err := route.Compile(spec)
					if err != nil {
						b.Fatal(err)
					}
					routes = append(routes, route.Route{Destination: fmt.Sprint("d", i), Filter: f})
				}
				p, err := provider.New("generic", provider.Options{Unsigned: true, Key: []string{"json:id"}})
				if err != nil {
					b.Fatal(err)
				}
				m := metrics.New()
				m.Hourly, m.Copies = metrics.NewHourly(nil), metrics.NewCopies()
				h := receive.New(receive.Options{
					Sources: []receive.Source{{Name: "bench", Preset: p, Window: time.Hour, Routes: routes}},
					Claimer: claimedAtOnce{}, Seen: seen.New(1000), Metrics: m, MaxBodySize: 8 << 20,
				})
				body := []byte(shape.body)
				rd := bytes.NewReader(nil)
				req, _ := http.NewRequest(http.MethodPost, "http://gw/in/bench", io.NopCloser(rd))
				req.SetPathValue("source", "bench")
				req.RemoteAddr = "192.0.2.1:43210"
				req.Header.Set("Content-Type", "application/json")
				w := &discardWriter{h: http.Header{}}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				cpu, ops := testenv.CPUTime(), 0
				for b.Loop() {
					ops++
					rd.Reset(body)
					req.ContentLength = int64(len(body))
					clear(w.h)
					w.status, w.wrote, w.accepted = 0, false, false
					h.ServeHTTP(w, req)
					if w.status != http.StatusOK || !w.accepted {
						b.Fatalf("status %d, accepted %t", w.status, w.accepted)
					}
				}
				// CPU, the collector's included, is what a loaded
				// machine's wall time hides.
				b.ReportMetric(float64((testenv.CPUTime()-cpu).Milliseconds())/float64(ops), "cpu-ms/op")
			})
		}
	}
}
