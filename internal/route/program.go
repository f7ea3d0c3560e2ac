package route

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A program is the body parts of a set of filters made ready to be
// matched together in one walk over a body's bytes (walk.go), without
// decoding the body into Go values. What a walk costs follows what the
// filters read: a value no filter reads is skipped in one scan, and a
// value one reads is looked at once, for all the filters at once.
//
// Decoding into Go values, even only along the fields filters named,
// cost what the body's shape made it cost: a field of an array is any
// element's, so a filter on "type" over a body that is an array of
// 100,000 objects decoded 100,000 maps (some 50 MiB for a 7 MiB body),
// and each of 24 filters then walked them.
//
// The filters' matchers are flattened into nodes, the same matcher in
// two filters (the same "type" test, say) being one node, evaluated once.
// A state is the set of nodes some value must be matched against; the
// states a body can reach, and what each does with an object's fields
// and an array's elements, are worked out here, once, when a source is
// loaded, so that a walk only looks them up.
type program struct {
	nodes  []node
	states []state
	top    int32   // the state of the body itself
	roots  []int32 // each filter's body node, in the order given
	at     []int   // each filter's result's place among the top state's
}

// op is what a node does: the matchers of filter.go, one for one.
type op uint8

const (
	opAll op = iota
	opAny
	opNot
	opField
	opContains
	opEquals
	opCompare
	opAffix
	opPattern
	opExist
	// opIn is an $or of $eq alone (an $in): matched at a scalar without
	// a step per value, and as $or is everywhere else.
	opIn
)

// node is one matcher of filter.go (m), flattened: its children are
// nodes. missing is what it answers for a value that is not there; the
// rest is the matcher's argument, ready to compare with a body's bytes.
type node struct {
	op      op
	m       matcher
	kids    []int32
	name    string // opField
	missing bool
	want    want    // opEquals, opCompare: the kind of value it takes
	num     float64 // ... a number's
	str     []byte  // ... a string's; opAffix's
	flag    bool    // opEquals: want true; opAffix: a prefix; opExist: its argument
	cmp     int8    // opCompare: -2 $lt, -1 $lte, 1 $gte, 2 $gt
	re      *regexp.Regexp
}

// want is the kind of value an $eq or a comparison takes.
type want uint8

const (
	wantNull want = iota
	wantBool
	wantNumber
	wantString
)

// set takes v, an $eq's or a comparison's argument (a scalar as
// filter.go normalizes it).
func (n *node) set(v any) {
	switch x := v.(type) {
	case bool:
		n.want, n.flag = wantBool, x
	case float64:
		n.want, n.num = wantNumber, x
	case string:
		n.want, n.str = wantString, []byte(x)
	}
}

// state is a set of nodes a value is matched against (roots, sorted),
// and what that takes for each kind of value. An object: the fields
// they read (keys, each with the state of its value and the place of its
// results in the object's frame of width results), then one expression
// per root over them (obj). An array: the state of each element (elem;
// -1 when none is read), and one expression per root over what its
// elements answered, each root of elem "some element matched" (arr). A
// scalar: the roots are matched against it directly.
type state struct {
	id      int32
	roots   []int32
	missing []bool // the frame of an object none of whose keys is there
	// flat: the state's array matches each root where some element
	// does, the elements against this same state (the fields of an
	// array of arrays, however deep).
	flat bool
	// constant: the roots' results at any scalar, where they only read
	// fields (nil where they read the scalar itself).
	constant []bool
	keys     []key
	byName   map[string]int // keys, by name, where there are many
	width    int
	obj      []expr
	elem     int32
	arr      []expr
}

// key is a field some root reads: its name, the state its value is
// matched against, and where its results start in the object's frame.
type key struct {
	name  string
	state int32
	at    int
}

// find is the index in s.keys of the field name, or -1.
func (s *state) find(name []byte) int {
	if s.byName != nil {
		if k, ok := s.byName[string(name)]; ok {
			return k
		}
		return -1
	}
	for k := range s.keys {
		if s.keys[k].name == string(name) {
			return k
		}
	}
	return -1
}

// expr is how a root's result at an object or an array is made from
// what its fields or elements answered: a constant, a result in the
// frame (slot), or all, any or none of its kids.
type expr struct {
	op   exprOp
	val  bool
	slot int
	kids []expr
}

type exprOp uint8

const (
	exprConst exprOp = iota
	exprSlot
	exprAll
	exprAny
	exprNot
)

// object stands for any object at compile time, to ask a matcher of
// filter.go what it answers for one: a value matcher and containsAll
// answer the same for every object (as exist does for every array, which
// []any{} stands for).
type object struct{}

// compileProgram makes the program of body matchers (one per filter).
func compileProgram(bodies []matcher) *program {
	p := &program{}
	seen := map[string]int32{}
	for _, m := range bodies {
		p.roots = append(p.roots, p.flatten(m, seen))
	}
	top := slices.Clone(p.roots)
	slices.Sort(top)
	top = slices.Compact(top)
	interned := map[string]int32{}
	p.top = p.intern(top, interned)
	// Work out every state the top one leads to: building one interns
	// the states of its fields and elements, which are built in turn.
	for i := 0; i < len(p.states); i++ {
		p.build(int32(i), interned)
	}
	for _, r := range p.roots {
		i, _ := slices.BinarySearch(p.states[p.top].roots, r)
		p.at = append(p.at, i)
	}
	return p
}

// flatten adds m's nodes, one node for matchers alike (by what they are
// and what their kids are), and returns m's.
func (p *program) flatten(m matcher, seen map[string]int32) int32 {
	n := node{m: m, missing: m.match(missing{})}
	var sig string
	switch x := m.(type) {
	case allOf:
		if len(x) == 1 {
			// {"$in": [...]} is an $and of one: it answers as its one kid
			// does, whatever the value.
			return p.flatten(x[0], seen)
		}
		n.op = opAll
		for _, c := range x {
			n.kids = append(n.kids, p.flatten(c, seen))
		}
	case anyOf:
		n.op = opIn
		for _, c := range x {
			if _, ok := c.(equals); !ok {
				n.op = opAny
			}
			n.kids = append(n.kids, p.flatten(c, seen))
		}
	case not:
		n.op = opNot
		n.kids = []int32{p.flatten(x.m, seen)}
	case field:
		n.op, n.name = opField, x.name
		n.kids = []int32{p.flatten(x.m, seen)}
		sig = strconv.Quote(x.name)
	case containsAll:
		n.op = opContains
		for _, c := range x {
			n.kids = append(n.kids, p.flatten(c, seen))
		}
	case equals:
		n.op = opEquals
		n.set(x.want)
		sig = fmt.Sprintf("%T %#v", x.want, x.want)
	case compare:
		n.op = opCompare
		n.set(x.to)
		n.cmp = map[string]int8{"$lt": -2, "$lte": -1, "$gte": 1, "$gt": 2}[x.op]
		sig = fmt.Sprintf("%s %T %#v", x.op, x.to, x.to)
	case affix:
		n.op, n.str, n.flag = opAffix, []byte(x.s), x.prefix
		sig = fmt.Sprintf("%v %q", x.prefix, x.s)
	case pattern:
		n.op, n.re = opPattern, x.re
		sig = strconv.Quote(x.re.String())
	case exist:
		n.op, n.flag = opExist, bool(x)
		sig = strconv.FormatBool(bool(x))
	default:
		panic(fmt.Sprintf("route: no node for %T", m))
	}
	var k strings.Builder
	fmt.Fprintf(&k, "%d %s", n.op, sig)
	for _, c := range n.kids {
		fmt.Fprintf(&k, " %d", c)
	}
	if id, ok := seen[k.String()]; ok {
		return id
	}
	id := int32(len(p.nodes))
	p.nodes = append(p.nodes, n)
	seen[k.String()] = id
	return id
}

// intern is the state of roots (sorted, without repeats), added (to be
// built) if it is new.
func (p *program) intern(roots []int32, interned map[string]int32) int32 {
	k := fmt.Sprint(roots)
	if id, ok := interned[k]; ok {
		return id
	}
	id := int32(len(p.states))
	p.states = append(p.states, state{id: id, roots: roots})
	interned[k] = id
	return id
}

// build works out what state id does with an object and an array.
func (p *program) build(id int32, interned map[string]int32) {
	roots := p.states[id].roots
	keys, width, objExpr := p.objectPlan(roots, interned)
	elem, arrExpr := p.arrayPlan(roots, interned)

	s := &p.states[id]
	s.keys, s.width, s.elem = keys, width, elem
	for _, k := range keys {
		for _, r := range p.states[k.state].roots {
			s.missing = append(s.missing, p.nodes[r].missing)
		}
	}
	if len(keys) > 8 {
		s.byName = make(map[string]int, len(keys))
		for i, k := range keys {
			s.byName[k.name] = i
		}
	}
	s.flat = elem == id
	constant := true
	for r, root := range roots {
		s.obj = append(s.obj, objExpr(root))
		a := arrExpr(root)
		s.arr = append(s.arr, a)
		s.flat = s.flat && a.op == exprSlot && a.slot == r
		v, ok := p.atScalar(root)
		constant = constant && ok
		s.constant = append(s.constant, v)
	}
	if !constant {
		s.constant = nil
	}
}

// objectPlan is how state roots read an object: the fields they read
// (keys, each a state of its own, whose results take width places in the
// frame), and an expression per root over those places.
func (p *program) objectPlan(roots []int32, interned map[string]int32) (keys []key, width int, objExpr func(int32) expr) {
	// An object: the fields its roots read, through $and, $or and $not
	// (which match at the object itself).
	fields := map[string][]int32{} // a name: the kids of the fields that name it
	var fieldNodes []int32
	var reach func(n int32)
	reach = func(n int32) {
		switch nd := &p.nodes[n]; nd.op {
		case opAll, opAny, opNot:
			for _, k := range nd.kids {
				reach(k)
			}
		case opField:
			fields[nd.name] = append(fields[nd.name], nd.kids[0])
			fieldNodes = append(fieldNodes, n)
		}
	}
	for _, r := range roots {
		reach(r)
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	at := map[string]int{} // a name: where its results start in the frame
	for _, name := range names {
		kids := fields[name]
		slices.Sort(kids)
		kids = slices.Compact(kids)
		fields[name] = kids
		keys = append(keys, key{name: name, state: p.intern(kids, interned), at: width})
		at[name] = width
		width += len(kids)
	}
	slot := map[int32]int{} // a field node: its result's place in the frame
	for _, n := range fieldNodes {
		nd := &p.nodes[n]
		i, _ := slices.BinarySearch(fields[nd.name], nd.kids[0])
		slot[n] = at[nd.name] + i
	}
	objExpr = func(n int32) expr {
		nd := &p.nodes[n]
		switch nd.op {
		case opAll, opAny, opNot:
			return p.combine(nd, objExpr)
		case opField:
			return expr{op: exprSlot, slot: slot[n]}
		}
		// containsAll, and a value matcher, answer alike for every object.
		return expr{op: exprConst, val: nd.m.match(object{})}
	}
	return keys, width, objExpr
}

// arrayPlan is how state roots read an array: the state its elements
// are read in (-1: none), and an expression per root over their results.
func (p *program) arrayPlan(roots []int32, interned map[string]int32) (elem int32, arrExpr func(int32) expr) {
	// An array: $and and $not match at the array itself; the rest match
	// when some element does ($or, a field, a value matcher) or, for
	// containsAll, when each of its kids matches some element.
	var elemRoots []int32
	var elemReach func(n int32)
	elemReach = func(n int32) {
		switch nd := &p.nodes[n]; nd.op {
		case opAll, opNot:
			for _, k := range nd.kids {
				elemReach(k)
			}
		case opContains:
			elemRoots = append(elemRoots, nd.kids...)
		case opExist:
		default:
			elemRoots = append(elemRoots, n)
		}
	}
	for _, r := range roots {
		elemReach(r)
	}
	slices.Sort(elemRoots)
	elemRoots = slices.Compact(elemRoots)
	elem = -1
	if len(elemRoots) > 0 {
		elem = p.intern(elemRoots, interned)
	}
	elemSlot := func(n int32) expr {
		i, _ := slices.BinarySearch(elemRoots, n)
		return expr{op: exprSlot, slot: i}
	}
	arrExpr = func(n int32) expr {
		nd := &p.nodes[n]
		switch nd.op {
		case opAll, opNot:
			return p.combine(nd, arrExpr)
		case opContains:
			e := expr{op: exprAll}
			for _, k := range nd.kids {
				e.kids = append(e.kids, elemSlot(k))
			}
			return e
		case opExist:
			return expr{op: exprConst, val: nd.m.match([]any{})}
		}
		return elemSlot(n)
	}
	return elem, arrExpr
}

// atScalar is what node n answers at every scalar, where that does not
// depend on the scalar (n reads only fields, which a scalar has not).
func (p *program) atScalar(n int32) (v, ok bool) {
	nd := &p.nodes[n]
	switch nd.op {
	case opAll, opAny:
		all := nd.op == opAll
		v = all
		for _, k := range nd.kids {
			kv, ok := p.atScalar(k)
			if !ok {
				return false, false
			}
			if all {
				v = v && kv
			} else {
				v = v || kv
			}
		}
		return v, true
	case opNot:
		v, ok = p.atScalar(nd.kids[0])
		return !v, ok
	case opField:
		return p.nodes[nd.kids[0]].missing, true
	case opContains:
		return false, true
	}
	return false, false
}

// combine is a $and, $or or $not node as an expression of its kids'.
func (p *program) combine(nd *node, kid func(int32) expr) expr {
	e := expr{op: map[op]exprOp{opAll: exprAll, opAny: exprAny, opNot: exprNot}[nd.op]}
	for _, k := range nd.kids {
		e.kids = append(e.kids, kid(k))
	}
	return e
}
