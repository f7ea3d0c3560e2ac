package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/store"
)

// A search by content (EventFilter.Where) reads stored events newest first
// and keeps those the filter matches: the filter language of a route's
// filter: (internal/route), so that a rule can be pasted between the
// config and a search, and both mean the same. The other fields of the
// filter narrow what is read first, in SQL, through the indexes they have
// (source, type, key prefix, time window). A search reads at most
// EventFilter.Scan events a call and says how far it read (Searched), so
// an operator is told "narrow it", never kept waiting on a page that hangs.
const (
	// DefaultScan is how many events one search reads at most when the
	// caller sets no Scan: some 1 to 3 seconds of 1 KiB events on either
	// store (BENCHMARKS.md).
	DefaultScan = 100_000
	// MaxScan is the most a caller may raise Scan to.
	MaxScan = 10_000_000
	// maxWhere bounds a search's filter text (a filter is written by a
	// person; MaxDepth bounds how it nests).
	maxWhere = 64 << 10
	// A read of the store returns scanBytes of bodies or so: its first
	// firstPage events, then as many as the bodies read so far say fit,
	// at most maxPage (1 KiB events: 500 a read; 1 MiB ones: 16), so a
	// search holds a few MiB whatever its events weigh. More than 500 a
	// read is slower on PostgreSQL, whose plan for the bodies' join then
	// changes (300,000 events of 1 KiB: 31,000 to 45,000 events/s at 500,
	// 8,300 to 9,000 at 2,000, alternating).
	scanBytes = 16 << 20
	firstPage = 32
	maxPage   = 500
	// idSkew is how far before its newer neighbours' an event's arrival
	// may be in id order: ids follow arrival but for a batch's commit, a
	// replica's sequence, a publish inside a long transaction. A search
	// with a from stops an hour's worth of arrivals past it (see search).
	idSkew = time.Hour
)

// Searched says how far a search by content read: what it read, whether
// that was every event the rest of the filter selects, and, when not, how
// far back it got.
type Searched struct {
	// Read is how many events this call read; Matched, how many of them
	// the filter kept (all of them are in the answer, but a page that
	// filled first).
	Read    int `json:"read"`
	Matched int `json:"matched"`
	// Scan is the bound the call read under.
	Scan int `json:"scan"`
	// Complete is true when the call read every event the rest of the
	// filter selects, back to the oldest.
	Complete bool `json:"complete"`
	// Oldest is when the oldest event read arrived.
	Oldest time.Time `json:"oldest,omitzero"`
	// OverBudget counts events whose body was too costly for the filter
	// to read whole (see route.Budget): they are not among the matches.
	OverBudget int `json:"over_budget,omitempty"`
	// Message says it in a sentence, for people.
	Message string `json:"message"`
}

// where compiles f's Where ("": nil).
func (f EventFilter) where() (*route.Filter, error) {
	if f.Where == "" {
		return nil, nil
	}
	if len(f.Where) > maxWhere {
		return nil, invalid("where", "at most %d bytes", maxWhere)
	}
	// Said apart: to the decoder a raw NUL or a byte that is not UTF-8
	// is a syntax error, or worse, a string that silently matches nothing.
	if i := strings.IndexByte(f.Where, 0); i >= 0 {
		return nil, invalid("where", "a NUL byte at %d: write it as \\u0000 inside a JSON string", i)
	}
	if !utf8.ValidString(f.Where) {
		return nil, invalid("where", "not UTF-8: a filter is JSON text; write other characters as \\u escapes")
	}
	var spec any
	dec := json.NewDecoder(bytes.NewReader([]byte(f.Where)))
	if err := dec.Decode(&spec); err != nil || dec.More() {
		return nil, invalid("where", "want a JSON object such as a route's filter: {\"body\": {\"data\": {\"customer\": \"cus_1\"}}}")
	}
	if top, ok := spec.(map[string]any); ok {
		for _, part := range []string{"query", "path"} {
			if _, asked := top[part]; asked {
				return nil, invalid("where", "%s: a stored event keeps its body and headers, not the request's %s: search body and headers", part, part)
			}
		}
	}
	filter, err := route.Compile(spec)
	if err != nil {
		return nil, invalid("where", "%v", err)
	}
	return filter, nil
}

// scan is f's bound on what a search reads.
func (f EventFilter) scan() (int, error) {
	switch {
	case f.Scan == 0:
		return DefaultScan, nil
	case f.Scan < 1 || f.Scan > MaxScan:
		return 0, invalid("scan", "want 1 to %d", MaxScan)
	}
	return f.Scan, nil
}

// search reads q's events newest first, from below q.Before, until it has
// limit that filter matches (0: no limit), it has read scan events, or
// none is left. next is the id to go on below: 0 when the search read to
// the end.
func (s *Service) search(ctx context.Context, q store.EventQuery, filter *route.Filter, scan, limit int) (found []int64, rep Searched, next int64, err error) {
	rep.Scan = scan
	// The time window's start is read here, not in SQL: no index has the
	// arrival time (one more on every insert of the hot path), and a
	// query for "newest first, at or after from" with too few rows left
	// in the window would read the rest of the table to fill its page.
	// Ids follow arrival, so the search walks the id index down and stops
	// once it is idSkew past from: a day's search reads about the day.
	from := q.From
	q.From = time.Time{}
	var bodyBytes int64 // read so far
	for {
		q.Limit = min(pageFor(rep.Read, bodyBytes), scan-rep.Read)
		batch, err := s.admin.EventContents(ctx, q)
		if err != nil {
			return nil, rep, 0, err
		}
		past := false
		for _, e := range batch {
			rep.Read++
			bodyBytes += int64(len(e.Body)) + 256 // and its row
			q.Before = e.ID
			if !from.IsZero() && e.ReceivedAt.Before(from) {
				past = past || e.ReceivedAt.Before(from.Add(-idSkew))
				continue
			}
			rep.Oldest = e.ReceivedAt.UTC()
			in := route.Input{Body: e.Body, Header: e.Header}
			if filter.Match(&in) {
				found = append(found, e.ID)
				if limit > 0 && len(found) == limit {
					rep.Matched = len(found)
					rep.Message = fmt.Sprintf("read %d events, %d matched: a full page (the next page searches on from the cursor)", rep.Read, rep.Matched)
					return found, rep, e.ID, nil
				}
			} else if in.Over() {
				rep.OverBudget++
			}
		}
		rep.Matched = len(found)
		switch {
		case len(batch) < q.Limit || past:
			rep.Complete = true
			rep.Message = fmt.Sprintf("read %d events, every one the other parameters select; %d matched", rep.Read, rep.Matched)
			return found, rep, 0, nil
		case rep.Read >= scan && !s.olderThan(ctx, q):
			rep.Complete = true
			rep.Message = fmt.Sprintf("read %d events, every one the other parameters select; %d matched", rep.Read, rep.Matched)
			return found, rep, 0, nil
		case rep.Read >= scan:
			rep.Message = fmt.Sprintf("read the last %d events the other parameters select (back to %s), %d matched; older ones were not read: narrow the time window (from, to), or raise scan (up to %d), or go on from the cursor",
				rep.Read, rep.Oldest.Format(time.RFC3339), rep.Matched, MaxScan)
			return found, rep, q.Before, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, rep, 0, err
		}
	}
}

// searchEvents is Events with a Where: a page of the events the filter
// matches, and how far the search read.
func (s *Service) searchEvents(ctx context.Context, f EventFilter, q store.EventQuery) (EventPage, error) {
	filter, err := f.where()
	if err != nil {
		return EventPage{}, err
	}
	scan, err := f.scan()
	if err != nil {
		return EventPage{}, err
	}
	if err := s.knownSource(ctx, f.Source); err != nil {
		return EventPage{}, err
	}
	found, rep, next, err := s.search(ctx, q, filter, scan, q.Limit)
	if err != nil {
		return EventPage{}, err
	}
	// The page's summaries (state, deliveries), for the events found only.
	var list []store.EventSummary
	if len(found) > 0 {
		if list, err = s.admin.ListEvents(ctx, store.EventQuery{IDs: found, Limit: len(found)}); err != nil {
			return EventPage{}, err
		}
	}
	page := EventPage{Events: make([]EventSummary, len(list)), Searched: &rep}
	for i, e := range list {
		page.Events[i] = summaryOf(e)
	}
	if next != 0 {
		page.NextCursor = cursorOf(next)
	}
	return page, nil
}

// olderThan reports whether q selects an event below q.Before: whether a
// search stopped by its bound left any unread (an error says yes, and the
// search says to go on).
func (s *Service) olderThan(ctx context.Context, q store.EventQuery) bool {
	q.Limit = 1
	older, err := s.admin.ListEvents(ctx, q)
	return err != nil || len(older) > 0
}

// pageFor is how many events the next read of a search asks for, having
// read n events of size bytes in all.
func pageFor(n int, size int64) int {
	if n == 0 {
		return firstPage
	}
	return int(max(1, min(maxPage, scanBytes*int64(n)/max(size, 1))))
}
