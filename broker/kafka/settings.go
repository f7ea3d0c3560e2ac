package kafka

import (
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// Kind is Kafka as a broker kind: `consume: {kafka: {...}}` and
// `publish: {kafka: {...}}`.
func Kind() broker.Kind { return kind{} }

type kind struct{}

func (kind) Name() string                            { return "kafka" }
func (kind) ConsumeSettings() config.ConsumeSettings { return &ConsumeSettings{} }
func (kind) PublishSettings() config.PublishSettings { return &PublishSettings{} }

func (kind) NewConsumer(src broker.Source, s config.ConsumeSettings) (broker.Consumer, error) {
	settings, err := broker.SettingsOf[*ConsumeSettings](s, "kafka")
	if err != nil {
		return nil, err
	}
	return NewConsumer(src, *settings)
}

func (kind) NewPublisher(d broker.Destination, s config.PublishSettings) (deliver.Sender, error) {
	settings, err := broker.SettingsOf[*PublishSettings](s, "kafka")
	if err != nil {
		return nil, err
	}
	return NewPublisher(d, *settings)
}

// ConsumeSettings are a source's `consume: {kafka: {...}}`: a consumer
// group's member.
type ConsumeSettings struct {
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
	SessionTimeout config.Duration `yaml:"session_timeout"`
}

// Where names the topic, for people.
func (s *ConsumeSettings) Where() string { return "topic " + s.Topic }

// Check reports each field at fault, under f (sources[i].consume.kafka).
func (s *ConsumeSettings) Check(f string, fail config.FailFunc) {
	broker.CheckHosts(s.Brokers, f+".brokers", fail)
	if s.Topic == "" {
		fail(f+".topic", "required: the topic to consume")
	}
	if s.MaxInFlight < 0 {
		fail(f+".max_in_flight", "cannot be negative")
	}
	if st := s.SessionTimeout; st != 0 && time.Duration(st) <= 3*time.Second {
		fail(f+".session_timeout", "%s: want more than the member's 3s heartbeat (Kafka's brokers allow 6s and up by default)", time.Duration(st))
	}
}

// PublishSettings are a destination's `publish: {kafka: {...}}`: an
// idempotent producer, acks=all.
type PublishSettings struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
}

// Target names the topic, for people.
func (s *PublishSettings) Target() string { return "topic " + s.Topic }

// Check reports each field at fault, under f (destinations[i].publish.kafka).
func (s *PublishSettings) Check(f string, fail config.FailFunc) {
	broker.CheckHosts(s.Brokers, f+".brokers", fail)
	if s.Topic == "" {
		fail(f+".topic", "required: the topic to produce to")
	}
}
