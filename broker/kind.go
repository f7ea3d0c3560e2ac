package broker

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/redact"
)

// A Kind is one broker, as Outpost's destination providers are: the name
// its blocks go under in the config (`consume: {nats: {...}}`), its
// settings, which it reads and checks itself, and the consumer and
// publisher it builds from them. A build registers the kinds it has (the
// binary: package kinds); config and the root package know only this
// interface, so a new broker is its package and one registration line.
type Kind interface {
	// Name is the key of the kind's blocks in the config: nats.
	Name() string
	// ConsumeSettings is a new, empty consume: block, for the config to
	// read a source's into (nil: the kind has no consumer).
	ConsumeSettings() config.ConsumeSettings
	// PublishSettings is a new, empty publish: block (nil: the kind has
	// no publisher).
	PublishSettings() config.PublishSettings
	// NewConsumer builds src's consumer from its checked settings. It
	// must not wait for the broker: a broker that is down at start is
	// reconnected to by Run, and says so in its Status.
	NewConsumer(src Source, settings config.ConsumeSettings) (Consumer, error)
	// NewPublisher builds dest's sender from its checked settings. It
	// must not wait for the broker either: a publish to a broker that is
	// down is a failed attempt, and its deliveries are held behind the
	// breaker, never dropped.
	NewPublisher(dest Destination, settings config.PublishSettings) (deliver.Sender, error)
}

// HeaderReserver is a Kind whose broker reads some of a message's headers
// as its own controls (JetStream's Nats-*): ReservedHeader says why a
// header is one, "" when it is not. A transformation's value for one is
// not sent, and a destination's headers: may not name one (see
// transform.Reserved). A kind that is not one reserves none.
type HeaderReserver interface {
	ReservedHeader(canonical string) string
}

// Source is what a consumer is built for beyond its settings.
type Source struct {
	// Name is the source's.
	Name string
	// Verify checks each message's signature with the source's preset
	// (consume.verify).
	Verify bool
	// Accept is intake's core, which takes each message: the gateway's
	// receive.Handler.
	Accept Accepter
	// Logger names the source and broker (nil: discarded).
	Logger *slog.Logger
}

// Destination is what a publisher is built for beyond its settings.
type Destination struct {
	// Name is the destination's.
	Name string
	// Lease is the delivery lease (delivery.lease): a publish whose
	// outcome a crash lost is made again once its lease ends, so a broker
	// that dedupes by message id must keep ids at least that long (a
	// publisher checks it where its broker says).
	Lease time.Duration
	// Logger names the destination and broker (nil: discarded).
	Logger *slog.Logger
}

// Log is l, or a logger that discards when l is nil.
func Log(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// SettingsOf is a kind's own settings type out of what the config holds:
// an error when they are another kind's (a caller mixed them up).
func SettingsOf[T any](s any, kind string) (T, error) {
	t, ok := s.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%T: not %s settings", s, kind)
	}
	return t, nil
}

// CheckURL reports a broker URL (field) that does not parse or whose
// scheme is not one of schemes, without printing its password.
func CheckURL(raw, field string, schemes []string, fail config.FailFunc) {
	u, err := url.Parse(raw)
	ok := err == nil && u.Host != ""
	if ok {
		ok = false
		for _, s := range schemes {
			ok = ok || u.Scheme == s
		}
	}
	if !ok {
		fail(field, "%q: want a %s:// URL", redact.URL(raw), strings.Join(schemes, ":// or "))
	}
}

// CheckHosts reports a list of host:port (field) that is empty or holds
// something else.
func CheckHosts(hosts []string, field string, fail config.FailFunc) {
	if len(hosts) == 0 {
		fail(field, "required: at least one host:port")
	}
	for i, b := range hosts {
		if h, p, ok := strings.Cut(b, ":"); !ok || h == "" || p == "" {
			fail(fmt.Sprintf("%s[%d]", field, i), "%q: want host:port", b)
		}
	}
}
