package amqp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/receive"
)

var unavailable = &receive.Rejection{Status: 503, Reason: receive.ReasonUnavailable, Detail: "events could not be stored; retry later"}

// Invariant 19: a message is acked only once Accept answered (its claim
// committed). While Accept waits, the broker holds it unacked: a cut
// connection puts it back, and it comes again.
func TestConsumerAcksOnlyAfterAcceptAnswered(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	proxy := r.proxy()
	gate := make(chan struct{})
	a := newAccepter(func(body string, n int) error {
		if n == 1 {
			<-gate // the first Accept waits for its "commit"
		}
		return nil
	})
	c, stop := consume(t, testenv.Via(t, r.url, proxy.Addr), q, 4, a)
	r.publish(q, `{"id":"a"}`, amqp.Publishing{})
	if !testenv.WaitFor(5*time.Second, func() bool { return a.count(`{"id":"a"}`) == 1 }) {
		t.Fatalf("never handed to Accept; status %+v", c.Status())
	}
	if n := r.ready(q); n != 0 {
		t.Fatalf("%d ready while Accept waits, want 0 (delivered, unacked)", n)
	}
	proxy.Stop() // the connection is cut before the commit answered
	if !testenv.WaitFor(5*time.Second, func() bool { return r.ready(q) == 1 }) {
		t.Fatal("the message did not go back to the queue when the connection was cut: it was acked before Accept answered")
	}
	close(gate) // its ack is lost now; it is a duplicate when it comes back
	// The broker is gone: the status says so (what /readyz and /metrics
	// show), and the consumer retries with backoff.
	if !testenv.WaitFor(5*time.Second, func() bool { st := c.Status(); return !st.Connected && st.Error != "" }) {
		t.Fatalf("status %+v with the broker cut, want not connected and why", c.Status())
	}
	if st := c.Status(); strings.Contains(st.Error, "guest:guest") {
		t.Fatalf("the status quotes the password: %s", st.Error)
	}
	proxy.Start(t)
	if !testenv.WaitFor(10*time.Second, func() bool { return a.count(`{"id":"a"}`) == 2 }) {
		t.Fatalf("not redelivered after the reconnect; status %+v", c.Status())
	}
	if st := c.Status(); !st.Connected || st.Error != "" {
		t.Fatalf("status %+v after the reconnect", st)
	}
	stop()
	if n := r.ready(q); n != 0 {
		t.Fatalf("%d left after the redelivery was accepted, want 0 (acked)", n)
	}
}

// A Temporary rejection (the store could not commit) is held, then
// requeued, and taken once the store works: nothing acked, nothing lost.
func TestConsumerRequeuesWhatTheStoreCouldNotTake(t *testing.T) {
	r := newRabbit(t)
	q, dead := r.queue(true)
	a := newAccepter(func(body string, n int) error {
		if n <= 3 {
			return unavailable
		}
		return nil
	})
	_, stop := consume(t, r.url, q, 8, a)
	const msgs = 20
	for i := range msgs {
		r.publish(q, fmt.Sprintf(`{"id":"m%d"}`, i), amqp.Publishing{})
	}
	if !testenv.WaitFor(15*time.Second, func() bool { return a.total() == 4*msgs }) {
		t.Fatalf("%d Accepts, want %d (three refusals and one success each)", a.total(), 4*msgs)
	}
	stop()
	for i := range msgs {
		if n := a.count(fmt.Sprintf(`{"id":"m%d"}`, i)); n != 4 {
			t.Errorf("m%d taken to Accept %d times, want 4", i, n)
		}
	}
	if n := r.ready(q); n != 0 {
		t.Errorf("%d left in the queue", n)
	}
	if got := r.drain(dead); len(got) != 0 {
		t.Errorf("%d dead-lettered: a store outage is not poison", len(got))
	}
}

// Invariant 19: one poison message never stalls its queue; each is
// rejected once, to the queue's dead-letter exchange, and the rest flow.
func TestPoisonIsRejectedOnceAndNeverStallsTheQueue(t *testing.T) {
	r := newRabbit(t)
	q, dead := r.queue(true)
	a := newAccepter(func(body string, n int) error {
		if strings.HasPrefix(body, "poison") {
			return &receive.Rejection{Status: 422, Reason: receive.ReasonMissingKey, Detail: "no event key found in the request"}
		}
		return nil
	})
	_, stop := consume(t, r.url, q, 4, a)
	const good, poison = 200, 20
	for i := range good {
		if i%10 == 0 {
			r.publish(q, fmt.Sprintf("poison %d", i/10), amqp.Publishing{})
		}
		r.publish(q, fmt.Sprintf(`{"id":"g%d"}`, i), amqp.Publishing{})
	}
	if !testenv.WaitFor(15*time.Second, func() bool { return a.total() == good+poison }) {
		t.Fatalf("%d Accepts, want %d", a.total(), good+poison)
	}
	stop()
	for i := range poison {
		if n := a.count(fmt.Sprintf("poison %d", i)); n != 1 {
			t.Errorf("poison %d taken %d times, want once", i, n)
		}
	}
	for i := range good {
		if n := a.count(fmt.Sprintf(`{"id":"g%d"}`, i)); n != 1 {
			t.Errorf("g%d taken %d times, want once", i, n)
		}
	}
	if n := r.ready(q); n != 0 {
		t.Errorf("%d left in the queue", n)
	}
	got := r.drain(dead)
	if len(got) != poison {
		t.Fatalf("%d dead-lettered, want %d", len(got), poison)
	}
	for _, d := range got {
		if !strings.HasPrefix(string(d.Body), "poison") {
			t.Errorf("dead-lettered %q", d.Body)
		}
	}
}

// oncehook never declares the user's queue: a missing one is a status
// error, retried, and consuming starts once someone declares it.
func TestConsumerSaysTheQueueIsMissingThenConsumes(t *testing.T) {
	r := newRabbit(t)
	q := unique("oncehook-test-missing")
	a := newAccepter(nil)
	c, _ := consume(t, r.url, q, 0, a)
	if !testenv.WaitFor(5*time.Second, func() bool { return strings.Contains(c.Status().Error, "does not exist") }) {
		t.Fatalf("status %+v, want the queue named missing", c.Status())
	}
	if st := c.Status(); st.Connected || st.Kind != "amqp" || st.Where != "queue "+q || !strings.Contains(st.Error, q) {
		t.Fatalf("status %+v", st)
	}
	if _, err := r.ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.ch.QueueDelete(q, false, false, false) })
	r.publish(q, `{"id":"late"}`, amqp.Publishing{})
	if !testenv.WaitFor(10*time.Second, func() bool { return a.count(`{"id":"late"}`) == 1 }) {
		t.Fatalf("not consumed once the queue exists; status %+v", c.Status())
	}
	if st := c.Status(); !st.Connected || st.Error != "" {
		t.Fatalf("status %+v, want connected", st)
	}
}

// A message's header fields and properties are the envelope's headers;
// a well-formed traceparent is its trace; a JSON body with no content
// type is taken as JSON; verification is skipped unless verify is on.
func TestEnvelopeCarriesHeadersAndProperties(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	a := newAccepter(nil)
	_, stop := consume(t, r.url, q, 0, a)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r.publish(q, `  {"id":"h"}`, amqp.Publishing{
		MessageId: "orders:h", CorrelationId: "c-1", Type: "order.created",
		Headers: amqp.Table{"x-tenant": "acme", "traceparent": tp, "attempts": int32(3), "flags": []any{"a", "b"}, "nested": amqp.Table{"x": 1}},
	})
	r.publish(q, `not json`, amqp.Publishing{Headers: amqp.Table{"traceparent": "garbage"}})
	if !testenv.WaitFor(5*time.Second, func() bool { return a.total() == 2 }) {
		t.Fatal("not consumed")
	}
	stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	// Accepts run concurrently: find each by its body.
	first, second := a.envs[0], a.envs[1]
	if string(first.Body) == `not json` {
		first, second = second, first
	}
	if string(first.Body) != `  {"id":"h"}` {
		t.Errorf("body %q, want the bytes as published", first.Body)
	}
	for k, want := range map[string]string{
		"Message-Id": "orders:h", "Correlation-Id": "c-1", "Amqp-Type": "order.created", "X-Tenant": "acme",
		"Attempts": "3", "Content-Type": "application/json", "Amqp-Routing-Key": q,
	} {
		if got := first.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if got := first.Header.Values("Flags"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("Flags %q", got)
	}
	if _, ok := first.Header["Nested"]; ok {
		t.Error("a nested table became a header")
	}
	if first.Trace != tp {
		t.Errorf("trace %q, want %q", first.Trace, tp)
	}
	if !first.SkipVerify || first.Client != "amqp queue "+q {
		t.Errorf("SkipVerify %v, Client %q", first.SkipVerify, first.Client)
	}
	// The trace parent is handed over as carried: intake keeps only a
	// well-formed one (receive's TestAValueADeliveryCannotCarryIsLeftOutNotRefused).
	if second.Trace != "garbage" || second.Header.Get("Content-Type") != "" {
		t.Errorf("second: trace %q content type %q, want the header as carried and no content type", second.Trace, second.Header.Get("Content-Type"))
	}
}

// Run's end lets the Accepts in flight answer, and acks them: a shutdown
// neither cuts a commit nor leaves committed messages to come back.
func TestShutdownLetsInFlightAcceptsAnswer(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	gate := make(chan struct{})
	a := newAccepter(func(string, int) error { <-gate; return nil })
	c, stop := consume(t, r.url, q, 0, a)
	for i := range 3 {
		r.publish(q, fmt.Sprintf(`{"id":"s%d"}`, i), amqp.Publishing{})
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return a.total() == 3 }) {
		t.Fatal("not handed to Accept")
	}
	if n := c.Status().InFlight; n != 3 {
		t.Errorf("in flight %d, want 3", n)
	}
	testenv.ShutdownWaits(t, stop, func() { close(gate) }, 200*time.Millisecond, 20*time.Second)
	if n := r.ready(q); n != 0 {
		t.Fatalf("%d back in the queue after a clean shutdown, want 0 (acked)", n)
	}
}

// A queue deleted under the consumer (the broker cancels it) is said in
// the status, and consuming resumes once it is declared again.
func TestConsumerSaysWhenItsQueueIsDeleted(t *testing.T) {
	r := newRabbit(t)
	q, _ := r.queue(false)
	a := newAccepter(nil)
	c, _ := consume(t, r.url, q, 0, a)
	if !testenv.WaitFor(5*time.Second, connected(c)) {
		t.Fatalf("status %+v", c.Status())
	}
	if _, err := r.ch.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { st := c.Status(); return !st.Connected && strings.Contains(st.Error, "does not exist") }) {
		t.Fatalf("status %+v after the queue was deleted", c.Status())
	}
	if _, err := r.ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	r.publish(q, `{"id":"again"}`, amqp.Publishing{})
	if !testenv.WaitFor(10*time.Second, func() bool { return a.count(`{"id":"again"}`) == 1 }) {
		t.Fatalf("not consumed after the queue came back; status %+v", c.Status())
	}
}
