package kafka

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
)

// BenchmarkPublisher measures the Kafka destination's Send (a record per
// attempt, idempotent, acks=all, waiting for each ack) against a bare
// franz-go producer with the same settings, each with 64 sends in flight
// as the worker's concurrency would have them, in the same run:
//
//	go test -run XXX -bench Publisher -benchtime 1x ./broker/kafka/
func BenchmarkPublisher(b *testing.B) {
	const (
		records    = 20000
		concurrent = 64
	)
	kc := testenv.NewKafka(b, 4, "out")
	body := []byte(`{"id":"evt_0000000000","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","amount":2000}}}`)
	run := func(b *testing.B, send func(i int) error) {
		var elapsed, cpu time.Duration
		for range b.N {
			var next atomic.Int64
			var wg sync.WaitGroup
			start, c0 := time.Now(), testenv.CPUTime()
			for range concurrent {
				wg.Go(func() {
					for {
						i := int(next.Add(1))
						if i > records {
							return
						}
						if err := send(i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed += time.Since(start)
			cpu += testenv.CPUTime() - c0
		}
		n := float64(records * b.N)
		b.ReportMetric(n/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
		b.ReportMetric(0, "ns/op")
	}

	b.Run("bare", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.DefaultProduceTopic("out"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		run(b, func(i int) error {
			k := fmt.Sprintf("stripe:evt_%010d", i)
			return cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(k), Value: body,
				Headers: []kgo.RecordHeader{{Key: "Idempotency-Key", Value: []byte(k)}}}).FirstErr()
		})
	})

	b.Run("publisher", func(b *testing.B) {
		pub, err := NewPublisher(broker.Destination{Name: "log"}, PublishSettings{Brokers: kc.Addrs, Topic: "out"})
		if err != nil {
			b.Fatal(err)
		}
		defer pub.Close()
		run(b, func(i int) error {
			k := fmt.Sprintf("stripe:evt_%010d", i)
			h := http.Header{}
			h.Set("Idempotency-Key", k)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := pub.Send(ctx, &deliver.Message{Source: "stripe", Key: k[7:], IdempotencyKey: k, Attempt: 1,
				ContentType: "application/json", Header: h, Body: body})
			if res.Kind != deliver.Delivered {
				return fmt.Errorf("%v: %s", res.Kind, res.Error)
			}
			return nil
		})
	})
}
