package oncehook_test

// RabbitMQ throughput against bare amqp091-go in the same run (figures in
// BENCHMARKS.md):
//
//	go test -run '^$' -bench RabbitMQ -benchtime 5000x .
//
// Each consume benchmark preloads b.N messages, then times draining them.
// The process's CPU per message covers everything in this process (the
// gateway, its store, the sink) but not the broker's own.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/broker"
	oamqp "github.com/oncehook/oncehook/broker/amqp"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

func benchQueue(b *testing.B) (base string, conn *amqp.Connection, ch *amqp.Channel, queue string) {
	b.Helper()
	base = testenv.RabbitMQ(b)
	conn, err := amqp.Dial(base)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	if ch, err = conn.Channel(); err != nil {
		b.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	queue = fmt.Sprintf("oncehook-bench-%08x", rand.Uint32())
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(queue, false, false, false)
			c.Close()
		}
	})
	return base, conn, ch, queue
}

// preload publishes n distinct 1 KiB JSON messages, persistent.
func preload(b *testing.B, ch *amqp.Channel, queue string, n int) {
	b.Helper()
	pad := make([]byte, 960)
	for i := range pad {
		pad[i] = 'x'
	}
	confirms := make([]*amqp.DeferredConfirmation, n)
	for i := range n {
		body := fmt.Sprintf(`{"id":"b%08d","pad":"%s"}`, i, pad)
		dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
		if err != nil {
			b.Fatal(err)
		}
		confirms[i] = dc
	}
	for _, dc := range confirms {
		dc.Wait()
	}
}

func report(b *testing.B, n int, elapsed, cpuUsed time.Duration) {
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpuUsed.Microseconds())/float64(n), "cpu-µs/msg")
	b.ReportMetric(0, "ns/op") // the rate is the figure; ns/op counts the preload too
}

func BenchmarkRabbitMQConsume(b *testing.B) {
	// The baseline: a bare consumer that only acks, with the same prefetch.
	b.Run("bare-ack", func(b *testing.B) {
		_, conn, ch, queue := benchQueue(b)
		preload(b, ch, queue, b.N)
		cch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		cch.Qos(256, 0, false)
		b.ResetTimer()
		start, c0 := time.Now(), testenv.CPUTime()
		ds, err := cch.Consume(queue, "", false, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			d := <-ds
			d.Ack(false)
		}
		report(b, b.N, time.Since(start), testenv.CPUTime()-c0)
	})
	// A gateway on SQLite consuming the same queue: each message claimed
	// (durable) before its ack, then delivered to a local sink.
	b.Run("gateway", func(b *testing.B) {

		base, _, ch, queue := benchQueue(b)
		preload(b, ch, queue, b.N)
		var delivered atomic.Int64
		sink := testenv.NewSink(b)
		sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) {
			delivered.Add(1)
			w.WriteHeader(http.StatusOK)
		}
		b.ResetTimer()
		start, c0 := time.Now(), testenv.CPUTime()
		gw := oncehooktest.Start(b, `
store: sqlite://$DIR/oncehook.db
sources:
  - name: orders
    consume: {amqp: {url: "`+base+`", queue: `+queue+`, prefetch: 256}}
    key: ["json:id"]
    destinations: [app]
destinations:
  - {name: app, url: `+sink.URL+`}
`)
		claimed := testenv.WaitFor(5*time.Minute, func() bool {
			q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
			return err == nil && q.Messages == 0 && gw.ConsumerStatus()[0].InFlight == 0
		})
		claimedAt, c1 := time.Since(start), testenv.CPUTime()-c0
		if !claimed || !testenv.WaitFor(5*time.Minute, func() bool { return delivered.Load() >= int64(b.N) }) {
			b.Fatalf("claimed %v, delivered %d of %d", claimed, delivered.Load(), b.N)
		}
		deliveredAt := time.Since(start)
		b.ReportMetric(float64(b.N)/claimedAt.Seconds(), "claimed-msgs/s")
		b.ReportMetric(float64(c1.Microseconds())/float64(b.N), "claim-cpu-µs/msg")
		report(b, b.N, deliveredAt, testenv.CPUTime()-c0)
	})
}

func BenchmarkRabbitMQPublish(b *testing.B) {
	const workers = oamqp.DefaultChannels
	run := func(b *testing.B, publish func(i int)) {
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start, c0 := time.Now(), testenv.CPUTime()
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1))
					if i > b.N {
						return
					}
					publish(i)
				}
			})
		}
		wg.Wait()
		report(b, b.N, time.Since(start), testenv.CPUTime()-c0)
	}
	// The baseline: 32 goroutines, each with its own confirm-mode channel,
	// publish a persistent message and wait for its confirm.
	b.Run("bare-confirm", func(b *testing.B) {
		_, conn, _, queue := benchQueue(b)
		chans := make(chan *amqp.Channel, workers)
		for range workers {
			c, err := conn.Channel()
			if err != nil {
				b.Fatal(err)
			}
			c.Confirm(false)
			chans <- c
		}
		body := make([]byte, 1024)
		run(b, func(i int) {
			c := <-chans
			dc, err := c.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: fmt.Sprint(i), Body: body})
			if err != nil || !dc.Wait() {
				b.Errorf("publish %d: %v", i, err)
			}
			chans <- c
		})
	})
	// oncehook's Publisher: the same publishes through Send (headers,
	// mandatory, the channel pool, the return check).
	b.Run("publisher", func(b *testing.B) {
		base, _, _, queue := benchQueue(b)
		s, err := oamqp.NewPublisher(broker.Destination{Name: "rabbit"}, oamqp.PublishSettings{URL: base, RoutingKey: queue})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		body := make([]byte, 1024)
		run(b, func(i int) {
			h := http.Header{}
			h.Set("Idempotency-Key", fmt.Sprintf("bench:%d", i))
			h.Set("X-Oncehook-Source", "bench")
			h.Set("X-Oncehook-Attempt", "1")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res := s.Send(ctx, &deliver.Message{Source: "bench", Key: fmt.Sprint(i), IdempotencyKey: fmt.Sprintf("bench:%d", i),
				ContentType: "application/json", Header: h, Body: body, Attempt: 1})
			cancel()
			if res.Kind != deliver.Delivered {
				b.Errorf("send %d: %v %s", i, res.Kind, res.Error)
			}
		})
	})
}
