// Package broker is what oncehook's queue transports share: a source that
// consumes a broker's stream, queue or topic (NATS JetStream, RabbitMQ,
// Kafka) hands each message to intake's transport-neutral core (Accept)
// and acknowledges it only once its claim has committed; a destination
// that publishes to one is a deliver.Sender. Each broker is one package
// below this one (broker/nats, broker/amqp, broker/kafka): a Kind, which
// reads and checks its own config blocks and builds each side from them,
// registered by the build that has it (the binary's: package kinds).
// What every consumer shares, from taking a message to the verdict on it
// (Intake, Decide), is here, once.
//
// What acknowledged means (invariant 19): a message is acked to its broker
// only after the transaction holding its events has committed, as a
// webhook gets 200 only then. A message the store could not take now
// (Rejection.Temporary) is left for the broker to deliver again (a nak
// with a delay where the broker has one). A message no retry would make
// acceptable (no key, not JSON where the key needs it, over the size
// limit, a bad signature with verify on) is poison: it is acked, or
// dead-lettered where the broker has a place for it, and counted as
// rejected by reason, so that it never stalls its queue. A message that
// was committed but not acked (a crash between the two) comes back and is
// a duplicate.
package broker

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/oncehook/oncehook/receive"
)

// Consumer consumes one source's messages.
type Consumer interface {
	// Run consumes until ctx ends, reconnecting with backoff when the
	// broker goes away, and returns nil then, once every message it
	// handed to Accept has its answer (acked, or left unacked for the
	// broker to redeliver). An error means it cannot run at all.
	Run(ctx context.Context) error
	// Status is what /readyz's detail, /metrics, the dashboard and doctor
	// say about the source's broker.
	Status() Status
}

// Status is a consumer's connection, as an operator reads it.
type Status struct {
	Source string `json:"source"`
	Kind   string `json:"kind"` // nats, amqp, kafka or table
	// Where names what is consumed, without credentials ("stream ORDERS
	// subject orders.>", "queue payments", "topic clicks").
	Where     string    `json:"where"`
	Connected bool      `json:"connected"`
	Error     string    `json:"error,omitempty"` // the last connection error, when not connected
	Since     time.Time `json:"since"`           // when Connected last changed
	InFlight  int64     `json:"in_flight"`       // messages handed out and not yet answered
	// InFlightBytes is what the consumer's messages hold of
	// max_inflight_bytes (their bodies, as a request's body is counted).
	InFlightBytes int64 `json:"in_flight_bytes"`
}

// Health keeps a consumer's Status, safe for concurrent use: a consumer
// embeds one and says when it connects and when it loses the broker.
type Health struct {
	mu sync.Mutex
	st Status
}

// NewHealth starts a status for source's consumer of kind, not connected.
func NewHealth(source, kind, where string, now time.Time) *Health {
	return &Health{st: Status{Source: source, Kind: kind, Where: where, Since: now}}
}

// Connected says the consumer reached its broker.
func (h *Health) Connected(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.st.Connected {
		h.st.Connected, h.st.Since = true, now
	}
	h.st.Error = ""
}

// Lost says the consumer lost (or could not reach) its broker, and why.
func (h *Health) Lost(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st.Connected {
		h.st.Connected, h.st.Since = false, now
	}
	if err != nil {
		h.st.Error = err.Error()
	}
}

// InFlight adds n (negative to take away) to the messages in flight.
func (h *Health) InFlight(n int) {
	h.mu.Lock()
	h.st.InFlight += int64(n)
	h.mu.Unlock()
}

// Status is the status now.
func (h *Health) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}

// DefaultContentType gives a message without a Content-Type header the
// one a POST of its body would have had, when the body looks like a JSON
// object or array: HTTP destinations are sent the event's content type.
func DefaultContentType(h http.Header, body []byte) {
	if h.Get("Content-Type") != "" {
		return
	}
	if ct := receive.DefaultContentType(body); ct != "" {
		h.Set("Content-Type", ct)
	}
}

// Backoff is the wait before the n-th retry (from 1) of a connection or
// a message: exponential from first, capped at most, drawn over its upper
// half (jitter), so that consumers that failed together do not come back
// at the same instant.
func Backoff(n int, first, most time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	return d/2 + rand.N(d/2+1)
}
