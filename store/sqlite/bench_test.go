package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// BenchmarkClaimEvents measures durable claims (synchronous=FULL) of unique
// 1 KiB events in batches of the sizes group commit produces. The figure to
// read is events/s: one transaction (one fsync) per batch.
func BenchmarkClaimEvents(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	for _, size := range []int{1, 16, 64, 256} {
		for _, dests := range []int{0, 1} {
			b.Run(fmt.Sprintf("batch=%d/destinations=%d", size, dests), func(b *testing.B) {
				s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var destinations []string
				if dests == 1 {
					destinations = []string{"app"}
				}
				now := time.Now()
				batch := make([]store.NewEvent, size)
				n := 0
				b.ResetTimer()
				for b.Loop() {
					for i := range batch {
						n++
						batch[i] = store.NewEvent{Source: "bench", Key: fmt.Sprintf("evt_%012d", n), ContentType: "application/json",
							Body: body, ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: destinations}
					}
					if _, err := s.ClaimEvents(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
