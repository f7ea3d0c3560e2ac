package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
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
					if _, err := store.ClaimEvents(context.Background(), s, batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkNextDue measures how long an idle worker's "when is the next
// delivery due?" takes with a large backlog (a destination down for hours),
// which it asks after every wake.
func BenchmarkNextDue(b *testing.B) {
	for _, backlog := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", backlog), func(b *testing.B) {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "due.db"), sqlite.Options{Synchronous: "OFF"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			now := time.Now()
			for i := 0; i < backlog; i += 1000 {
				batch := make([]store.NewEvent, 1000)
				for j := range batch {
					batch[j] = store.NewEvent{Source: "s", Key: fmt.Sprint(i + j), Body: []byte("{}"), ReceivedAt: now.Add(time.Duration(i+j) * time.Millisecond),
						ExpiresAt: now.Add(time.Hour), Destinations: []string{"d"}}
				}
				if _, err := store.ClaimEvents(context.Background(), s, batch); err != nil {
					b.Fatal(err)
				}
			}
			// Some are leased, as in a running worker.
			if _, err := store.LeaseDeliveries(context.Background(), s, now.Add(time.Second), time.Minute, 64); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := s.NextDue(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTick measures the writer's steady state with a destination: each
// commit claims batch new events, hands their deliveries off, and records
// the previous commit's deliveries as delivered, as the gateway's writer
// does under load. Read delivered events/s, and the CPU and the writes
// each event costs by the size of the commits (which the load sets: the
// requests that arrive during one commit ride the next).
func BenchmarkTick(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	for _, size := range []int{8, 16, 32, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "tick.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			n := 0
			var prev []store.LeasedDelivery
			b.ResetTimer()
			cpu := testenv.CPUTime()
			calls, bytes := testenv.Writes()
			for b.Loop() {
				now := time.Now()
				batch := store.Batch{Events: make([]store.NewEvent, size), Lease: store.Lease{Max: size, Now: now, For: time.Minute}}
				for i := range batch.Events {
					n++
					batch.Events[i] = store.NewEvent{Source: "bench", Key: fmt.Sprintf("evt_%012d", n), ContentType: "application/json",
						Body: body, ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"app"}}
				}
				for _, d := range prev {
					batch.Outcomes = append(batch.Outcomes, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered,
						Attempt: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 200})
				}
				// With a deadline, as the group committer gives each commit.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, err := s.Commit(ctx, batch)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				prev = c.Leased
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
			// The process's CPU per event, which a shared machine's load
			// does not inflate as it does the wall clock.
			b.ReportMetric(float64((testenv.CPUTime()-cpu).Microseconds())/float64(n), "cpu-µs/event")
			// What it costs in system calls: a commit writes each page it
			// dirtied (a B-tree's tail is one page a commit, whatever the
			// batch), so bigger commits write fewer pages per event.
			calls2, bytes2 := testenv.Writes()
			b.ReportMetric(float64(calls2-calls)/float64(n), "writes/event")
			b.ReportMetric(float64(bytes2-bytes)/1024/float64(n), "KiB-written/event")
		})
	}
}
