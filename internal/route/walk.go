package route

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/jsonstr"
)

// What the filters may spend on a request, in steps: a step is one
// matcher matched at one value of a body (some 5 to 10 ns of one core).
// A request of n body bytes may take BaseSteps + StepsPerByte × n: its
// filters cost at most a fixed multiple of what reading its bytes costs,
// whatever the body's shape and however many filters its source has,
// and what the requests in flight may cost is bounded as their bytes are
// (max_inflight_bytes). 24 filters reading seven fields of each of a
// 4 MiB array's 100,000 objects take between 1 and 4 steps a byte, as
// they do on an array of 600,000 scalars (TestFilterCostFollowsWhat-
// FiltersReadWhateverTheBodysShape).
const (
	BaseSteps    = 1 << 20
	StepsPerByte = 16
)

// A $regex costs regexSteps, and regexByteSteps a byte of the string it
// reads: RE2 is linear, but its automaton may take some 30 ns a byte,
// and a call some 300 ns, where a step takes 10.
const (
	regexSteps     = 32
	regexByteSteps = 3
)

// Budget is what is left of the work a request's filters may do: one is
// shared by the events of a batch. When a walk would spend more than is
// left, it stops, and every filter that reads the body answers that its
// route does not want the event (see Input.Over): the event is still
// stored, filtered for those destinations, and an operator can send it
// to them.
type Budget struct {
	left int64
}

// NewBudget is the budget of a request whose body has n bytes (the
// events of a batch share their request's).
func NewBudget(n int) *Budget { return &Budget{left: BaseSteps + StepsPerByte*int64(n)} }

// Left is what remains of b, in steps.
func (b *Budget) Left() int64 { return b.left }

// walker matches a program's states against one body, in one pass.
// res holds each value's results while its parents need them, a frame
// per object or array being walked (never a slice of it: a nested walk
// may move it); buf holds a string's text where it had to be unescaped;
// left is the budget's steps, spent as the work is done, and over says
// that they ran out.
type walker struct {
	p    *program
	b    []byte
	res  []bool
	buf  []byte
	left int64
	over bool
}

// run matches p against body: each filter's body result, in p.roots's
// order, into out; false when the budget ran out first (out is then
// left as it was). A body that is not JSON is a value that is not there.
func (p *program) run(body []byte, budget *Budget, out []bool) bool {
	if !json.Valid(body) {
		for i, r := range p.roots {
			out[i] = p.nodes[r].missing
		}
		return true
	}
	top := &p.states[p.top]
	w := walker{p: p, b: body, left: budget.left, res: make([]bool, len(top.roots), 64)}
	w.value(skipSpace(body, 0), p.top, 0, false)
	budget.left = max(w.left, 0)
	if w.over {
		return false
	}
	for i := range p.roots {
		out[i] = w.res[p.at[i]]
	}
	return true
}

// spent says whether the steps ran out (and marks the walk over).
func (w *walker) spent() bool {
	if w.left < 0 {
		w.over = true
	}
	return w.over
}

// push makes a frame of n results, all false, and says where it starts.
func (w *walker) push(n int) int {
	base := len(w.res)
	w.res = slices.Grow(w.res, n)[:base+n]
	clear(w.res[base:])
	return base
}

func (w *walker) pop(base int) { w.res = w.res[:base] }

// put sets the result at res[at] to v, or, when or is set, ORs v into
// it; it says whether that turned it true (1) or not (0).
func (w *walker) put(at int, v, or bool) int {
	if !or {
		w.res[at] = v
		return 0
	}
	if v && !w.res[at] {
		w.res[at] = true
		return 1
	}
	return 0
}

// value matches the value at b[i] against state st, and puts the results
// of its roots at res[out:]: as they are, or ORed into what is there
// when or is set (an array's elements, each matched in turn). It says
// where the value ends and, with or, how many results it turned true.
//
// Each byte is looked at once: a value nothing reads is skipped in one
// scan, a value read is walked in one descent (as deep as the body nests,
// which json.Valid bounds at 10,000), and what the rest of an array
// cannot change (every root has an element it matches, or a scalar where
// the roots only read fields) is skipped too.
func (w *walker) value(i int, st int32, out int, or bool) (end, turned int) {
	s := &w.p.states[st]
	b := w.b
	if w.left--; w.spent() {
		return len(b), 0
	}
	switch b[i] {
	case '{':
		if len(s.keys) == 0 {
			return valueEnd(b, i), w.exprs(s.obj, 0, out, or)
		}
		base := w.push(s.width)
		copy(w.res[base:], s.missing) // a field that is not there answers as a missing value does
		w.left -= int64(s.width / 16)
		i = skipSpace(b, i+1)
		for b[i] != '}' {
			ke := valueEnd(b, i)
			k := s.find(w.text(b[i:ke]))
			i = skipSpace(b, ke)
			i = skipSpace(b, i+1) // the colon
			if k >= 0 {
				// A field named twice is its last value, as encoding/json has it.
				if end, _ = w.value(i, s.keys[k].state, base+s.keys[k].at, false); w.over {
					return len(b), 0
				}
			} else {
				end = valueEnd(b, i)
			}
			i = skipSpace(b, end)
			if b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		turned = w.exprs(s.obj, base, out, or)
		w.pop(base)
		return i + 1, turned
	case '[':
		if s.elem < 0 {
			return valueEnd(b, i), w.exprs(s.arr, 0, out, or)
		}
		if s.flat {
			// Each root matches the array when some element does: the
			// elements' results go straight into out, however deeply
			// such arrays nest.
			if !or {
				clear(w.res[out : out+len(s.roots)])
			}
			end, turned = w.elements(i, s, out)
			return end, turned
		}
		acc := w.push(len(w.p.states[s.elem].roots))
		end, _ = w.elements(i, &w.p.states[s.elem], acc)
		if w.over {
			return len(b), 0
		}
		turned = w.exprs(s.arr, acc, out, or)
		w.pop(acc)
		return end, turned
	}
	end = valueEnd(b, i)
	if s.constant != nil {
		for r, v := range s.constant {
			turned += w.put(out+r, v, or)
		}
		return end, turned
	}
	sc := token{raw: b[i:end]}
	for r, root := range s.roots {
		turned += w.put(out+r, w.match(root, &sc), or)
	}
	if w.spent() {
		return len(b), 0
	}
	return end, turned
}

// elements matches each element of the array at b[i] against es, ORing
// their results into res[acc:], and says where the array ends and how
// many results turned true.
func (w *walker) elements(i int, es *state, acc int) (end, turned int) {
	b := w.b
	n := len(es.roots)
	matched := 0
	for _, v := range w.res[acc : acc+n] {
		if v {
			matched++
		}
	}
	w.left -= int64(n / 16)
	scalars := false // a scalar was matched, and es answers alike for all
	i = skipSpace(b, i+1)
	for b[i] != ']' {
		if matched == n {
			// Every root has an element it matches: the rest cannot
			// change an answer.
			return endOf(b, i, 1), turned
		}
		if c := b[i]; c != '{' && c != '[' && scalars {
			end = valueEnd(b, i)
		} else {
			var t int
			if end, t = w.value(i, es.id, acc, true); w.over {
				return len(b), 0
			}
			matched, turned = matched+t, turned+t
			scalars = c != '{' && c != '[' && es.constant != nil
		}
		i = skipSpace(b, end)
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return i + 1, turned
}

// exprs puts each root's expression, its slots read in the frame at
// base, at res[out:] (see put).
func (w *walker) exprs(es []expr, base, out int, or bool) (turned int) {
	for r := range es {
		e := &es[r]
		var v bool
		if e.op == exprSlot {
			v = w.res[base+e.slot]
			w.left--
		} else {
			v = w.expr(e, base)
		}
		turned += w.put(out+r, v, or)
	}
	return turned
}

// expr is e's answer, its slots read in the frame at base.
func (w *walker) expr(e *expr, base int) bool {
	w.left--
	switch e.op {
	case exprSlot:
		return w.res[base+e.slot]
	case exprAll:
		for i := range e.kids {
			if !w.expr(&e.kids[i], base) {
				return false
			}
		}
		return true
	case exprAny:
		for i := range e.kids {
			if w.expr(&e.kids[i], base) {
				return true
			}
		}
		return false
	case exprNot:
		return !w.expr(&e.kids[0], base)
	}
	return e.val
}

// token is a string, number, true, false or null of the body, read as
// far as a matcher asks: a string's text, a number's value.
type token struct {
	raw      []byte
	text     []byte
	textDone bool
	num      float64
	numOK    bool // a finite number: what encoding/json's Number gives
	numDone  bool
}

// match is what node n answers for the scalar sc, as its matcher of
// filter.go answers for the value encoding/json (with UseNumber) decodes.
func (w *walker) match(n int32, sc *token) bool {
	nd := &w.p.nodes[n]
	c := sc.raw[0]
	w.left--
	switch nd.op {
	case opAll:
		for _, k := range nd.kids {
			if !w.match(k, sc) {
				return false
			}
		}
		return true
	case opAny:
		for _, k := range nd.kids {
			if w.match(k, sc) {
				return true
			}
		}
		return false
	case opNot:
		return !w.match(nd.kids[0], sc)
	case opField:
		// A scalar has no field: the field is not there.
		return w.p.nodes[nd.kids[0]].missing
	case opContains:
		return false
	case opExist:
		return nd.flag != (c == 'n')
	case opEquals:
		return w.equals(nd, sc)
	case opIn:
		w.left -= int64(len(nd.kids) / 8) // a step for eight values
		for _, k := range nd.kids {
			if w.equals(&w.p.nodes[k], sc) {
				return true
			}
		}
		return false
	case opCompare:
		var cmp int
		if nd.want == wantNumber {
			f, ok := w.number(sc)
			if !ok {
				return false
			}
			cmp = sign(f - nd.num)
		} else {
			if c != '"' {
				return false
			}
			cmp = bytes.Compare(w.str(sc), nd.str)
		}
		switch nd.cmp {
		case 2:
			return cmp > 0
		case 1:
			return cmp >= 0
		case -2:
			return cmp < 0
		}
		return cmp <= 0
	case opAffix:
		if c != '"' {
			return false
		}
		if nd.flag {
			return bytes.HasPrefix(w.str(sc), nd.str)
		}
		return bytes.HasSuffix(w.str(sc), nd.str)
	case opPattern:
		if c != '"' {
			return false
		}
		s := w.str(sc)
		if w.left -= regexSteps + regexByteSteps*int64(len(s)); w.spent() {
			return false // not run: the walk is over
		}
		return nd.re.Match(s)
	}
	return false
}

// equals is what the $eq node nd answers for the scalar sc.
func (w *walker) equals(nd *node, sc *token) bool {
	c := sc.raw[0]
	switch nd.want {
	case wantNull:
		return c == 'n'
	case wantBool:
		return (c == 't' && nd.flag) || (c == 'f' && !nd.flag)
	case wantNumber:
		f, ok := w.number(sc)
		return ok && f == nd.num
	}
	if c == '"' {
		return bytes.Equal(w.str(sc), nd.str)
	}
	// A number beyond float64 is its text (see value).
	if _, ok := w.number(sc); !ok && isNumber(c) {
		return bytes.Equal(sc.raw, nd.str)
	}
	return false
}

func isNumber(c byte) bool { return c == '-' || '0' <= c && c <= '9' }

// number is sc's value when it is a finite number, as value reads a
// json.Number (anything else, a number beyond float64 included, is not).
func (w *walker) number(sc *token) (float64, bool) {
	if !sc.numDone {
		sc.numDone = true
		if isNumber(sc.raw[0]) {
			sc.num, sc.numOK = parseNumber(sc.raw)
		}
	}
	return sc.num, sc.numOK
}

// parseNumber is strconv.ParseFloat's value of a JSON number, and
// whether it is finite; an integer of up to 15 digits (an amount, a
// count, an id) is read without it, exactly as it would read it.
func parseNumber(raw []byte) (float64, bool) {
	digits, neg := raw, false
	if digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	if len(digits) <= 15 && !(neg && len(digits) == 1 && digits[0] == '0') {
		var n int64
		plain := true
		for _, c := range digits {
			if c < '0' || c > '9' {
				plain = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if plain {
			if neg {
				n = -n
			}
			return float64(n), true
		}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

// str is the text of the string sc, as encoding/json decodes it.
func (w *walker) str(sc *token) []byte {
	if !sc.textDone {
		sc.textDone = true
		sc.text = w.text(sc.raw)
	}
	return sc.text
}

// text is the text of the JSON string literal s (quotes included, valid
// JSON), as encoding/json decodes it: s's own bytes where it has no
// escape and is valid UTF-8, else unescaped into w.buf (valid until the
// next call).
func (w *walker) text(s []byte) []byte {
	in := s[1 : len(s)-1]
	plain := true
	for _, c := range in {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain || bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return in
	}
	if cap(w.buf) < len(in) {
		w.buf = make([]byte, 0, len(in)) // once, where appending would double it
	}
	w.buf = jsonstr.AppendUnquoted(w.buf[:0], in, jsonstr.Replace)
	return w.buf
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// valueEnd is where the JSON value starting at b[i] ends (b is valid
// JSON). It loops, never recurses: depth costs nothing.
func valueEnd(b []byte, i int) int { return endOf(b, i, 0) }

// endOf is where the value ends that b[i] is inside, depth levels deep
// (0: the value starting at b[i]; 1: the object or array whose elements
// b[i] is among, just past its closing bracket).
func endOf(b []byte, i, depth int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		default:
			if depth == 0 {
				j := i
				for j < len(b) && !isDelim(b[j]) {
					j++
				}
				return j
			}
		}
	}
	return i
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n', ':':
		return true
	}
	return false
}
