package route

import (
	"fmt"
	"strings"
)

// Route is one destination of a source, and what it wants of the source's
// events: Types (exact names, or a prefix ending in *) and a Filter; an
// event must pass both that are set. A route with neither wants every
// event.
type Route struct {
	Destination string
	Types       []string
	Filter      *Filter
}

// Wants reports whether the route wants an event of type typ, read from in.
func (r Route) Wants(typ string, in *Input) bool {
	if len(r.Types) > 0 && !MatchType(r.Types, typ) {
		return false
	}
	return r.Filter == nil || r.Filter.Match(in)
}

// MatchType reports whether typ is one of patterns: an exact name, a
// prefix ending in * (invoice.* is invoice.paid and invoice.finalized),
// or * alone (every event, an untyped one too).
func MatchType(patterns []string, typ string) bool {
	for _, p := range patterns {
		if p == "*" {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if typ != "" && strings.HasPrefix(typ, prefix) {
				return true
			}
		} else if p == typ {
			return true
		}
	}
	return false
}

// CheckTypes refuses an empty pattern, or a * anywhere but at the end.
func CheckTypes(patterns []string) error {
	for i, p := range patterns {
		if p == "" {
			return fmt.Errorf("types[%d] is empty", i)
		}
		if star := strings.IndexByte(p, '*'); star >= 0 && star != len(p)-1 {
			return fmt.Errorf("types[%d] %q: a * may only end a pattern (invoice.*)", i, p)
		}
	}
	return nil
}

// Routes are a source's routes, in the config's order.
type Routes []Route

// Pick returns the destinations that want the event, and those that do
// not (its filtered ones), each in the routes' order.
func (rs Routes) Pick(typ string, in *Input) (want, skip []string) {
	return rs.Plan().Pick(typ, in)
}

// Plan is a source's routes made ready to pick events: the body parts of
// all their filters made one program (see program), so that an event's
// body is walked once for all of them, in one pass.
type Plan struct {
	routes Routes
	prog   *program // nil when no filter reads the body
	at     []int    // each route's filter's place in prog, or -1
}

// Plan prepares rs to pick events; a source makes it when it is loaded.
func (rs Routes) Plan() *Plan {
	p := &Plan{routes: rs, at: make([]int, len(rs))}
	var bodies []matcher
	for i, r := range rs {
		p.at[i] = -1
		if r.Filter != nil && r.Filter.body != nil {
			p.at[i] = len(bodies)
			bodies = append(bodies, r.Filter.body)
		}
	}
	if len(bodies) > 0 {
		p.prog = compileProgram(bodies)
	}
	return p
}

// Pick returns the destinations that want the event, and those that do
// not (its filtered ones), each in the routes' order. The body is walked
// once, when some route whose types take the event has a filter that
// reads it; when that walk would cost more than in's Budget, those
// routes do not want the event (in.Over says so).
func (p *Plan) Pick(typ string, in *Input) (want, skip []string) {
	var body []bool
	walked, decided := false, false
	for i, r := range p.routes {
		ok := len(r.Types) == 0 || MatchType(r.Types, typ)
		if ok && r.Filter != nil {
			if p.at[i] >= 0 {
				if !walked {
					walked, body = true, make([]bool, len(p.prog.roots))
					in.walks++
					if decided = p.prog.run(in.Body, in.budget(), body); !decided {
						in.over = true
					}
				}
				ok = decided && body[p.at[i]]
			}
			ok = ok && r.Filter.matchRest(in)
		}
		if ok {
			want = append(want, r.Destination)
		} else {
			skip = append(skip, r.Destination)
		}
	}
	return want, skip
}

// Routed reports whether any route wants only some events (without one,
// every event goes to every destination, and nothing need be read).
func (rs Routes) Routed() bool {
	for _, r := range rs {
		if len(r.Types) > 0 || r.Filter != nil {
			return true
		}
	}
	return false
}

// To is routes that want every event, to each of destinations.
func To(destinations ...string) Routes {
	rs := make(Routes, len(destinations))
	for i, d := range destinations {
		rs[i] = Route{Destination: d}
	}
	return rs
}

// Destinations are the routes' destination names.
func (rs Routes) Destinations() []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Destination
	}
	return out
}
