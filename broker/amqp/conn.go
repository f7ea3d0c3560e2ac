package amqp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/internal/redact"
)

// dialTimeout bounds a connection's TCP connect and AMQP handshake when
// the caller's context has no earlier deadline.
const dialTimeout = 10 * time.Second

// heartbeat is the interval the connection asks the broker for: a broker
// that stops answering is noticed within about twice this.
const heartbeat = 10 * time.Second

// dial connects to rawURL within ctx, naming the connection (what the
// broker's management UI shows). Its errors quote the URL with its
// password hidden.
func dial(ctx context.Context, rawURL, name string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	cfg := amqp.Config{
		Heartbeat:  heartbeat,
		Properties: props,
		Locale:     "en_US",
		// The TCP connect follows ctx; the deadline set on the connection
		// bounds the TLS and AMQP handshakes too (the client clears it once
		// the connection is open).
		Dial: func(network, addr string) (net.Conn, error) {
			deadline := time.Now().Add(dialTimeout)
			if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
				deadline = d
			}
			d := net.Dialer{Deadline: deadline}
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := conn.SetDeadline(deadline); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}
	conn, err := amqp.DialConfig(rawURL, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact.URL(rawURL), err)
	}
	return conn, nil
}

// notFound reports whether err is the broker's 404 NOT_FOUND (no such
// queue or exchange).
func notFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}

// backoff is an exponential backoff with full jitter, capped.
type backoff struct {
	min, max, next time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, next: min} }

// wait is the next delay: a random one up to the current step, which then
// doubles up to the cap.
func (b *backoff) wait() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.max)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.next = b.min }

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
