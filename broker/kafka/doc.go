// Package kafka is oncehook's Kafka transport, on franz-go (kgo): a source
// that consumes a topic as a member of a consumer group, and a destination
// that produces to a topic.
//
// # What acknowledged means on Kafka
//
// Kafka has no per-message ack: a consumer group commits, per partition,
// the offset from which a new owner of the partition starts reading. So
// the consumer acknowledges by committing, and it commits a partition only
// up to the first record whose claim has not yet committed: it remembers
// every record it took from a partition, in offset order, and the
// committed offset is one past the last record of the longest prefix whose
// records are all claimed (accepted or duplicate, both durable) or
// rejected as poison. A record still in Accept, or waiting to be tried
// again, holds its partition's commit point where it is, however many
// records after it are claimed; the other partitions go on. A crash
// (kill -9) therefore never skips a record: a new owner starts at the
// committed offset, and what it reads again that was already claimed is a
// duplicate, counted as one (invariant 19).
//
// A rebalance is the same rule at a boundary: when the group takes a
// partition away (OnPartitionsRevoked), the consumer stops starting its
// records, stops retrying its failed ones, waits for the Accepts in flight
// to answer, commits its prefix, and only then lets the partition go.
// Polling blocks rebalances (kgo.BlockRebalanceOnPoll) only while one
// poll's records are being entered in the partitions' books, so the books
// and the group's assignment always agree. A partition lost outright (the
// member was thrown out of the group) is let go without a commit: its new
// owner reads again from the last commit, and duplicates are counted.
//
// The three outcomes of Accept:
//   - accepted or duplicate: the record is done, and the commit point may
//     pass it.
//   - a Temporary rejection (the store could not commit, or memory was
//     short): the record is tried again, with exponential backoff and
//     jitter, and its partition's commit point waits for it. There is no
//     nak on Kafka: not committing is what leaves the record to the group.
//   - any other rejection (no key, not JSON where the key needs it, over
//     the size limit, a bad signature with verify: true) is poison: it is
//     rejected once, counted by reason (Accept counts it as intake counts
//     its rejections), logged, and treated as done, so the commit point
//     passes it and the partition never stalls. Kafka has no dead-letter
//     queue of its own: the record stays in the topic, at its offset, for
//     as long as the topic's retention keeps it, and oncehook does not copy
//     it anywhere.
//
// Memory is bounded: at most max_in_flight records are held (in Accept or
// waiting for a retry) at once for the whole source, and a partition keeps
// at most a window of offsets behind its commit point (a few words each)
// before its fetching pauses until the record holding the point is done.
// Their bytes are bounded too: a record's value counts in intake's
// max_inflight_bytes (the source's share) from its first try until it is
// done, its waits to try again included, and the consumer polls again only
// once every record of the last poll is counted. Beside them, franz-go
// buffers what it fetched and was not yet polled: up to one fetch per
// broker, of at most the source's share (kgo.FetchMaxBytes, in bytes as
// the broker sends them: a compressed batch is larger once decompressed).
//
// # The publisher
//
// A destination with publish: kafka produces each delivery as one record
// with an idempotent producer (franz-go's default) and acks=all, so an
// attempt is Delivered only when every in-sync replica has it, and the
// producer's own retries never write it twice. The record's key is the
// event's order entity when its source orders events (an entity's events
// keep one partition, and their order), and <source>:<key> otherwise; its
// headers are what an HTTP delivery carries (Idempotency-Key,
// X-Oncehook-Source, X-Oncehook-Type, X-Oncehook-Attempt, traceparent).
// Kafka has no broker-side dedup by message id across producer sessions:
// a retried attempt whose first try did land (the ack was lost) is a
// second record with the same Idempotency-Key, which a consumer dedupes
// on, as an HTTP destination does.
package kafka
