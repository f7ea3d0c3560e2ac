package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

// schema is the database's schema, one line a table, index or trigger.
func schema(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT type, name, COALESCE(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s: %s\n", typ, name, text)
	}
	return b.String()
}

// A database that an earlier oncehook migrated, to any point, still
// migrates: that one counted the files applied in user_version (the files
// were numbered 1, 2, 3... then), this one reads a file's number, and it
// ends with the schema a new database gets.
func TestADatabaseMigratedBeforeStillMigrates(t *testing.T) {
	ctx := context.Background()
	fresh, err := Open(ctx, filepath.Join(t.TempDir(), "fresh.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := schema(t, fresh.write)
	fresh.Close()

	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	// The earlier migrate counted files, and knew none from 0021 on (the
	// numbers the backends share): a database it migrated has at most
	// the files before.
	legacy := 0
	for _, name := range names {
		if filepath.Base(name) < "0021" {
			legacy++
		}
	}
	for _, upTo := range []int{1, 4, 12, 17, legacy} {
		path := filepath.Join(t.TempDir(), "old.db")
		old, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		// The earlier migrate: the first upTo files in name order, and
		// their count in user_version.
		for _, name := range names[:upTo] {
			body, _ := migrations.ReadFile(name)
			if _, err := old.Exec(string(body)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if _, err := old.Exec(fmt.Sprintf("PRAGMA user_version = %d", upTo)); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatalf("a database migrated to %s: %v", names[upTo-1], err)
		}
		if got := schema(t, s.write); got != want {
			t.Errorf("a database migrated to %s, migrated now, has another schema than a new one:\n%s\nwant:\n%s", names[upTo-1], got, want)
		}
		s.Close()
	}
}

// A migration's number is its version, gaps and all: from 0021 the
// backends share numbers (see sqlstore.Migrations), so SQLite skips the
// numbers only PostgreSQL needs. A database takes a 0999 as 999,
// and a later start applies nothing again. Before, user_version counted
// files: 0021 was recorded as 19, and a SQLite 0022 that PostgreSQL's
// 0022 needed would have been taken for what a 0019 meant.
func TestAMigrationsNumberIsItsVersion(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "o.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next := fstest.MapFS{"migrations/0999_future.sql": {Data: []byte(`CREATE TABLE future (id INTEGER PRIMARY KEY)`)}}
	embedded, _ := fs.Glob(migrations, "migrations/*.sql")
	for _, name := range embedded {
		body, _ := migrations.ReadFile(name)
		next[name] = &fstest.MapFile{Data: body}
	}
	for range 2 {
		if err := s.migrate(ctx, next); err != nil {
			t.Fatal(err)
		}
		var version int
		if err := s.write.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != 999 {
			t.Fatalf("user_version %d (%v) after 0999_future.sql; want 999", version, err)
		}
	}
}
