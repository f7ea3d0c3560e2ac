package sqlstore

import (
	"os"
	"slices"
	"testing"
	"testing/fstest"
)

// applied are the migrations databases have recorded, per backend, before
// the numbering was aligned: they keep their numbers and names for good
// (a database that applied SQLite's 0017 would skip a new 0017 and run
// the old one's change again under another number).
var applied = map[string][]string{
	"sqlite": {"0001_init.sql", "0002_store_id.sql", "0003_event_headers.sql", "0004_drop_deliveries_event.sql",
		"0005_effects.sql", "0006_stats_hourly.sql", "0007_admin.sql", "0008_sessions.sql", "0009_event_copies.sql",
		"0010_event_type.sql", "0011_event_filtered.sql", "0012_flow.sql", "0013_rate_slots.sql", "0014_order.sql",
		"0015_event_trace.sql", "0016_body_retention.sql", "0017_attempt_digests.sql", "0018_first_attempt.sql"},
	"postgres": {"0001_init.sql", "0002_store_id.sql", "0003_event_headers.sql", "0004_notify_trigger.sql",
		"0005_effects.sql", "0006_stats_hourly.sql", "0007_admin.sql", "0008_sessions.sql", "0009_event_copies.sql",
		"0010_event_type.sql", "0011_event_filtered.sql", "0012_flow.sql", "0013_rate_slots.sql", "0014_order.sql",
		"0015_event_trace.sql", "0016_body_retention.sql", "0017_partitions.sql", "0018_attempt_digests.sql",
		"0019_first_attempt.sql", "0020_deliveries_without_fk.sql"},
}

// The two backends' migrations keep the numbering rule (see Aligned):
// what databases applied stays as it was, and from Aligned on a number is
// one change, with one name, in both backends.
func TestMigrationNumbering(t *testing.T) {
	root := os.DirFS("../..")
	byNumber := map[int]string{}
	for backend, old := range applied {
		list, err := Migrations(root, backend+"/migrations")
		if err != nil || len(list) == 0 {
			t.Fatalf("%s: %d migrations, %v", backend, len(list), err)
		}
		var names []string
		for _, m := range list {
			names = append(names, m.Name)
			if m.Version < Aligned {
				continue
			}
			if other, ok := byNumber[m.Version]; ok && other != m.Name {
				t.Errorf("%s's %s and the other backend's %s share a number: one number is one change (name them alike), or take the next free number", backend, m.Name, other)
			}
			byNumber[m.Version] = m.Name
		}
		if len(names) < len(old) || !slices.Equal(names[:len(old)], old) {
			t.Errorf("%s's migrations begin %v; want the ones databases applied, as they were: %v", backend, names[:min(len(names), len(old))], old)
		}
		for _, n := range names[len(old):] {
			if v, _ := Migrations(fstest.MapFS{n: {}}, "."); len(v) == 1 && v[0].Version < Aligned {
				t.Errorf("%s's new migration %s is numbered under %d, where the backends' numbers meant different changes", backend, n, Aligned)
			}
		}
	}
	// The same change in both backends has one number.
	byName := map[string]int{}
	for v, n := range byNumber {
		if w, ok := byName[n]; ok && w != v {
			t.Errorf("%s is numbered %d in one backend and %d in the other", n, w, v)
		}
		byName[n] = v
	}
}

// A name without its number, or a number given twice, is refused: a
// database could not tell which it applied.
func TestMigrationsRefuseAmbiguousNames(t *testing.T) {
	for _, fsys := range []fstest.MapFS{
		{"m/init.sql": {}},
		{"m/0001_init.sql": {}, "m/01_again.sql": {}},
		{"m/0000_zero.sql": {}},
	} {
		if list, err := Migrations(fsys, "m"); err == nil {
			t.Errorf("%v: %v, want an error", fsys, list)
		}
	}
	list, err := Migrations(fstest.MapFS{"m/0021_b.sql": {Data: []byte("B")}, "m/0002_a.sql": {Data: []byte("A")}, "m/README": {}}, "m")
	if err != nil || len(list) != 2 || list[0].Version != 2 || list[1].Version != 21 || list[1].SQL != "B" || list[1].Name != "0021_b.sql" {
		t.Fatalf("%+v %v", list, err)
	}
}
