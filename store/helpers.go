package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// NewLeaseToken names one lease. Outcomes carry it back, so that a worker
// whose lease expired and was taken over cannot record over the new owner.
func NewLeaseToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// EncodeHeader is how backends store an event's forwarded headers.
func EncodeHeader(h http.Header) string {
	if len(h) == 0 {
		return "{}"
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// DecodeHeader reads what EncodeHeader stored. A value that does not decode
// gives no headers: they are a courtesy to the destination, never a reason
// to hold a delivery back.
func DecodeHeader(s string) http.Header {
	var h http.Header
	if json.Unmarshal([]byte(s), &h) != nil || len(h) == 0 {
		return nil
	}
	return h
}

// ClaimEvents claims events in a commit of their own (see Store.Commit).
// The gateway's writer batches claims with everything else; this is for
// tools and tests.
func ClaimEvents(ctx context.Context, s Store, events []NewEvent) ([]Claim, error) {
	c, err := s.Commit(ctx, Batch{Events: events})
	return c.Claims, err
}

// LeaseDeliveries leases up to limit pending deliveries due at now, in a
// commit of their own.
func LeaseDeliveries(ctx context.Context, s Store, now time.Time, lease time.Duration, limit int) ([]LeasedDelivery, error) {
	c, err := s.Commit(ctx, Batch{Lease: Lease{Max: limit, Due: true, Now: now, For: lease}})
	return c.Leased, err
}

// CompleteDeliveries records outcomes in a commit of their own.
func CompleteDeliveries(ctx context.Context, s Store, outcomes []Outcome) error {
	_, err := s.Commit(ctx, Batch{Outcomes: outcomes})
	return err
}

// WithoutName is a comma-separated list of names (events.filtered)
// without name.
func WithoutName(list, name string) string {
	var keep []string
	for _, n := range strings.Split(list, ",") {
		if n != "" && n != name {
			keep = append(keep, n)
		}
	}
	return strings.Join(keep, ",")
}
