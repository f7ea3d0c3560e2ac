package amqp

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/receive"
)

// rabbit is the test's own connection to the real broker, to declare
// queues, publish and look.
type rabbit struct {
	t    *testing.T
	url  string
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newRabbit(t *testing.T) *rabbit {
	t.Helper()
	base := testenv.RabbitMQ(t)
	conn, err := amqp.Dial(base)
	if err != nil {
		t.Fatalf("dial %s: %v", base, err)
	}
	t.Cleanup(func() { conn.Close() })
	r := &rabbit{t: t, url: base, conn: conn}
	r.ch = r.channel()
	return r
}

func (r *rabbit) channel() *amqp.Channel {
	r.t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		r.t.Fatal(err)
	}
	return ch
}

// proxy is a proxy in front of the broker, to cut its connections.
func (r *rabbit) proxy() *testenv.Proxy {
	r.t.Helper()
	u, err := url.Parse(r.url)
	if err != nil {
		r.t.Fatal(err)
	}
	return testenv.NewProxy(r.t, u.Host)
}

func unique(prefix string) string {
	var b [4]byte
	crand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// queue declares a fresh queue (with a dead-letter exchange and queue
// when dlq), deleted when the test ends.
func (r *rabbit) queue(dlq bool) (name, dead string) {
	r.t.Helper()
	name = unique("oncehook-test")
	var args amqp.Table
	if dlq {
		dead = name + ".dead"
		if err := r.ch.ExchangeDeclare(dead, "fanout", false, false, false, false, nil); err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.ch.QueueDeclare(dead, false, false, false, false, nil); err != nil {
			r.t.Fatal(err)
		}
		if err := r.ch.QueueBind(dead, "", dead, false, nil); err != nil {
			r.t.Fatal(err)
		}
		args = amqp.Table{"x-dead-letter-exchange": dead}
	}
	if _, err := r.ch.QueueDeclare(name, false, false, false, false, args); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		ch, err := r.conn.Channel()
		if err != nil {
			return
		}
		ch.QueueDelete(name, false, false, false)
		if dlq {
			ch.QueueDelete(dead, false, false, false)
			ch.ExchangeDelete(dead, false, false)
		}
		ch.Close()
	})
	return name, dead
}

// publish puts body on queue (the default exchange) and waits for the
// broker's confirm.
func (r *rabbit) publish(queue, body string, p amqp.Publishing) {
	r.t.Helper()
	p.Body = []byte(body)
	dc, err := r.ch.PublishWithDeferredConfirm("", queue, true, false, p)
	if err != nil {
		r.t.Fatal(err)
	}
	if !dc.Wait() {
		r.t.Fatalf("publish %q: nacked", body)
	}
}

// ready is how many messages queue holds that are neither delivered nor
// unacked.
func (r *rabbit) ready(queue string) int {
	r.t.Helper()
	q, err := r.ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return q.Messages
}

// drain takes every message queue holds now.
func (r *rabbit) drain(queue string) []amqp.Delivery {
	r.t.Helper()
	var out []amqp.Delivery
	for {
		d, ok, err := r.ch.Get(queue, true)
		if err != nil {
			r.t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// accepter stands for intake's Accept: it records each call and answers
// what answer says for the message's body (nil: accepted).
type accepter struct {
	answer func(body string, n int) error
	mu     sync.Mutex
	calls  map[string]int
	envs   []receive.Envelope
}

func newAccepter(answer func(body string, n int) error) *accepter {
	return &accepter{answer: answer, calls: map[string]int{}}
}

// Hold, Share and Stream are intake's budget, which a test's accepter leaves
// unbounded.
func (a *accepter) Hold(context.Context, string, int) (*receive.Held, error) {
	return &receive.Held{}, nil
}
func (a *accepter) Share(string) int64          { return 0 }
func (a *accepter) Stream(string) *receive.Held { return &receive.Held{} }

func (a *accepter) Accept(ctx context.Context, source string, env receive.Envelope) (receive.Response, error) {
	a.mu.Lock()
	a.calls[string(env.Body)]++
	n := a.calls[string(env.Body)]
	a.envs = append(a.envs, env)
	a.mu.Unlock()
	if a.answer != nil {
		if err := a.answer(string(env.Body), n); err != nil {
			return receive.Response{}, err
		}
	}
	return receive.Response{Status: receive.StatusAccepted}, nil
}

func (a *accepter) count(body string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[body]
}

func (a *accepter) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		n += c
	}
	return n
}

// consume runs a consumer of queue at url until the test ends (or stop is
// called), with holds short enough for a test.
func consume(t *testing.T, url, queue string, prefetch int, a *accepter) (c *Consumer, stop func()) {
	t.Helper()
	c, err := NewConsumer(broker.Source{Name: "orders", Accept: a}, ConsumeSettings{URL: url, Queue: queue, Prefetch: prefetch})
	if err != nil {
		t.Fatal(err)
	}
	c.reconnectMin, c.reconnectMax = 20*time.Millisecond, 200*time.Millisecond
	c.holdMin, c.holdMax = 10*time.Millisecond, 50*time.Millisecond
	stop = testenv.Run(t, c, 20*time.Second)
	return c, stop
}

func connected(c *Consumer) func() bool { return func() bool { return c.Status().Connected } }
