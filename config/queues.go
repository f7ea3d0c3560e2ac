package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Consume makes a source a queue's consumer: its events are the messages
// of one broker's stream, queue or topic, claimed as intake claims a
// request's and acknowledged to the broker only once the claim has
// committed (invariant 19). Exactly one broker is set.
type Consume struct {
	NATS  *NATSConsume  `yaml:"nats"`
	AMQP  *AMQPConsume  `yaml:"amqp"`
	Kafka *KafkaConsume `yaml:"kafka"`
	// Verify checks each message's signature with the source's preset, as
	// intake checks a request's (a queue that carries a provider's signed
	// events). Off by default: the broker's own credentials authenticate
	// who may publish.
	Verify bool `yaml:"verify"`
}

// Kind names the broker: nats, amqp or kafka ("" when none is set).
func (c *Consume) Kind() string {
	switch {
	case c == nil:
		return ""
	case c.NATS != nil:
		return "nats"
	case c.AMQP != nil:
		return "amqp"
	case c.Kafka != nil:
		return "kafka"
	}
	return ""
}

// Where names what the source consumes, for people ("stream ORDERS",
// "queue payments", "topic clicks"); "" when it consumes nothing.
func (c *Consume) Where() string {
	switch {
	case c == nil:
		return ""
	case c.NATS != nil:
		return "stream " + c.NATS.Stream
	case c.AMQP != nil:
		return "queue " + c.AMQP.Queue
	case c.Kafka != nil:
		return "topic " + c.Kafka.Topic
	}
	return ""
}

// Broker is the broker's name, for people: NATS JetStream, RabbitMQ or
// Kafka ("" when none).
func (c *Consume) Broker() string {
	switch c.Kind() {
	case "nats":
		return "NATS JetStream"
	case "amqp":
		return "RabbitMQ"
	case "kafka":
		return "Kafka"
	}
	return ""
}

// NATSConsume is a JetStream durable pull consumer.
type NATSConsume struct {
	URL     string `yaml:"url"`
	Stream  string `yaml:"stream"`
	Subject string `yaml:"subject"` // the consumer's filter subject; empty: the whole stream
	Durable string `yaml:"durable"` // the durable consumer's name (default: oncehook-<source>)
	// MaxAckPending bounds the messages handed out and not yet acked
	// (default 256): a backlog of millions never grows memory.
	MaxAckPending int `yaml:"max_ack_pending"`
	// AckWait is how long JetStream waits for a message's answer before
	// it delivers it again (default 30s): what a gateway that died holding
	// messages costs in delay. A message's claim is given a little less.
	AckWait Duration `yaml:"ack_wait"`
}

// AMQPConsume is a RabbitMQ (AMQP 0-9-1) queue's consumer.
type AMQPConsume struct {
	URL   string `yaml:"url"`
	Queue string `yaml:"queue"`
	// Prefetch bounds the messages delivered and not yet acked (basic.qos,
	// default 256).
	Prefetch int `yaml:"prefetch"`
}

// KafkaConsume is a Kafka consumer group's member.
type KafkaConsume struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	Group   string   `yaml:"group"` // default: oncehook-<source>
	// MaxInFlight bounds the records fetched and not yet claimed
	// (default 1024).
	MaxInFlight int `yaml:"max_in_flight"`
	// SessionTimeout is how long the group waits for a member that stopped
	// heartbeating (killed, cut off) before its partitions move to another
	// (default 45s, franz-go's; the brokers bound it by their
	// group.min/max.session.timeout.ms).
	SessionTimeout Duration `yaml:"session_timeout"`
}

// Publish makes a destination a queue: each delivery is a publish,
// acknowledged by the broker, with <source>:<key> as its message id, an
// attempt like a POST (retries, dead letters, holds). Exactly one broker
// is set.
type Publish struct {
	NATS  *NATSPublish  `yaml:"nats"`
	AMQP  *AMQPPublish  `yaml:"amqp"`
	Kafka *KafkaPublish `yaml:"kafka"`
}

// Kind names the broker: nats, amqp or kafka ("" when none is set).
func (p *Publish) Kind() string {
	switch {
	case p == nil:
		return ""
	case p.NATS != nil:
		return "nats"
	case p.AMQP != nil:
		return "amqp"
	case p.Kafka != nil:
		return "kafka"
	}
	return ""
}

// Target names what the destination publishes to, for people, without
// credentials ("subject events.{source}.{type}"); "" for none.
func (p *Publish) Target() string {
	switch {
	case p == nil:
		return ""
	case p.NATS != nil:
		return "subject " + p.NATS.Subject
	case p.AMQP != nil:
		ex := p.AMQP.Exchange
		if ex == "" {
			ex = "(default)"
		}
		return "exchange " + ex + ", routing key " + p.AMQP.RoutingKey
	case p.Kafka != nil:
		return "topic " + p.Kafka.Topic
	}
	return ""
}

// NATSPublish publishes to JetStream, waiting for the stream's ack.
type NATSPublish struct {
	URL string `yaml:"url"`
	// Subject may name the event's {source} and {type}.
	Subject string `yaml:"subject"`
}

// AMQPPublish publishes persistent messages with publisher confirms.
type AMQPPublish struct {
	URL        string `yaml:"url"`
	Exchange   string `yaml:"exchange"`    // "": the default exchange (routing_key is then the queue)
	RoutingKey string `yaml:"routing_key"` // may name {source} and {type}
}

// KafkaPublish produces to a topic with an idempotent producer, acks=all.
type KafkaPublish struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
}

// validateConsume checks a source's consume block; f is the source's path.
func validateConsume(c *Consume, f string, fail failFunc) {
	n := 0
	for _, set := range []bool{c.NATS != nil, c.AMQP != nil, c.Kafka != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		fail(f+".consume", "name exactly one broker: nats, amqp or kafka")
		return
	}
	switch {
	case c.NATS != nil:
		checkBrokerURL(c.NATS.URL, f+".consume.nats.url", []string{"nats", "tls"}, fail)
		if c.NATS.Stream == "" {
			fail(f+".consume.nats.stream", "required: the JetStream stream to consume")
		}
		if c.NATS.MaxAckPending < 0 {
			fail(f+".consume.nats.max_ack_pending", "cannot be negative")
		}
		if w := time.Duration(c.NATS.AckWait); w != 0 && w < time.Second {
			fail(f+".consume.nats.ack_wait", "%s: at least 1s (a claim waits for its commit within it)", w)
		}
		if strings.ContainsAny(c.NATS.Stream, " \t\r\n.*>/\\") {
			fail(f+".consume.nats.stream", "%q: a JetStream stream's name has no whitespace, '.', '*', '>', '/' or '\\'", c.NATS.Stream)
		}
		if strings.ContainsAny(c.NATS.Durable, " \t\r\n.*>/\\") {
			fail(f+".consume.nats.durable", "%q: a JetStream consumer's name has no whitespace, '.', '*', '>', '/' or '\\'", c.NATS.Durable)
		}
		if c.NATS.Subject != "" && !natsSubject(c.NATS.Subject, true) {
			fail(f+".consume.nats.subject", "%q: want a NATS subject (dot-separated tokens, no whitespace; '*' and '>' as whole tokens, '>' last)", c.NATS.Subject)
		}
	case c.AMQP != nil:
		checkBrokerURL(c.AMQP.URL, f+".consume.amqp.url", []string{"amqp", "amqps"}, fail)
		if c.AMQP.Queue == "" {
			fail(f+".consume.amqp.queue", "required: the queue to consume")
		}
		if c.AMQP.Prefetch < 0 || c.AMQP.Prefetch > 65535 {
			// basic.qos carries it in 16 bits: a larger one would wrap.
			fail(f+".consume.amqp.prefetch", "%d: want 1 to 65535 (unset: 256)", c.AMQP.Prefetch)
		}
		if len(c.AMQP.Queue) > 255 {
			fail(f+".consume.amqp.queue", "%d bytes: AMQP names are at most 255", len(c.AMQP.Queue))
		}
	case c.Kafka != nil:
		checkBrokers(c.Kafka.Brokers, f+".consume.kafka.brokers", fail)
		if c.Kafka.Topic == "" {
			fail(f+".consume.kafka.topic", "required: the topic to consume")
		}
		if c.Kafka.MaxInFlight < 0 {
			fail(f+".consume.kafka.max_in_flight", "cannot be negative")
		}
		if st := c.Kafka.SessionTimeout; st != 0 && time.Duration(st) <= 3*time.Second {
			fail(f+".consume.kafka.session_timeout", "%s: want more than the member's 3s heartbeat (Kafka's brokers allow 6s and up by default)", time.Duration(st))
		}
	}
}

// validatePublish checks a destination's publish block; f is its path.
func validatePublish(p *Publish, f string, fail failFunc) {
	n := 0
	for _, set := range []bool{p.NATS != nil, p.AMQP != nil, p.Kafka != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		fail(f+".publish", "name exactly one broker: nats, amqp or kafka")
		return
	}
	switch {
	case p.NATS != nil:
		checkBrokerURL(p.NATS.URL, f+".publish.nats.url", []string{"nats", "tls"}, fail)
		switch rest := strings.NewReplacer("{source}", "x", "{type}", "x").Replace(p.NATS.Subject); {
		case p.NATS.Subject == "":
			fail(f+".publish.nats.subject", "required: the subject to publish to (it may name {source} and {type})")
		case strings.ContainsAny(rest, "{}"):
			fail(f+".publish.nats.subject", "%q: the only placeholders are {source} and {type}", p.NATS.Subject)
		case !natsSubject(rest, false):
			fail(f+".publish.nats.subject", "%q: want a NATS subject to publish to (dot-separated tokens, no whitespace, no wildcard '*' or '>')", p.NATS.Subject)
		}
	case p.AMQP != nil:
		checkBrokerURL(p.AMQP.URL, f+".publish.amqp.url", []string{"amqp", "amqps"}, fail)
		if p.AMQP.Exchange == "" && p.AMQP.RoutingKey == "" {
			fail(f+".publish.amqp.routing_key", "required with the default exchange: the queue to publish to")
		}
		if len(p.AMQP.Exchange) > 255 {
			fail(f+".publish.amqp.exchange", "%d bytes: AMQP names are at most 255", len(p.AMQP.Exchange))
		}
		// With {source} or {type} in it, the key's length is known per
		// event (an overlong one is a permanent failure of that event).
		if k := p.AMQP.RoutingKey; len(k) > 255 && !strings.Contains(k, "{source}") && !strings.Contains(k, "{type}") {
			fail(f+".publish.amqp.routing_key", "%d bytes: a routing key is at most 255", len(k))
		}
	case p.Kafka != nil:
		checkBrokers(p.Kafka.Brokers, f+".publish.kafka.brokers", fail)
		if p.Kafka.Topic == "" {
			fail(f+".publish.kafka.topic", "required: the topic to produce to")
		}
	}
}

func checkBrokerURL(raw, field string, schemes []string, fail failFunc) {
	u, err := url.Parse(raw)
	ok := err == nil && u.Host != ""
	if ok {
		ok = false
		for _, s := range schemes {
			ok = ok || u.Scheme == s
		}
	}
	if !ok {
		fail(field, "%q: want a %s:// URL", Redact(raw), strings.Join(schemes, ":// or "))
	}
}

func checkBrokers(brokers []string, field string, fail failFunc) {
	if len(brokers) == 0 {
		fail(field, "required: at least one host:port")
	}
	for i, b := range brokers {
		if h, p, ok := strings.Cut(b, ":"); !ok || h == "" || p == "" {
			fail(fmt.Sprintf("%s[%d]", field, i), "%q: want host:port", b)
		}
	}
}

// natsSubject reports whether s is a NATS subject: non-empty tokens
// separated by dots, no whitespace; with wildcards, '*' may stand for a
// token and '>' for the last ones (a filter), and without, neither may
// (a publish).
func natsSubject(s string, wildcards bool) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return false
		case t == "*" || t == ">":
			if !wildcards || (t == ">" && i != len(tokens)-1) {
				return false
			}
		}
	}
	return true
}
