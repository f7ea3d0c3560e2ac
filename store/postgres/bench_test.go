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
// delivery each, in group-commit batches, from 4 concurrent writers (as the
// gateway runs on PostgreSQL). Read events/s.
func BenchmarkClaimEvents(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	for _, size := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d/writers=4", size), func(b *testing.B) {
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
						if _, err := s.ClaimEvents(context.Background(), batch); err != nil {
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
