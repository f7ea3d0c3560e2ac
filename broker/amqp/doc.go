// Package amqp is oncehook's RabbitMQ transport (AMQP 0-9-1, through the
// RabbitMQ team's client github.com/rabbitmq/amqp091-go): a source that
// consumes a queue (Consumer) and a destination that publishes to an
// exchange (Publisher).
//
// # Consuming: what ack, nack and dead-letter mean here
//
// A consumed message is acknowledged (basic.ack) only after Accept has
// answered, that is after the transaction holding its events committed
// (invariant 19): accepted and duplicate are both acks. Until then it is
// unacked, and a connection that goes away (a crash, kill -9, a cut
// network) makes RabbitMQ deliver it again; a message that was committed
// but whose ack was lost comes back and is a duplicate, counted as one,
// with no second delivery. The Redelivered flag is only informative: the
// store decides what is a duplicate.
//
// RabbitMQ has no delayed negative acknowledgement. A message the store
// could not take now (a Temporary rejection: the store is unavailable, or
// intake is short of memory) is held for a backoff, which grows while the
// store keeps failing (up to 5 s), and then nacked with requeue: RabbitMQ
// puts it back and delivers it again. While held, it keeps its place in
// the prefetch window, so a store that is down slows the consumer to a
// stop rather than spinning through the queue.
//
// A message no retry would make acceptable (poison: no key, not JSON where
// the key needs it, a bad signature with verify on) is rejected once, with
// basic.nack and requeue=false, so it never stalls the queue. RabbitMQ
// then routes it to the queue's dead-letter exchange when the queue was
// declared with the x-dead-letter-exchange argument (or a policy gives it
// one), and otherwise drops it: declare one to keep poison messages for
// inspection. Intake counts it as rejected, by reason, as it counts a
// webhook's rejection.
//
// oncehook never declares the queue it consumes: it checks that it exists
// (a passive declare), and a missing queue is an error the source's status
// says, retried with backoff until someone declares it. basic.qos bounds
// the messages delivered and not yet acknowledged (prefetch, default 256),
// which is also how many Accepts run at once, so the group commit batches
// them and a backlog of millions never grows memory; their bytes are
// bounded apart, by intake's max_inflight_bytes, which the connection is
// read through (gate.go): a backlog of large messages does not either.
//
// Header fields become the envelope's headers under canonical names, and
// the message's properties are added as headers too: Content-Type,
// Content-Encoding, Message-Id, Correlation-Id, and Amqp-Type,
// Amqp-App-Id, Amqp-Exchange and Amqp-Routing-Key. A key rule can read any
// of them (key: ["header:Message-Id"]). A body without a content type
// that looks like JSON is taken as application/json.
//
// # Publishing
//
// Each attempt is one persistent message (delivery mode 2) published with
// mandatory set on a channel in confirm mode, with message-id
// <source>:<key> (stable across attempts and replays, so a consumer can
// dedupe on it), the delivery's headers (Idempotency-Key,
// X-Oncehook-Source, X-Oncehook-Type, X-Oncehook-Attempt, traceparent and
// the provider's routing headers) as header fields, and as properties the
// content type, the event's type, its arrival as the timestamp (the same
// on every attempt) and app-id oncehook. It is delivered only when the broker confirms it
// (basic.ack). A nack, a basic.return (no queue is bound for the routing
// key), no confirm before the destination's timeout, a broker that blocks
// publishers (a memory or disk alarm) or one that cannot be reached is a
// failed attempt, retried like a 5xx: an unroutable message keeps failing
// until a queue is bound, and then the breaker holds the destination's
// deliveries (it never drops them). The connection is made on the first
// Send and again on the next Send after it is lost. A channel carries one
// publish at a time, from a small pool, so a confirm and a return are
// always the one publish's.
package amqp
