// Package nats is oncehook's NATS JetStream transport: a source that
// consumes a stream through a durable pull consumer (Consumer), and a
// destination that publishes to a stream and waits for its ack
// (Publisher). Both speak through the maintained client, nats.go's
// jetstream package, with nothing between oncehook and JetStream's acks.
//
// What the consumer's acknowledgements mean (invariant 19):
//
//   - Ack: Accept returned a verdict, accepted or duplicate, so the claim
//     of every event the message carried has committed. Never before: a
//     gateway killed between the commit and the ack sees the message again
//     after the consumer's ack wait, and it is a duplicate.
//   - NakWithDelay: the store could not take the message now (unavailable,
//     or memory short). JetStream delivers it again after the delay, which
//     grows with the message's delivery count (1 s doubling, up to 30 s).
//     The durable consumer is created with no max_deliver, so a long store
//     outage never makes JetStream give a message up.
//   - Term: the message is poison (no key, not JSON where the key needs
//     it, too large, a bad signature with verify on): no retry would make
//     it acceptable. NATS has no dead-letter stream of its own; Term tells
//     the server never to redeliver it (the reason is logged with the
//     stream sequence, and counted by intake), and
//     the server raises a $JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED
//     advisory that names the stream sequence, so an operator can find the
//     message (it stays in the stream under the stream's own retention).
//     Intake counts it as rejected, by reason, as it counts a webhook's.
//
// The messages handed out and not yet acked are bounded by the consumer's
// max_ack_pending (default 256), which is also how many Accepts run at
// once, so that the group committer batches them.
//
// The publisher sends each attempt with Nats-Msg-Id: <source>:<key>, the
// delivery's Idempotency-Key, and counts it delivered only on the
// stream's publish ack. JetStream drops a second message with the same id
// inside the stream's duplicate window: a re-publish after a crash that
// lost the outcome (another worker takes the delivery over once its lease
// expires) is absorbed by the stream, if the window covers the lease. The
// publisher reads the stream's config after its first ack and warns when
// it does not.
package nats
