package oncehook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/broker/amqp"
	"github.com/oncehook/oncehook/broker/kafka"
	natsbroker "github.com/oncehook/oncehook/broker/nats"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// The transports beside HTTP: each broker's consumer (a source's consume:)
// and publisher (a destination's publish:), built from its config by one
// constructor. A new broker is one package under broker/ and one entry in
// each table.

// consumerKind builds the consumer of a source whose consume: names its
// broker. It must not wait for the broker: a broker that is down at start
// is reconnected to by Run, and says so in its Status.
type consumerKind func(src config.Source, accept broker.Accepter, log *slog.Logger) (broker.Consumer, error)

// publisherKind builds the sender of a destination whose publish: names
// its broker. It must not wait for the broker either: a publish to a
// broker that is down is a failed attempt, and its deliveries are held
// behind the breaker, never dropped.
type publisherKind func(d config.Destination, log *slog.Logger) (deliver.Sender, error)

func consumerKinds() map[string]consumerKind {
	return map[string]consumerKind{
		"amqp":  amqp.NewConsumer,
		"kafka": kafka.NewConsumer,
		"nats":  natsbroker.NewConsumer,
	}
}

func publisherKinds() map[string]publisherKind {
	return map[string]publisherKind{
		"amqp":  amqp.NewPublisher,
		"kafka": kafka.NewPublisher,
		"nats":  natsbroker.NewPublisher,
	}
}

// buildConsumers makes a consumer for each source that consumes a queue.
func buildConsumers(cfg *config.Config, accept broker.Accepter, log *slog.Logger) ([]broker.Consumer, error) {
	kinds := consumerKinds()
	var out []broker.Consumer
	for i, s := range cfg.Sources {
		if s.Consume == nil {
			continue
		}
		kind := s.Consume.Kind()
		build, ok := kinds[kind]
		if !ok {
			return nil, fmt.Errorf("sources[%d].consume: this build has no %s consumer", i, kind)
		}
		c, err := build(s, accept, log.With("component", "consume", "source", s.Name, "broker", kind))
		if err != nil {
			return nil, fmt.Errorf("sources[%d].consume.%s: %w", i, kind, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// publishers keeps the destinations' publishers across reloads: a
// destination whose publish: did not change keeps its connection; one
// that changed or went gets a new one, and the old is closed.
type publishers struct {
	mu     sync.Mutex
	byName map[string]publisher
	log    *slog.Logger
}

type publisher struct {
	cfg    config.Publish
	sender deliver.Sender
}

func newPublishers(log *slog.Logger) *publishers {
	return &publishers{byName: map[string]publisher{}, log: log}
}

// prepare builds the senders cfg's destinations need beyond those it
// keeps, and returns them by destination name with a function that
// commits them (closing the ones no longer used) or, when the config is
// not applied, closes the new ones.
func (p *publishers) prepare(cfg *config.Config) (map[string]deliver.Sender, func(apply bool), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kinds := publisherKinds()
	next := map[string]publisher{}
	var fresh []deliver.Sender
	fail := func(err error) (map[string]deliver.Sender, func(bool), error) {
		for _, s := range fresh {
			s.Close()
		}
		return nil, nil, err
	}
	for i, d := range cfg.Destinations {
		if d.Publish == nil {
			continue
		}
		if old, ok := p.byName[d.Name]; ok && reflect.DeepEqual(old.cfg, *d.Publish) {
			next[d.Name] = old
			continue
		}
		kind := d.Publish.Kind()
		build, ok := kinds[kind]
		if !ok {
			return fail(fmt.Errorf("destinations[%d].publish: this build has no %s publisher", i, kind))
		}
		s, err := build(d, p.log.With("component", "publish", "destination", d.Name, "broker", kind))
		if err != nil {
			return fail(fmt.Errorf("destinations[%d].publish.%s: %w", i, kind, err))
		}
		if l, ok := s.(interface{ SetLease(time.Duration) }); ok {
			// A publisher whose broker dedupes by message id checks its
			// window against the lease (a takeover re-publishes after it).
			l.SetLease(time.Duration(cfg.Delivery.Lease))
		}
		fresh = append(fresh, s)
		next[d.Name] = publisher{cfg: *d.Publish, sender: s}
	}
	senders := make(map[string]deliver.Sender, len(next))
	for name, pub := range next {
		senders[name] = pub.sender
	}
	var once sync.Once
	finish := func(apply bool) {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if !apply {
				for _, s := range fresh {
					s.Close()
				}
				return
			}
			for name, old := range p.byName {
				if cur, ok := next[name]; !ok || cur.sender != old.sender {
					// Attempts still on it fail and are retried on the new
					// one: a failed publish is an attempt, never a drop.
					if err := old.sender.Close(); err != nil {
						p.log.Warn("close a publisher", "destination", name, "err", err)
					}
				}
			}
			p.byName = next
		})
	}
	return senders, finish, nil
}

// Close closes every publisher.
func (p *publishers) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, pub := range p.byName {
		errs = append(errs, pub.sender.Close())
	}
	p.byName = map[string]publisher{}
	return errors.Join(errs...)
}

// runConsumers runs every consumer until ctx ends.
func (g *Gateway) runConsumers(ctx context.Context, wg *sync.WaitGroup) {
	for _, c := range g.consumers {
		wg.Go(func() {
			if err := c.Run(ctx); err != nil {
				st := c.Status()
				g.log.Error("a queue consumer stopped", "source", st.Source, "broker", st.Kind, "err", err)
			}
		})
	}
}

// ConsumerStatus is every queue source's broker connection, in the
// config's order: what /readyz's detail, /metrics, the dashboard and
// doctor say.
func (g *Gateway) ConsumerStatus() []broker.Status {
	out := make([]broker.Status, len(g.consumers))
	for i, c := range g.consumers {
		out[i] = c.Status()
	}
	return out
}

// consumerCollector exports each queue source's connection at scrape time.
type consumerCollector struct {
	status    func() []broker.Status
	connected *prometheus.Desc
	inFlight  *prometheus.Desc
}

func newConsumerCollector(status func() []broker.Status) *consumerCollector {
	return &consumerCollector{
		status: status,
		connected: prometheus.NewDesc("oncehook_source_broker_connected",
			"Whether a queue source's consumer is connected to its broker (1) or not (0): it reconnects with backoff, and HTTP intake is unaffected.",
			[]string{"source", "broker"}, nil),
		inFlight: prometheus.NewDesc("oncehook_source_broker_in_flight",
			"Messages a queue source's consumer holds, handed out by the broker and not yet acknowledged.",
			[]string{"source", "broker"}, nil),
	}
}

func (c *consumerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connected
	ch <- c.inFlight
}

func (c *consumerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.status() {
		v := 0.0
		if st.Connected {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, v, st.Source, st.Kind)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(st.InFlight), st.Source, st.Kind)
	}
}
