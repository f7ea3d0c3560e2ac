package amqp

import (
	"strings"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// Kind is RabbitMQ (AMQP 0-9-1) as a broker kind: `consume: {amqp: {...}}`
// and `publish: {amqp: {...}}`.
func Kind() broker.Kind { return kind{} }

type kind struct{}

func (kind) Name() string                            { return "amqp" }
func (kind) ConsumeSettings() config.ConsumeSettings { return &ConsumeSettings{} }
func (kind) PublishSettings() config.PublishSettings { return &PublishSettings{} }

func (kind) NewConsumer(src broker.Source, s config.ConsumeSettings) (broker.Consumer, error) {
	settings, err := broker.SettingsOf[*ConsumeSettings](s, "amqp")
	if err != nil {
		return nil, err
	}
	return NewConsumer(src, *settings)
}

func (kind) NewPublisher(d broker.Destination, s config.PublishSettings) (deliver.Sender, error) {
	settings, err := broker.SettingsOf[*PublishSettings](s, "amqp")
	if err != nil {
		return nil, err
	}
	return NewPublisher(d, *settings)
}

// ConsumeSettings are a source's `consume: {amqp: {...}}`: a RabbitMQ
// queue's consumer.
type ConsumeSettings struct {
	URL   string `yaml:"url"`
	Queue string `yaml:"queue"`
	// Prefetch bounds the messages delivered and not yet acked (basic.qos,
	// default 256).
	Prefetch int `yaml:"prefetch"`
}

// Where names the queue, for people.
func (s *ConsumeSettings) Where() string { return "queue " + s.Queue }

// Check reports each field at fault, under f (sources[i].consume.amqp).
func (s *ConsumeSettings) Check(f string, fail config.FailFunc) {
	broker.CheckURL(s.URL, f+".url", []string{"amqp", "amqps"}, fail)
	if s.Queue == "" {
		fail(f+".queue", "required: the queue to consume")
	}
	if s.Prefetch < 0 || s.Prefetch > 65535 {
		// basic.qos carries it in 16 bits: a larger one would wrap.
		fail(f+".prefetch", "%d: want 1 to 65535 (unset: 256)", s.Prefetch)
	}
	if len(s.Queue) > 255 {
		fail(f+".queue", "%d bytes: AMQP names are at most 255", len(s.Queue))
	}
}

// PublishSettings are a destination's `publish: {amqp: {...}}`: persistent
// messages with publisher confirms.
type PublishSettings struct {
	URL        string `yaml:"url"`
	Exchange   string `yaml:"exchange"`    // "": the default exchange (routing_key is then the queue)
	RoutingKey string `yaml:"routing_key"` // may name {source} and {type}
}

// Target names the exchange and routing key, for people.
func (s *PublishSettings) Target() string {
	ex := s.Exchange
	if ex == "" {
		ex = "(default)"
	}
	return "exchange " + ex + ", routing key " + s.RoutingKey
}

// Check reports each field at fault, under f (destinations[i].publish.amqp).
func (s *PublishSettings) Check(f string, fail config.FailFunc) {
	broker.CheckURL(s.URL, f+".url", []string{"amqp", "amqps"}, fail)
	if s.Exchange == "" && s.RoutingKey == "" {
		fail(f+".routing_key", "required with the default exchange: the queue to publish to")
	}
	if len(s.Exchange) > 255 {
		fail(f+".exchange", "%d bytes: AMQP names are at most 255", len(s.Exchange))
	}
	// With {source} or {type} in it, the key's length is known per event
	// (an overlong one is a permanent failure of that event).
	if k := s.RoutingKey; len(k) > maxRoutingKey && !strings.Contains(k, "{source}") && !strings.Contains(k, "{type}") {
		fail(f+".routing_key", "%d bytes: a routing key is at most 255", len(k))
	}
}
