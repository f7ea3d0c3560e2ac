package oncehook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/metrics"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// The transports beside HTTP: each broker's consumer (a source's consume:)
// and publisher (a destination's publish:), built from its config by its
// kind (Kinds.Brokers). A new broker is one package under broker/ and one
// registration line in package kinds.

// buildConsumers makes a consumer for each source that consumes a queue.
func buildConsumers(cfg *config.Config, kinds Kinds, accept broker.Accepter, log *slog.Logger) ([]broker.Consumer, error) {
	var out []broker.Consumer
	for i, s := range cfg.Sources {
		if s.Consume == nil {
			continue
		}
		name := s.Consume.Broker
		kind := kinds.broker(name)
		if kind == nil {
			return nil, fmt.Errorf("sources[%d].consume: this build has no %s consumer", i, name)
		}
		c, err := kind.NewConsumer(broker.Source{
			Name: s.Name, Verify: s.Consume.Verify, Accept: accept,
			Logger: log.With("component", "consume", "source", s.Name, "broker", name),
		}, s.Consume.Settings)
		if err != nil {
			return nil, fmt.Errorf("sources[%d].consume.%s: %w", i, name, err)
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
	kinds  Kinds
	log    *slog.Logger
}

type publisher struct {
	cfg    *config.Publish
	sender deliver.Sender
}

func newPublishers(kinds Kinds, log *slog.Logger) *publishers {
	return &publishers{byName: map[string]publisher{}, kinds: kinds, log: log}
}

// prepare builds the senders cfg's destinations need beyond those it
// keeps, and returns them by destination name with a function that
// commits them (closing the ones no longer used) or, when the config is
// not applied, closes the new ones.
func (p *publishers) prepare(cfg *config.Config) (map[string]deliver.Sender, func(apply bool), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
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
		if old, ok := p.byName[d.Name]; ok && old.cfg.Same(d.Publish) {
			next[d.Name] = old
			continue
		}
		name := d.Publish.Broker
		kind := p.kinds.broker(name)
		if kind == nil {
			return fail(fmt.Errorf("destinations[%d].publish: this build has no %s publisher", i, name))
		}
		s, err := kind.NewPublisher(broker.Destination{
			Name: d.Name, Lease: time.Duration(cfg.Delivery.Lease),
			Logger: p.log.With("component", "publish", "destination", d.Name, "broker", name),
		}, d.Publish.Settings)
		if err != nil {
			return fail(fmt.Errorf("destinations[%d].publish.%s: %w", i, name, err))
		}
		fresh = append(fresh, s)
		next[d.Name] = publisher{cfg: d.Publish, sender: s}
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

// consumerStates is each queue source's consumer, as the metrics read it
// at scrape time.
func (g *Gateway) consumerStates() []metrics.ConsumerState {
	st := g.ConsumerStatus()
	out := make([]metrics.ConsumerState, len(st))
	for i, s := range st {
		out[i] = metrics.ConsumerState{Source: s.Source, Broker: s.Kind, Connected: s.Connected, InFlight: s.InFlight, InFlightBytes: s.InFlightBytes}
	}
	return out
}
