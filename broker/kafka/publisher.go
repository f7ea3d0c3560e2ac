package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/broker"
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
	flying map[string]*flight // by Idempotency-Key: produced, the answer not yet heard
	swept  time.Time
}

// NewPublisher is d's sender, from its publish.kafka settings (checked).
// It does not dial: the first Send does.
func NewPublisher(d broker.Destination, k PublishSettings) (*Publisher, error) {
	if len(k.Brokers) == 0 || k.Topic == "" {
		return nil, errors.New("brokers and topic are required")
	}
	return &Publisher{topic: k.Topic, seeds: k.Brokers, log: broker.Log(d.Logger), flying: map[string]*flight{}}, nil
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
	// producer does not fail a record whose request may already be on the
	// wire (it cannot know whether the broker wrote it), so ProduceSync
	// could outlast ctx, and Send must answer by ctx's deadline. Such a
	// record stays in the client and lands once the brokers are back; an
	// attempt of the same event meanwhile waits for it rather than
	// producing a second record.
	f := p.produce(cl, m, rec)
	select {
	case <-f.done:
		p.answered(m.IdempotencyKey, f)
		if f.err != nil {
			return classify(f.err)
		}
	case <-ctx.Done():
		return deliver.Result{Kind: deliver.Retry, After: -1, Error: "kafka produce: no ack before the deadline: " + ctx.Err().Error()}
	}
	rec = f.rec
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

// flight is one record produced for an attempt, kept until an attempt of
// the same delivery has heard its answer.
type flight struct {
	rec     *kgo.Record
	attempt int
	done    chan struct{}
	err     error
	at      time.Time // when answered
}

// keepLanded is how long a record that landed after its attempt gave up is
// remembered for the delivery's next attempt (which the worker makes
// within its backoff, well inside this).
const keepLanded = time.Hour

// produce hands rec to the client, unless a record of the same delivery
// is still waiting for its answer or has landed since its attempt gave up
// (the brokers were away past the attempt's deadline): then the later
// attempt takes that record's answer. One delivery, one record, however
// many attempts wait for it. A delivery whose attempt number is not
// later (an operator's replay starts again) produces afresh.
func (p *Publisher) produce(cl *kgo.Client, m *deliver.Message, rec *kgo.Record) *flight {
	now := time.Now()
	p.mu.Lock()
	if f, ok := p.flying[m.IdempotencyKey]; ok && m.Attempt > f.attempt {
		select {
		case <-f.done:
			if f.err == nil {
				p.mu.Unlock()
				return f
			}
		default:
			p.mu.Unlock()
			return f
		}
	}
	if now.Sub(p.swept) > time.Minute {
		p.swept = now
		for k, f := range p.flying {
			if !f.at.IsZero() && now.Sub(f.at) > keepLanded {
				delete(p.flying, k)
			}
		}
	}
	f := &flight{rec: rec, attempt: m.Attempt, done: make(chan struct{})}
	p.flying[m.IdempotencyKey] = f
	p.mu.Unlock()
	// Not the attempt's context: the record is failed only by the client,
	// when that is safe (never written), and the next attempt then
	// produces afresh. TryProduce: a full buffer (brokers away for long)
	// fails it now, as a retry, rather than blocking past the deadline.
	cl.TryProduce(context.Background(), rec, func(_ *kgo.Record, err error) {
		p.mu.Lock()
		f.err, f.at = err, time.Now()
		p.mu.Unlock()
		close(f.done)
	})
	return f
}

// answered forgets f once an attempt has its answer.
func (p *Publisher) answered(id string, f *flight) {
	p.mu.Lock()
	if p.flying[id] == f {
		delete(p.flying, id)
	}
	p.mu.Unlock()
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
