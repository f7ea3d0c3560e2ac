package api

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/admin"
)

// How an action's argument travels, one rule for the handler and the
// Client alike: a field tagged path:"x" fills the route's wildcard {x}; a
// GET or a DELETE carries the other fields in the query, under their JSON
// names (a field tagged query:"-" is not taken there), and a POST carries
// them as its JSON body. So an action's argument type is all the API needs
// to know of it.

// bind fills in, a pointer to an action's argument, from r: the path's
// wildcards, then the query or the body.
func bind(w http.ResponseWriter, r *http.Request, in any) error {
	v := reflect.ValueOf(in).Elem()
	for i, f := range fields(v.Type()) {
		if f.path == "" {
			continue
		}
		raw := r.PathValue(f.path)
		switch fv := v.Field(i); fv.Kind() {
		case reflect.Int64:
			id, err := strconv.ParseInt(raw, 10, 64)
			if err != nil {
				return fmt.Errorf("event %q: %w", raw, admin.ErrNotFound)
			}
			if id <= 0 {
				return fmt.Errorf("event %d: %w", id, admin.ErrNotFound) // as the Service says it
			}
			fv.SetInt(id)
		default:
			fv.SetString(raw)
		}
	}
	if !inQuery(r.Method) {
		if e := decode(w, r, in); e != nil {
			return e
		}
		return nil
	}
	fs := fields(v.Type())
	var allowed []string
	for _, f := range fs {
		if f.query != "" {
			allowed = append(allowed, f.query)
		}
	}
	q, err := query(r, allowed...)
	if err != nil {
		return err
	}
	for i, f := range fs {
		if f.query == "" || q.Get(f.query) == "" {
			continue
		}
		if err := setQuery(v.Field(i), f.query, q.Get(f.query)); err != nil {
			return err
		}
	}
	return nil
}

// setQuery sets a field from its query parameter's value.
func setQuery(fv reflect.Value, name, raw string) error {
	switch fv.Interface().(type) {
	case time.Time:
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			return invalid(name, "want an RFC 3339 time, e.g. 2026-11-30T15:00:00Z")
		}
		fv.Set(reflect.ValueOf(t))
	case int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return invalid(name, "want a number")
		}
		fv.SetInt(int64(n))
	case bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return invalid(name, "want true or false")
		}
		fv.SetBool(b)
	default:
		fv.SetString(raw)
	}
	return nil
}

// encode is in as a request of route's method: the path's wildcards in
// order, and the query or the body.
func encode(method string, in any) (args []string, q url.Values, body any) {
	v := reflect.ValueOf(in)
	for i, f := range fields(v.Type()) {
		fv := v.Field(i)
		switch {
		case f.path != "":
			if fv.Kind() == reflect.Int64 {
				args = append(args, strconv.FormatInt(fv.Int(), 10))
			} else {
				args = append(args, fv.String())
			}
		case f.query != "" && inQuery(method) && !fv.IsZero():
			if q == nil {
				q = url.Values{}
			}
			switch x := fv.Interface().(type) {
			case time.Time:
				q.Set(f.query, x.UTC().Format(time.RFC3339))
			default:
				q.Set(f.query, fmt.Sprint(x))
			}
		}
	}
	if !inQuery(method) {
		body = in
	}
	return args, q, body
}

// inQuery says whether a method carries its argument in the query.
func inQuery(method string) bool { return method == http.MethodGet || method == http.MethodDelete }

// field is where one field of an argument travels: its wildcard, or its
// query parameter.
type field struct{ path, query string }

// fields are t's fields' places, in order (t is flat: an embedded struct's
// fields travel in a body only, where encoding/json reads them).
func fields(t reflect.Type) []field {
	out := make([]field, t.NumField())
	for i := range out {
		sf := t.Field(i)
		if p, ok := sf.Tag.Lookup("path"); ok {
			out[i].path = p
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous || name == "" || name == "-" || sf.Tag.Get("query") == "-" {
			continue
		}
		out[i].query = name
	}
	return out
}
