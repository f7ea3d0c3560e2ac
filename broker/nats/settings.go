package nats

import (
	"strings"
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// Kind is NATS JetStream as a broker kind: `consume: {nats: {...}}` and
// `publish: {nats: {...}}`.
func Kind() broker.Kind { return kind{} }

type kind struct{}

func (kind) Name() string                            { return "nats" }
func (kind) ConsumeSettings() config.ConsumeSettings { return &ConsumeSettings{} }
func (kind) PublishSettings() config.PublishSettings { return &PublishSettings{} }

// ReservedHeader makes the kind a broker.HeaderReserver: JetStream's
// Nats-* headers.
func (kind) ReservedHeader(canonical string) string { return ReservedHeader(canonical) }

func (kind) NewConsumer(src broker.Source, s config.ConsumeSettings) (broker.Consumer, error) {
	settings, err := broker.SettingsOf[*ConsumeSettings](s, "nats")
	if err != nil {
		return nil, err
	}
	return NewConsumer(src, *settings), nil
}

func (kind) NewPublisher(d broker.Destination, s config.PublishSettings) (deliver.Sender, error) {
	settings, err := broker.SettingsOf[*PublishSettings](s, "nats")
	if err != nil {
		return nil, err
	}
	return NewPublisher(d, *settings), nil
}

// ConsumeSettings are a source's `consume: {nats: {...}}`: a JetStream
// durable pull consumer.
type ConsumeSettings struct {
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
	AckWait config.Duration `yaml:"ack_wait"`
}

// Where names the stream, for people.
func (s *ConsumeSettings) Where() string { return "stream " + s.Stream }

// Check reports each field at fault, under f (sources[i].consume.nats): a
// name JetStream would refuse fails where the config is read, not on
// every reconnect.
func (s *ConsumeSettings) Check(f string, fail config.FailFunc) {
	broker.CheckURL(s.URL, f+".url", []string{"nats", "tls"}, fail)
	if s.Stream == "" {
		fail(f+".stream", "required: the JetStream stream to consume")
	}
	if s.MaxAckPending < 0 {
		fail(f+".max_ack_pending", "cannot be negative")
	}
	if w := time.Duration(s.AckWait); w != 0 && w < time.Second {
		fail(f+".ack_wait", "%s: at least 1s (a claim waits for its commit within it)", w)
	}
	if strings.ContainsAny(s.Stream, " \t\r\n.*>/\\") {
		fail(f+".stream", "%q: a JetStream stream's name has no whitespace, '.', '*', '>', '/' or '\\'", s.Stream)
	}
	if strings.ContainsAny(s.Durable, " \t\r\n.*>/\\") {
		fail(f+".durable", "%q: a JetStream consumer's name has no whitespace, '.', '*', '>', '/' or '\\'", s.Durable)
	}
	if s.Subject != "" && !validSubject(s.Subject, true) {
		fail(f+".subject", "%q: want a NATS subject (dot-separated tokens, no whitespace; '*' and '>' as whole tokens, '>' last)", s.Subject)
	}
}

// PublishSettings are a destination's `publish: {nats: {...}}`: JetStream,
// each publish waiting for the stream's ack.
type PublishSettings struct {
	URL string `yaml:"url"`
	// Subject may name the event's {source} and {type}.
	Subject string `yaml:"subject"`
}

// Target names the subject, for people.
func (s *PublishSettings) Target() string { return "subject " + s.Subject }

// Check reports each field at fault, under f (destinations[i].publish.nats).
func (s *PublishSettings) Check(f string, fail config.FailFunc) {
	broker.CheckURL(s.URL, f+".url", []string{"nats", "tls"}, fail)
	switch rest := strings.NewReplacer("{source}", "x", "{type}", "x").Replace(s.Subject); {
	case s.Subject == "":
		fail(f+".subject", "required: the subject to publish to (it may name {source} and {type})")
	case strings.ContainsAny(rest, "{}"):
		fail(f+".subject", "%q: the only placeholders are {source} and {type}", s.Subject)
	case !validSubject(rest, false):
		fail(f+".subject", "%q: want a NATS subject to publish to (dot-separated tokens, no whitespace, no wildcard '*' or '>')", s.Subject)
	}
}

// validSubject reports whether s is a NATS subject: non-empty tokens
// separated by dots, no whitespace; with wildcards, '*' may stand for a
// token and '>' for the last ones (a filter), and without, neither may
// (a publish).
func validSubject(s string, wildcards bool) bool {
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
