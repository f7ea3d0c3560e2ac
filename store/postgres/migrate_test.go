package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store/postgres"
)

// pgSchema is the current schema's tables, columns, indexes and triggers,
// one line each, but for the day partitions (made for the day a store
// opens).
func pgSchema(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, q := range []string{
		`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '')
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name !~ '_d[0-9]{8}$' ORDER BY 1`,
		`SELECT indexname || ': ' || replace(indexdef, current_schema() || '.', '') FROM pg_indexes
			WHERE schemaname = current_schema() AND tablename !~ '_d[0-9]{8}$' ORDER BY 1`,
		`SELECT event_object_table || ' ' || trigger_name || ' ' || event_manipulation || ' ' || action_statement
			FROM information_schema.triggers WHERE trigger_schema = current_schema() ORDER BY 1`,
	} {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}

// A database an earlier oncehook migrated, to any point, still migrates,
// to the schema a new database gets (the numbers it recorded are the
// files' numbers, kept as they were: see sqlstore.Migrations).
func TestADatabaseMigratedBeforeStillMigrates(t *testing.T) {
	ctx := context.Background()
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	_, freshConn := openWithConn(t, postgres.Options{})
	want := pgSchema(t, freshConn)
	for _, upTo := range []int{1, 4, 16, 17, 19, len(entries)} {
		url := testenv.Postgres(t)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		// What an earlier Migrate did: each file in order, its number
		// recorded.
		if _, err := conn.Exec(ctx, `CREATE TABLE oncehook_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
			t.Fatal(err)
		}
		for i, e := range entries[:upTo] {
			body, err := os.ReadFile("migrations/" + e.Name())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, string(body)); err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			var version int
			fmt.Sscanf(e.Name(), "%d_", &version)
			if version != i+1 {
				t.Fatalf("%s: numbered %d, the %dth file", e.Name(), version, i+1)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO oncehook_migrations (version) VALUES ($1)`, version); err != nil {
				t.Fatal(err)
			}
		}
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatalf("a database migrated to %s: %v", entries[upTo-1].Name(), err)
		}
		s.Close()
		if got := pgSchema(t, conn); got != want {
			t.Errorf("a database migrated to %s, migrated now, has another schema than a new one:\n%s\nwant:\n%s", entries[upTo-1].Name(), got, want)
		}
		conn.Close(ctx)
	}
}
