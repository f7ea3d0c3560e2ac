package store

import (
	"context"
	"time"
)

// Pulls is what a pull destination keeps in the store, so that a
// consumer's lease holds on every replica: the lease a worker took on a
// delivery passes, when a consumer pulls it, to the consumer's token and
// expiry. An ack that reaches any gateway is then checked against the
// store (Leased) and recorded as an outcome under that token, which the
// store fences as any outcome; a stale token is refused everywhere; and a
// lease its consumer never acks (its gateway killed meanwhile) expires
// in the store, where any worker leases the delivery again, as its next
// attempt under the same key. It is part of Store.
type Pulls interface {
	// HandOut passes each delivery's lease from its worker's token to its
	// consumer's, until Expires: the lease's end and the delivery's due
	// time from then on, as a lease's are. It reports, for each, whether
	// the worker's lease still held (false: it ended, and the delivery may
	// be another worker's; the consumer must not have it). All or none
	// are written: an error means none was.
	HandOut(ctx context.Context, hs []HandOut) ([]bool, error)
	// Leased returns pending delivery id as its lease stands (LeaseToken
	// and LeaseExpiresAt, empty when it is not leased), with what an
	// outcome needs (Attempt, Destination, Ordered) and its event's
	// source, key, type and received time, without headers or body;
	// ErrNotFound when no pending delivery has that id.
	Leased(ctx context.Context, id int64) (LeasedDelivery, error)
}

// HandOut is one delivery's lease passed to a consumer.
type HandOut struct {
	DeliveryID    int64
	Token         string // the worker's lease token, which must still hold
	ConsumerToken string // the lease's token from now on
	Expires       time.Time
}
