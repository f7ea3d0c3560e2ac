package sqlstore

import (
	"reflect"
	"testing"
)

// A placeholder is a ? outside quotes; ?? is PostgreSQL's ? operator
// (before, Add rewrote the first ? it found, the operator's included).
func TestAddRewritesOnlyPlaceholders(t *testing.T) {
	pg, lite := Dialect{Numbered: true}, Dialect{}
	cases := []struct {
		d     Dialect
		cond  string
		args  []any
		where string
	}{
		{pg, "doc ?? ?", []any{"k"}, "doc ? $1"},
		{pg, "doc ??| ? AND id > ?", []any{[]string{"a", "b"}, 3}, "doc ?| $1 AND id > $2"},
		{pg, "doc ??& ?", []any{[]string{"a"}}, "doc ?& $1"},
		{pg, "a = ? AND b = ?", []any{1, 2}, "a = $1 AND b = $2"},
		{pg, "note = 'why?' AND \"odd?col\" = ?", []any{1}, "note = 'why?' AND \"odd?col\" = $1"},
		{pg, "note = 'it''s ?' AND a = ?", []any{1}, "note = 'it''s ?' AND a = $1"},
		{lite, "a = ? AND note <> '?'", []any{1}, "a = ? AND note <> '?'"},
		{lite, "e.id IN (SELECT 1)", nil, "e.id IN (SELECT 1)"},
	}
	for _, c := range cases {
		f := NewFilter(c.d)
		f.Add(c.cond, c.args...)
		if f.Where() != c.where || !reflect.DeepEqual(f.Args(), c.args) && len(c.args) > 0 {
			t.Errorf("Add(%q, %v) = %q %v; want %q %v", c.cond, c.args, f.Where(), f.Args(), c.where, c.args)
		}
	}
	// A count of placeholders unlike the arguments' is the caller's bug:
	// run, its arguments would stand in the wrong places.
	for _, c := range []struct {
		d    Dialect
		cond string
		args []any
	}{
		{pg, "doc ? ?", []any{"k"}}, {pg, "a = ?", nil}, {pg, "a = 1", []any{1}},
		{pg, "a = 'unclosed ?", []any{1}}, {lite, "doc ?? ?", []any{"k"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%q, %v) did not panic", c.cond, c.args)
				}
			}()
			NewFilter(c.d).Add(c.cond, c.args...)
		}()
	}
}
