package oncehook

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/store"
)

// Kinds are the stores and brokers a gateway can use, as River's client
// takes its driver: the root package imports no backend and no broker
// client, so a library user passes the kinds it uses and builds no other
// (only SQLite: Kinds{Stores: []store.Kind{sqlite.Kind()}}). The binary
// passes every kind oncehook has (package kinds, the one place they are
// registered). A config that names a kind the gateway was not given is
// refused where it is checked, naming the field.
type Kinds struct {
	// Stores open the store: URL (sqlite://, postgres://, ...), by its
	// scheme.
	Stores []store.Kind
	// Front, when set, is what redis: puts in front of the store's
	// claims.
	Front *store.Front
	// Brokers are the queue transports a source's consume: and a
	// destination's publish: may name.
	Brokers []broker.Kind
}

// storeKind is the kind that opens url (false: none of k's).
func (k Kinds) storeKind(url string) (store.Kind, bool) {
	scheme, _, _ := strings.Cut(url, "://")
	for _, s := range k.Stores {
		if slices.Contains(s.Schemes, scheme) {
			return s, true
		}
	}
	return store.Kind{}, false
}

// StoreName names the kind of store url is ("" when none of k's opens
// it), for messages.
func (k Kinds) StoreName(url string) string {
	s, _ := k.storeKind(url)
	return s.Name
}

// broker is the broker kind named name (nil: none of k's).
func (k Kinds) broker(name string) broker.Kind {
	for _, b := range k.Brokers {
		if b.Name() == name {
			return b
		}
	}
	return nil
}

// transportHeaders is what d's transport reads as its own headers (see
// transform.Reserved): its broker's, when the kind is a
// broker.HeaderReserver; nil for HTTP, whose transform.Protected covers
// for every destination. RabbitMQ and Kafka reserve none: oncehook sends
// every header under its canonical name, never one RabbitMQ reads
// (x-delay, CC, BCC are written in that case), Kafka reads no record
// header, and their message ids, keys and properties are not headers.
func (k Kinds) transportHeaders(d config.Destination) func(canonical string) string {
	if d.Publish == nil {
		return nil
	}
	if r, ok := k.broker(d.Publish.Broker).(broker.HeaderReserver); ok {
		return r.ReservedHeader
	}
	return nil
}

// checker is Kinds as config.Checker: the kinds a config may name, and
// parts, the check of what only the parts can say (build). A partsOnly
// checker reads no kind's settings: what builds no store, consumer or
// publisher (the outbox) needs none of their kinds.
type checker struct {
	kinds     Kinds
	parts     func(c *config.Config, fail config.FailFunc)
	partsOnly bool
}

func (c checker) Brokers() []string {
	if c.partsOnly {
		return nil
	}
	names := make([]string, len(c.kinds.Brokers))
	for i, b := range c.kinds.Brokers {
		names[i] = b.Name()
	}
	return names
}

func (c checker) ConsumeSettings(name string) config.ConsumeSettings {
	if b := c.kinds.broker(name); b != nil {
		return b.ConsumeSettings()
	}
	return nil
}

func (c checker) PublishSettings(name string) config.PublishSettings {
	if b := c.kinds.broker(name); b != nil {
		return b.PublishSettings()
	}
	return nil
}

// CheckStore has the store's kind check its URL, and the front's its.
func (c checker) CheckStore(cfg *config.Config, fail config.FailFunc) {
	if c.partsOnly {
		return
	}
	if s, ok := c.kinds.storeKind(cfg.Store); !ok {
		examples := make([]string, len(c.kinds.Stores))
		for i, s := range c.kinds.Stores {
			examples[i] = s.Example
		}
		fail("store", "%q: want %s", redact.URL(cfg.Store), orList(examples, "a store kind this build has (none)"))
	} else if s.Check != nil {
		if err := s.Check(cfg.Store); err != nil {
			fail("store", "%q: %v", redact.URL(cfg.Store), err)
		}
	}
	switch f := c.kinds.Front; {
	case cfg.Redis == "":
	case f == nil:
		fail("redis", "this build has no layer to put in front of the store")
	case f.Check != nil:
		if err := f.Check(cfg.Redis); err != nil {
			fail("redis", "%q: %v", redact.URL(cfg.Redis), err)
		}
	}
}

func (c checker) CheckParts(cfg *config.Config, fail config.FailFunc) {
	if c.parts != nil {
		c.parts(cfg, fail)
	}
}

// orList is "a, b or c" (none when names is empty).
func orList(names []string, none string) string {
	switch len(names) {
	case 0:
		return none
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// OpenStore opens the config's store with its kind, applying its pending
// migrations: the one place a store is opened, for the gateway and for
// the commands that work on the store directly (migrate, replay, the
// operator's commands). The front (Redis) is not put before it: the
// gateway adds it; the commands claim nothing.
func OpenStore(ctx context.Context, cfg *config.Config, kinds Kinds, log *slog.Logger) (store.Store, error) {
	st, _, err := kinds.openStore(ctx, cfg, log)
	return st, err
}

// openStore is OpenStore, with how the group committer should run on it.
func (k Kinds) openStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (store.Store, store.Writer, error) {
	kind, ok := k.storeKind(cfg.Store)
	if !ok {
		return nil, store.Writer{}, fmt.Errorf("store %s: this build has no store of its kind", redact.URL(cfg.Store))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var horizon time.Duration // the longest window: how far ahead a body may be due
	for _, src := range cfg.Sources {
		horizon = max(horizon, time.Duration(src.Window))
	}
	st, err := kind.Open(ctx, cfg.Store, store.OpenOptions{Logger: log.With("component", "store"), Horizon: horizon, Synchronous: cfg.SQLite.Synchronous})
	if err != nil {
		return nil, store.Writer{}, err
	}
	return st, kind.Writer, nil
}

// openFronted is openStore with the front (Redis) before it when the
// config sets one, its hits and errors counted in m.
func (k Kinds) openFronted(ctx context.Context, cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (store.Store, store.Writer, error) {
	st, w, err := k.openStore(ctx, cfg, log)
	if err != nil || cfg.Redis == "" {
		return st, w, err
	}
	if k.Front == nil {
		st.Close()
		return nil, w, fmt.Errorf("redis: this build has no layer to put in front of the store")
	}
	hot, err := k.Front.Open(cfg.Redis, st, store.FrontOptions{
		Logger:  log.With("component", k.Front.Name),
		OnHit:   func(n int) { m.RedisHits.Add(float64(n)) },
		OnError: func(op string, _ error) { m.RedisErrors.WithLabelValues(op).Inc() },
	})
	if err != nil {
		st.Close()
		return nil, w, err
	}
	return hot, w, nil
}
