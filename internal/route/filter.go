// Package route decides which of a source's destinations want an event:
// by its type (types: ["invoice.*"]) and by a filter over its body,
// headers, query and path, in the JSON filter syntax Hookdeck and Convoy
// users already write, so that a rule copied from either means the same
// here. It is the one place the decision is made; intake asks it while it
// makes the event's deliveries, and the store creates only those.
package route

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// MaxDepth bounds how deeply a filter nests: a filter is written by a
// person, and a deeper one is a mistake (or an attack on the config check).
const MaxDepth = 32

// Filter is a compiled filter. Compile checks it whole, once: matching
// never fails, never panics and never loops (regular expressions are
// RE2, linear in their input), and what it costs is bounded by the
// request's Budget.
type Filter struct {
	body, headers, query, path matcher
	prog                       *program // body, ready to match a body's bytes
}

// Input is what a filter reads of an event.
type Input struct {
	Body   []byte // JSON; a body that is not JSON matches only filters that ask nothing of it
	Header http.Header
	Query  url.Values
	Path   string

	// Budget is what the filters may spend on this event's body, shared
	// with the other events of its request; nil is a budget of its own,
	// for a request of this body alone.
	Budget *Budget

	over    bool           // the budget ran out: no filter reading the body matched
	walks   int            // how many times the body was walked: once at most
	headers map[string]any // headerDoc, made once
	query   map[string]any // queryDoc, made once
}

// Over reports whether the filters that read this event's body could not
// be matched within its Budget: each answered that its route does not
// want the event.
func (in *Input) Over() bool { return in.over }

func (in *Input) budget() *Budget {
	if in.Budget == nil {
		in.Budget = NewBudget(len(in.Body))
	}
	return in.Budget
}

// missing is a value that is not there (a body that is not JSON, a field
// an object lacks): it matches only {"$exist": false} and what negates.
type missing struct{}

// Compile compiles a filter: an object whose keys are body, headers, query
// and path, each holding the filter of that part. spec is as YAML or JSON
// decodes it (maps, lists, strings, numbers, booleans, null).
func Compile(spec any) (*Filter, error) {
	top, ok := spec.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want an object of body, headers, query and path")
	}
	f := &Filter{}
	for _, part := range sortedKeys(top) {
		m, err := compile(top[part], part, 1)
		if err != nil {
			return nil, err
		}
		switch part {
		case "body":
			f.body, f.prog = m, compileProgram([]matcher{m})
		case "headers":
			f.headers = lowerNames(m)
		case "query":
			f.query = m
		case "path":
			f.path = m
		default:
			return nil, fmt.Errorf("%s: want body, headers, query or path", part)
		}
	}
	return f, nil
}

// Match reports whether in passes every part the filter names.
func (f *Filter) Match(in *Input) bool {
	if f.body != nil {
		var got [1]bool
		in.walks++
		if !f.prog.run(in.Body, in.budget(), got[:]) {
			in.over = true
			return false
		}
		if !got[0] {
			return false
		}
	}
	return f.matchRest(in)
}

// matchRest reports whether in passes the parts the filter names other
// than its body.
func (f *Filter) matchRest(in *Input) bool {
	if f.headers != nil {
		if in.headers == nil {
			in.headers = headerDoc(in.Header)
		}
		if !f.headers.match(in.headers) {
			return false
		}
	}
	if f.query != nil {
		if in.query == nil {
			in.query = queryDoc(in.Query)
		}
		if !f.query.match(in.query) {
			return false
		}
	}
	if f.path != nil && !f.path.match(in.Path) {
		return false
	}
	return true
}

// lowerNames lowers the header names a headers filter reads (X-GitHub-Event
// is x-github-event, as headerDoc names it: header names are
// case-insensitive), under $and, $or and $not too; what matches a header's
// value is left as it is.
func lowerNames(m matcher) matcher {
	switch x := m.(type) {
	case allOf:
		out := make(allOf, len(x))
		for i, e := range x {
			out[i] = lowerNames(e)
		}
		return out
	case anyOf:
		out := make(anyOf, len(x))
		for i, e := range x {
			out[i] = lowerNames(e)
		}
		return out
	case not:
		return not{lowerNames(x.m)}
	case field:
		return field{name: strings.ToLower(x.name), m: x.m}
	}
	return m
}

// headerDoc is the headers as the filter sees them: lower-case names, the
// first value of each.
func headerDoc(h http.Header) map[string]any {
	out := make(map[string]any, len(h))
	for k, vs := range h {
		if len(vs) > 0 {
			out[strings.ToLower(k)] = vs[0]
		}
	}
	return out
}

func queryDoc(q url.Values) map[string]any {
	out := make(map[string]any, len(q))
	for k, vs := range q {
		if len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}

// matcher matches one value.
type matcher interface{ match(v any) bool }

func compile(spec any, path string, depth int) (matcher, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d", path, MaxDepth)
	}
	switch s := spec.(type) {
	case map[string]any:
		var all allOf
		for _, k := range sortedKeys(s) {
			at := path + "." + k
			if strings.HasPrefix(k, "$") {
				m, err := compileOp(k, s[k], at, depth)
				if err != nil {
					return nil, err
				}
				all = append(all, m)
				continue
			}
			m, err := compile(s[k], at, depth+1)
			if err != nil {
				return nil, err
			}
			all = append(all, field{name: k, m: m})
		}
		return all, nil
	case []any:
		// An array filter: the value must be an array holding every one.
		var each allOf
		for i, e := range s {
			m, err := compile(e, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			each = append(each, m)
		}
		return containsAll(each), nil
	}
	v, err := scalar(spec, path)
	if err != nil {
		return nil, err
	}
	return equals{v}, nil
}

func compileOp(op string, arg any, path string, depth int) (matcher, error) {
	switch op {
	case "$eq":
		v, err := scalar(arg, path)
		return equals{v}, err
	case "$neq":
		v, err := scalar(arg, path)
		return not{equals{v}}, err
	case "$in", "$nin":
		list, ok := arg.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a list", path)
		}
		var any anyOf
		for i, e := range list {
			v, err := scalar(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			any = append(any, equals{v})
		}
		if op == "$nin" {
			return not{any}, nil
		}
		return any, nil
	case "$gt", "$gte", "$lt", "$lte":
		v, err := scalar(arg, path)
		if err != nil {
			return nil, err
		}
		switch v.(type) {
		case float64, string:
		default:
			return nil, fmt.Errorf("%s: want a number or a string", path)
		}
		return compare{op: op, to: v}, nil
	case "$exist":
		b, ok := arg.(bool)
		if !ok {
			return nil, fmt.Errorf("%s: want true or false", path)
		}
		return exist(b), nil
	case "$startsWith", "$endsWith":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a string", path)
		}
		return affix{prefix: op == "$startsWith", s: s}, nil
	case "$regex":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a string", path)
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		return pattern{re}, nil
	case "$and", "$or":
		list, ok := arg.([]any)
		if !ok || len(list) == 0 {
			return nil, fmt.Errorf("%s: want a list of filters", path)
		}
		var ms []matcher
		for i, e := range list {
			m, err := compile(e, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		if op == "$or" {
			return anyOf(ms), nil
		}
		return allOf(ms), nil
	case "$not":
		m, err := compile(arg, path, depth+1)
		return not{m}, err
	}
	return nil, fmt.Errorf("%s: no such operator (want $eq $neq $in $nin $gt $gte $lt $lte $exist $startsWith $endsWith $regex $and $or $not)", path)
}

// scalar normalizes a filter's value as JSON would decode it: numbers as
// float64 (YAML's ints included), strings, booleans, nil.
func scalar(v any, path string) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s: want a string, number, boolean or null here", path)
}

// value normalizes a value of the data (json.Number to float64).
func value(v any) any {
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil && !math.IsInf(f, 0) {
			return f
		}
		return string(n)
	}
	return v
}

type allOf []matcher

func (ms allOf) match(v any) bool {
	for _, m := range ms {
		if !m.match(v) {
			return false
		}
	}
	return true
}

type anyOf []matcher

func (ms anyOf) match(v any) bool {
	if arr, ok := v.([]any); ok {
		return anyElement(arr, ms)
	}
	for _, m := range ms {
		if m.match(v) {
			return true
		}
	}
	return false
}

type not struct{ m matcher }

func (n not) match(v any) bool { return !n.m.match(v) }

// field matches an object's field; on an array, any element's.
type field struct {
	name string
	m    matcher
}

func (f field) match(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		e, ok := x[f.name]
		if !ok {
			return f.m.match(missing{})
		}
		return f.m.match(e)
	case []any:
		return anyElement(x, f)
	}
	return f.m.match(missing{})
}

// containsAll: the value is an array, and each matcher matches one of its
// elements.
type containsAll []matcher

func (c containsAll) match(v any) bool {
	arr, ok := v.([]any)
	if !ok {
		return false
	}
	for _, m := range c {
		found := false
		for _, e := range arr {
			if m.match(e) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// equals: the value is want, or an array holding it.
type equals struct{ want any }

func (e equals) match(v any) bool {
	if arr, ok := v.([]any); ok {
		return anyElement(arr, e)
	}
	if _, gone := v.(missing); gone {
		return false
	}
	return value(v) == e.want
}

// anyElement: a value matcher on an array matches when an element does
// (an array contains the value).
func anyElement(arr []any, m matcher) bool {
	for _, x := range arr {
		if m.match(x) {
			return true
		}
	}
	return false
}

type compare struct {
	op string
	to any
}

func (c compare) match(v any) bool {
	if arr, ok := v.([]any); ok {
		return anyElement(arr, c)
	}
	var cmp int
	switch to := c.to.(type) {
	case float64:
		f, ok := value(v).(float64)
		if !ok {
			return false
		}
		cmp = sign(f - to)
	case string:
		s, ok := v.(string)
		if !ok {
			return false
		}
		cmp = strings.Compare(s, to)
	}
	switch c.op {
	case "$gt":
		return cmp > 0
	case "$gte":
		return cmp >= 0
	case "$lt":
		return cmp < 0
	}
	return cmp <= 0
}

func sign(f float64) int {
	switch {
	case f > 0:
		return 1
	case f < 0:
		return -1
	}
	return 0
}

type exist bool

func (e exist) match(v any) bool {
	_, gone := v.(missing)
	return bool(e) != (gone || v == nil)
}

type affix struct {
	prefix bool
	s      string
}

func (a affix) match(v any) bool {
	if arr, ok := v.([]any); ok {
		return anyElement(arr, a)
	}
	s, ok := v.(string)
	if !ok {
		return false
	}
	if a.prefix {
		return strings.HasPrefix(s, a.s)
	}
	return strings.HasSuffix(s, a.s)
}

type pattern struct{ re *regexp.Regexp }

func (p pattern) match(v any) bool {
	if arr, ok := v.([]any); ok {
		return anyElement(arr, p)
	}
	s, ok := v.(string)
	return ok && p.re.MatchString(s)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
