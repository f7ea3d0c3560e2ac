package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/redact"
)

// DefaultChannels bounds the publishes in flight at once from one
// destination's publisher: each is on a channel of its own, waiting for
// its confirm. A Send past it waits for a channel, within its deadline.
const DefaultChannels = 32

// maxRoutingKey is AMQP's bound on a routing key (a short string).
const maxRoutingKey = 255

// Publisher publishes each delivery as a persistent message with publisher
// confirms (see the package doc).
type Publisher struct {
	url        string
	where      string // the URL without its password, for errors
	exchange   string
	routingKey string // may name {source} and {type}
	log        *slog.Logger

	slots   chan struct{} // one per channel in use
	dialing chan struct{} // held while connecting: one dial at a time

	mu     sync.Mutex
	conn   *amqp.Connection
	idle   []*pubChannel // confirm-mode channels of conn, free
	closed bool
	// blocked is set while the broker blocks conn's publishers
	// (connection.blocked: a memory or disk alarm).
	blocked atomic.Bool
}

// pubChannel is a channel in confirm mode with its returns.
type pubChannel struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
}

// NewPublisher is d's sender, from its publish.amqp settings (checked).
// It does not dial: the first Send connects.
func NewPublisher(d broker.Destination, p PublishSettings) (*Publisher, error) {
	if _, err := amqp.ParseURI(p.URL); err != nil {
		return nil, fmt.Errorf("url %s: %w", redact.URL(p.URL), err)
	}
	if p.Exchange == "" && p.RoutingKey == "" {
		return nil, errors.New("routing_key: required with the default exchange (it names the queue)")
	}
	return &Publisher{
		url: p.URL, where: redact.URL(p.URL), exchange: p.Exchange, routingKey: p.RoutingKey, log: broker.Log(d.Logger),
		slots: make(chan struct{}, DefaultChannels), dialing: make(chan struct{}, 1),
	}, nil
}

// Send publishes m and waits for the broker's confirm, by ctx's deadline.
func (p *Publisher) Send(ctx context.Context, m *deliver.Message) deliver.Result {
	key := p.routingKeyOf(m)
	if len(key) > maxRoutingKey {
		return deliver.Result{Kind: deliver.Permanent, After: -1,
			Error: fmt.Sprintf("the routing key is %d bytes, over AMQP's %d: shorten routing_key or the event's type", len(key), maxRoutingKey)}
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return retry("no publish channel came free before the deadline (%d in flight)", cap(p.slots))
	}
	defer func() { <-p.slots }()
	if p.blocked.Load() {
		return retry("the broker is blocking publishers (a resource alarm: memory or disk is low)")
	}
	pc, err := p.channel(ctx)
	if err != nil {
		return retry("%v", err)
	}
	at := m.ReceivedAt // the event's time, the same on every attempt
	if at.IsZero() {
		at = time.Now()
	}
	msg := amqp.Publishing{
		Headers:      tableOf(m.Header),
		ContentType:  m.ContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    m.IdempotencyKey,
		Timestamp:    at,
		Type:         m.Type,
		AppId:        "oncehook",
		Body:         m.Body,
	}
	// mandatory: a message no queue takes comes back (basic.return) rather
	// than vanish with a confirm.
	confirm, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, key, true, false, msg)
	if err != nil {
		p.discard(pc)
		return retry("publish to %s: %v", p.target(key), err)
	}
	select {
	case <-confirm.Done():
	case <-ctx.Done():
		// The confirm may still come: this channel's next publish would not
		// know whose it is.
		p.discard(pc)
		return retry("no confirm from the broker for the publish to %s before the deadline", p.target(key))
	}
	if !confirm.Acked() {
		if why := closedWhy(pc); why != nil {
			p.discard(pc)
			if notFound(why) && p.exchange != "" {
				return retry("exchange %q does not exist on %s: declare it (%v)", p.exchange, p.where, why)
			}
			return retry("the channel closed before the broker confirmed the publish to %s: %v", p.target(key), why)
		}
		p.release(pc)
		return retry("the broker nacked the publish to %s (it could not take the message)", p.target(key))
	}
	// A basic.return comes before its publish's ack, on the same reader:
	// if there is one, it is already here.
	select {
	case r, ok := <-pc.returns:
		if ok {
			p.release(pc)
			if p.exchange == "" {
				return retry("unroutable: there is no queue %q on %s for the default exchange to route to (returned %d %s); declare it, and the held deliveries go out",
					key, p.where, r.ReplyCode, r.ReplyText)
			}
			return retry("unroutable: no queue is bound to %s (returned %d %s); bind one, and the held deliveries go out",
				p.target(key), r.ReplyCode, r.ReplyText)
		}
	default:
	}
	p.release(pc)
	return deliver.Result{Kind: deliver.Delivered, After: -1}
}

// routingKeyOf is the routing key for m, its {source} and {type} filled.
func (p *Publisher) routingKeyOf(m *deliver.Message) string {
	if !strings.Contains(p.routingKey, "{") {
		return p.routingKey
	}
	return strings.NewReplacer("{source}", m.Source, "{type}", m.Type).Replace(p.routingKey)
}

// target names where a publish went, for the operator.
func (p *Publisher) target(key string) string {
	if p.exchange == "" {
		return fmt.Sprintf("queue %q (the default exchange) on %s", key, p.where)
	}
	return fmt.Sprintf("exchange %q with routing key %q on %s", p.exchange, key, p.where)
}

// channel is a free confirm-mode channel on a live connection: an idle
// one, or a new one, connecting first when there is no connection.
func (p *Publisher) channel(ctx context.Context) (*pubChannel, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("the publisher is closed")
	}
	for len(p.idle) > 0 {
		pc := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if pc.conn == p.conn && !pc.ch.IsClosed() {
			p.mu.Unlock()
			return pc, nil
		}
		go pc.ch.Close()
	}
	conn := p.conn
	p.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		var err error
		if conn, err = p.connect(ctx, conn); err != nil {
			return nil, err
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open a channel on %s: %w", p.where, err)
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("put a channel in confirm mode on %s: %w", p.where, err)
	}
	return &pubChannel{
		conn: conn, ch: ch,
		// One publish at a time on a channel: at most one return is ever
		// waiting, and the client's reader never blocks on this.
		returns: ch.NotifyReturn(make(chan amqp.Return, 4)),
		closed:  ch.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}

// connect replaces the connection dead (nil at first) with a new one, or
// returns the one another Send made meanwhile.
func (p *Publisher) connect(ctx context.Context, dead *amqp.Connection) (*amqp.Connection, error) {
	select {
	case p.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("connect to %s: %w", p.where, ctx.Err())
	}
	defer func() { <-p.dialing }()
	p.mu.Lock()
	if p.conn != dead && p.conn != nil && !p.conn.IsClosed() {
		c := p.conn
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	conn, err := dial(ctx, p.url, "oncehook destination", nil)
	if err != nil {
		return nil, err
	}
	notes := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	go func() {
		for b := range notes { // closed with the connection
			p.mu.Lock()
			if p.conn == conn {
				p.blocked.Store(b.Active)
			}
			p.mu.Unlock()
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		conn.Close()
		return nil, errors.New("the publisher is closed")
	}
	if p.conn != nil {
		p.log.Info("reconnected to the broker", "broker", p.where)
		go p.conn.Close()
	}
	for _, pc := range p.idle {
		go pc.ch.Close()
	}
	p.conn, p.idle = conn, nil
	p.blocked.Store(false)
	return conn, nil
}

// release gives a channel back for the next publish, its returns read.
func (p *Publisher) release(pc *pubChannel) {
drain:
	for {
		select {
		case _, ok := <-pc.returns:
			if !ok {
				break drain
			}
		default:
			break drain
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || pc.conn != p.conn || pc.ch.IsClosed() {
		go pc.ch.Close()
		return
	}
	p.idle = append(p.idle, pc)
}

// discard drops a channel whose state is not known (a publish that failed
// or whose confirm did not come in time). Closing it waits for the
// broker, so it is done aside: Send returns by its deadline.
func (p *Publisher) discard(pc *pubChannel) { go pc.ch.Close() }

// closedWhy is why pc's channel closed (nil: it is open).
func closedWhy(pc *pubChannel) *amqp.Error {
	select {
	case err, ok := <-pc.closed:
		if ok && err != nil {
			return err
		}
		if !ok {
			return &amqp.Error{Code: amqp.ChannelError, Reason: "channel closed"}
		}
	default:
	}
	if pc.ch.IsClosed() {
		return &amqp.Error{Code: amqp.ChannelError, Reason: "channel closed"}
	}
	return nil
}

// Close closes the connection: a Send still on it fails, and is retried.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.idle = nil
	if p.conn == nil {
		return nil
	}
	err := p.conn.CloseDeadline(time.Now().Add(2 * time.Second))
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

func retry(format string, args ...any) deliver.Result {
	return deliver.Result{Kind: deliver.Retry, After: -1, Error: fmt.Sprintf(format, args...)}
}
