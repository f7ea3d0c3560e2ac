package amqp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
)

func newPublisher(t *testing.T, url, exchange, routingKey string) *Publisher {
	t.Helper()
	s, err := NewPublisher(broker.Destination{Name: "rabbit"}, PublishSettings{URL: url, Exchange: exchange, RoutingKey: routingKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func message(key string) *deliver.Message {
	h := http.Header{}
	h.Set("Idempotency-Key", "orders:"+key)
	h.Set("X-Oncehook-Source", "orders")
	h.Set("X-Oncehook-Attempt", "1")
	h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	return &deliver.Message{
		Source: "orders", Key: key, Type: "order.created", Destination: "rabbit", Attempt: 1,
		IdempotencyKey: "orders:" + key, ContentType: "application/json", Header: h,
		Body: []byte(`{"id":"` + key + `"}`), ReceivedAt: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC),
	}
}

func send(p *Publisher, m *deliver.Message) deliver.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

// Invariant 19: a publish is delivered only on the broker's confirm, as a
// persistent message whose id is <source>:<key>, with the delivery's
// headers and content type.
func TestPublishIsDeliveredOnConfirm(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	p := newPublisher(t, r.url, "", q)
	if res := send(p, message("e1")); res.Kind != deliver.Delivered {
		t.Fatalf("%v: %s", res.Kind, res.Error)
	}
	got := r.drain(q)
	if len(got) != 1 {
		t.Fatalf("%d messages in the queue, want 1", len(got))
	}
	d := got[0]
	if d.MessageId != "orders:e1" || d.DeliveryMode != 2 || d.ContentType != "application/json" || d.Type != "order.created" {
		t.Errorf("message-id %q delivery mode %d content type %q type %q", d.MessageId, d.DeliveryMode, d.ContentType, d.Type)
	}
	if !d.Timestamp.Equal(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)) || d.AppId != "oncehook" {
		t.Errorf("timestamp %v app id %q, want the event's arrival and oncehook", d.Timestamp, d.AppId)
	}
	if string(d.Body) != `{"id":"e1"}` {
		t.Errorf("body %q", d.Body)
	}
	for k, want := range map[string]string{"Idempotency-Key": "orders:e1", "X-Oncehook-Source": "orders", "X-Oncehook-Attempt": "1",
		"Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if got := d.Headers[k]; got != want {
			t.Errorf("header %s = %v, want %q", k, got, want)
		}
	}
}

// The routing key names the event's source and type.
func TestRoutingKeyNamesSourceAndType(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	ex := unique("oncehook-test-ex")
	if err := r.ch.ExchangeDeclare(ex, "topic", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.ch.QueueBind(q, "events.orders.#", ex, false, nil); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, r.url, ex, "events.{source}.{type}")
	if res := send(p, message("e2")); res.Kind != deliver.Delivered {
		t.Fatalf("%v: %s", res.Kind, res.Error)
	}
	got := r.drain(q)
	if len(got) != 1 || got[0].RoutingKey != "events.orders.order.created" {
		t.Fatalf("got %d, routing key %q", len(got), got[0].RoutingKey)
	}
}

// An unroutable publish (mandatory, returned) and one to an exchange that
// does not exist are failed attempts that say why, and the publisher
// works again once the topology is fixed.
func TestUnroutableAndMissingExchangeAreRetriedWithTheReason(t *testing.T) {
	r := newRabbit(t)
	ex := unique("oncehook-test-ex")
	p := newPublisher(t, r.url, ex, "orders")
	res := send(p, message("e3"))
	if res.Kind != deliver.Retry || !strings.Contains(res.Error, "does not exist") || !strings.Contains(res.Error, ex) {
		t.Fatalf("to a missing exchange: %v %q, want a retry naming it", res.Kind, res.Error)
	}
	t.Logf("missing exchange: %s", res.Error)
	if strings.Contains(res.Error, "guest:guest") {
		t.Fatalf("the error quotes the password: %s", res.Error)
	}
	if err := r.ch.ExchangeDeclare(ex, "direct", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	res = send(p, message("e3"))
	if res.Kind != deliver.Retry || !strings.Contains(res.Error, "unroutable") {
		t.Fatalf("unroutable: %v %q, want a retry saying unroutable", res.Kind, res.Error)
	}
	t.Logf("unroutable: %s", res.Error)
	q, _ := r.queue(false)
	if err := r.ch.QueueBind(q, "orders", ex, false, nil); err != nil {
		t.Fatal(err)
	}
	if res := send(p, message("e3")); res.Kind != deliver.Delivered {
		t.Fatalf("once bound: %v %q", res.Kind, res.Error)
	}
	if got := r.drain(q); len(got) != 1 {
		t.Fatalf("%d in the queue, want 1", len(got))
	}
}

// A broker that cannot be reached is a retry, quickly; the next Send after
// it is back reconnects.
func TestBrokerDownIsRetryAndTheNextSendReconnects(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	proxy := r.proxy()
	p := newPublisher(t, testenv.Via(t, r.url, proxy.Addr), "", q)
	if res := send(p, message("d1")); res.Kind != deliver.Delivered {
		t.Fatalf("%v: %s", res.Kind, res.Error)
	}
	proxy.Stop()
	start := time.Now()
	for range 3 {
		res := send(p, message("d2"))
		if res.Kind != deliver.Retry || res.Error == "" {
			t.Fatalf("broker down: %v %q, want a retry", res.Kind, res.Error)
		}
		t.Logf("broker down: %s", res.Error)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("three sends to a broker that is down took %v", time.Since(start))
	}
	proxy.Start(t)
	if res := send(p, message("d2")); res.Kind != deliver.Delivered {
		t.Fatalf("broker back: %v %q", res.Kind, res.Error)
	}
	got := r.drain(q)
	if len(got) != 2 || got[0].MessageId != "orders:d1" || got[1].MessageId != "orders:d2" {
		t.Fatalf("queue holds %d", len(got))
	}
}

// Send is safe for concurrent use: more publishes at once than the pool
// has channels, each confirmed as its own.
func TestConcurrentSendsAreEachConfirmed(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	p := newPublisher(t, r.url, "", q)
	const n = 3 * DefaultChannels
	var wg sync.WaitGroup
	results := make([]deliver.Result, n)
	for i := range n {
		wg.Go(func() { results[i] = send(p, message(fmt.Sprintf("c%d", i))) })
	}
	wg.Wait()
	for i, res := range results {
		if res.Kind != deliver.Delivered {
			t.Errorf("c%d: %v %q", i, res.Kind, res.Error)
		}
	}
	ids := map[string]bool{}
	for _, d := range r.drain(q) {
		ids[d.MessageId] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct messages in the queue, want %d", len(ids), n)
	}
}

// A routing key over AMQP's 255 bytes can never be published: permanent.
func TestOverlongRoutingKeyIsPermanent(t *testing.T) {
	p := newPublisher(t, "amqp://guest:guest@127.0.0.1:1/", "ex", "{type}")
	m := message("long")
	m.Type = strings.Repeat("t", 300)
	if res := send(p, m); res.Kind != deliver.Permanent {
		t.Fatalf("%v %q, want permanent", res.Kind, res.Error)
	}
}
