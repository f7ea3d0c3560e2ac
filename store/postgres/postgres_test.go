package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), testenv.Postgres(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Replicas starting together must not race on migrations: one applies
// each, the others wait on the advisory lock and find it done.
func TestConcurrentStartsApplyMigrationsOnce(t *testing.T) {
	url := testenv.Postgres(t)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 5)
	errs := make([]error, 5)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(context.Background(), url, postgres.Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	applied, err := stores[0].Migrate(context.Background())
	if err != nil || len(applied) != 0 {
		t.Fatalf("migrating again applied %v (%v), want nothing", applied, err)
	}
}

// LISTEN/NOTIFY: a commit that creates deliveries wakes listeners of other
// connections (other replicas) at once.
func TestCommitWithDeliveriesNotifiesListeners(t *testing.T) {
	url := testenv.Postgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	woken := make(chan struct{}, 16)
	go b.Listen(ctx, func() { woken <- struct{}{} })
	wait := func(what string) {
		select {
		case <-woken:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake %s", what)
		}
	}
	wait("after connecting")
	if _, err := a.ClaimEvents(ctx, []store.NewEvent{{Source: "s", Key: "k", Destinations: []string{"d"}}}); err != nil {
		t.Fatal(err)
	}
	wait("after a commit with a delivery")
}
