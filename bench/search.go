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
	rows, err := b.searches("SQLite", st)
	if err != nil {
		return nil, err
	}
	bulk, err := b.bulks("SQLite", st)
	return append(rows, bulk...), err
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
	rows, err := b.searches("PostgreSQL", st)
	if err != nil {
		return nil, err
	}
	bulk, err := b.bulks("PostgreSQL", st)
	return append(rows, bulk...), err
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

// bulks measures acting on every stored event of the source (#46): a
// delivery added to a destination its route passed over (events deliver
// --destination, dry run first, then for real, then again: nothing left to
// add), against the bulk replay that was there before it (every one of
// those deliveries requeued), each once, in one run.
func (b *bench) bulks(backend string, st store.Store) ([]result, error) {
	svc, err := admin.New(admin.Options{Store: st, Sources: []admin.Source{{Name: "bench"}}, Destinations: []admin.Destination{{Name: "ledger"}}})
	if err != nil {
		return nil, err
	}
	f := admin.EventFilter{Source: "bench", Destination: "ledger"}
	cases := []struct {
		name string
		act  func() (admin.Count, error)
	}{
		{"deliver, dry run", func() (admin.Count, error) { return svc.DeliverEvents(context.Background(), f, true) }},
		{"deliver", func() (admin.Count, error) { return svc.DeliverEvents(context.Background(), f, false) }},
		{"deliver again (each already there)", func() (admin.Count, error) { return svc.DeliverEvents(context.Background(), f, false) }},
		{"replay (the baseline: each of those deliveries requeued), dry run", func() (admin.Count, error) { return svc.ReplayEvents(context.Background(), f, true) }},
		{"replay (the baseline)", func() (admin.Count, error) { return svc.ReplayEvents(context.Background(), f, false) }},
	}
	var rows []result
	for _, c := range cases {
		r := result{name: fmt.Sprintf("bulk: %s (%s, every one of %d events)", c.name, backend, b.stored)}
		start := time.Now()
		n, err := c.act()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		r.elapsed, r.requests = time.Since(start), 1
		r.latencies = []time.Duration{r.elapsed}
		r.note = fmt.Sprintf("%d acted on, %d already there (%.0f events/s)", n.Count, n.Already, float64(b.stored)/r.elapsed.Seconds())
		fmt.Fprintf(os.Stderr, "%s: %s, %s\n", r.name, r.elapsed.Round(time.Millisecond), r.note)
		rows = append(rows, r)
	}
	return rows, nil
}
