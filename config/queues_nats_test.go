package config_test

import (
	"strings"
	"testing"
)

// A NATS source's stream, durable and filter, and a NATS destination's
// subject template, are checked where the config is read: a name JetStream
// would refuse fails at start, not on every reconnect or attempt.
func TestNATSNamesAndSubjectsAreCheckedWhenTheConfigIsRead(t *testing.T) {
	const ok = `sources:
  - name: orders
    consume: {nats: {url: nats://127.0.0.1:4222, stream: ORDERS, subject: "orders.>", durable: oncehook}}
    key: ["json:order_id"]
    destinations: [bus]
destinations:
  - name: bus
    publish: {nats: {url: nats://127.0.0.1:4222, subject: "events.{source}.{type}"}}
`
	if _, err := parseWithKinds([]byte(ok), env(nil)); err != nil {
		t.Fatalf("a valid NATS source and destination: %v", err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"stream: ORDERS", "stream: ORD.ERS", "consume.nats.stream"},
		{"durable: oncehook", "durable: once.hook", "consume.nats.durable"},
		{"durable: oncehook", "durable: oncehook, ack_wait: 100ms", "consume.nats.ack_wait"},
		{`subject: "orders.>"`, `subject: "orders.>.x"`, "consume.nats.subject"},
		{`subject: "orders.>"`, `subject: "orders..x"`, "consume.nats.subject"},
		{`"events.{source}.{type}"`, `"events.*.{type}"`, "publish.nats.subject"},
		{`"events.{source}.{type}"`, `"events.{source}.>"`, "publish.nats.subject"},
		{`"events.{source}.{type}"`, `"events.{id}"`, "publish.nats.subject"},
		{`"events.{source}.{type}"`, `"events. {type}"`, "publish.nats.subject"},
	} {
		yaml := strings.Replace(ok, c.from, c.to, 1)
		_, err := parseWithKinds([]byte(yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %s", c.to, err, c.want)
		}
	}
}
