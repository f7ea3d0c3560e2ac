package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/lease"
	"github.com/oncehook/oncehook/internal/redact"
)

// Publisher publishes each delivery to a JetStream stream and counts it
// delivered only on the stream's ack. It is a deliver.Sender.
type Publisher struct {
	url     string
	subject subject
	log     *slog.Logger

	// lease is the delivery lease the stream's duplicate window should
	// cover: a re-publish after a crash that lost the outcome comes at
	// least a lease after the first.
	lease time.Duration

	mu      sync.Mutex
	nc      *nats.Conn
	js      jetstream.JetStream
	closed  bool
	checked map[string]bool // streams whose duplicate window was read
}

// NewPublisher builds d's sender from its publish.nats settings
// (checked). It does not dial: the first Send does, and a broker that is
// down is a failed attempt, retried (and held behind the breaker), never
// a drop.
func NewPublisher(d broker.Destination, s PublishSettings) *Publisher {
	l := d.Lease
	if l <= 0 {
		l = lease.Default(0)
	}
	return &Publisher{
		url:     s.URL,
		subject: newSubject(s.Subject),
		lease:   l,
		log:     broker.Log(d.Logger),
		checked: map[string]bool{},
	}
}

// Close closes the connection: a publish still on it fails, and is
// retried as any failed attempt.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.nc != nil {
		p.nc.Close()
	}
	return nil
}

var errClosed = errors.New("the publisher is closed")

// conn is the connection, dialled on first use and again once closed.
// Once dialled, nats.go reconnects by itself; while it does, a publish
// fails at once (no reconnect buffer: a publish held in it would reach
// the stream after its attempt was counted failed).
func (p *Publisher) conn(ctx context.Context) (jetstream.JetStream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	if p.nc != nil && !p.nc.IsClosed() {
		return p.js, nil
	}
	timeout := dialTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, ctx.Err()
	}
	nc, err := nats.Connect(p.url,
		nats.Name("oncehook publisher"),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				p.log.Warn("NATS connection lost; reconnecting", "err", redact.Error(err))
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { p.log.Info("NATS connection back") }),
	)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	p.nc, p.js = nc, js
	return js, nil
}

// ReservedHeader says why a header is JetStream's rather than a message's,
// "" when it is not: every Nats-* header. JetStream reads them as controls
// of the publish (Nats-Expected-Stream, Nats-Expected-Last-Sequence,
// Nats-Rollup, Nats-TTL, ...: one a script set refused every publish, or
// purged the subject), and Nats-Msg-Id is oncehook's dedup id. The prefix
// is reserved whole, since each JetStream release adds to it.
func ReservedHeader(canonical string) string {
	if strings.HasPrefix(canonical, "Nats-") {
		return "JetStream's: it reads Nats-* headers as controls of the publish (Nats-Msg-Id is oncehook's dedup id)"
	}
	return ""
}

// Send publishes m to its subject with Nats-Msg-Id: <source>:<key> and
// waits for the stream's ack. Delivered: the stream stored it, or already
// had it (a duplicate inside its window, as a re-publish after a lost
// outcome is). Retry: the broker is unreachable, no ack came in time,
// no stream captures the subject (JetStream says the same while a
// stream's leader changes, so it is not taken for a config error), or a
// stream's limits refused it. Permanent: the message can never fit (over
// the server's max_payload or the stream's max message size).
func (p *Publisher) Send(ctx context.Context, m *deliver.Message) deliver.Result {
	js, err := p.conn(ctx)
	if err != nil {
		return retry("NATS unreachable at %s: %v", redact.URL(p.url), redact.Error(err))
	}
	subj := p.subject.render(m.Source, m.Type)
	msg := &nats.Msg{Subject: subj, Data: m.Body, Header: make(nats.Header, len(m.Header)+2)}
	for k, v := range m.Header {
		msg.Header[k] = v
	}
	if m.ContentType != "" {
		msg.Header.Set("Content-Type", m.ContentType)
	}
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(m.IdempotencyKey))
	if err != nil {
		return p.failed(ctx, subj, len(m.Body), err)
	}
	res := deliver.Result{Kind: deliver.Delivered, After: -1,
		Response: fmt.Sprintf("stream %s seq %d", ack.Stream, ack.Sequence)}
	if ack.Duplicate {
		res.Response = fmt.Sprintf("stream %s already had this Nats-Msg-Id (seq %d): a duplicate inside its window, not stored again", ack.Stream, ack.Sequence)
	}
	p.checkWindow(js, ack.Stream)
	return res
}

// failed classifies a publish that got no ack.
func (p *Publisher) failed(ctx context.Context, subj string, size int, err error) deliver.Result {
	var api *jetstream.APIError
	switch {
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return retry("no publish ack from JetStream in time for %s (the stream may have it: a retry with the same Nats-Msg-Id is dropped inside its duplicate window)", subj)
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return retry("no JetStream stream captures the subject %s: create one whose subjects include it", subj)
	case errors.Is(err, nats.ErrMaxPayload):
		return deliver.Result{Kind: deliver.Permanent, After: -1,
			Error: fmt.Sprintf("the event's %d bytes are over the NATS server's max_payload", size)}
	case errors.Is(err, nats.ErrBadSubject):
		return deliver.Result{Kind: deliver.Permanent, After: -1, Error: fmt.Sprintf("%q is not a valid NATS subject", subj)}
	case errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return deliver.Result{Kind: deliver.Permanent, After: -1,
			Error: fmt.Sprintf("the event's %d bytes are over the stream's max message size (%s)", size, api.Description)}
	case errors.As(err, &api):
		return retry("JetStream refused the publish to %s: %s (%d)", subj, api.Description, api.ErrorCode)
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrNoServers), errors.Is(err, errClosed):
		return retry("NATS unreachable at %s: %v", redact.URL(p.url), err)
	}
	return retry("publish to %s: %v", subj, redact.Error(err))
}

func retry(format string, args ...any) deliver.Result {
	return deliver.Result{Kind: deliver.Retry, After: -1, Error: fmt.Sprintf(format, args...)}
}

// checkWindow reads, once per stream, the duplicate window of a stream
// the publisher reached, and warns when it is shorter than the delivery
// lease: a delivery taken over after a crash would then be stored twice
// (the destination still gets one Nats-Msg-Id, and can dedupe on it).
func (p *Publisher) checkWindow(js jetstream.JetStream, stream string) {
	p.mu.Lock()
	seen := p.checked[stream]
	p.checked[stream] = true
	p.mu.Unlock()
	held := p.lease
	if seen {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			p.log.Debug("read the stream's config", "stream", stream, "err", err)
			return
		}
		if w := s.CachedInfo().Config.Duplicates; w < held {
			p.log.Warn("the stream's duplicate window is shorter than the delivery lease: a delivery another worker takes over after a crash may be stored in the stream twice; raise the stream's duplicate_window",
				"stream", stream, "duplicate_window", w, "lease", held)
		}
	}()
}
