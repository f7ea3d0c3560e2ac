package objects_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// version is one state of a source: what a request to it gets while a
// replica runs it, from the change that made it on.
type version struct {
	begun    time.Time // the change's request sent: no replica runs it before
	answered time.Time // its answer (zero: not yet)
	on       int       // the replica that took the change, -1 for one before the run
	secret   string
	dests    []string
	filter   bool // only events of amount 1,000 and over go to dests
	deleted  bool // absent: before its create, after its delete
}

// outcome is what an event of amount signed with secret gets from v: the
// status, and when 200 the destinations it goes to, joined by commas.
func (v version) outcome(secret string, amount int) (int, string) {
	switch {
	case v.deleted:
		return 404, ""
	case secret != v.secret:
		return 401, ""
	case v.filter && amount < 1000:
		return 200, ""
	}
	return 200, strings.Join(v.dests, ",")
}

// sure is the time from which replica r runs v or a later version: at its
// answer on the replica that took the change (it applies before it
// answers), bound after it on the others.
func (v version) sure(r int) time.Time {
	switch {
	case v.answered.IsZero():
		return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	case v.on == r || v.on < 0:
		return v.answered
	}
	return v.answered.Add(bound)
}

// acceptance is an event answered 200: its source, and the destination
// lists ("a,b"; "" for none) it may go to, one of them, each destination
// once. There are two when the request met a change on its way.
type acceptance struct {
	source string
	may    []string
}

// ledger keeps every source's versions and every event accepted, and
// holds each answer against what the versions allow: a request sent to a
// replica may meet any version that had begun by its answer and that a
// later one was not yet sure to have replaced when it was sent. An answer
// no such version gives is a failure: a request to a source that failed,
// or that an old version answered after the bound.
type ledger struct {
	mu       sync.Mutex
	sources  map[string][]version
	accepted map[string]acceptance // by event id
	statuses map[int]int           // traffic's answers, by status
	failures []string
}

func newLedger() *ledger {
	return &ledger{sources: map[string][]version{}, accepted: map[string]acceptance{}, statuses: map[int]int{}}
}

// absent adds source name as one to be created in the run.
func (l *ledger) absent(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sources[name] = []version{{on: -1, deleted: true, answered: time.Now()}}
}

// existing adds source name as it is before the run.
func (l *ledger) existing(name string, v version) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v.on, v.answered = -1, time.Now()
	l.sources[name] = []version{v}
}

// change makes next of name's latest version its new one, taken by
// replica r through do: begun before do is called, answered when it
// returns.
func (l *ledger) change(name string, r int, next func(version) version, do func() answer) answer {
	l.mu.Lock()
	vs := l.sources[name]
	v := next(vs[len(vs)-1])
	v.begun, v.on, v.answered = time.Now(), r, time.Time{}
	l.sources[name] = append(vs, v)
	i := len(vs)
	l.mu.Unlock()
	a := do()
	l.mu.Lock()
	l.sources[name][i].answered = time.Now()
	l.mu.Unlock()
	return a
}

// current is the secret traffic signs name's events with: its latest
// answered version's (a rotation's new one once the PATCH is answered),
// or its last before its delete; false before its create is answered.
func (l *ledger) current(name string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	vs := l.sources[name]
	for i := len(vs) - 1; i >= 0; i-- {
		if !vs[i].answered.IsZero() && !vs[i].deleted {
			return vs[i].secret, true
		}
	}
	return "", false
}

// lastAnswer is when the last change was answered.
func (l *ledger) lastAnswer() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, vs := range l.sources {
		for _, v := range vs {
			if v.answered.After(last) {
				last = v.answered
			}
		}
	}
	return last
}

// send sends event id of amount to source name on replica r of intakes,
// signed with secret, and holds its answer against the versions; what
// says what sent it. It returns the status.
func (l *ledger) send(t testing.TB, intakes []string, r int, name, secret, id string, amount int, what string) int {
	sent := time.Now()
	a := webhook(t, intakes[r], name, secret, id, amount)
	got := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	vs := l.sources[name]
	allowed := map[int]bool{}
	var may []string
	for k, v := range vs {
		if v.begun.After(got) || k+1 < len(vs) && vs[k+1].sure(r).Before(sent) {
			continue
		}
		status, dests := v.outcome(secret, amount)
		allowed[status] = true
		if status == 200 && !slices.Contains(may, dests) {
			may = append(may, dests)
		}
	}
	if what == "traffic" {
		l.statuses[a.status]++
	}
	if !allowed[a.status] {
		l.failures = append(l.failures, fmt.Sprintf("%s: %s (event %s) on replica %d: %d %.200s, want one of %v (sent %s, answered %s)",
			what, name, id, r, a.status, a.body, slices.Sorted(maps.Keys(allowed)), sent.Format("15:04:05.000"), got.Format("15:04:05.000")))
	}
	if a.status == 200 {
		l.accepted[id] = acceptance{source: name, may: may}
	}
	return a.status
}

// misdelivered is, for every accepted event, what its deliveries (by
// event id: the destinations that got it) get wrong: none of its lists,
// or a destination twice; and every delivery of an event never accepted.
// Each event only (keep) when keep is set.
func (l *ledger) misdelivered(got map[string][]string, keep func(acceptance) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wrong []string
	for id, acc := range l.accepted {
		if keep != nil && !keep(acc) {
			continue
		}
		if d := strings.Join(got[id], ","); !slices.Contains(acc.may, d) {
			wrong = append(wrong, fmt.Sprintf("%s of %s delivered to [%s], want one of %q", id, acc.source, d, acc.may))
		}
	}
	if keep == nil {
		for id, ds := range got {
			if _, ok := l.accepted[id]; !ok {
				wrong = append(wrong, fmt.Sprintf("%s, never accepted, delivered to %v", id, ds))
			}
		}
	}
	slices.Sort(wrong)
	return wrong
}
