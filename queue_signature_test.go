package oncehook_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/provider"
)

const paddleSecret = "pdl_ntfset_queue_secret"

// paddleSigned is a Paddle notification of event id, signed with secret at
// at, as Paddle signs one: its headers and body.
func paddleSigned(t *testing.T, id, secret string, at time.Time) (http.Header, []byte) {
	t.Helper()
	p, err := provider.New("paddle", provider.Options{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event_id":"` + id + `","event_type":"transaction.completed","data":{"id":"txn_` + id + `"}}`)
	req, _ := http.NewRequest(http.MethodPost, "http://x/in/paddle", bytes.NewReader(body))
	if err := provider.SignHTTP(p, req, body, secret, at, ""); err != nil {
		t.Fatal(err)
	}
	return req.Header, body
}

// Invariant 23 and issue 41's first loss: a queue source with a preset
// and verify: true measured a signature's age against when the message
// was consumed, so a backlog (messages published while the gateway was
// down) was terminated as "too old" and lost: 20 of 20 Paddle messages,
// published 2 s before a gateway with a 1 s tolerance started. A
// signature's age is now measured against when the broker took the
// message (JetStream's stored time, the Kafka record's timestamp,
// RabbitMQ's timestamp_in_ms or timestamp property), so the backlog is
// taken and nothing is counted aged; a message whose signature matches
// but was made outside the tolerance even so (a relay that held it for
// an hour; a RabbitMQ message without a timestamp, measured against when
// it is consumed) is taken too, and counted as signature_aged; a forged
// one is still rejected (unauthorized), on every broker.
func TestAQueuedBacklogIsNotTooOld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	natsURL := testenv.NATS(t)
	js, stream, subject := brokertest.NATSStream(t, natsURL, jetstream.MemoryStorage)
	amqpURL, ch, queue, _ := brokertest.RabbitQueue(t)
	_, ch2, bareQueue, _ := brokertest.RabbitQueue(t)
	kc := testenv.NewKafka(t, 1, "paddle")

	type message struct {
		header http.Header
		body   []byte
	}
	publish := map[string]func(m message){
		"paddle-nats": func(m message) {
			msg := &nats.Msg{Subject: subject + ".paddle", Data: m.body, Header: nats.Header(m.header)}
			if _, err := js.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
		},
		// As RabbitMQ's incoming timestamp interceptor stamps a message
		// (the broker these tests run against predates it).
		"paddle-amqp": func(m message) {
			h := amqp.Table{"timestamp_in_ms": time.Now().UnixMilli()}
			for k := range m.header {
				h[k] = m.header.Get(k)
			}
			if dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{Headers: h, Body: m.body}); err != nil || !dc.Wait() {
				t.Fatalf("publish: %v", err)
			}
		},
		// No timestamp at all: measured against when it is consumed.
		"paddle-bare": func(m message) {
			h := amqp.Table{}
			for k := range m.header {
				h[k] = m.header.Get(k)
			}
			if dc, err := ch2.PublishWithDeferredConfirm("", bareQueue, true, false, amqp.Publishing{Headers: h, Body: m.body}); err != nil || !dc.Wait() {
				t.Fatalf("publish: %v", err)
			}
		},
		"paddle-kafka": func(m message) {
			r := &kgo.Record{Topic: "paddle", Value: m.body}
			for k := range m.header {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(m.header.Get(k))})
			}
			kc.Produce(t, r)
		},
	}
	const backlog = 20
	for source, pub := range publish {
		for i := range backlog {
			h, b := paddleSigned(t, fmt.Sprintf("%s-%02d", source, i), paddleSecret, time.Now())
			pub(message{h, b})
		}
		h, b := paddleSigned(t, source+"-forged", "another secret", time.Now())
		pub(message{h, b})
	}
	time.Sleep(2 * time.Second) // the gateway is down: the backlog is older than the tolerance

	sink := testenv.NewSink(t)
	sources := ""
	for source, consume := range map[string]string{
		"paddle-nats":  `{nats: {url: ` + natsURL + `, stream: ` + stream + `, subject: "` + subject + `.>"}, verify: true}`,
		"paddle-amqp":  `{amqp: {url: "` + amqpURL + `", queue: ` + queue + `}, verify: true}`,
		"paddle-bare":  `{amqp: {url: "` + amqpURL + `", queue: ` + bareQueue + `}, verify: true}`,
		"paddle-kafka": `{kafka: {brokers: [` + strings.Join(kc.Addrs, ", ") + `], topic: paddle, group: paddle}, verify: true}`,
	} {
		sources += `
  - name: ` + source + `
    preset: paddle
    secrets: [` + paddleSecret + `]
    tolerance: 1s
    consume: ` + consume + `
    destinations: [app]`
	}
	gw := startGateway(t, `store: sqlite://$DIR/oncehook.db
sources:`+sources+`
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	check := func(when string, accepted int, aged map[string]int64) {
		t.Helper()
		for source := range publish {
			got, ok := waitSourceTotal(gw, source, func(c admin.SourceCounts) bool {
				return c.Accepted == int64(accepted) && c.Rejected["unauthorized"] == 1 && len(c.Rejected) == 1 && c.SignatureAged == aged[source]
			})
			if !ok {
				t.Errorf("%s, %s: accepted %d, rejected %v, aged %d; want %d accepted, the forged one unauthorized, %d aged",
					when, source, got.Accepted, got.Rejected, got.SignatureAged, accepted, aged[source])
			}
		}
		for source := range publish {
			for i := range accepted {
				key := fmt.Sprintf("%s:%s-%02d", source, source, i)
				if n := sink.ByKey()[key]; n != 1 {
					t.Errorf("%s: %s delivered %d times, want once", when, key, n)
				}
			}
		}
	}
	check("the backlog", backlog, map[string]int64{"paddle-bare": backlog})

	// Signed an hour before the broker took them: taken, counted aged.
	const late = 3
	for source, pub := range publish {
		for i := range late {
			h, b := paddleSigned(t, fmt.Sprintf("%s-%02d", source, backlog+i), paddleSecret, time.Now().Add(-time.Hour))
			pub(message{h, b})
		}
	}
	check("signed an hour before", backlog+late, map[string]int64{"paddle-nats": late, "paddle-amqp": late, "paddle-bare": backlog + late, "paddle-kafka": late})
	sink.CheckEachOnce(t)
}
