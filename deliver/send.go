package deliver

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Message is one attempt of one delivery, as every destination kind sends
// it: the worker fills it from the leased delivery, and a Sender puts it
// on its wire (an HTTP POST, a publish to a broker).
type Message struct {
	Source, Key, Type, Destination string
	Attempt                        int
	// IdempotencyKey is <source>:<key>: an HTTP delivery's
	// Idempotency-Key, a publish's message id (Nats-Msg-Id, AMQP's
	// message-id, Kafka's record key), stable across attempts and replays
	// (invariant 8).
	IdempotencyKey string
	ContentType    string
	// Header is what travels with the event: the provider's routing
	// headers, the destination's own headers, and oncehook's
	// (Idempotency-Key, X-Oncehook-Source, X-Oncehook-Type,
	// X-Oncehook-Attempt, traceparent, the stale markers). A Sender adds
	// only what is its own (HTTP's User-Agent and Standard Webhooks
	// signature).
	Header http.Header
	Body   []byte
	// Path and Query, when set (a transformation's), replace the HTTP
	// destination URL's path and query.
	Path  string
	Query url.Values
	// ReceivedAt is when the event arrived.
	ReceivedAt time.Time
	// Entity is the event's order entity ("" when its source does not
	// order events): a Kafka record's key, so an entity's events keep one
	// partition and their order.
	Entity string
	// StoreID and LeaseToken are the delivery's row and the worker's
	// lease on it: a pull destination passes that lease on to the
	// consumer that takes the attempt (store.Pulls).
	StoreID    int64
	LeaseToken string
}

// ResultKind is what one send led to, as far as the destination says.
type ResultKind int

const (
	// Delivered: the destination has it (a 2xx, a publish ack, a confirm).
	Delivered ResultKind = iota
	// Retry: it may succeed later (a 5xx, 429, a timeout, a refused
	// connection, a broker's nack or absence). The worker backs off, or
	// waits Result.After when the destination said how long.
	Retry
	// Permanent: no retry will fix it (400, 401, 403, 404, 410, 422, a
	// redirect): the delivery goes to the dead letters.
	Permanent
	// Released: nothing was attempted (shutdown cut it before it left):
	// the lease goes back, no attempt spent.
	Released
)

// String names the kind as logs and traces say it.
func (k ResultKind) String() string {
	switch k {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Permanent:
		return "permanent"
	case Released:
		return "released"
	}
	return "unknown"
}

// Result is one send's classified outcome: the one answer that both the
// delivery's next state and the breaker read.
type Result struct {
	Kind ResultKind
	// After, on Retry, is the delay the destination asked for (HTTP's
	// Retry-After), within the destination's bounds; -1: none.
	After time.Duration
	// Status is the HTTP status (0 for another kind, or without an answer).
	Status int
	// Response is the start of the destination's answer, for the operator.
	Response string
	// Error says why it failed. It is stored and shown: no secrets (a URL's
	// query may hold an API key).
	Error string
	// Control is the receiver's webhook-delivery header (Standard
	// Webhooks: "abort-message", "disable"), which the worker honours for
	// a destination that opted in (Destination.DeliveryControl).
	Control string
	// LeaseToken, when set, is the lease the attempt ended under, where
	// the Sender passed the worker's on (a pull destination's consumer
	// holds it in the store): its outcome is recorded under this one.
	LeaseToken string
}

// Sender is one destination kind's way out: HTTP's POST, a publish to NATS
// JetStream, RabbitMQ or Kafka. The worker leases, gates (pause, rate,
// concurrency, breaker), bounds the time, backs off and records; a Sender
// only sends and classifies what it heard back. Send returns by ctx's
// deadline and is safe for concurrent use. The Message is the attempt's
// own: Send may keep its Header and add to it (HTTP's sender makes it the
// request's), and the worker reads nothing of it afterwards.
type Sender interface {
	Send(ctx context.Context, m *Message) Result
	Close() error
}
