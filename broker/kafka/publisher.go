package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// Publisher is a Kafka destination: each attempt produces one record with
// an idempotent producer and acks=all, and is Delivered only on the
// brokers' ack.
type Publisher struct {
	topic string
	seeds []string
	log   *slog.Logger
	extra []kgo.Opt // tests

	mu     sync.Mutex
	cl     *kgo.Client
	closed bool
}

// NewPublisher is the sender of d, whose publish.kafka names the brokers
// and topic. It does not dial: the first Send does.
func NewPublisher(d config.Destination, log *slog.Logger) (deliver.Sender, error) {
	return newPublisher(d, log)
}

func newPublisher(d config.Destination, log *slog.Logger) (*Publisher, error) {
	if d.Publish == nil || d.Publish.Kafka == nil {
		return nil, errors.New("no publish.kafka block")
	}
	k := d.Publish.Kafka
	if len(k.Brokers) == 0 || k.Topic == "" {
		return nil, errors.New("brokers and topic are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{topic: k.Topic, seeds: k.Brokers, log: log}, nil
}

// client is the producer, made on first use. kgo connects lazily and
// reconnects by itself; a client is kept for the publisher's life.
func (p *Publisher) client() (*kgo.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the publisher is closed")
	}
	if p.cl != nil {
		return p.cl, nil
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(p.seeds...),
		kgo.DefaultProduceTopic(p.topic),
		kgo.ClientID("oncehook"),
		// Idempotent (kgo's default) and acknowledged by every in-sync
		// replica: an ack means the record survives a broker's loss, and
		// the producer's own retries never write it twice.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// One record per attempt, sent now: the worker already batches
		// nothing and waits for each answer.
		kgo.ProducerLinger(0),
	}
	cl, err := kgo.NewClient(append(opts, p.extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	p.cl = cl
	return cl, nil
}

// Send produces m as one record and waits for its ack within ctx. The
// record's key is the order entity when the source orders its events (one
// partition per entity, in order), else <source>:<key>; its headers are
// m.Header's, plus Content-Type.
func (p *Publisher) Send(ctx context.Context, m *deliver.Message) deliver.Result {
	cl, err := p.client()
	if err != nil {
		return deliver.Result{Kind: deliver.Retry, After: -1, Error: err.Error()}
	}
	key := m.Entity
	if key == "" {
		key = m.IdempotencyKey
	}
	rec := &kgo.Record{Key: []byte(key), Value: m.Body, Topic: p.topic}
	for k, vs := range m.Header {
		for _, v := range vs {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	if m.ContentType != "" && m.Header.Get("Content-Type") == "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "Content-Type", Value: []byte(m.ContentType)})
	}
	// Produce with a promise rather than ProduceSync: an idempotent
	// producer does not fail a record whose request is already on the wire
	// (it cannot know whether the broker wrote it), so ProduceSync could
	// outlast ctx; Send must answer by ctx's deadline.
	acked := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err := <-acked:
		if err != nil {
			return classify(err)
		}
	case <-ctx.Done():
		// It may still land: a retry is then a second record with the same
		// Idempotency-Key, which the consumer dedupes on.
		return deliver.Result{Kind: deliver.Retry, After: -1, Error: "kafka produce: no ack before the deadline: " + ctx.Err().Error()}
	}
	return deliver.Result{Kind: deliver.Delivered, After: -1,
		Response: fmt.Sprintf("topic %s partition %d offset %d", rec.Topic, rec.Partition, rec.Offset)}
}

// classify says what a failed produce means: permanent only for what no
// retry fixes (a record larger than the topic takes, a topic name Kafka
// refuses); a broker that is down, a timeout, a missing topic (it may be
// created) or a refused authorization (an operator may grant it) is a
// retry, and holds the delivery behind the breaker.
func classify(err error) deliver.Result {
	res := deliver.Result{Kind: deliver.Retry, After: -1, Error: "kafka produce: " + err.Error()}
	switch {
	case errors.Is(err, kerr.MessageTooLarge),
		errors.Is(err, kerr.RecordListTooLarge), errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.InvalidRecord):
		res.Kind = deliver.Permanent
	}
	return res
}

// Close flushes nothing (every Send waited for its ack) and closes the
// producer; a Send after it is a retry, on the publisher that replaced it.
func (p *Publisher) Close() error {
	p.mu.Lock()
	cl := p.cl
	p.cl, p.closed = nil, true
	p.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	return nil
}
