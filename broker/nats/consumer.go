package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/receive"
)

// DefaultMaxAckPending bounds the messages a source holds unacked when its
// config names no max_ack_pending.
const DefaultMaxAckPending = 256

// The consumer's timings. The ack wait is how long JetStream waits for an
// answer before it delivers a message again (DefaultAckWait unless the
// config says); Accept is given five sixths of it, so that a message is
// acked or nakked while it is still ours (a slower answer is not lost,
// only seen twice: the second is a duplicate).
// reconnectDelay is nats.go's wait before its n-th reconnect.
func reconnectDelay(n int) time.Duration { return broker.Backoff(n, 500*time.Millisecond, maxBackoff) }

const (
	DefaultAckWait = 30 * time.Second
	dialTimeout    = 5 * time.Second
	maxBackoff     = 30 * time.Second
	maxNakDelay    = 30 * time.Second
)

// Consumer consumes one source's JetStream stream through a durable pull
// consumer, handing each message to intake (broker.Intake) and acking it
// only after its claim has committed. It is a broker.Consumer.
type Consumer struct {
	source  string
	url     string
	stream  string
	filter  string
	durable string
	pending int
	ackWait time.Duration
	verify  bool
	in      *broker.Intake
	log     *slog.Logger
	health  *broker.Health
	now     func() time.Time
}

// NewConsumer builds src's consumer from its consume.nats settings
// (checked). It does not dial: Run does, and keeps trying while the
// broker is away.
func NewConsumer(src broker.Source, s ConsumeSettings) *Consumer {
	c := &Consumer{
		source:  src.Name,
		url:     s.URL,
		stream:  s.Stream,
		filter:  s.Subject,
		durable: s.Durable,
		pending: s.MaxAckPending,
		ackWait: time.Duration(s.AckWait),
		verify:  src.Verify,
		in:      broker.NewIntake(src),
		log:     broker.Log(src.Logger),
		now:     time.Now,
	}
	if c.durable == "" {
		c.durable = DefaultDurable(src.Name)
	}
	if c.pending == 0 {
		c.pending = DefaultMaxAckPending
	}
	if c.ackWait == 0 {
		c.ackWait = DefaultAckWait
	}
	where := "stream " + c.stream
	if c.filter != "" {
		where += " subject " + c.filter
	}
	where += " durable " + c.durable
	c.health = broker.NewHealth(src.Name, "nats", where, c.now())
	return c
}

// DefaultDurable is the durable consumer's name for a source whose config
// names none: oncehook-<source>, with the dots a source's name may have
// (a consumer's name may not) made '_'.
func DefaultDurable(source string) string {
	return "oncehook-" + strings.ReplaceAll(source, ".", "_")
}

// Status is the consumer's connection as an operator reads it.
func (c *Consumer) Status() broker.Status {
	st := c.health.Status()
	st.InFlightBytes = c.in.HeldBytes()
	return st
}

// Run consumes until ctx ends. A broker that is down, or a stream that
// does not exist yet, is said in Status and retried with exponential
// backoff and jitter (up to 30 s); once connected, nats.go reconnects by
// itself, on the same schedule. Run returns nil at ctx's end, once every
// message handed to Accept has been acked or nakked.
func (c *Consumer) Run(ctx context.Context) error {
	for failures := 0; ; {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			failures = 0
			continue
		}
		c.health.Lost(err, c.now())
		failures++
		wait := reconnectDelay(failures)
		c.log.Warn("NATS consumer not consuming; retrying", "err", err, "retry_in", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// errStreamMissing says the configured stream is not on the server: the
// consumer waits for it rather than creating it (its subjects, retention
// and duplicate window are the operator's to choose).
var errStreamMissing = errors.New("stream not found")

// session connects, creates or updates the durable consumer, and consumes
// until ctx ends or the consumer goes away (deleted, its stream deleted,
// the connection closed). It returns only once its in-flight messages
// have their answers.
func (c *Consumer) session(ctx context.Context) error {
	var closing atomic.Bool // our own Close is no loss to report
	nc, err := nats.Connect(c.url,
		nats.Name("oncehook source "+c.source),
		nats.Timeout(dialTimeout),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if closing.Load() {
				return
			}
			if err == nil {
				err = errors.New("disconnected")
			}
			c.health.Lost(fmt.Errorf("connection lost: %w", redact.Error(err)), c.now())
			c.log.Warn("NATS connection lost; reconnecting", "err", redact.Error(err))
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.health.Connected(c.now())
			c.log.Info("NATS connection back")
		}),
	)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact.URL(c.url), redact.Error(err))
	}
	defer func() { closing.Store(true); nc.Close() }()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, dialTimeout)
	cons, err := js.CreateOrUpdateConsumer(cctx, c.stream, jetstream.ConsumerConfig{
		Durable:       c.durable,
		Description:   "oncehook source " + c.source,
		FilterSubject: c.filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.ackWait,
		MaxAckPending: c.pending,
		// Never give a message up: one the store cannot take now is
		// nakked as often as the outage lasts; poison is terminated.
		MaxDeliver: -1,
	})
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: %s has no stream %s (create it; oncehook only consumes it)", errStreamMissing, redact.URL(c.url), c.stream)
	}
	if err != nil {
		return fmt.Errorf("create or update the durable consumer %s on stream %s: %w", c.durable, c.stream, err)
	}
	c.health.Connected(c.now())
	c.log.Info("consuming NATS stream", "stream", c.stream, "subject", c.filter, "durable", c.durable, "max_ack_pending", c.pending)

	// Accept runs on a context that shutdown does not cut: a claim on
	// its way to the commit finishes and is acked, rather than left for
	// a redelivery.
	actx := context.WithoutCancel(ctx)
	slots := make(chan struct{}, c.pending)
	var inflight sync.WaitGroup
	// stopped is set, under mu, before the in-flight Accepts are waited
	// for: a message handed out after it is nakked at once (for the next
	// consumer, without the ack wait), and no Accept starts while Wait
	// runs.
	var mu sync.Mutex
	stopped := false
	gone := make(chan error, 1)
	end := func(err error) {
		select {
		case gone <- err:
		default:
		}
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		// Room in intake's byte budget first: while there is none, this
		// callback waits, the client's buffer fills and it pulls no more.
		held, err := c.in.Reserve(ctx, len(msg.Data()))
		if err != nil {
			msg.Nak() // stopping
			return
		}
		slots <- struct{}{}
		mu.Lock()
		if stopped {
			mu.Unlock()
			<-slots
			held.Release()
			msg.Nak()
			return
		}
		c.health.InFlight(1)
		inflight.Add(1)
		mu.Unlock()
		go func() {
			defer func() { <-slots; c.health.InFlight(-1); inflight.Done() }()
			c.take(actx, held, msg)
		}()
	},
		// What the client buffers is bounded by bytes (the source's share
		// of max_inflight_bytes, but never below the server's largest
		// message, which would stall the pull); the server's
		// max_ack_pending bounds it by number.
		jetstream.PullMaxBytes(int(max(c.in.Room(), nc.MaxPayload()))),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			switch {
			case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound),
				errors.Is(err, jetstream.ErrConnectionClosed), errors.Is(err, jetstream.ErrBadRequest):
				end(err)
			case errors.Is(err, jetstream.ErrNoHeartbeat) && nc.IsConnected():
				// Connected, yet no heartbeat: the consumer (or its
				// stream) may be gone, as on a server that came back
				// without its store. Ask, without holding the callback.
				go func() {
					ictx, cancel := context.WithTimeout(ctx, dialTimeout)
					defer cancel()
					if _, err := cons.Info(ictx); errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
						end(fmt.Errorf("the durable consumer %s is gone: %w", c.durable, err))
					}
				}()
			default:
				c.log.Debug("NATS consume", "err", err)
			}
		}),
	)
	if err != nil {
		return fmt.Errorf("consume %s: %w", c.durable, err)
	}
	select {
	case <-ctx.Done():
		err = nil
	case err = <-gone:
	}
	// Stop pulling; what is buffered is handed back (nakked). Then let
	// every Accept in flight answer, and flush the acks before the
	// connection closes.
	mu.Lock()
	stopped = true
	mu.Unlock()
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(dialTimeout):
		cc.Stop()
	}
	inflight.Wait()
	nc.FlushTimeout(dialTimeout)
	return err
}

// take hands one message to intake and answers the broker by the verdict:
// ack once committed, term as poison, nak with a delay otherwise.
func (c *Consumer) take(ctx context.Context, held *receive.Held, msg jetstream.Msg) {
	meta, _ := msg.Metadata()
	ctx, cancel := context.WithTimeout(ctx, c.ackWait*5/6)
	defer cancel()
	out := c.in.Take(ctx, held, c.envelope(msg, meta))
	switch out.Verdict {
	case broker.Ack:
		// A lost ack is a redelivery, and that is a duplicate.
		if err := msg.Ack(); err != nil {
			c.log.Debug("ack", "err", err)
		}
	case broker.Poison:
		// Term, not TermWithReason: a server before 2.10 takes "+TERM
		// <reason>" for no answer at all, and the message would come back
		// after the ack wait, holding its slot meanwhile. The reason is
		// in intake's count and in this log line.
		if err := msg.Term(); err != nil {
			c.log.Debug("term", "err", err)
		}
		attrs := []any{"reason", out.Rejection.Reason, "detail", out.Rejection.Detail, "stream", c.stream}
		if meta != nil {
			attrs = append(attrs, "stream_seq", meta.Sequence.Stream)
		}
		c.log.Warn("poison message terminated: JetStream will not deliver it again", attrs...)
	default:
		delivered := 1
		if meta != nil {
			delivered = int(meta.NumDelivered)
		}
		delay := nakDelay(delivered)
		if err := msg.NakWithDelay(delay); err != nil {
			c.log.Debug("nak", "err", err)
		}
		c.log.Debug("message left for redelivery", "err", out.Err, "redeliver_in", delay)
	}
}

// envelope is what Accept needs of a message: its headers under canonical
// keys, its bytes as they are, where it came from, and when the stream
// stored it (its metadata's timestamp, the server's clock): a signature's
// age is measured against that, not against when it is consumed.
func (c *Consumer) envelope(msg jetstream.Msg, meta *jetstream.MsgMetadata) receive.Envelope {
	h := make(http.Header, len(msg.Headers())+1)
	for k, v := range msg.Headers() {
		k = textproto.CanonicalMIMEHeaderKey(k)
		h[k] = append(h[k], v...)
	}
	body := msg.Data()
	broker.DefaultContentType(h, body)
	env := receive.Envelope{
		Header:     h,
		Body:       body,
		ReceivedAt: c.now(),
		Queued:     true,
		Trace:      h.Get("Traceparent"),
		SkipVerify: !c.verify,
		Client:     "nats:" + c.stream,
	}
	if meta != nil {
		env.Enqueued = meta.Timestamp
	}
	return env
}

// nakDelay is how long JetStream waits before delivering again a message
// the store could not take, by how often it was delivered: 1 s doubling,
// up to 30 s.
func nakDelay(delivered int) time.Duration {
	if delivered < 1 {
		delivered = 1
	}
	if delivered > 6 {
		return maxNakDelay
	}
	return min(maxNakDelay, time.Second<<(delivered-1))
}
