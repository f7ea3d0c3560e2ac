package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
)

// A fresh deployment of two replicas commits as the gateway does (events
// claimed and handed off, their outcomes recorded by the replica's next
// commit) before autovacuum has ever analyzed its tables. pgx prepares the
// commit's statements once per connection, and PostgreSQL's generic plan,
// made while the tables were empty, joined the outcomes to deliveries by
// a scan of the whole table: 500 commits of 64 events read 8 million rows
// of it, and each commit took longer as it grew. The store analyzes its
// young tables itself; the scans stop while the table is small (below a
// few thousand rows, the plan scans it by choice), and what they read
// stays about the size of the table.
func TestAFreshDeploymentDoesNotScanDeliveriesEachCommit(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	var replicas []*postgres.Store
	for range 2 {
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		replicas = append(replicas, s)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	// Autovacuum off on this schema's tables: its first ANALYZE has not
	// come yet (it may take a minute or more, longer when it is busy),
	// and the test does not depend on when it would.
	rows, err := conn.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		if _, err := conn.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = off)"); err != nil {
			t.Fatal(err)
		}
	}

	const commits, size = 500, 64
	outcomes := make([][]store.Outcome, len(replicas)) // each replica's, for its next commit
	var first, last time.Duration
	n := 0
	for i := range commits {
		r := i % len(replicas)
		now := time.Now()
		events := make([]store.NewEvent, size)
		for j := range events {
			n++
			events[j] = store.NewEvent{Source: "s", Key: fmt.Sprintf("evt_%08d", n), ContentType: "application/json",
				Body: []byte(`{"n":1}`), ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"d"}}
		}
		start := time.Now()
		c, err := replicas[r].Commit(ctx, store.Batch{Events: events, Outcomes: outcomes[r],
			Lease: store.Lease{Max: size, Now: now, For: time.Minute}})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		switch took := time.Since(start); {
		case i < 100:
			first += took
		case i >= commits-100:
			last += took
		}
		if len(c.Leased) != size {
			t.Fatalf("commit %d handed off %d deliveries, want %d", i, len(c.Leased), size)
		}
		outcomes[r] = outcomes[r][:0]
		for _, d := range c.Leased {
			outcomes[r] = append(outcomes[r], store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered,
				Attempt: d.Attempt, StartedAt: now, Duration: time.Millisecond, StatusCode: 200})
		}
	}
	for r, s := range replicas {
		if _, err := s.Commit(ctx, store.Batch{Outcomes: outcomes[r]}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("a commit took %v on average over the first 100, %v over the last 100", first/100, last/100)
	// The replicas' connections report what they read when they end.
	for _, s := range replicas {
		s.Close()
	}
	var read int64
	deadline := time.Now().Add(5 * time.Second)
	for {
		var next int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables
			WHERE relid = 'deliveries'::regclass`).Scan(&next); err != nil {
			t.Fatal(err)
		}
		if next == read && read != 0 || time.Now().After(deadline) {
			break
		}
		read = next
		time.Sleep(300 * time.Millisecond)
		if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
	}
	// Counted after the scans were: this count is one.
	var delivered int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE state = 'delivered'").Scan(&delivered); err != nil || delivered != commits*size {
		t.Fatalf("%d deliveries delivered (%v), want %d", delivered, err, commits*size)
	}
	t.Logf("%d commits of %d events read %d rows of deliveries by sequential scans; it holds %d", commits, size, read, commits*size)
	if read > 4*commits*size {
		t.Errorf("%d commits of %d events read %d rows of deliveries by sequential scans, more than 4 times the %d it holds: a plan made while it was young scans it each commit",
			commits, size, read, commits*size)
	}
}
