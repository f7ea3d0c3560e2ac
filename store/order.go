package store

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Order per entity. Providers promise no order: a retry from hours ago
// arrives after today's events, Shopify's orders/updated can come newest
// first. A source that asks for order names the entity an event is about
// and, where the provider has one, its version; the store then keeps, per
// (destination, entity):
//   - at most one delivery in flight (leased), in both modes;
//   - the highest version delivered, so that an older event is marked
//     stale instead of delivered as if it were new (or, if the source
//     says so, delivered with the current version beside it);
//   - in fifo mode, the order: only the lowest pending version is leased,
//     so a failing head holds its entity's later events, and only them.
//
// Ordered deliveries are never handed off at the commit that creates them:
// they are leased by the ordered lease step (PlanOrder), which each backend
// runs where its leases are decided, so across replicas the store decides,
// as it decides claims.

// OrderMode is how a source orders its entities' events.
type OrderMode string

const (
	// OrderLatest delivers each entity's events one at a time, as they
	// come, and marks stale an event older than one already delivered:
	// the destination keeps the latest version.
	OrderLatest OrderMode = "latest"
	// OrderStale is OrderLatest's old name (it was also the word for the
	// deliveries it holds back). Deliveries stored under it keep it, and
	// are ordered as OrderLatest: only OrderFIFO orders differently.
	//
	// Deprecated: use OrderLatest; OrderStale is read for one release more.
	OrderStale OrderMode = "stale"
	// OrderFIFO delivers each entity's events one at a time in version
	// order (arrival order without a version): a failing head holds the
	// entity's later events.
	OrderFIFO OrderMode = "fifo"
)

// Named is the mode under its current name: OrderLatest for a delivery
// stored as OrderStale.
func (m OrderMode) Named() OrderMode {
	if m == OrderStale {
		return OrderLatest
	}
	return m
}

// Order is what a NewEvent says of its place among its entity's events.
// An empty Entity means the event is not ordered.
type Order struct {
	// Entity is what the event is about, as StorableEntity writes it:
	// a backend may refuse one it does not hold (PostgreSQL: a NUL, bytes
	// that are not UTF-8, a value over its index's row).
	Entity string
	Mode   OrderMode
	// Version orders two events of the entity; without one (Versioned
	// false) arrival order does, by the event's id.
	Version     int64
	Versioned   bool
	VersionText string // the version as the provider wrote it, for the operator and the stale header
	// DeliverStale delivers a stale event anyway, marked stale (the
	// destination is told the current version), instead of holding it back.
	DeliverStale bool
}

// MaxEntityLen is the longest order entity stored as the provider wrote
// it: a longer one is stored as its digest (StorableEntity). Every store
// indexes entities, and PostgreSQL's index takes a row of at most about
// 2.7 KB.
const MaxEntityLen = 512

// The marks that start an entity StorableEntity had to rewrite: an entity
// written with its bytes percent-encoded, and one replaced by its digest.
const (
	entityEncoded = "%"
	entityDigest  = "sha256:"
)

// StorableEntity is an order entity as every store keeps it, written once
// for both backends (intake applies it to each event's entity):
//
//   - the entity as the provider wrote it, when any store can hold it as it
//     is: UTF-8 without a NUL (what PostgreSQL's text takes), at most
//     MaxEntityLen bytes (what its index takes), and not starting with
//     "%" or "sha256:";
//   - else "%" and the entity with every NUL, "%" and byte of an invalid
//     UTF-8 sequence (a lone surrogate's, say) percent-encoded: "a\x00b"
//     is "%a%00b", "5%\x00" is "%5%25%00";
//   - else, when that is longer than MaxEntityLen, "sha256:" and the hex
//     SHA-256 of the entity.
//
// Distinct entities stay distinct (the encoding is undone by decoding it,
// a digest is SHA-256's), and one entity is always written the same, so
// an entity no store could hold as it is still orders its events, on
// either backend: how an entity is written is never a reason to lose its
// event (invariant 23). What is stored is what the operator sees and
// names (ResetOrder).
func StorableEntity(entity string) string {
	if len(entity) <= MaxEntityLen && utf8.ValidString(entity) && strings.IndexByte(entity, 0) < 0 &&
		!strings.HasPrefix(entity, entityEncoded) && !strings.HasPrefix(entity, entityDigest) {
		return entity
	}
	var b strings.Builder
	b.Grow(len(entity) + len(entityEncoded) + 8)
	b.WriteString(entityEncoded)
	const hexdig = "0123456789ABCDEF"
	for i := 0; i < len(entity) && b.Len() <= MaxEntityLen; {
		r, size := utf8.DecodeRuneInString(entity[i:])
		if c := entity[i]; c == 0 || c == '%' || (r == utf8.RuneError && size == 1) {
			b.WriteByte('%')
			b.WriteByte(hexdig[c>>4])
			b.WriteByte(hexdig[c&15])
			i++
			continue
		}
		b.WriteString(entity[i : i+size])
		i += size
	}
	if b.Len() > MaxEntityLen {
		sum := sha256.Sum256([]byte(entity))
		return entityDigest + hex.EncodeToString(sum[:])
	}
	return b.String()
}

// OrderKey is how an entity is stored: by its source, since two providers'
// ids can be equal. Source names cannot hold a "/".
func OrderKey(source, entity string) string { return source + "/" + entity }

// SplitOrderKey is OrderKey's inverse.
func SplitOrderKey(k string) (source, entity string) {
	source, entity, ok := strings.Cut(k, "/")
	if !ok {
		return "", k
	}
	return source, entity
}

// StoredVersion is the version a delivery is ordered by: the event's own,
// or its id for arrival order.
func StoredVersion(o Order, eventID int64) (int64, string) {
	if o.Versioned {
		return o.Version, o.VersionText
	}
	return eventID, "#" + strconv.FormatInt(eventID, 10)
}

// OrderCandidate is an ordered delivery that is due and not leased.
type OrderCandidate struct {
	ID           int64
	Destination  string
	Entity       string // as OrderKey stores it
	Version      int64
	Mode         OrderMode
	DeliverStale bool
}

// OrderGroup is what the store holds of one (destination, entity) that has
// candidates.
type OrderGroup struct {
	// Delivered is the highest version delivered (HasDelivered) and its text.
	Delivered     int64
	HasDelivered  bool
	DeliveredText string
	// InflightUntil is when the delivery in flight's lease ends (zero: none).
	InflightUntil time.Time
	// FirstID is the fifo head: the pending delivery with the lowest
	// version (and id), leased or not, due or not, except that one already
	// attempted comes first. An attempt the destination may have taken (it
	// timed out, or its replica died before it reported) keeps its place:
	// an older event that arrived after it was sent waits behind it, and is
	// stale once it is delivered, rather than reaching the destination
	// after it. FirstDue is when the head is due.
	FirstID  int64
	FirstDue time.Time
	// FirstAttempted is true when the head has been attempted, and
	// FirstVersion is its version. In both modes an older event waits for
	// an attempted newer one: once it is delivered the older is stale, and
	// if it goes to the dead letters the older goes.
	FirstAttempted bool
	FirstVersion   int64
}

// OrderGroupKey names a group.
type OrderGroupKey struct{ Destination, Entity string }

// OrderPlan is what one ordered lease step does.
type OrderPlan struct {
	Lease []OrderLease
	Stale []StaleMark
	// Park moves deliveries that must wait for their entity to when they
	// can be looked at again (the in-flight lease's end, the fifo head's
	// next attempt), marked waiting: an outcome of the entity wakes the
	// lowest waiting one at once.
	Park []Parked
	// Wake are groups that a stale mark left with nothing leased: their
	// lowest waiting delivery is due at once, for the step to look at again.
	Wake []OrderGroupKey
}

// OrderLease is a candidate to lease; Stale ones are delivered marked so.
type OrderLease struct {
	ID          int64
	Destination string
	Entity      string
	Stale       bool
	Current     string // with Stale: the version delivered before
}

// StaleMark is a candidate older than its entity's delivered version, not
// delivered (the operator can replay it).
type StaleMark struct {
	ID      int64
	Entity  string
	Version int64
	Current string
}

// Parked is a candidate that waits until Until.
type Parked struct {
	ID    int64
	Until time.Time
}

// PlanOrder decides an ordered lease step, the same on every backend: given
// the candidates (due, unleased, in due order), what the store holds of
// their groups, and room for limit leases until leaseUntil, which to lease,
// which are stale, and which wait. At most one delivery per group is leased,
// and none of a group that has one in flight.
func PlanOrder(now, leaseUntil time.Time, limit int, candidates []OrderCandidate, groups map[OrderGroupKey]OrderGroup) OrderPlan {
	byGroup := map[OrderGroupKey][]OrderCandidate{}
	var keys []OrderGroupKey
	for _, c := range candidates {
		k := OrderGroupKey{c.Destination, c.Entity}
		if _, ok := byGroup[k]; !ok {
			keys = append(keys, k)
		}
		byGroup[k] = append(byGroup[k], c)
	}
	var p OrderPlan
	park := func(cs []OrderCandidate, until time.Time) {
		until = later(until, now.Add(time.Millisecond))
		for _, c := range cs {
			p.Park = append(p.Park, Parked{ID: c.ID, Until: until})
		}
	}
	for _, k := range keys {
		cs := byGroup[k]
		g := groups[k]
		if g.InflightUntil.After(now) {
			park(cs, g.InflightUntil)
			continue
		}
		if len(p.Lease) >= limit {
			continue // no room: left due for the next step
		}
		// The head first, in fifo order, or when it was attempted: it may
		// not be the lowest version (see OrderGroup.FirstID).
		head := func(c OrderCandidate) int {
			if c.ID == g.FirstID && (c.Mode == OrderFIFO || g.FirstAttempted) {
				return 0
			}
			return 1
		}
		slices.SortFunc(cs, func(a, b OrderCandidate) int {
			return cmp.Or(cmp.Compare(head(a), head(b)), cmp.Compare(a.Version, b.Version), cmp.Compare(a.ID, b.ID))
		})
		if g.FirstAttempted {
			// Older than an attempt the destination may have: wait for
			// it, as fifo waits for its head.
			var older []OrderCandidate
			cs = slices.DeleteFunc(cs, func(c OrderCandidate) bool {
				if c.Mode != OrderFIFO && c.ID != g.FirstID && c.Version < g.FirstVersion {
					older = append(older, c)
					return true
				}
				return false
			})
			if len(older) > 0 {
				if len(cs) > 0 && cs[0].ID == g.FirstID {
					park(older, leaseUntil) // the head is leased below
				} else {
					park(older, g.FirstDue)
				}
			}
		}
		rest := cs
		leased := len(p.Lease)
		staled := len(p.Stale)
		for len(rest) > 0 {
			c := rest[0]
			if c.Mode == OrderFIFO && c.ID != g.FirstID {
				// The head is in backoff (or not yet seen): the entity
				// waits for it.
				park(rest, g.FirstDue)
				rest = nil
				break
			}
			rest = rest[1:]
			if g.HasDelivered && c.Version < g.Delivered {
				if !c.DeliverStale {
					p.Stale = append(p.Stale, StaleMark{ID: c.ID, Entity: c.Entity, Version: c.Version, Current: g.DeliveredText})
					if c.Mode == OrderFIFO {
						// The next head is known at the next step.
						break
					}
					continue
				}
				p.Lease = append(p.Lease, OrderLease{ID: c.ID, Destination: c.Destination, Entity: c.Entity, Stale: true, Current: g.DeliveredText})
			} else {
				p.Lease = append(p.Lease, OrderLease{ID: c.ID, Destination: c.Destination, Entity: c.Entity})
			}
			park(rest, leaseUntil)
			rest = nil
		}
		if len(p.Stale) > staled && len(p.Lease) == leased {
			p.Wake = append(p.Wake, k)
		}
	}
	return p
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// StaleMetric is the hourly rollup (per source) that counts deliveries
// marked stale: the store counts them in the transaction that marks them.
const StaleMetric = "order.stale"

// StaleReason is what a stale delivery says, for the operator.
func StaleReason(m StaleMark) string {
	return "stale: an event of this entity with a later version (" + m.Current + ") was already delivered"
}
