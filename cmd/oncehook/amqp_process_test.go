package main_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/internal/testenv"
)

// Invariant 19 through a crash: a gateway consuming a RabbitMQ queue is
// killed (-9) mid-stream and restarted. 10,000 messages, 30% of them
// re-published copies: every distinct key is delivered exactly once and
// nothing is lost. What the broker redelivers after the kill is what was
// not yet acked: the uncommitted messages, taken now, and the committed
// ones whose ack the kill cut, which are duplicates. A message acked
// before its commit would be missing here.
func TestKillNineWhileConsumingRabbitMQLosesNothing(t *testing.T) {
	t.Parallel()
	base := testenv.RabbitMQ(t)
	conn, err := amqp.Dial(base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	queue := fmt.Sprintf("oncehook-kill-%08x", rand.Uint32())
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(queue, false, false, false)
			c.Close()
		}
	})
	ready := func() int {
		q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}

	const distinct, copies = 7000, 3000
	bodies := make([]string, 0, distinct+copies)
	for i := range distinct {
		bodies = append(bodies, fmt.Sprintf(`{"id":"k%05d"}`, i))
	}
	for range copies {
		bodies = append(bodies, bodies[rand.IntN(distinct)])
	}
	rand.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	confirms := make([]*amqp.DeferredConfirmation, len(bodies))
	for i, b := range bodies {
		if confirms[i], err = ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, dc := range confirms {
		if !dc.Wait() {
			t.Fatalf("publish %d nacked", i)
		}
	}

	dir := t.TempDir()
	// The destination holds every attempt until after the kill: what is
	// tested is the consumer's ack, not a delivery's outcome cut by the
	// kill (that one is repeated, at least once, by design).
	sink := newOKSink(t)
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:0
store: sqlite://./events.db
delivery:
  lease: 4s
sources:
  - name: orders
    consume: {amqp: {url: %q, queue: %s, prefetch: 128}}
    key: ["json:id"]
    destinations: [app]
destinations:
  - name: app
    url: %s
    timeout: 3s
    retry: {max_attempts: 20, base_delay: 50ms, max_delay: 200ms}
`, base, queue, sink.URL)), 0o600); err != nil {
		t.Fatal(err)
	}

	p := startProcess(t, dir, "--config", cfg)
	total := len(bodies)
	// Mid-stream: a third of the queue taken (acked), the rest not yet.
	if !testenv.WaitFor(30*time.Second, func() bool { return ready() < total*2/3 }) {
		t.Fatalf("the gateway did not consume: %d ready of %d; stderr:\n%s", ready(), total, p.stderr)
	}
	p.kill()
	time.Sleep(200 * time.Millisecond) // the broker notices the closed connection
	left := ready()
	if left == 0 {
		t.Fatal("everything was consumed before the kill: not mid-stream")
	}
	t.Logf("killed with %d of %d messages left in the queue (including those unacked at the kill)", left, total)

	if len(sink.delivered()) != 0 {
		t.Fatal("something was delivered before the destination opened")
	}
	sink.open.Store(true)
	p2 := startProcess(t, dir, "--config", cfg)
	defer p2.kill()
	if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.delivered()) == distinct }) {
		t.Fatalf("after the restart %d of %d keys delivered, %d messages still queued; stderr:\n%s",
			len(sink.delivered()), distinct, ready(), p2.stderr)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return ready() == 0 }) {
		t.Fatalf("%d messages still in the queue", ready())
	}
	time.Sleep(500 * time.Millisecond) // a second delivery, if any, would land now
	for key, n := range sink.delivered() {
		if n != 1 {
			t.Errorf("%s delivered %d times", key, n)
		}
	}
}
