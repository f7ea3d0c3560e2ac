package provider

import (
	"fmt"
	"math"
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
	unit            VersionUnit
	maxAhead        time.Duration
}

// VersionUnit says what an integer version counts. An RFC 3339 version
// names a time whatever the unit.
type VersionUnit string

const (
	// Sequence is an integer version that names no time (a counter): it
	// cannot be told to be in the future, only compared.
	Sequence VersionUnit = ""
	// UnixSeconds is an integer version that is a Unix time in seconds
	// (Stripe's created).
	UnixSeconds VersionUnit = "unix"
	// UnixMillis is an integer version that is a Unix time in milliseconds.
	UnixMillis VersionUnit = "unix_ms"
)

// DefaultMaxAhead is how far past the arrival a version that names a time
// may be before the event goes outside the order. A provider's clock is
// not an hour ahead of ours; a version that is (a test event, a bug, an
// attacker with the secret) would otherwise make every later real event of
// its entity stale until that time comes.
const DefaultMaxAhead = time.Hour

// Arrival is the version rule that orders an entity's events by arrival,
// overriding a preset's version.
const Arrival = "arrival"

// ParseOrderRule parses an entity rule and a version rule, each of the
// form header:Name or json:path (version may be Arrival or empty), the
// version's unit ("", "sequence", "unix" or "unix_ms"), and how far past
// the arrival a version that names a time may be (0: DefaultMaxAhead; a
// negative duration: no bound).
func ParseOrderRule(entity, version, unit string, maxAhead time.Duration) (OrderRule, error) {
	r := OrderRule{maxAhead: maxAhead}
	if r.maxAhead == 0 {
		r.maxAhead = DefaultMaxAhead
	}
	switch VersionUnit(unit) {
	case Sequence, UnixSeconds, UnixMillis:
		r.unit = VersionUnit(unit)
	case "sequence":
		r.unit = Sequence
	default:
		return r, fmt.Errorf("version_unit: %q: want sequence, unix or unix_ms", unit)
	}
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

// Place is where an event stands among its entity's events.
type Place struct {
	Entity      string
	Version     int64
	Versioned   bool
	VersionText string
}

// Read returns the event's place, and false when it has none: no entity,
// a version that is missing or not one (see ParseVersion), or a version
// that names a time more than the rule's bound after now (the arrival).
// Such an event is delivered outside the order rather than refused: order
// is a courtesy to the destination, never a reason to lose an event.
func (r OrderRule) Read(h http.Header, body []byte, now time.Time) (Place, bool) {
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
	if !ok || r.ahead(text, v, now) {
		return Place{}, false
	}
	p.Version, p.Versioned, p.VersionText = v, true, text
	return p, true
}

// ahead reports whether version v (text as written) names a time more than
// the rule's bound after now. Integers are compared in their unit, never
// turned into a time, so that no value overflows.
func (r OrderRule) ahead(text string, v int64, now time.Time) bool {
	if r.maxAhead < 0 {
		return false
	}
	limit := now.Add(r.maxAhead)
	if _, err := strconv.ParseInt(text, 10, 64); err != nil {
		return v > limit.UnixNano() // an RFC 3339 time, as Unix nanoseconds
	}
	switch r.unit {
	case UnixSeconds:
		return v > limit.Unix()
	case UnixMillis:
		return v > limit.UnixMilli()
	}
	return false
}

// ParseVersion reads a version: an integer (a sequence number, a Unix
// time) as it is, or an RFC 3339 timestamp as Unix nanoseconds, so that
// timestamps with different offsets compare by the instant they name. A
// timestamp whose nanoseconds do not fit in 64 bits (before 1678 or after
// 2262) is no version: UnixNano would wrap it to a far smaller number.
func ParseVersion(s string) (int64, bool) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.Before(minNanoTime) || t.After(maxNanoTime) {
			return 0, false
		}
		return t.UnixNano(), true
	}
	return 0, false
}

var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)
