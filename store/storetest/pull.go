package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// testHandOut: a worker's lease handed to a pull consumer is the
// consumer's on every replica (each reads its token and expiry), the
// worker's old token records nothing, an outcome under the consumer's
// token is recorded once, and a lease its consumer never acked is due
// at its expiry, leased again as the next attempt.
func testHandOut(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	a, b := stores[0], stores[len(stores)-1]
	mustClaim(t, a, event("acked", "laptop"), event("lost", "laptop"))
	leased := lease(t, a, base, time.Minute, 10)
	if len(leased) != 2 {
		t.Fatalf("leased %d, want 2", len(leased))
	}
	byKey := map[string]store.LeasedDelivery{}
	for _, d := range leased {
		byKey[d.Key] = d
	}
	acked, lost := byKey["acked"], byKey["lost"]
	expires := base.Add(10 * time.Second)
	held, err := a.HandOut(ctx, []store.HandOut{
		{DeliveryID: acked.ID, Token: acked.LeaseToken, ConsumerToken: "c-acked", Expires: expires},
		{DeliveryID: lost.ID, Token: lost.LeaseToken, ConsumerToken: "c-lost", Expires: expires},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || !held[0] || !held[1] {
		t.Fatalf("HandOut = %v, want [true true]", held)
	}
	// A lease passes only from the token that holds it (the worker's is
	// the consumer's now).
	if held, err := b.HandOut(ctx, []store.HandOut{{DeliveryID: lost.ID, Token: lost.LeaseToken, ConsumerToken: "c-other", Expires: expires}}); err != nil || len(held) != 1 || held[0] {
		t.Fatalf("HandOut under a token that no longer holds = %v, %v, want [false]", held, err)
	}
	// Another replica reads the consumer's lease as it stands.
	got, err := b.Leased(ctx, acked.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaseToken != "c-acked" || !got.LeaseExpiresAt.Equal(expires) || got.Attempt != 1 || got.Destination != "laptop" ||
		got.Source != "src" || got.Key != "acked" || got.Ordered || !got.ReceivedAt.Equal(base) {
		t.Fatalf("Leased = %+v, want the consumer's token c-acked until %s, attempt 1, laptop, src/acked", got, expires)
	}
	if _, err := b.Leased(ctx, acked.ID+lost.ID+1000); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Leased of no delivery: err %v, want ErrNotFound", err)
	}
	// Held until the consumer's expiry, by anyone.
	if again := lease(t, b, expires.Add(-time.Second), time.Minute, 10); len(again) != 0 {
		t.Fatalf("a consumer's live lease was leased again: %+v", again)
	}
	if next, ok, err := b.NextDue(ctx, nil); err != nil || !ok || !next.Equal(expires) {
		t.Fatalf("NextDue = %v %v %v, want the consumer's expiry %s", next, ok, err, expires)
	}
	// The worker's token no longer holds; the consumer's, acked on
	// another replica, is recorded once.
	complete(t, b, store.Outcome{DeliveryID: acked.ID, LeaseToken: acked.LeaseToken, Kind: store.OutcomeDead, Attempt: 1, StartedAt: base})
	complete(t, b, store.Outcome{DeliveryID: acked.ID, LeaseToken: "c-acked", Kind: store.OutcomeDelivered, Attempt: 1, StartedAt: base, StatusCode: 200})
	complete(t, a, store.Outcome{DeliveryID: acked.ID, LeaseToken: "c-acked", Kind: store.OutcomeRetry, Attempt: 1, StartedAt: base, NextAttemptAt: base})
	if st := stats(t, a); st.Delivered != 1 || st.Dead != 0 || st.Pending != 1 {
		t.Fatalf("stats %+v, want the acked delivery delivered once, the other pending", st)
	}
	if _, err := a.Leased(ctx, acked.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Leased of a delivered delivery: err %v, want ErrNotFound", err)
	}
	// The unacked one is due at its consumer's expiry: the next attempt.
	taken := lease(t, b, expires, time.Minute, 10)
	if len(taken) != 1 || taken[0].ID != lost.ID || taken[0].Attempt != 2 || taken[0].LeaseToken == "c-lost" {
		t.Fatalf("after the consumer's expiry leased %+v, want %s again as attempt 2 under a new token", taken, lost.Key)
	}
	if got, err := a.Leased(ctx, lost.ID); err != nil || got.LeaseToken != taken[0].LeaseToken {
		t.Fatalf("Leased = %+v, %v, want the new worker's token", got, err)
	}
}
