package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// Reloaded is what a running gateway takes of a config read anew.
type Reloaded struct {
	// Config is the config to run: next's sources, destinations and
	// tokens, and the running config's value of everything else.
	Config *Config
	// Changed says what differs, one line a source, destination or token
	// ("destination audit added", "source stripe changed").
	Changed []string
	// Restart names the fields whose new value waits for a restart.
	Restart []string
}

// Reload is what a running gateway can take of next, a config read anew
// while it serves old: sources (secrets, routes, filters, order),
// destinations (URLs, signing keys, retries, rates, breakers) and API
// tokens. The rest is bound at start (listeners, the store, the delivery
// lease the worker's claims were made under, the upstream APIs' proxies,
// the ledger's, stats' and alerts' settings): effective keeps old's value
// of each, and restart names the fields whose value next changes, for the
// reload to say that they wait for a restart.
//
// Effective is validated in full, with check (see Checker): a new
// destination whose timeout outlives the running lease is refused here, as
// it would be at start.
func Reload(old, next *Config, check Checker) (*Reloaded, error) {
	var restart []string
	e := *next
	bound := []struct {
		field     string
		old, next any
		keep      func()
	}{
		{"listen", old.Listen, next.Listen, func() { e.Listen = old.Listen }},
		{"api.listen", old.API.Listen, next.API.Listen, func() { e.API.Listen = old.API.Listen }},
		{"store", old.Store, next.Store, func() { e.Store = old.Store }},
		{"sqlite", old.SQLite, next.SQLite, func() { e.SQLite = old.SQLite }},
		{"redis", old.Redis, next.Redis, func() { e.Redis = old.Redis }},
		{"tls", old.TLS, next.TLS, func() { e.TLS = old.TLS }},
		{"metrics", old.Metrics, next.Metrics, func() { e.Metrics = old.Metrics }},
		{"max_body_size", old.MaxBodySize, next.MaxBodySize, func() { e.MaxBodySize = old.MaxBodySize }},
		{"max_inflight_bytes", old.MaxInflightBytes, next.MaxInflightBytes, func() { e.MaxInflightBytes = old.MaxInflightBytes }},
		{"trusted_proxies", old.TrustedProxies, next.TrustedProxies, func() { e.TrustedProxies = old.TrustedProxies }},
		{"delivery", old.Delivery, next.Delivery, func() { e.Delivery = old.Delivery }},
		{"effects", old.Effects, next.Effects, func() { e.Effects = old.Effects }},
		{"stats", old.Stats, next.Stats, func() { e.Stats = old.Stats }},
		{"objects", old.Objects, next.Objects, func() { e.Objects = old.Objects }},
		{"alerts", old.Alerts, next.Alerts, func() { e.Alerts = old.Alerts }},
		{"upstreams", old.Upstreams, next.Upstreams, func() { e.Upstreams = old.Upstreams }},
		{"secret_keys_file", old.SecretKeysFile, next.SecretKeysFile, func() { e.SecretKeysFile = old.SecretKeysFile }},
	}
	for _, b := range bound {
		if !reflect.DeepEqual(b.old, b.next) {
			restart = append(restart, b.field)
			b.keep()
		}
	}
	// Tokens are taken, but with none at start the API listener was never
	// opened: new ones answer nowhere until a restart opens it.
	if len(old.API.Tokens) == 0 && len(next.API.Tokens) > 0 {
		restart = append(restart, "api.tokens (the API listener is off: it had no tokens at start)")
	}
	errs := e.validate(nil, check)
	if bound := consumersChanged(old, &e); len(bound) > 0 {
		errs = append(errs, bound...)
		// Refused for a consumer, the whole change waits for a restart:
		// name what else it will take then, not only the first.
		for _, f := range restart {
			errs = append(errs, fmt.Errorf("%s: changed, and bound at start too: the restart takes it", f))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	var changed []string
	// A source's name is part of every key it claimed and of each
	// delivery's Idempotency-Key: a source renamed starts with no keys, so
	// a provider's resend of an event the old name took is new to it.
	changed = append(changed, diff("source", old.Sources, next.Sources, func(s Source) string { return s.Name },
		": its keys go with it (a resend of one of its events to another source is a new event there, delivered again)")...)
	changed = append(changed, diff("destination", old.Destinations, next.Destinations, func(d Destination) string { return d.Name }, "")...)
	changed = append(changed, diff("api token", old.API.Tokens, next.API.Tokens, func(t APIToken) string { return t.Name }, "")...)
	if !slices.Equal(old.TenantEgress.Allow, next.TenantEgress.Allow) {
		// Taken at once: the tenants' next dials are checked against it.
		changed = append(changed, "tenant_egress changed")
	}
	return &Reloaded{Config: &e, Changed: changed, Restart: restart}, nil
}

// consumersChanged names each queue source of next whose consumer differs
// from old's: one error a source. A consumer is bound at start: a
// consume: block that appears, changes or goes would leave the source half
// one transport and half another (a consumer's source is unsigned over
// HTTP), so such a reload is refused whole, never half applied.
func consumersChanged(old, next *Config) []error {
	var errs []error
	consumed := map[string]*Consume{}
	for _, s := range old.Sources {
		consumed[s.Name] = s.Consume
	}
	for i, s := range next.Sources {
		was, known := consumed[s.Name]
		switch {
		case known && was != nil && s.Consume == nil:
			errs = append(errs, fmt.Errorf("sources[%d].consume: removed, and a queue source's consumer is bound at start; restart to remove it", i))
		case known && !was.Same(s.Consume):
			errs = append(errs, fmt.Errorf("sources[%d].consume: changed, and a queue source's consumer is bound at start; restart to change it", i))
		case !known && s.Consume != nil:
			errs = append(errs, fmt.Errorf("sources[%d].consume: added, and a queue source's consumer is bound at start; restart to add it", i))
		}
		delete(consumed, s.Name)
	}
	for _, s := range old.Sources {
		if c, gone := consumed[s.Name]; gone && c != nil {
			errs = append(errs, fmt.Errorf("source %s: removed, and it consumes a queue, which is bound at start; restart to remove it", s.Name))
		}
	}
	return errs
}

// diff says, by name, which of next's items are new, changed or gone
// from old: "source stripe added"; note ends the line of one removed.
func diff[T any](kind string, old, next []T, name func(T) string, note string) []string {
	var out []string
	before := map[string]T{}
	for _, o := range old {
		before[name(o)] = o
	}
	for _, n := range next {
		o, ok := before[name(n)]
		switch {
		case !ok:
			out = append(out, kind+" "+name(n)+" added")
		case !reflect.DeepEqual(o, n):
			out = append(out, kind+" "+name(n)+" changed")
		}
		delete(before, name(n))
	}
	for _, o := range old {
		if _, gone := before[name(o)]; gone {
			out = append(out, kind+" "+name(o)+" removed"+note)
		}
	}
	return out
}
