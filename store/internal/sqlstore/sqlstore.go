// Package sqlstore is the policy the SQL backends (store/sqlite,
// store/postgres) share, written once: what an event's state is, and which
// rows an operator's query selects. A rule written in each backend's SQL
// drifts (replay's did); here each backend speaks it in its own dialect,
// and store/storetest checks that both do.
package sqlstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/store"
)

// EventState is the SQL for the state of the event row e (see
// store.EventPending and its kin): its deliveries taken together, the
// worst first. An event with a dead letter is dead even while another
// delivery is pending, since that is what the operator must act on.
const EventState = `CASE
	WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.state = '` + string(store.Dead) + `') THEN '` + store.EventDead + `'
	WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.state = '` + string(store.Pending) + `') THEN '` + store.EventPending + `'
	WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.state = '` + string(store.Stale) + `') THEN '` + store.EventStale + `'
	WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.state = '` + string(store.Delivered) + `') THEN '` + store.EventDelivered + `'
	WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id) THEN '` + store.EventSkipped + `'
	WHEN e.filtered <> '' THEN '` + store.EventFiltered + `'
	ELSE '` + store.EventStored + `' END`

// Dialect is what a backend's SQL differs in where the backends share a
// query.
type Dialect struct {
	// Numbered is PostgreSQL's $1, $2...; otherwise SQLite's ?.
	Numbered bool
	// StartsWith tests a prefix with starts_with(col, p); otherwise with
	// the range col >= p AND col < p+U+10FFFF, which SQLite's index on
	// col serves.
	StartsWith bool
	// Time is a time as the backend stores it (its clock, its unit).
	Time func(time.Time) any
}

// Filter builds a WHERE clause and its arguments in a dialect's
// placeholders.
type Filter struct {
	dialect Dialect
	conds   []string
	args    []any
}

// NewFilter returns a Filter in d, its conditions conds (which take no
// arguments).
func NewFilter(d Dialect, conds ...string) *Filter {
	return &Filter{dialect: d, conds: conds}
}

// Add adds cond, whose placeholders, each a ?, are args in order. A ? in a
// quoted string or name is not one, and ?? is a ? that stays (PostgreSQL's
// JSON operators: "doc ?? ?" is the key in the argument, "doc ??| ?" any
// of them), as JDBC writes it; SQLite has no such operator, and its ?? is
// refused. A count of placeholders other than
// len(args) is a bug in the caller's SQL, and panics: it would run with
// its arguments in the wrong places.
func (f *Filter) Add(cond string, args ...any) {
	var b strings.Builder
	n := 0
	for i := 0; i < len(cond); i++ {
		c := cond[i]
		switch {
		case c == '\'' || c == '"':
			// A quoted string or name, to its closing quote ('' and ""
			// inside are quotes, which the loop steps over as an end and
			// a start).
			j := strings.IndexByte(cond[i+1:], c)
			if j < 0 {
				panic(fmt.Sprintf("sqlstore: %q has an unclosed %c", cond, c))
			}
			b.WriteString(cond[i : i+j+2])
			i += j + 1
		case c == '?' && i+1 < len(cond) && cond[i+1] == '?':
			if !f.dialect.Numbered {
				panic(fmt.Sprintf("sqlstore: %q: ?? is PostgreSQL's; in SQLite a ? is a placeholder", cond))
			}
			b.WriteByte('?')
			i++
		case c == '?':
			if n == len(args) {
				panic(fmt.Sprintf("sqlstore: %q has more placeholders than its %d arguments", cond, len(args)))
			}
			b.WriteString(f.Arg(args[n]))
			n++
		default:
			b.WriteByte(c)
		}
	}
	if n != len(args) {
		panic(fmt.Sprintf("sqlstore: %q has %d placeholders for %d arguments", cond, n, len(args)))
	}
	f.conds = append(f.conds, b.String())
}

// Arg adds an argument for a placeholder outside the WHERE clause (a
// LIMIT, a SET) and returns the placeholder. With ? placeholders, the
// clause's arguments come first: use Arg only after the last Add.
func (f *Filter) Arg(a any) string {
	f.args = append(f.args, a)
	if f.dialect.Numbered {
		return fmt.Sprintf("$%d", len(f.args))
	}
	return "?"
}

// Where is the clause: its conditions joined by AND, or one that holds.
func (f *Filter) Where() string {
	if len(f.conds) == 0 {
		return "1 = 1"
	}
	return strings.Join(f.conds, " AND ")
}

// Args are the arguments, in placeholder order.
func (f *Filter) Args() []any { return f.args }

// Prefix adds that col starts with prefix.
func (f *Filter) Prefix(col, prefix string) {
	if f.dialect.StartsWith {
		f.Add("starts_with("+col+", ?)", prefix)
		return
	}
	f.Add(col+" >= ? AND "+col+" < ?", prefix, prefix+"\U0010FFFF")
}

// Events selects the events q selects (by all but Before and Limit), from
// the table events aliased e.
func Events(q store.EventQuery, d Dialect) *Filter {
	f := NewFilter(d)
	if q.ID != 0 {
		f.Add("e.id = ?", q.ID)
	}
	if q.IDs != nil {
		// Ids are numbers the store made: written into the clause, not
		// one placeholder each (a search may find thousands).
		ids := make([]string, len(q.IDs))
		for i, id := range q.IDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		if len(ids) == 0 {
			ids = []string{"NULL"} // none: selects nothing
		}
		f.Add("e.id IN (" + strings.Join(ids, ",") + ")")
	}
	if q.Key != "" {
		f.Add("e.key = ?", q.Key)
	}
	if q.Source != "" {
		f.Add("e.source = ?", q.Source)
	}
	f.In("e.source", q.Sources)
	if prefix, ok := strings.CutSuffix(q.Type, "*"); ok {
		f.Prefix("e.type", prefix)
	} else if q.Type != "" {
		f.Add("e.type = ?", q.Type)
	}
	if q.KeyPrefix != "" {
		f.Prefix("e.key", q.KeyPrefix)
	}
	if !q.From.IsZero() {
		f.Add("e.received_at >= ?", d.Time(q.From))
	}
	if !q.To.IsZero() {
		f.Add("e.received_at < ?", d.Time(q.To))
	}
	switch q.State {
	case "":
	case store.EventDead:
		// Dead letters are few: start from them (the deliveries_dead
		// index) rather than test every event, newest first, for one.
		f.Add("e.id IN (SELECT event_id FROM deliveries WHERE state = '" + string(store.Dead) + "')")
	default:
		f.Add("("+EventState+") = ?", q.State)
	}
	return f
}

// DeadLetters selects the dead letters q selects (by all but Before and
// Limit), from deliveries d joined to their events e.
func DeadLetters(q store.DeadQuery, d Dialect) *Filter {
	f := NewFilter(d, "d.state = '"+string(store.Dead)+"'")
	if q.Destination != "" {
		f.Add("d.destination = ?", q.Destination)
	}
	if q.Source != "" {
		f.Add("e.source = ?", q.Source)
	}
	f.In("e.source", q.Sources)
	return f
}

// In adds that col is one of values, when values is not nil: none (an
// empty list) selects nothing, never everything.
func (f *Filter) In(col string, values []string) {
	if values == nil {
		return
	}
	if len(values) == 0 {
		f.Add("1 = 0")
		return
	}
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	f.Add(col+" IN (?"+strings.Repeat(", ?", len(values)-1)+")", args...)
}

// DefaultPage is how many rows a list returns when its query sets no
// limit.
const DefaultPage = 50

// Page narrows f to the page below the cursor before (ids under it, when
// it is set), newest first, and returns the ORDER BY and LIMIT that end
// the query: limit rows, DefaultPage when it is not set. Call it after
// the last Add.
func (f *Filter) Page(id string, before int64, limit int) string {
	if before > 0 {
		f.Add(id+" < ?", before)
	}
	if limit <= 0 {
		limit = DefaultPage
	}
	return " ORDER BY " + id + " DESC LIMIT " + f.Arg(limit)
}

// DeadByDestination counts the dead letters per destination (for
// store.Admin's Queues: see store.MergeDead).
const DeadByDestination = `SELECT destination, COUNT(*) FROM deliveries WHERE state = '` + string(store.Dead) + `' GROUP BY destination`

// FirstAttempt is the SQL list of a delivery row's first attempt, when
// that attempt succeeded and is kept on the row rather than in attempts
// (#30: one write per event fewer): its start (NULL when there is none),
// duration in ms, status, response and digests.
const FirstAttempt = `first_started_at, COALESCE(first_duration_ms, 0), COALESCE(first_status, 0),
	COALESCE(first_response, ''), COALESCE(first_script_digest, ''), COALESCE(first_sent_digest, '')`

// History is a delivery's attempts in the order they were made: rows, the
// attempts table's (in the order recorded), with first, the first attempt
// kept on the delivery's row (nil when there is none), put in its place by
// time. It is usually the first of all; after a dead letter's replay whose
// first attempt succeeded, it is the last.
func History(first *store.AttemptRecord, rows []store.AttemptRecord) []store.AttemptRecord {
	if first == nil {
		return rows
	}
	i := 0
	for i < len(rows) && !rows[i].StartedAt.After(first.StartedAt) {
		i++
	}
	return slices.Insert(rows, i, *first)
}

// FirstDelivered is the record of a first attempt kept on its delivery's
// row, as read through FirstAttempt: a success, attempt 1.
func FirstDelivered(started time.Time, durationMS int64, status int, response, script, sent string) *store.AttemptRecord {
	return &store.AttemptRecord{Attempt: 1, StartedAt: started, Duration: time.Duration(durationMS) * time.Millisecond,
		StatusCode: status, Outcome: store.OutcomeDelivered.String(), Response: response, ScriptDigest: script, SentDigest: sent}
}

// IssueColumns are an alert issue's columns in the order ScanIssue's
// caller reads them (both backends).
const IssueColumns = `id, kind, scope, name, state, opened_at, acknowledged_at, acknowledged_by, resolved_at, resolved_by,
	figures, notified, notices, last_notified_at`

// IssueFilter is the WHERE clause of q (store.IssueQuery) and its page's
// end, in d.
func IssueFilter(q store.IssueQuery, d Dialect) *Filter {
	f := NewFilter(d)
	if len(q.States) > 0 {
		ph := make([]string, len(q.States))
		args := make([]any, len(q.States))
		for i, st := range q.States {
			ph[i], args[i] = "?", st
		}
		f.Add("state IN ("+strings.Join(ph, ", ")+")", args...)
	}
	if q.Unnotified {
		f.Add("state = ? AND notified NOT IN ('', ?)", store.IssueResolved, store.NoticeResolved)
	}
	if q.Before > 0 {
		f.Add("id < ?", q.Before)
	}
	return f
}
