package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
)

// BenchmarkClaimEvents measures durable claims of unique 1 KiB events, one
// delivery each, in group-commit batches, from 4 concurrent writers, with
// the deliveries handed off (as the gateway claims) or left unleased for any
// replica (which notifies them). Read events/s.
func BenchmarkClaimEvents(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	for _, tc := range []struct {
		size    int
		handOff bool
	}{{1, true}, {16, true}, {64, true}, {256, true}, {1, false}, {16, false}, {64, false}} {
		size := tc.size
		b.Run(fmt.Sprintf("batch=%d/writers=4/handoff=%v", size, tc.handOff), func(b *testing.B) {
			s, err := postgres.Open(context.Background(), testenv.Postgres(b), postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			now := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/4 + 1
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					batch := make([]store.NewEvent, size)
					for range per {
						for i := range batch {
							batch[i] = store.NewEvent{Source: "bench", Key: fmt.Sprintf("evt_%012d", n.Add(1)), ContentType: "application/json",
								Body: body, ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"app"}}
						}
						lease := store.Lease{Now: now, For: time.Minute}
						if tc.handOff {
							lease.Max = size
						}
						if _, err := s.Commit(context.Background(), store.Batch{Events: batch, Lease: lease}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "events/s")
		})
	}
}
