package nats_test

// go test -run XXX -bench . -benchtime 20000x ./broker/nats/
//
// Each benchmark moves b.N messages once: ns/op is per message. Bare
// baselines run in the same process, against the same NATS server, so
// the figures are read as ratios.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook/broker"
	natsbroker "github.com/oncehook/oncehook/broker/nats"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

func benchStream(b *testing.B, name string) (jetstream.JetStream, string) {
	b.Helper()
	url := testenv.NATS(b)
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	stream := fmt.Sprintf("BENCH%s%d", strings.ToUpper(name), time.Now().UnixNano())
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{strings.ToLower(stream) + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
	return js, stream
}

func fill(b *testing.B, js jetstream.JetStream, stream string, n int) {
	b.Helper()
	subj := strings.ToLower(stream) + ".orders"
	for i := range n {
		body := fmt.Appendf(nil, `{"order_id":"o-%08d","event":"order.created","pad":"%s"}`, i, strings.Repeat("x", 900))
		if _, err := js.PublishAsync(subj, body); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
}

func report(b *testing.B, start time.Time, cpu0 time.Duration) {
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64((testenv.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
}

func waitAcked(b *testing.B, js jetstream.JetStream, stream, durable string, n int) {
	b.Helper()
	ctx := context.Background()
	for {
		if c, err := js.Consumer(ctx, stream, durable); err == nil {
			if info, err := c.Info(ctx); err == nil && info.AckFloor.Stream >= uint64(n) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A bare durable pull consumer that only acks, max_ack_pending 256.
func BenchmarkConsumeBareAckOnly(b *testing.B) {
	js, stream := benchStream(b, "bare")
	fill(b, js, stream, b.N)
	ctx := context.Background()
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "bare", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 256})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), testenv.CPUTime()
	var acked atomic.Int64
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		m.Ack()
		if acked.Add(1) == int64(b.N) {
			close(done)
		}
	}, jetstream.PullMaxMessages(256))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	waitAcked(b, js, stream, "bare", b.N)
	report(b, start, cpu0)
	cc.Stop()
}

// oncehook's consumer into a gateway on SQLite (synchronous=FULL): each
// message claimed durably, then acked; no destination.
func BenchmarkConsumeOncehookClaimed(b *testing.B) {
	benchGateway(b, false)
}

// The same with an HTTP destination (a local sink answering 200): until
// every message is delivered.
func BenchmarkConsumeOncehookDelivered(b *testing.B) {
	benchGateway(b, true)
}

// The same as Claimed with max_ack_pending 1024: two commits' worth in
// flight.
func BenchmarkConsumeOncehookClaimed1024(b *testing.B) {
	benchGatewayPending(b, false, "1024")
}

func benchGateway(b *testing.B, deliver bool) { benchGatewayPending(b, deliver, "256") }

func benchGatewayPending(b *testing.B, deliver bool, pending string) {
	js, stream := benchStream(b, "gw")
	fill(b, js, stream, b.N)
	var got atomic.Int64
	sink := testenv.NewSink(b)
	sink.Respond = func(w http.ResponseWriter, _ *http.Request, _ int) { got.Add(1); w.WriteHeader(200) }
	dest, dests := "", ""
	if deliver {
		dest, dests = "[app]", "destinations:\n  - {name: app, url: "+sink.URL+"}\n"
	} else {
		dest = "[]"
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), testenv.CPUTime()
	oncehooktest.Start(b, `
store: sqlite://$DIR/oncehook.db
sources:
  - name: orders
    consume: {nats: {url: `+testenv.NATS(b)+`, stream: `+stream+`, max_ack_pending: `+pending+`}}
    key: ["json:order_id"]
    destinations: `+dest+`
`+dests)
	waitAcked(b, js, stream, "oncehook-orders", b.N)
	for deliver && got.Load() < int64(b.N) {
		time.Sleep(5 * time.Millisecond)
	}
	report(b, start, cpu0)
}

// A bare publisher: 64 goroutines, each PublishMsg with a Nats-Msg-Id and
// the headers oncehook's carries, waiting for the ack.
func BenchmarkPublishBare(b *testing.B) {
	js, stream := benchStream(b, "pubbare")
	subj := strings.ToLower(stream) + ".x"
	body := []byte(strings.Repeat("x", 1024))
	benchPublish(b, func(i int) bool {
		key := fmt.Sprint(i)
		h := nats.Header{"Idempotency-Key": {"s:" + key}, "X-Oncehook-Source": {"s"}, "X-Oncehook-Attempt": {"1"}, "Content-Type": {"application/json"}}
		_, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: subj, Data: body, Header: h}, jetstream.WithMsgID("s:"+key))
		return err == nil
	})
}

// oncehook's publisher (deliver.Sender): the same, through Send.
func BenchmarkPublishOncehook(b *testing.B) {
	_, stream := benchStream(b, "pub")
	p := natsbroker.NewPublisher(broker.Destination{Name: "bus", Lease: 40 * time.Second},
		natsbroker.PublishSettings{URL: testenv.NATS(b), Subject: strings.ToLower(stream) + ".{source}.{type}"})
	defer p.Close()
	body := []byte(strings.Repeat("x", 1024))
	benchPublish(b, func(i int) bool {
		key := fmt.Sprint(i)
		h := http.Header{"Idempotency-Key": {"s:" + key}, "X-Oncehook-Source": {"s"}, "X-Oncehook-Attempt": {"1"}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return p.Send(ctx, &deliver.Message{Source: "s", Key: key, Type: "order.created", IdempotencyKey: "s:" + key,
			ContentType: "application/json", Header: h, Body: body}).Kind == deliver.Delivered
	})
}

func benchPublish(b *testing.B, one func(i int) bool) {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), testenv.CPUTime()
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				if !one(i) {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	report(b, start, cpu0)
	if failed.Load() > 0 {
		b.Fatalf("%d publishes failed", failed.Load())
	}
}
