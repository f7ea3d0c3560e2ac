package config

import (
	"time"

	"github.com/oncehook/oncehook/internal/lease"
)

// Defaults every config gets.
const (
	DefaultListen    = "127.0.0.1:8080"
	DefaultStore     = "sqlite://./oncehook.db"
	DefaultAPIListen = "127.0.0.1:8081"
	// MaxMaxBodySize bounds max_body_size: a body is stored whole and sent
	// in one database message (PostgreSQL refuses messages over 1 GiB).
	MaxMaxBodySize = 256 << 20
	// DefaultTimeout is a url: destination's timeout when it sets none.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxAttempts is a destination's retry.max_attempts when it
	// sets none.
	DefaultMaxAttempts = 12
)

func (c *Config) setDefaults() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if c.API.Listen == "" {
		c.API.Listen = DefaultAPIListen
	}
	if c.Stats.Retention == 0 {
		c.Stats.Retention = Duration(90 * 24 * time.Hour)
	}
	var longest time.Duration
	for i := range c.Destinations {
		d := &c.Destinations[i]
		if d.Timeout == 0 && d.Pull != nil {
			d.Timeout = Duration(DefaultPullTimeout)
		} else if d.Timeout == 0 {
			d.Timeout = Duration(DefaultTimeout)
		}
		if d.Pull == nil {
			// A pull destination's attempt holds its own lease in the
			// store once handed out (deliver.Destination.OwnLease): its
			// minute-long timeout does not lengthen every other
			// destination's lease.
			longest = max(longest, time.Duration(d.Timeout))
		}
		if d.Retry.MaxAttempts == 0 {
			d.Retry.MaxAttempts = DefaultMaxAttempts
		}
		if d.Retry.BaseDelay == 0 {
			d.Retry.BaseDelay = Duration(time.Second)
		}
		if d.Retry.MaxDelay == 0 {
			d.Retry.MaxDelay = Duration(time.Hour)
		}
	}
	if c.Delivery.Lease == 0 {
		c.Delivery.Lease = Duration(lease.Default(longest))
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.Outbox {
			// A publish without a key could not be told from its retry:
			// an outbox source refuses one (422), and reads the caller's
			// Idempotency-Key unless its key rules say otherwise.
			if s.OnMissingKey == "" {
				s.OnMissingKey = "reject"
			}
			if len(s.Key) == 0 {
				s.Key = []string{"header:Idempotency-Key"}
			}
		}
		if s.OnMissingKey == "" {
			s.OnMissingKey = "accept"
		}
		if s.OnBadSignature == "" {
			s.OnBadSignature = "reject"
		}
		if s.Preset == "" && (s.Consume != nil || s.Outbox) {
			// A queue's messages need no provider: the key and type rules
			// read them, and the broker authenticated the publisher. An
			// outbox's publishes neither: the caller's transaction or API
			// token did.
			s.Preset, s.Unsigned = "generic", true
		}
		// The window and the order's rules a preset decides are the
		// preset's to fill in (the root package's wiring, where presets
		// are built).
		if o := s.Order; o != nil {
			if o.Mode == "" {
				o.Mode = "latest"
			}
			if o.OnStale == "" {
				o.OnStale = "hold"
			}
		}
	}
	return nil
}

// DefaultPullTimeout is a pull destination's timeout when it sets none:
// the time an attempt has from being offered to a consumer to its ack,
// which bounds the lease a consumer can ask for.
const DefaultPullTimeout = time.Minute
