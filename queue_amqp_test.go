package oncehook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/oncehooktest"
)

// publishAll publishes bodies to queue in order, pipelined, and waits for
// every confirm.
func publishAll(t *testing.T, ch *amqp.Channel, queue string, bodies []string) {
	t.Helper()
	confirms := make([]*amqp.DeferredConfirmation, len(bodies))
	for i, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(b)})
		if err != nil {
			t.Fatal(err)
		}
		confirms[i] = dc
	}
	for i, dc := range confirms {
		if !dc.Wait() {
			t.Fatalf("publish %d nacked", i)
		}
	}
}

func queueLen(t *testing.T, ch *amqp.Channel, queue string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// waitSourceTotal polls the admin API's /v1/stats for source's totals
// until ok holds of them (counts ride the next commit), and returns the
// last it read and whether ok held within 20s.
func waitSourceTotal(gw *oncehooktest.Gateway, source string, ok func(admin.SourceCounts) bool) (admin.SourceCounts, bool) {
	c := api.NewClient(gw.APIURL, gw.APIToken, nil)
	var got admin.SourceCounts
	held := testenv.WaitFor(20*time.Second, func() bool {
		v, err := c.Stats(context.Background(), admin.StatsQuery{Source: source})
		if err != nil || len(v.Sources) != 1 {
			return false
		}
		got = v.Sources[0].Total
		return ok(got)
	})
	return got, held
}

// Invariants 3, 13 and 19 over RabbitMQ: 3,000 messages of which 30% are
// re-published copies, poison mixed in (no key, not JSON, over
// max_body_size). Every distinct key is delivered
// once, the copies are counted as duplicates exactly (in /v1/stats, the
// same rollups as a webhook's), each poison message is rejected once, by
// reason, to the queue's dead-letter exchange, and nothing is left.
func TestRabbitMQSourceTakesEachKeyOnce(t *testing.T) {
	base, ch, queue, dead := brokertest.RabbitQueue(t)
	sink := testenv.NewSink(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
max_body_size: 4KiB
sources:
  - name: orders
    consume: {amqp: {url: "`+base+`", queue: `+queue+`, prefetch: 128}}
    key: ["json:id"]
    on_missing_key: reject
    destinations: [app]
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	const distinct, copies, noKey, notJSON, tooLarge = 2100, 900, 15, 15, 5
	var bodies []string
	for i := range distinct {
		bodies = append(bodies, fmt.Sprintf(`{"id":"o%04d","amount":%d}`, i, i))
	}
	// Each copy is an earlier message's bytes again (a producer's retry),
	// at a random place in the stream: some long after their original,
	// some right after, some before it (then the copy is the first to
	// arrive and the original is the duplicate).
	mixed := append([]string(nil), bodies...)
	insert := func(b string) {
		at := rand.IntN(len(mixed) + 1)
		mixed = append(mixed[:at], append([]string{b}, mixed[at:]...)...)
	}
	for range copies {
		insert(bodies[rand.IntN(distinct)])
	}
	for i := range noKey + notJSON + tooLarge {
		poison := fmt.Sprintf(`{"order":"p%d"}`, i)
		switch {
		case i >= noKey+notJSON:
			poison = fmt.Sprintf(`{"id":"big%d","pad":"%s"}`, i, strings.Repeat("x", 8<<10))
		case i >= noKey:
			poison = fmt.Sprintf("not json %d", i)
		}
		insert(poison)
	}
	start := time.Now()
	publishAll(t, ch, queue, mixed)

	if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) == distinct }) {
		t.Fatalf("delivered %d distinct keys of %d; consumer %+v", len(sink.ByKey()), distinct, gw.ConsumerStatus())
	}
	t.Logf("%d messages consumed, claimed and delivered in %v", len(mixed), time.Since(start).Round(time.Millisecond))
	time.Sleep(300 * time.Millisecond) // a second delivery, if any, would land now
	sink.CheckEachOnce(t)
	got, ok := waitSourceTotal(gw, "orders", func(got admin.SourceCounts) bool { return got.Requests == int64(len(mixed)) })
	if !ok {
		t.Fatalf("/v1/stats never counted every message: %+v, want %d requests", got, len(mixed))
	}
	rejected := int64(0)
	for _, n := range got.Rejected {
		rejected += n
	}
	if got.Accepted != distinct || got.Duplicate != copies || got.Received != distinct+copies || rejected != noKey+notJSON+tooLarge ||
		got.Rejected["too_large"] != tooLarge {
		t.Fatalf("/v1/stats %+v: want %d accepted, %d duplicates, %d rejected (%d too large)", got, distinct, copies, noKey+notJSON+tooLarge, tooLarge)
	}
	t.Logf("rejected by reason: %v", got.Rejected)
	if !testenv.WaitFor(5*time.Second, func() bool { return queueLen(t, ch, queue) == 0 && queueLen(t, ch, dead) == noKey+notJSON+tooLarge }) {
		t.Fatalf("queue holds %d (want 0), its dead letters %d (want %d)", queueLen(t, ch, queue), queueLen(t, ch, dead), noKey+notJSON+tooLarge)
	}
	// /readyz says the source's broker is connected.
	resp, err := http.Get(gw.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ready struct {
		Consumers []struct {
			Source, Kind, Where string
			Connected           bool
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil || len(ready.Consumers) != 1 ||
		!ready.Consumers[0].Connected || ready.Consumers[0].Kind != "amqp" || ready.Consumers[0].Where != "queue "+queue {
		t.Fatalf("/readyz %+v %v", ready, err)
	}
}

// Invariants 14 and 19: a webhook source into a RabbitMQ destination. While
// the broker is unreachable every delivery is held behind the breaker (no
// dead letters); once it is back each event is published once, as a
// persistent message whose id is <source>:<key>.
func TestRabbitMQDestinationHoldsWhileTheBrokerIsDown(t *testing.T) {
	t.Parallel()
	base, ch, queue, _ := brokertest.RabbitQueue(t)
	u, _ := url.Parse(base)
	proxy := testenv.NewProxy(t, u.Host)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [rabbit]}
destinations:
  - name: rabbit
    publish: {amqp: {url: "`+testenv.Via(t, base, proxy.Addr)+`", exchange: "", routing_key: `+queue+`}}
    timeout: 2s
    retry: {max_attempts: 4, base_delay: 50ms, max_delay: 100ms}
    breaker: {failures: 3, cooldown: 1s}
`)
	proxy.Stop()
	const events = 30
	for i := range events {
		body := fmt.Sprintf(`{"id":"evt_%03d","object":"event","type":"invoice.paid"}`, i)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("intake: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	time.Sleep(3 * time.Second) // an outage of a few cool-downs
	st, err := gw.Store().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Dead != 0 || st.Delivered != 0 {
		t.Fatalf("while the broker was down: %+v; want nothing dead, nothing delivered", st)
	}
	c := api.NewClient(gw.APIURL, gw.APIToken, nil)
	ds, err := c.Destinations(context.Background())
	if err != nil || len(ds) != 1 || ds[0].Breaker == nil {
		t.Fatalf("destinations %+v %v: want the breaker open", ds, err)
	}
	t.Logf("held behind the breaker: %s", ds[0].Breaker.Reason)
	proxy.Start(t)
	if !testenv.WaitFor(20*time.Second, func() bool { return queueLen(t, ch, queue) >= events }) {
		t.Fatalf("after the broker came back the queue holds %d of %d", queueLen(t, ch, queue), events)
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		st, _ := gw.Store().Stats(context.Background())
		return st.Delivered == events
	}) {
		st, _ := gw.Store().Stats(context.Background())
		t.Fatalf("stats %+v, want %d delivered", st, events)
	}
	time.Sleep(300 * time.Millisecond)
	byID := map[string]int{}
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		byID[d.MessageId]++
		if d.DeliveryMode != amqp.Persistent || d.Headers["Idempotency-Key"] != d.MessageId {
			t.Errorf("%s: delivery mode %d, Idempotency-Key %v", d.MessageId, d.DeliveryMode, d.Headers["Idempotency-Key"])
		}
	}
	if len(byID) != events {
		t.Fatalf("%d distinct messages, want %d", len(byID), events)
	}
	for id, n := range byID {
		if n != 1 || !strings.HasPrefix(id, "stripe:evt_") {
			t.Errorf("%s published %d times", id, n)
		}
	}
	if st, _ := gw.Store().Stats(context.Background()); st.Dead != 0 || st.Pending != 0 {
		t.Fatalf("stats after recovery %+v", st)
	}
}

// Invariant 19 with the store down: PostgreSQL unreachable while the
// gateway consumes. Nothing is acked (every message stays in the queue,
// ready or held unacked within the prefetch), nothing is dead-lettered
// (a store outage is not poison), and once PostgreSQL is back every
// message is taken and delivered once.
func TestRabbitMQSourceAcksNothingWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	base, ch, queue, dead := brokertest.RabbitQueue(t)
	pg := testenv.Postgres(t)
	pgURL, _ := url.Parse(pg)
	proxy := testenv.NewProxy(t, pgURL.Host)
	sink := testenv.NewSink(t)
	const prefetch = 16
	gw := oncehooktest.Start(t, `
store: "`+strings.Replace(pg, pgURL.Host, proxy.Addr, 1)+`"
sources:
  - name: orders
    consume: {amqp: {url: "`+base+`", queue: `+queue+`, prefetch: `+fmt.Sprint(prefetch)+`}}
    key: ["json:id"]
    destinations: [app]
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	if !testenv.WaitFor(10*time.Second, func() bool { st := gw.ConsumerStatus(); return len(st) == 1 && st[0].Connected }) {
		t.Fatalf("consumer %+v", gw.ConsumerStatus())
	}
	proxy.Stop()
	const msgs = 200
	var bodies []string
	for i := range msgs {
		bodies = append(bodies, fmt.Sprintf(`{"id":"down%03d"}`, i))
	}
	publishAll(t, ch, queue, bodies)
	time.Sleep(2 * time.Second) // the consumer tries, holds and requeues
	if n := queueLen(t, ch, queue); n < msgs-prefetch {
		t.Fatalf("%d of %d ready with the store down: more than the prefetch (%d) were acked or dropped", n, msgs, prefetch)
	}
	if n := len(sink.Deliveries()); n != 0 {
		t.Fatalf("%d delivered with the store down", n)
	}
	if n := queueLen(t, ch, dead); n != 0 {
		t.Fatalf("%d dead-lettered: a store outage is not poison", n)
	}
	if st := gw.ConsumerStatus()[0]; !st.Connected {
		t.Fatalf("consumer %+v: the broker is up, only the store is down", st)
	}
	proxy.Start(t)
	if !testenv.WaitFor(30*time.Second, func() bool { return len(sink.ByKey()) == msgs }) {
		t.Fatalf("after the store came back %d of %d delivered; queue %d", len(sink.ByKey()), msgs, queueLen(t, ch, queue))
	}
	time.Sleep(300 * time.Millisecond)
	sink.CheckEachOnce(t)
	if n, d := queueLen(t, ch, queue), queueLen(t, ch, dead); n != 0 || d != 0 {
		t.Fatalf("queue %d, dead letters %d: want both empty", n, d)
	}
	// The outage shows where a webhook's would: refusals counted as
	// unavailable, every message accepted once in the end.
	got, ok := waitSourceTotal(gw, "orders", func(got admin.SourceCounts) bool {
		return got.Accepted == msgs && got.Rejected["unavailable"] > 0
	})
	if !ok {
		t.Fatalf("/v1/stats %+v: want %d accepted and the outage's refusals as unavailable", got, msgs)
	}
	t.Logf("/v1/stats: %d accepted, %d refused while the store was down", got.Accepted, got.Rejected["unavailable"])
}

// A queue can carry a provider's signed events: with verify on, the
// preset checks each message's signature over its exact bytes, from the
// message's header fields, and a forged one is poison (unauthorized),
// dead-lettered once.
func TestRabbitMQSourceVerifiesAPresetsSignature(t *testing.T) {
	base, ch, queue, dead := brokertest.RabbitQueue(t)
	sink := testenv.NewSink(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - name: payments
    preset: stripe
    secrets: [whsec_queue]
    consume: {amqp: {url: "`+base+`", queue: `+queue+`}, verify: true}
    destinations: [app]
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	signed := func(id, secret string) amqp.Publishing {
		body := []byte(`{"id":"` + id + `","object":"event","type":"charge.succeeded"}`)
		req := testenv.SignedRequest(t, "http://x/in/payments", "stripe", secret, body, "")
		h := amqp.Table{}
		for k := range req.Header {
			h[k] = req.Header.Get(k)
		}
		return amqp.Publishing{Headers: h, Body: body, DeliveryMode: amqp.Persistent}
	}
	for _, p := range []amqp.Publishing{signed("evt_good", "whsec_queue"), signed("evt_forged", "whsec_wrong"), signed("evt_good", "whsec_queue")} {
		dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, p)
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return queueLen(t, ch, dead) == 1 && len(sink.Deliveries()) == 1 }) {
		t.Fatalf("dead letters %d, deliveries %d: want the forged one dead-lettered, the good one delivered", queueLen(t, ch, dead), len(sink.Deliveries()))
	}
	time.Sleep(300 * time.Millisecond)
	if got := sink.ByKey(); len(got) != 1 || got["payments:evt_good"] != 1 {
		t.Fatalf("delivered %v, want payments:evt_good once", got)
	}
	d, _, err := ch.Get(dead, true)
	if err != nil || !strings.Contains(string(d.Body), "evt_forged") {
		t.Fatalf("dead-lettered %q %v", d.Body, err)
	}
	c := api.NewClient(gw.APIURL, gw.APIToken, nil)
	if !testenv.WaitFor(20*time.Second, func() bool {
		v, err := c.Stats(context.Background(), admin.StatsQuery{Source: "payments"})
		return err == nil && len(v.Sources) == 1 && v.Sources[0].Total.Requests == 3 &&
			v.Sources[0].Total.Accepted == 1 && v.Sources[0].Total.Duplicate == 1 && v.Sources[0].Total.Rejected["unauthorized"] == 1
	}) {
		v, _ := c.Stats(context.Background(), admin.StatsQuery{Source: "payments"})
		t.Fatalf("/v1/stats %+v: want 1 accepted, 1 duplicate, 1 unauthorized", v)
	}
}
