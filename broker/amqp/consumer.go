package amqp

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/receive"
)

// DefaultPrefetch is basic.qos's prefetch count when the config sets none.
const DefaultPrefetch = 256

// Consumer consumes one source's RabbitMQ queue (see the package doc for
// what it acks, nacks and dead-letters).
type Consumer struct {
	source   string
	url      string
	queue    string
	verify   bool
	prefetch int
	in       *broker.Intake
	log      *slog.Logger
	health   *broker.Health
	now      func() time.Time

	// reconnect paces the attempts to reach the broker; hold paces the
	// redelivery of messages the store could not take.
	reconnectMin, reconnectMax time.Duration
	holdMin, holdMax           time.Duration
	// acceptTimeout bounds one Accept once Run's context has ended (the
	// in-flight messages finish; they are not cut).
	acceptTimeout time.Duration

	mu          sync.Mutex
	failingFrom time.Time // when the store began failing (zero: it is not)
}

// NewConsumer is src's consumer, from its consume.amqp settings
// (checked). It does not dial: Run connects, and reconnects with backoff.
func NewConsumer(src broker.Source, c ConsumeSettings) (*Consumer, error) {
	if c.Queue == "" {
		return nil, errors.New("queue: required")
	}
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return nil, fmt.Errorf("url %s: %w", redact.URL(c.URL), err)
	}
	prefetch := c.Prefetch
	if prefetch == 0 {
		prefetch = DefaultPrefetch
	}
	return &Consumer{
		source: src.Name, url: c.URL, queue: c.Queue, verify: src.Verify, prefetch: prefetch,
		in: broker.NewIntake(src), log: broker.Log(src.Logger), now: time.Now,
		health:       broker.NewHealth(src.Name, "amqp", "queue "+c.Queue, time.Now()),
		reconnectMin: 100 * time.Millisecond, reconnectMax: 30 * time.Second,
		holdMin: 200 * time.Millisecond, holdMax: 5 * time.Second,
		acceptTimeout: 30 * time.Second,
	}, nil
}

// Status is the consumer's connection, as /readyz and /metrics say it.
func (c *Consumer) Status() broker.Status {
	st := c.health.Status()
	st.InFlightBytes = c.in.HeldBytes()
	return st
}

// Run consumes until ctx ends, reconnecting with exponential backoff and
// jitter (up to 30 s) whenever the broker goes away or the queue is
// missing. At ctx's end it stops taking messages, lets the ones in flight
// get their answer (ack, or nack for redelivery), and returns nil.
func (c *Consumer) Run(ctx context.Context) error {
	b := newBackoff(c.reconnectMin, c.reconnectMax)
	for {
		consumed, err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if consumed {
			b.reset() // it was up: the first try again is quick
		}
		c.health.Lost(err, c.now())
		d := b.wait()
		c.log.Warn("not consuming the queue; retrying", "queue", c.queue, "err", err, "retry_in", d.Round(time.Millisecond))
		if !sleep(ctx, d) {
			return nil
		}
	}
}

// session is one connection's worth of consuming: it returns when the
// connection or channel is gone (consumed says whether it got as far as
// consuming) or when ctx ends, once every message it took has its answer.
func (c *Consumer) session(ctx context.Context) (consumed bool, err error) {
	// The connection is read through a gate that reserves each body's bytes
	// in intake's budget as they are read, waiting while there is no room
	// (see gate.go): what the client buffers, unbounded, is bounded so.
	stream := c.in.Stream()
	defer stream.Close() // what was read and never handed over: redelivered
	gctx, openGate := context.WithCancel(ctx)
	conn, err := dial(ctx, c.url, "oncehook source "+c.source, func(nc net.Conn) net.Conn { return newGate(nc, gctx, stream) })
	if err != nil {
		openGate()
		return false, err
	}
	defer conn.Close()
	// Before the close: the broker's close-ok must be read, room or not.
	defer openGate()
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open a channel: %w", err)
	}
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	// Passive: the queue is the user's, with the arguments they chose (its
	// dead-letter exchange among them); oncehook only checks it is there.
	if _, err := ch.QueueDeclarePassive(c.queue, false, false, false, false, nil); err != nil {
		if notFound(err) {
			return false, fmt.Errorf("queue %q does not exist: oncehook does not declare it; declare it (durable, with x-dead-letter-exchange to keep poison messages)", c.queue)
		}
		return false, fmt.Errorf("check queue %q: %w", c.queue, err)
	}
	if err := ch.Qos(c.prefetch, 0, false); err != nil {
		return false, fmt.Errorf("set prefetch %d: %w", c.prefetch, err)
	}
	cancelled := ch.NotifyCancel(make(chan string, 1))
	tag := consumerTag(c.source)
	deliveries, err := ch.Consume(c.queue, tag, false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consume queue %q: %w", c.queue, err)
	}
	c.health.Connected(c.now())
	c.log.Info("consuming", "queue", c.queue, "prefetch", c.prefetch)

	// Every message taken is answered on this channel before it closes
	// (the deferred conn.Close runs after this Wait). The session's end
	// cuts the holds short (a held message's nack is for this channel),
	// never an Accept.
	var inflight sync.WaitGroup
	defer inflight.Wait()
	sctx, endSession := context.WithCancel(ctx)
	defer endSession()
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return true, closeReason(c.queue, connClosed, chClosed, cancelled)
			}
			// Its body's bytes were reserved as the gate read them.
			held := stream.Take(len(d.Body))
			c.health.InFlight(1)
			inflight.Go(func() {
				defer c.health.InFlight(-1)
				c.handle(sctx, held, d)
			})
		case <-ctx.Done():
			// No more deliveries; those the client buffered and never
			// handed out are redelivered when the channel closes.
			ch.Cancel(tag, false)
			return true, nil
		}
	}
}

// closeReason says why the deliveries ended: the connection, the channel,
// or the broker cancelling the consumer (the queue was deleted).
func closeReason(queue string, conn, ch <-chan *amqp.Error, cancelled <-chan string) error {
	select {
	case err := <-conn:
		if err != nil {
			return fmt.Errorf("connection closed: %w", err)
		}
	default:
	}
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("channel closed: %w", err)
		}
	default:
	}
	select {
	case <-cancelled:
		return fmt.Errorf("the broker cancelled the consumer of queue %q (was it deleted?)", queue)
	default:
	}
	return errors.New("connection lost")
}

// handle takes one message to intake and answers the broker by the
// verdict: ack once committed, nack with requeue after a hold when it was
// not taken now, nack without requeue (the dead-letter exchange, or
// dropped) when it is poison.
func (c *Consumer) handle(ctx context.Context, held *receive.Held, d amqp.Delivery) {
	// An Accept already started finishes though Run's context ends: its
	// claim may be committing, and its answer is the ack.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.acceptTimeout)
	out := c.in.Try(actx, held, c.envelope(&d))
	cancel()
	// The body counts in the budget until the broker has its answer: a
	// message held before its requeue is still in memory.
	defer c.in.Release(held)
	switch out.Verdict {
	case broker.Ack:
		c.storeWorks()
		if err := d.Ack(false); err != nil {
			// Committed: it comes back as a duplicate.
			c.log.Debug("an ack was lost; the message will come back as a duplicate", "message_id", d.MessageId, "err", err)
		}
	case broker.Poison:
		c.log.Warn("message rejected: dead-lettered if the queue has a dead-letter exchange, else dropped by the broker",
			"queue", c.queue, "reason", out.Rejection.Reason, "detail", out.Rejection.Detail, "message_id", d.MessageId, "redelivered", d.Redelivered)
		if err := d.Nack(false, false); err != nil {
			c.log.Debug("a reject was lost; the message will come back", "message_id", d.MessageId, "err", err)
		}
	default:
		// Held, then given back for redelivery.
		hold := c.holdFor()
		c.log.Debug("message not taken now; holding it, then requeueing", "message_id", d.MessageId, "err", out.Err, "hold", hold)
		sleep(ctx, hold)
		if err := d.Nack(false, true); err != nil {
			c.log.Debug("a requeue was lost; the broker redelivers the message anyway", "message_id", d.MessageId, "err", err)
		}
	}
}

// envelope is what Accept takes for d.
func (c *Consumer) envelope(d *amqp.Delivery) receive.Envelope {
	h := headerOf(d)
	return receive.Envelope{
		Header: h, Body: d.Body, Enqueued: enqueued(d), Queued: true, Trace: h.Get("Traceparent"),
		SkipVerify: !c.verify, Client: "amqp queue " + c.queue,
	}
}

// holdFor is how long to hold a message the store could not take: as long
// as the store has been failing, between holdMin and holdMax, jittered, so
// a short blip costs little and an outage does not spin the queue.
func (c *Consumer) holdFor() time.Duration {
	c.mu.Lock()
	now := c.now()
	if c.failingFrom.IsZero() {
		c.failingFrom = now
	}
	d := min(max(now.Sub(c.failingFrom), c.holdMin), c.holdMax)
	c.mu.Unlock()
	return d/2 + rand.N(d/2+1)
}

func (c *Consumer) storeWorks() {
	c.mu.Lock()
	c.failingFrom = time.Time{}
	c.mu.Unlock()
}

// consumerTag names this process's consumer on the broker, unique per
// connection.
func consumerTag(source string) string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return "oncehook-" + source + "-" + hex.EncodeToString(b[:])
}
