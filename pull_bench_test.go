package oncehook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// BenchmarkPullVersusPush delivers b.N stored events to one local app,
// through pull + ack (oncehook listen's loop, in this process) in batches
// of 1, 16 and 128, and through HTTP push, in the same run: deliveries/s
// and the CPU (gateway and consumer together, this process's) per
// delivery. Run:
//
//	go test -run XXX -bench BenchmarkPullVersusPush -benchtime 3000x .
func BenchmarkPullVersusPush(b *testing.B) {
	var got atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	defer app.Close()
	for _, batch := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("pull/batch=%d", batch), func(b *testing.B) {
			got.Store(0)
			gw := benchGateway(b, "{name: out, pull: {}, concurrency: 256}")
			postBench(b, gw, b.N)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l := &pull.Listener{Client: pull.NewClient(gw.APIURL, gw.APIToken, nil), Destination: "out", ForwardTo: app.URL,
				Out: io.Discard, Batch: batch, Parallel: min(batch, 16)}
			measure(b, &got, func() { go l.Run(ctx) })
		})
	}
	b.Run("push", func(b *testing.B) {
		got.Store(0)
		gw := benchGateway(b, "{name: out, url: "+app.URL+", concurrency: 256}")
		operateBench(b, gw, "pause")
		postBench(b, gw, b.N)
		measure(b, &got, func() { operateBench(b, gw, "resume") })
	})
}

func benchGateway(b *testing.B, dest string) *gateway {
	return oncehooktest.Start(b, `
store: sqlite://$DIR/oncehook.db
delivery: {concurrency: 256}
sources:
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], destinations: [out]}
destinations:
  - `+dest+`
`)
}

func postBench(b *testing.B, gw *gateway, n int) {
	s := testenv.NewStorm(16)
	for i := range n {
		s.Go(func() {
			resp, err := http.Post(gw.URL+"/in/shop", "application/json", strings.NewReader(fmt.Sprintf(`{"id":"ev_%d","type":"t"}`, i)))
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	s.Wait()
}

func operateBench(b *testing.B, gw *gateway, action string) {
	req, _ := http.NewRequest(http.MethodPost, gw.APIURL+"/v1/destinations/out/"+action, nil)
	req.Header.Set("Authorization", "Bearer "+gw.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %v %v", action, resp, err)
	}
	resp.Body.Close()
}

// measure starts delivery with start, waits until the app has b.N, and
// reports deliveries/s and CPU µs per delivery.
func measure(b *testing.B, got *atomic.Int64, start func()) {
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	t0 := time.Now()
	start()
	if !testenv.WaitFor(5*time.Minute, func() bool { return got.Load() >= int64(b.N) }) {
		b.Fatalf("delivered %d of %d", got.Load(), b.N)
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/delivery")
}
