package oncehook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

// BenchmarkKafkaConsume measures a Kafka source (consumed, claimed on
// SQLite, committed) against a bare group consumer that only commits, on
// the same topic in the same run: run both, and read the ratio.
//
//	go test -run XXX -bench KafkaConsume -benchtime 1x .
//
// The clock starts at the first record (once the group is joined). The
// cluster (kfake) runs in the same process, so CPU per message counts the
// broker's share too, in both.
func BenchmarkKafkaConsume(b *testing.B) {
	const records = 20000
	kc := testenv.NewKafka(b, 4, "bench")
	recs := make([]*kgo.Record, records)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "bench", Partition: int32(i % 4),
			Value: fmt.Appendf(nil, `{"click_id":"c%06d","url":"/products/%d","at":"2026-12-02T03:00:00Z"}`, i, i)}
	}
	for i := 0; i < records; i += 1000 {
		kc.Produce(b, recs[i:i+1000]...)
	}
	group := 0
	report := func(b *testing.B, elapsed, cpu time.Duration) {
		n := float64(records * b.N)
		b.ReportMetric(n/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
		b.ReportMetric(0, "ns/op")
	}

	b.Run("bare", func(b *testing.B) {
		var elapsed, cpu time.Duration
		for range b.N {
			group++
			start, c0 := time.Now(), testenv.CPUTime()
			cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ConsumerGroup(fmt.Sprintf("bare-%d", group)),
				kgo.ConsumeTopics("bench"), kgo.DisableAutoCommit())
			if err != nil {
				b.Fatal(err)
			}
			seen := 0
			for seen < records {
				fs := cl.PollRecords(context.Background(), 1024)
				if seen == 0 && fs.NumRecords() > 0 {
					start, c0 = time.Now(), testenv.CPUTime() // the group is joined
				}
				seen += fs.NumRecords()
				if err := cl.CommitUncommittedOffsets(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			elapsed += time.Since(start)
			cpu += testenv.CPUTime() - c0
			cl.Close()
		}
		report(b, elapsed, cpu)
	})

	b.Run("gateway", func(b *testing.B) {
		var elapsed, cpu time.Duration
		for range b.N {
			group++
			start, c0 := time.Now(), testenv.CPUTime()
			gw := oncehooktest.Start(b, fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - name: clicks
    consume: {kafka: {brokers: [%s], topic: bench, group: gw-%d}}
    key: ["json:click_id"]
    destinations: []
`, strings.Join(kc.Addrs, ", "), group))
			testenv.WaitFor(30*time.Second, func() bool { return gatewayTaken(b, gw) > 0 })
			start, c0 = time.Now(), testenv.CPUTime() // joined, and claiming
			if !testenv.WaitFor(120*time.Second, func() bool {
				return gatewayTaken(b, gw) >= records
			}) {
				b.Fatalf("the gateway claimed %v of %d", gatewayTaken(b, gw), records)
			}
			elapsed += time.Since(start)
			cpu += testenv.CPUTime() - c0
			gw.Stop()
		}
		report(b, elapsed, cpu)
	})
}

func gatewayTaken(b *testing.B, gw *oncehooktest.Gateway) float64 {
	m := testenv.Metrics(b, gw.MetricsHandler())
	return m[`oncehook_events_total{source="clicks",verdict="accepted"}`] + m[`oncehook_events_total{source="clicks",verdict="duplicate"}`]
}
