package config

import (
	"fmt"
	"reflect"
)

// Reload is what a running gateway can take of next, a config read anew
// while it serves old: sources (secrets, routes, filters, order),
// destinations (URLs, signing keys, retries, rates, breakers) and API
// tokens. The rest is bound at start (listeners, the store, the delivery
// lease the worker's claims were made under, the upstream APIs' proxies,
// the ledger's, stats' and alerts' settings): effective keeps old's value
// of each, and restart names the fields whose value next changes, for the
// reload to say that they wait for a restart.
//
// Effective is validated in full: a new destination whose timeout outlives
// the running lease is refused here, as it would be at start.
func Reload(old, next *Config) (effective *Config, restart []string, err error) {
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
		{"alerts", old.Alerts, next.Alerts, func() { e.Alerts = old.Alerts }},
		{"apis", old.APIs, next.APIs, func() { e.APIs = old.APIs }},
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
	if err := e.Validate(); err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	return &e, restart, nil
}
