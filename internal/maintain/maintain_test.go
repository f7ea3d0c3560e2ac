package maintain_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/maintain"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// One round sweeps more than a batch of expired events, keeps what is
// still in its window, and drops the rollups past their retention.
func TestSweepDeletesOnlyWhatIsNoLongerKept(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var evs []store.NewEvent
	for i := range maintain.SweepBatch + 20 {
		evs = append(evs, store.NewEvent{Source: "src", Key: "old-" + time.Duration(i).String(), Body: []byte("{}"),
			ReceivedAt: now.Add(-48 * time.Hour), ExpiresAt: now.Add(-24 * time.Hour)})
	}
	evs = append(evs, store.NewEvent{Source: "src", Key: "fresh", Body: []byte("{}"), ReceivedAt: now, ExpiresAt: now.Add(time.Hour)})
	stats := []store.StatDelta{
		{Hour: now.Add(-100 * 24 * time.Hour).Truncate(time.Hour), Scope: store.ScopeSource, Name: "src", Metric: "events.accepted", Value: 1},
		{Hour: now.Truncate(time.Hour), Scope: store.ScopeSource, Name: "src", Metric: "events.accepted", Value: 1},
	}
	if _, err := s.Commit(ctx, store.Batch{Events: evs, Stats: stats, Shard: "t"}); err != nil {
		t.Fatal(err)
	}
	sw := &maintain.Sweeper{Store: s, RollupRetention: 90 * 24 * time.Hour, Now: func() time.Time { return now }}
	sw.Sweep(ctx)
	st, err := s.Stats(ctx)
	if err != nil || st.Events != 1 {
		t.Fatalf("after a sweep: %+v %v; want only the event in its window", st, err)
	}
	rows, err := s.Rollups(ctx, store.RollupQuery{From: now.Add(-200 * 24 * time.Hour), To: now.Add(time.Hour)})
	if err != nil || len(rows) != 1 || !rows[0].Hour.Equal(now.Truncate(time.Hour)) {
		t.Fatalf("rollups %+v %v; want this hour's alone", rows, err)
	}
}

type counter struct{ runs atomic.Int32 }

func (c *counter) Run(ctx context.Context) { c.runs.Add(1); <-ctx.Done() }

func TestMaintainerRunsEveryServiceUntilCancelled(t *testing.T) {
	a, b := &counter{}, &counter{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { maintain.New(a, b).Run(ctx); close(done) }()
	for a.runs.Load() == 0 || b.runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
