package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// searchSQLite measures a search by content (GET /v1/events?where=, without
// the HTTP) over b.stored events of 1 KiB on SQLite.
func (b *bench) searchSQLite() ([]result, error) {
	path := filepath.Join(b.dir, "search.db")
	if err := prefill(path, b.stored, 365*24*time.Hour); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return b.searches("SQLite", st)
}

// searchPostgres is the same on PostgreSQL, the bodies in their day's
// partition as intake stores them.
func (b *bench) searchPostgres() ([]result, error) {
	url, drop, err := b.prefilledSchema(false, false)
	if err != nil {
		return nil, err
	}
	defer drop()
	st, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return b.searches("PostgreSQL", st)
}

// searches runs each search three times, one at a time, and says what
// each read.
func (b *bench) searches(backend string, st store.Store) ([]result, error) {
	svc, err := admin.New(admin.Options{Store: st, Sources: []admin.Source{{Name: "bench"}}})
	if err != nil {
		return nil, err
	}
	eq := `{"body":{"data":{"object":{"id":"obj_none"}}}}`
	cases := []struct {
		name string
		f    admin.EventFilter
	}{
		{"a field equal to a value, the default bound", admin.EventFilter{Source: "bench", Where: eq}},
		{"a field equal to a value, every stored event", admin.EventFilter{Source: "bench", Where: eq, Scan: b.stored}},
		{"$or of a field and a regex, the default bound", admin.EventFilter{Source: "bench",
			Where: `{"body":{"$or":[{"type":"nope"},{"data":{"object":{"id":{"$regex":"^obj_x"}}}}]}}`}},
		{"a field equal to a value within the last day (the stored events are older)", admin.EventFilter{Source: "bench", Where: eq, From: time.Now().Add(-24 * time.Hour)}},
		{"a header equal to a value, the default bound", admin.EventFilter{Source: "bench", Where: `{"headers":{"x-shop":"acme"}}`}},
	}
	var rows []result
	for _, c := range cases {
		r := result{name: fmt.Sprintf("search: %s (%s, %d events stored)", c.name, backend, b.stored)}
		var last admin.Searched
		start := time.Now()
		for range 3 {
			t0 := time.Now()
			page, err := svc.Events(context.Background(), c.f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
			r.latencies = append(r.latencies, time.Since(t0))
			last = *page.Searched
		}
		r.elapsed, r.requests = time.Since(start), 3
		r.note = fmt.Sprintf("read %d events a call (%.0f events/s), %d matched, complete %v", last.Read,
			float64(last.Read)/r.pct(0.5).Seconds(), last.Matched, last.Complete)
		fmt.Fprintf(os.Stderr, "%s: p50 %s, %s\n", r.name, r.pct(0.5), r.note)
		rows = append(rows, r)
	}
	return rows, nil
}
