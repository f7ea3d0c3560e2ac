package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
)

// dayTables lists table's partitions (the kept one and the days of March
// 2026), as PostgreSQL has them (Open made today's too).
func dayTables(t *testing.T, conn *pgx.Conn, table string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass AND (c.relname LIKE '%_d202603%' OR c.relname LIKE '%_kept') ORDER BY c.relname`, table)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func countRows(t *testing.T, conn *pgx.Conn, table string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A day of bodies and attempts goes as one partition: the sweep makes the
// days intake will write to ahead of time, and once a day is over drops it
// whole, after moving out the rows of the one event a dead letter keeps.
// An event stored before the partitions (its body in its own row) is still
// delivered whole.
func TestADayGoesAsOnePartition(t *testing.T) {
	ctx := context.Background()
	s, conn := openWithConn(t, postgres.Options{Horizon: 5 * 24 * time.Hour})

	// Open made the days from today to the horizon (5 days) ahead.
	if got := fmt.Sprint(dayTables(t, conn, "event_bodies")); got != "[event_bodies_kept]" {
		t.Fatalf("partitions of March %s", got)
	}
	for _, d := range []time.Time{time.Now(), time.Now().Add(5 * 24 * time.Hour)} {
		var made bool
		name := "event_bodies_d" + d.UTC().Format("20060102")
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&made); err != nil || !made {
			t.Fatalf("Open made no %s (%v)", name, err)
		}
	}
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	at := day.Add(9 * time.Hour)
	if _, err := s.SweepExpired(ctx, at, 100); err != nil {
		t.Fatal(err)
	}
	days := func(table string, from int) string {
		var names []string
		for d := from; d <= from+5; d++ {
			names = append(names, fmt.Sprintf("%s_d202603%02d", table, d))
		}
		return fmt.Sprint(append(names, table+"_kept"))
	}
	if got, want := fmt.Sprint(dayTables(t, conn, "event_bodies")), days("event_bodies", 10); got != want {
		t.Fatalf("bodies' partitions %s: want %s, the day and the horizon's ahead", got, want)
	}
	var evs []store.NewEvent
	for i := range 100 {
		evs = append(evs, store.NewEvent{Source: "s", Key: fmt.Sprint("k", i), ContentType: "application/json",
			Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), ReceivedAt: at, ExpiresAt: at.Add(time.Hour), Destinations: []string{"d"}})
	}
	if _, err := store.ClaimEvents(ctx, s, evs); err != nil {
		t.Fatal(err)
	}
	for {
		ds, err := store.LeaseDeliveries(ctx, s, at, time.Minute, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		var outs []store.Outcome
		for _, d := range ds {
			kind := store.OutcomeDelivered
			if d.Key == "k7" {
				kind = store.OutcomeDead
			}
			outs = append(outs, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: kind, Attempt: 1, StatusCode: 410, StartedAt: at})
		}
		if err := store.CompleteDeliveries(ctx, s, outs); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, conn, "event_bodies_d20260310"); n != 100 {
		t.Fatalf("the day's partition holds %d bodies, want the 100", n)
	}
	// The 99 first successes are kept on their deliveries' rows (#30): the
	// day's attempts partition holds the dead letter's attempt alone.
	if n := countRows(t, conn, "attempts_d20260310"); n != 1 {
		t.Fatalf("the day's attempts partition holds %d, want the dead letter's 1", n)
	}
	// The next day: the tenth is dropped whole, the dead letter's body and
	// attempt moved to the kept partitions first.
	if _, err := s.SweepExpired(ctx, day.Add(25*time.Hour), 1000); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(dayTables(t, conn, "event_bodies")), days("event_bodies", 11); got != want {
		t.Fatalf("bodies' partitions the next day %s: want %s, the tenth dropped", got, want)
	}
	if got, want := fmt.Sprint(dayTables(t, conn, "attempts")), days("attempts", 11); got != want {
		t.Fatalf("attempts' partitions the next day %s: want %s, the tenth dropped", got, want)
	}
	for _, name := range []string{"event_bodies_d20260310", "attempts_d20260310"} {
		var left bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&left); err != nil || left {
			t.Fatalf("%s is still a table (%v): detached, it must be dropped too", name, err)
		}
	}
	if b, a := countRows(t, conn, "event_bodies_kept"), countRows(t, conn, "attempts_kept"); b != 1 || a != 1 {
		t.Fatalf("kept %d bodies and %d attempts, want the dead letter's one of each", b, a)
	}
	if n, err := s.Replay(ctx, store.Replay{Events: store.EventQuery{Source: "s", Key: "k7"}, Now: day.Add(26 * time.Hour)}); err != nil || n != 1 {
		t.Fatalf("replay of the dead letter = %d, %v", n, err)
	}
	ds, err := store.LeaseDeliveries(ctx, s, day.Add(26*time.Hour), time.Minute, 10)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != `{"n":7}` {
		t.Fatalf("the replayed dead letter leased %+v (%v), want k7 whole", ds, err)
	}
	if err := store.CompleteDeliveries(ctx, s, []store.Outcome{{DeliveryID: ds[0].ID, LeaseToken: ds[0].LeaseToken, Kind: store.OutcomeDelivered, Attempt: 2}}); err != nil {
		t.Fatal(err)
	}

	// Stored before the partitions: the body is in the event's row.
	var id int64
	if err := conn.QueryRow(ctx, `INSERT INTO events (source, key, content_type, body, received_at, expires_at)
		VALUES ('s', 'old', 'application/json', '{"old":true}', $1, $2) RETURNING id`, at, at.Add(72*time.Hour)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (event_id, destination, next_attempt_at, updated_at) VALUES ($1, 'd', $2, $2)`,
		id, at); err != nil {
		t.Fatal(err)
	}
	ds, err = store.LeaseDeliveries(ctx, s, day.Add(27*time.Hour), time.Minute, 10)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != `{"old":true}` {
		t.Fatalf("an event stored before the partitions leased %+v (%v), want its body", ds, err)
	}
	e, err := s.Event(ctx, id)
	if err != nil || string(e.Body) != `{"old":true}` || e.Size != len(e.Body) {
		t.Fatalf("an event stored before the partitions reads %q (size %d, %v)", e.Body, e.Size, err)
	}
}
