// Package inflight holds no code: its tests put a backlog of large
// messages in NATS, RabbitMQ and Kafka and hold that a queue source keeps
// within max_inflight_bytes and stores every message once. They are a
// package of their own, not the root's, so that go test runs them beside
// the rest (minutes under the race detector), and so that the heap they
// measure is not another test's.
package inflight
