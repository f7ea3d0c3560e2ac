package config_test

import (
	"strings"
	"testing"
)

// A RabbitMQ source or destination that could never work is refused where
// the config is read, by field.
func TestAMQPSettingsAreChecked(t *testing.T) {
	long := strings.Repeat("q", 256)
	for _, c := range []struct{ yaml, want string }{
		{`sources: [{name: s, consume: {amqp: {url: "http://x", queue: q}}}]`, "sources[0].consume.amqp.url"},
		{`sources: [{name: s, consume: {amqp: {url: "amqp://x", queue: ""}}}]`, "sources[0].consume.amqp.queue"},
		{`sources: [{name: s, consume: {amqp: {url: "amqp://x", queue: q, prefetch: 70000}}}]`, "sources[0].consume.amqp.prefetch"},
		{`sources: [{name: s, consume: {amqp: {url: "amqp://x", queue: ` + long + `}}}]`, "sources[0].consume.amqp.queue"},
		{`sources: [{name: s, preset: stripe, secrets: [x], destinations: [r]}]
destinations: [{name: r, publish: {amqp: {url: "amqp://x", exchange: ""}}}]`, "destinations[0].publish.amqp.routing_key"},
		{`sources: [{name: s, preset: stripe, secrets: [x], destinations: [r]}]
destinations: [{name: r, publish: {amqp: {url: "amqp://x", exchange: e, routing_key: ` + long + `}}}]`, "destinations[0].publish.amqp.routing_key"},
		{`sources: [{name: s, preset: stripe, secrets: [x], destinations: [r]}]
destinations: [{name: r, url: "http://x", publish: {amqp: {url: "amqp://x", routing_key: q}}}]`, "destinations[0].url"},
	} {
		_, err := parseWithKinds([]byte(c.yaml), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config:\n%s\nerr = %v, want it to name %q", c.yaml, err, c.want)
		}
	}
	cfg, err := parseWithKinds([]byte(`sources:
  - {name: s, consume: {amqp: {url: "amqps://u:p@rabbit:5671/vh", queue: q}}, key: ["json:id"], destinations: [r]}
destinations:
  - {name: r, publish: {amqp: {url: "amqp://x", exchange: events, routing_key: "{source}.{type}"}}}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if k := cfg.Sources[0].Consume.Kind(); k != "amqp" || cfg.Destinations[0].Kind() != "amqp" {
		t.Fatalf("kinds %q %q", k, cfg.Destinations[0].Kind())
	}
}
