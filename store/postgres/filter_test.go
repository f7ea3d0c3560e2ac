package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store/internal/sqlstore"
)

// A filter may use PostgreSQL's JSON operators, written ?? (?, ?| and ?&
// are operators there, not placeholders): on PostgreSQL itself, each
// selects what it means, beside placeholders before and after it.
// Before, Add made the operator's ? the first placeholder.
func TestFilterKeepsPostgresJSONOperators(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE docs (id int, doc jsonb);
		INSERT INTO docs VALUES (1, '{"a":1}'), (2, '{"b":1}'), (3, '{"a":1,"b":1}'), (4, '{"c":"?"}')`); err != nil {
		t.Fatal(err)
	}
	ids := func(add func(f *sqlstore.Filter)) []int {
		t.Helper()
		f := sqlstore.NewFilter(sqlstore.Dialect{Numbered: true})
		add(f)
		rows, err := conn.Query(ctx, `SELECT id FROM docs WHERE `+f.Where()+` ORDER BY id`, f.Args()...)
		if err != nil {
			t.Fatalf("%s: %v", f.Where(), err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		name string
		add  func(f *sqlstore.Filter)
		want []int
	}{
		{"has a key", func(f *sqlstore.Filter) { f.Add("doc ?? ?", "a") }, []int{1, 3}},
		{"a placeholder first", func(f *sqlstore.Filter) { f.Add("id > ? AND doc ?? ?", 1, "a") }, []int{3}},
		{"any of the keys", func(f *sqlstore.Filter) { f.Add("doc ??| ?", []string{"b", "c"}) }, []int{2, 3, 4}},
		{"all of the keys", func(f *sqlstore.Filter) { f.Add("doc ??& ?", []string{"a", "b"}) }, []int{3}},
		{"a ? in a string", func(f *sqlstore.Filter) { f.Add("doc->>'c' = '?' AND id = ?", 4) }, []int{4}},
		{"two conditions", func(f *sqlstore.Filter) { f.Add("doc ?? ?", "b"); f.Add("id <> ?", 2) }, []int{3}},
	} {
		if got := ids(c.add); !slices.Equal(got, c.want) {
			t.Errorf("%s: ids %v, want %v", c.name, got, c.want)
		}
	}
}
