package amqp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
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
// password hidden. wrap, when set, is the connection amqp091-go reads and
// writes instead of the network's (the consumer's gate): over amqps:// it
// wraps the TLS connection, which dial then makes itself.
func dial(ctx context.Context, rawURL, name string, wrap func(net.Conn) net.Conn) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	target, tlsConfig, err := plainTarget(rawURL, wrap != nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact.URL(rawURL), err)
	}
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
			if tlsConfig != nil {
				tc := tls.Client(conn, tlsConfig)
				if err := tc.HandshakeContext(ctx); err != nil {
					conn.Close()
					return nil, err
				}
				conn = tc
			}
			if wrap != nil {
				conn = wrap(conn)
			}
			return conn, nil
		},
	}
	conn, err := amqp.DialConfig(target, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact.URL(rawURL), err)
	}
	return conn, nil
}

// plainTarget is the URL amqp091-go dials and, for amqps:// when the
// caller wraps the connection, the TLS config dial uses itself: amqp091-go
// would put its TLS connection over the wrapper, where the wrapper needs
// the plain frames under it. The URL is then amqp:// with the amqps://
// port written out (5671 by default), the rest as it was (credentials,
// virtual host, heartbeat, ...); the TLS config is amqp091-go's for the
// URL (its cacertfile, certfile, keyfile and server_name_indication, the
// host as the server's name by default).
func plainTarget(rawURL string, wrapped bool) (string, *tls.Config, error) {
	uri, err := amqp.ParseURI(rawURL)
	if err != nil {
		return "", nil, err
	}
	if !wrapped || uri.Scheme != "amqps" {
		return rawURL, nil, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", nil, err
	}
	u.Scheme = "amqp"
	u.Host = net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	cfg := &tls.Config{ServerName: uri.ServerName, MinVersion: tls.VersionTLS12}
	if cfg.ServerName == "" {
		cfg.ServerName = uri.Host
	}
	if uri.CACertFile != "" {
		pem, err := os.ReadFile(uri.CACertFile)
		if err != nil {
			return "", nil, fmt.Errorf("read CA certificate: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM(pem)
	}
	if uri.CertFile != "" && uri.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(uri.CertFile, uri.KeyFile)
		if err != nil {
			return "", nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return u.String(), cfg, nil
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
