//go:build unix

package oncehook_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/provider"
)

// BenchmarkIntakeAmongObjects is issue 45's claim that intake to one source
// does not care how many others there are, without the network and the
// load generator between: unique Stripe-signed 1 KiB events go straight
// into the intake handler (in process, httptest.NewRecorder) of the source
// bench, on a gateway where bench has one other source and destination
// beside it, and on one with 10,000 others (s00000…, each to its own
// destination d00000…; one destination in ten, 1,000, with a transformation
// of its own text), built from the file config as bench's manyobjects
// scenario builds them. Each gateway is built once, before its
// sub-benchmark is timed, and stopped after it, each on its own SQLite file
// (the default store, FULL); it logs how long it took to be ready and the
// process's CPU over 2 idle seconds after (background work that grew with
// the objects would show there). bench's
// destination is paused, so its deliveries are held in the store and the
// figure is intake's, not delivery's.
//
// Besides ns/op it reports cpu-ns/op, the whole process's CPU (user and
// system) per request; GCs/kop, the garbage collections a thousand
// requests (the large gateway's live heap, about 40 MiB, makes them
// rarer: GOGC=off GOMEMLIMIT=4GiB takes that out); and allocs/op: the allocations of the whole process
// (the gateway's background work too), which do not move with the
// machine's load and are equal if nothing on the way sees the others.
//
// The gateways take seconds to build (the 1,000 scripts compiled), and
// -count repeats each sub-benchmark in a row, so to interleave them run the
// compiled test binary once a round (ONCEHOOK_BENCH_LARGE_FIRST=1 in every
// other round runs the large gateway first):
//
//	go test -c -o /tmp/oncehook.test .
//	for i in 1 2 3 4 5 6 7 8 9 10; do
//	  ONCEHOOK_BENCH_LARGE_FIRST=$((i % 2)) /tmp/oncehook.test -test.run '^$' \
//	    -test.bench IntakeAmongObjects -test.benchtime 3s -test.benchmem
//	done
func BenchmarkIntakeAmongObjects(b *testing.B) {
	const secret = "whsec_bench_secret"
	stripe, err := provider.New("stripe", provider.Options{Secrets: []string{secret}})
	if err != nil {
		b.Fatal(err)
	}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer sink.Close()
	start := func(others, transformEvery int) *oncehooktest.Gateway {
		var s, d strings.Builder
		for i := range others {
			fmt.Fprintf(&s, "  - {name: s%05d, preset: stripe, secrets: [%q], destinations: [d%05d]}\n", i, secret, i)
			fmt.Fprintf(&d, "  - {name: d%05d, url: \"http://127.0.0.1:9/d%05d\"", i, i)
			if i%transformEvery == 0 {
				fmt.Fprintf(&d, ", transform: {inline: %q}", strings.Replace(benchObjectsTransform, "Purchase", "Purchase"+strconv.Itoa(i), 1))
			}
			d.WriteString("}\n")
		}
		gw := oncehooktest.Start(b, fmt.Sprintf(`store: sqlite://$DIR/oncehook.db
sources:
  - name: bench
    preset: stripe
    secrets: [%q]
    destinations: [sink]
%sdestinations:
  - {name: sink, url: %q, timeout: 5s}
%s`, secret, s.String(), sink.URL, d.String()))
		if _, err := gw.Admin().SetPaused(b.Context(), "sink", true); err != nil {
			b.Fatal(err)
		}
		return gw
	}
	// The baseline has one other source and destination: a destination
	// alone has the worker's whole pool, one among others three quarters of
	// it, and that is not what is measured.
	sizes := []int{1, 10_000}
	if os.Getenv("ONCEHOOK_BENCH_LARGE_FIRST") == "1" {
		slices.Reverse(sizes) // the machine's drift falls on both alike
	}
	var seq atomic.Int64
	for _, n := range sizes {
		// Each gateway is built before its sub-benchmark and stopped after
		// it, so neither's heap or background work is in the other's figure.
		runtime.GC()
		began := time.Now()
		gw := start(n, 10)
		ready := time.Since(began)
		runtime.GC()
		cpu0, idle := processCPU(), 2*time.Second
		time.Sleep(idle)
		b.Logf("objects=%d: ready in %s; idle, the process used %s of CPU in %s", 2*n, ready.Round(time.Millisecond),
			(processCPU() - cpu0).Round(time.Millisecond), idle)
		h := gw.Handler()
		b.Run(fmt.Sprintf("objects=%d", 2*n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // 32 × GOMAXPROCS requests at once: the group commit has company
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			cpu0, gc0 := processCPU(), m.NumGC
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := benchObjectsBody(seq.Add(1))
					req := httptest.NewRequest(http.MethodPost, "/in/bench", bytes.NewReader(body))
					provider.SignHTTP(stripe, req, body, secret, time.Now(), "")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			runtime.ReadMemStats(&m)
			b.ReportMetric(1000*float64(m.NumGC-gc0)/float64(b.N), "GCs/kop")
		})
		gw.Stop()
	}
}

// benchObjectsBody is a unique 1 KiB Stripe event, the bench's.
func benchObjectsBody(id int64) []byte {
	head := fmt.Sprintf(`{"id":"evt_%014d","object":"event","type":"bench","created":%d,"data":{"object":{"id":"obj_%014d"}},"pad":"`, id, id, id)
	return []byte(head + strings.Repeat("x", max(1024-len(head)-2, 0)) + `"}`)
}

// benchObjectsTransform is the bench's typical transformation: its Stripe
// event reshaped into Meta CAPI's Purchase, a header added.
const benchObjectsTransform = `addHandler("transform", (request, context) => {
  const o = request.body.data.object;
  request.body = { data: [{ event_name: "Purchase", event_id: request.body.id, event_time: Math.floor(Date.now() / 1000),
    custom_data: { value: o.amount / 100, currency: (o.currency ?? "usd").toUpperCase(), order_id: o.id } }] };
  request.headers["x-event-type"] = context.type;
  return request;
});`

// processCPU is the CPU this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
