package sqlstore

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// The numbering of the SQL backends' migrations (store/sqlite/migrations,
// store/postgres/migrations). A migration is NNNN_what.sql; its number is
// its version, which a database records once it is applied (SQLite in
// PRAGMA user_version, PostgreSQL in oncehook_migrations), and a database
// applies, in order, each migration numbered above the highest it has.
//
// The rule, from 0021 on: a new migration takes the number after the
// highest of both backends; a change both backends need is one number,
// with one name, in both; a number one backend does not need is a gap
// there. So a number means one change wherever it appears, and a glance at
// either folder says how far the other has come. Up to 0020 the backends
// numbered apart (SQLite's 0004 and 0017-0018 are not PostgreSQL's): those
// files keep their numbers and names for good, since databases recorded
// them; renumbering one would make a database skip or repeat it.
// sqlstore's TestMigrationNumbering holds both rules.

// Aligned is the first migration number that means the same change in
// both backends.
const Aligned = 21

// Migration is one file of a backend's migrations.
type Migration struct {
	// Version is its number, what a database records once it is applied.
	Version int
	// Name is its file name ("0021_what.sql").
	Name string
	// SQL is its text.
	SQL string
}

// Migrations reads the migrations in fsys's folder dir, in order of
// version. A name that does not start with its number, or a number given
// twice, is an error: a database could not tell which it applied.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: its name must start with its number (0021_what.sql)", base)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: base, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have one number", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}
