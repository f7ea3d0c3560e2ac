package config_test

import (
	"strings"
	"testing"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/kinds"
)

func noEnv(string) (string, bool) { return "", false }

// parseWithKinds reads text as the gateway does, with every kind oncehook
// ships: config knows no broker and no store, and their kinds check their
// own blocks (a broker's settings) and the store's URL.
func parseWithKinds(text []byte, lookupEnv func(string) (string, bool)) (*config.Config, error) {
	return oncehook.ParseConfig(text, lookupEnv, kinds.All())
}

// The issue's own examples parse as written: a source that consumes a
// queue needs no preset (its key and type rules read the messages, and
// its HTTP endpoint is off), and a destination that publishes needs no url.
func TestQueueSourcesAndDestinationsParse(t *testing.T) {
	cfg, err := parseWithKinds([]byte(`
sources:
  - name: orders
    consume: {nats: {url: nats://127.0.0.1:4222, stream: ORDERS, subject: "orders.>", durable: oncehook}}
    key: ["header:Nats-Msg-Id", "json:order_id"]
    type: "json:event"
    destinations: [billing]
  - name: payments
    consume: {amqp: {url: "amqp://guest:guest@127.0.0.1:5672/", queue: payments, prefetch: 256}}
    preset: stripe
    secrets: [whsec_x]
    destinations: [bus]
  - name: clicks
    consume: {kafka: {brokers: [127.0.0.1:9092], topic: clicks, group: oncehook}}
    key: ["json:click_id"]
    destinations: [log, rabbit]
destinations:
  - {name: billing, url: "http://127.0.0.1:9000/billing"}
  - name: bus
    publish: {nats: {url: nats://127.0.0.1:4222, subject: "events.{source}.{type}"}}
  - name: rabbit
    publish: {amqp: {url: "amqp://guest:guest@127.0.0.1:5672/", exchange: "", routing_key: orders}}
  - name: log
    publish: {kafka: {brokers: [127.0.0.1:9092], topic: events}}
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	orders := cfg.Sources[0]
	if orders.Preset != "generic" || !orders.Unsigned || orders.HTTP() || orders.Consume.Kind() != "nats" {
		t.Fatalf("orders: preset %q unsigned %v http %v kind %q", orders.Preset, orders.Unsigned, orders.HTTP(), orders.Consume.Kind())
	}
	if p := cfg.Sources[1]; p.Preset != "stripe" || p.Unsigned || p.Consume.Kind() != "amqp" {
		t.Fatalf("payments: %+v", p)
	}
	for i, want := range []string{"http", "nats", "amqp", "kafka"} {
		if got := cfg.Destinations[i].Kind(); got != want {
			t.Errorf("destinations[%d] is %s, want %s", i, got, want)
		}
	}
}

// What a queue block lacks or gets wrong is named with its path.
func TestQueueBlocksNameTheFieldAtFault(t *testing.T) {
	for _, c := range []struct{ yaml, field string }{
		{`consume: {nats: {url: "http://x:4222", stream: S}}`, "sources[0].consume.nats.url"},
		{`consume: {nats: {url: "nats://x:4222"}}`, "sources[0].consume.nats.stream"},
		{`consume: {amqp: {url: "amqp://x:5672/"}}`, "sources[0].consume.amqp.queue"},
		{`consume: {kafka: {brokers: [nohost], topic: t}}`, "sources[0].consume.kafka.brokers[0]"},
		{`consume: {kafka: {topic: t}}`, "sources[0].consume.kafka.brokers"},
		{`consume: {kafka: {brokers: ["b:1"], topic: t, session_timeout: 2s}}`, "sources[0].consume.kafka.session_timeout"},
		{`consume: {}`, "sources[0].consume"},
		{`consume: {nats: {url: "nats://x:4222", stream: S}, kafka: {brokers: ["b:1"], topic: t}}`, "sources[0].consume"},
	} {
		_, err := parseWithKinds([]byte("sources:\n  - name: q\n    key: [\"json:id\"]\n    "+c.yaml+"\n"), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want %s named", c.yaml, err, c.field)
		}
	}
	for _, c := range []struct{ yaml, field string }{
		{`publish: {nats: {url: "nats://x:4222"}}`, "destinations[0].publish.nats.subject"},
		{`publish: {amqp: {url: "amqp://x:5672/"}}`, "destinations[0].publish.amqp.routing_key"},
		{`publish: {kafka: {brokers: ["b:1"]}}`, "destinations[0].publish.kafka.topic"},
		{`publish: {nats: {url: "nats://x:4222", subject: s}}` + "\n    url: http://x/", "destinations[0].url"},
		{`url: "nats://x:4222"`, "destinations[0].url"},
	} {
		_, err := parseWithKinds([]byte("sources: [{name: s, preset: stripe, secrets: [x], destinations: [d]}]\ndestinations:\n  - name: d\n    "+c.yaml+"\n"), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want %s named", c.yaml, err, c.field)
		}
	}
}

// A consumer is bound at start: a reload that adds, changes or removes a
// consume: block is refused whole, so a source is never half a queue's
// (unsigned) and half HTTP's.
func TestReloadRefusesAChangedConsumer(t *testing.T) {
	parse := func(text string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte(text), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	queue := "sources:\n  - {name: q, key: [\"json:id\"], consume: {nats: {url: \"nats://x:4222\", stream: %s}}}\n"
	http := "sources:\n  - {name: q, preset: stripe, secrets: [x]}\n"
	old := parse(strings.Replace(queue, "%s", "A", 1))
	for name, next := range map[string]string{
		"changed": strings.Replace(queue, "%s", "B", 1),
		"removed": http,
	} {
		if _, err := config.Reload(old, parse(next), nil); err == nil || !strings.Contains(err.Error(), "restart") {
			t.Errorf("%s: %v, want refused until a restart", name, err)
		}
	}
	if _, err := config.Reload(parse(http), old, nil); err == nil || !strings.Contains(err.Error(), "sources[0].consume") {
		t.Errorf("added: %v, want refused until a restart", err)
	}
	if _, err := config.Reload(old, parse(strings.Replace(queue, "%s", "A", 1)+"    # unchanged\n"), nil); err != nil {
		t.Errorf("unchanged: %v", err)
	}
}

// A reload refused for its consumers names every change that waits for a
// restart, not only the first: each consumer added, changed or removed,
// and each other field bound at start (found from outside: two consume:
// sources and upstreams: changed, and only sources[3].consume was named).
func TestReloadRefusedForConsumersNamesEveryRestart(t *testing.T) {
	parse := func(text string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte(text), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	queue := func(name, stream string) string {
		return `  - {name: ` + name + `, key: ["json:id"], consume: {nats: {url: "nats://x:4222", stream: ` + stream + `}}}` + "\n"
	}
	web := "  - {name: web, preset: stripe, secrets: [x]}\n"
	old := parse("sources:\n" + web + queue("a", "A") + queue("b", "B") + queue("c", "C") +
		"upstreams: [{name: pay, prefix: /pay, upstream: \"http://127.0.0.1:9\"}]\n")
	next := parse("sources:\n" + web + queue("a", "A2") + queue("b", "B2") + queue("d", "D") +
		"upstreams: [{name: pay, prefix: /pay, upstream: \"http://127.0.0.1:10\"}]\nlisten: 127.0.0.1:9999\n")
	_, err := config.Reload(old, next, nil)
	if err == nil {
		t.Fatal("refused nothing")
	}
	for _, want := range []string{"sources[1].consume: changed", "sources[2].consume: changed", "sources[3].consume: added",
		"source c: removed", "upstreams: changed", "listen: changed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	// And with errors of another kind, both: every reason to refuse at
	// once.
	bad := parse("sources:\n" + web + queue("a", "A2") + queue("b", "B") + queue("c", "C") +
		"upstreams: [{name: pay, prefix: /pay, upstream: \"http://127.0.0.1:9\"}]\n")
	bad.Sources[0].Destinations = []config.SourceDestination{{Name: "nowhere"}}
	if _, err := config.Reload(old, bad, nil); err == nil || !strings.Contains(err.Error(), "sources[1].consume: changed") ||
		!strings.Contains(err.Error(), "nowhere") {
		t.Errorf("a consumer changed and a destination unknown: %v", err)
	}
}

// A misspelled field inside an optional block (consume:, publish:, order:,
// all pointers in Config) is named as any other: it was accepted silently,
// so `durabel: x` made a second durable consumer under the default name,
// which reads the stream again from its start.
func TestMisspelledFieldsInOptionalBlocksAreNamed(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{`sources: [{name: o, consume: {nats: {url: "nats://127.0.0.1:4222", stream: S, durabel: x}}, key: ["json:id"]}]`,
			"sources[0].consume.nats.durabel: unknown field (line 1); did you mean durable?"},
		{`sources: [{name: o, consume: {verfy: true, amqp: {url: "amqp://127.0.0.1", queue: q}}, key: ["json:id"]}]`,
			"sources[0].consume.verfy: unknown field (line 1); did you mean verify?"},
		{"sources: [{name: o, outbox: true, destinations: [bus]}]\ndestinations:\n  - name: bus\n    publish: {nats: {url: \"nats://127.0.0.1:4222\", subject: x, subjct: y}}",
			"destinations[0].publish.nats.subjct: unknown field (line 4); did you mean subject?"},
		{`sources: [{name: o, outbox: true, order: {entiti: "json:x"}}]`,
			"sources[0].order.entiti: unknown field (line 1); did you mean entity?"},
	} {
		_, err := parseWithKinds([]byte(c.yaml), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.yaml, err, c.want)
		}
	}
}
