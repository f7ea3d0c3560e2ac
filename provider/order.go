package provider

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// OrderRule reads what orders an event among its entity's events: the
// entity it is about (Stripe's data.object.id, Shopify's resource id) and,
// where the provider has one, its version (Shopify's updated_at). A rule
// without a version orders by arrival.
type OrderRule struct {
	entity, version KeyRule
	versioned       bool
}

// Arrival is the version rule that orders an entity's events by arrival,
// overriding a preset's version.
const Arrival = "arrival"

// ParseOrderRule parses an entity rule and a version rule, each of the
// form header:Name or json:path (version may be Arrival or empty).
func ParseOrderRule(entity, version string) (OrderRule, error) {
	var r OrderRule
	var err error
	if r.entity, err = ParseKeyRule([]string{entity}); err != nil {
		return r, fmt.Errorf("entity: %w", err)
	}
	if version != "" && version != Arrival {
		if r.version, err = ParseKeyRule([]string{version}); err != nil {
			return r, fmt.Errorf("version: %w", err)
		}
		r.versioned = true
	}
	return r, nil
}

// DefaultOrder is the entity and version rules of a preset whose provider
// has them (see providers.md, "Event types and entities"); version is
// empty where the provider sends none reliable, and ok is false where it
// names no entity (the source must then say).
func DefaultOrder(preset string) (entity, version string, ok bool) {
	d, ok := defaultOrders[preset]
	return d[0], d[1], ok
}

var defaultOrders = map[string][2]string{
	"stripe":      {"json:data.object.id", "json:created"}, // seconds: two events can share one (an equal version is not stale)
	"shopify":     {"json:id", "json:updated_at"},
	"paddle":      {"json:data.id", "json:occurred_at"},
	"hotmart":     {"json:data.purchase.transaction", ""}, // creation_date changes between attempts
	"mercadopago": {"json:data.id", ""},                   // the notification has no version: fetch the payment
	"evolution":   {"json:data.key.id", ""},
	"asaas":       {"json:payment.id", ""},
	"kiwify":      {"json:order_id", ""},
	"pagarme":     {"json:data.id", ""},
}

// Place is where an event stands among its entity's events.
type Place struct {
	Entity      string
	Version     int64
	Versioned   bool
	VersionText string
}

// Read returns the event's place, and false when it has none: no entity,
// or a version that is missing or not one (see ParseVersion). Such an
// event is delivered outside the order rather than refused: order is a
// courtesy to the destination, never a reason to lose an event.
func (r OrderRule) Read(h http.Header, body []byte) (Place, bool) {
	entity, err := r.entity.Extract(h, body)
	if err != nil || entity == "" {
		return Place{}, false
	}
	p := Place{Entity: entity}
	if !r.versioned {
		return p, true
	}
	text, err := r.version.Extract(h, body)
	if err != nil || text == "" {
		return Place{}, false
	}
	v, ok := ParseVersion(text)
	if !ok {
		return Place{}, false
	}
	p.Version, p.Versioned, p.VersionText = v, true, text
	return p, true
}

// ParseVersion reads a version: an integer (a sequence number, a Unix
// time) as it is, or an RFC 3339 timestamp as Unix nanoseconds, so that
// timestamps with different offsets compare by the instant they name.
func ParseVersion(s string) (int64, bool) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), true
	}
	return 0, false
}
