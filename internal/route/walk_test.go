package route

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomFilter is a filter's body part, drawn from every operator over a
// few field names, nested up to depth.
func randomFilter(r *rand.Rand, depth int) any {
	names := []string{"a", "b", "type", "é", "x y"}
	values := []any{1.0, 2.0, 100.0, 0.0, -1.5, "a", "b", "charge.x", "1e400", "", true, false, nil}
	val := func() any { return values[r.IntN(len(values))] }
	if depth <= 0 {
		return val()
	}
	switch r.IntN(12) {
	case 0:
		return val()
	case 1:
		return map[string]any{"$eq": val()}
	case 2:
		return map[string]any{"$neq": val()}
	case 3:
		return map[string]any{[]string{"$in", "$nin"}[r.IntN(2)]: []any{val(), val()}}
	case 4:
		ops := []string{"$gt", "$gte", "$lt", "$lte"}
		to := []any{1.0, 50.0, "b", "charge."}[r.IntN(4)]
		return map[string]any{ops[r.IntN(4)]: to}
	case 5:
		return map[string]any{"$exist": r.IntN(2) == 0}
	case 6:
		return map[string]any{[]string{"$startsWith", "$endsWith"}[r.IntN(2)]: []string{"a", "charge.", "x", ""}[r.IntN(4)]}
	case 7:
		return map[string]any{"$regex": []string{"^a", "b$", "[0-9]", "é"}[r.IntN(4)]}
	case 8:
		return map[string]any{[]string{"$and", "$or"}[r.IntN(2)]: []any{randomFilter(r, depth-1), randomFilter(r, depth-1)}}
	case 9:
		return map[string]any{"$not": randomFilter(r, depth-1)}
	case 10:
		return []any{randomFilter(r, depth-1), randomFilter(r, depth-1)}[:1+r.IntN(2)]
	}
	m := map[string]any{}
	for range 1 + r.IntN(3) {
		m[names[r.IntN(len(names))]] = randomFilter(r, depth-1)
	}
	return m
}

// randomBody is a JSON body over the same names, with what a body can
// hold that a decoder might read otherwise: escapes, a lone surrogate,
// invalid UTF-8, a number beyond float64, a key named twice.
func randomBody(r *rand.Rand, depth int) string {
	scalars := []string{`1`, `1.0`, `2`, `100`, `1e2`, `-0`, `0`, `-1.5`, `1e400`, `123456789012345678`, `"a"`, `"b"`,
		`"\u0061"`, `"charge.x"`, `"1e400"`, `"\ud800"`, `"\ud83d\ude00x"`, `"é"`, "\"\xff\"", `"a\"b"`, `true`, `false`, `null`, `""`}
	if depth <= 0 || r.IntN(4) == 0 {
		return scalars[r.IntN(len(scalars))]
	}
	if r.IntN(2) == 0 {
		var items []string
		for range r.IntN(4) {
			items = append(items, randomBody(r, depth-1))
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	keys := []string{`"a"`, `"b"`, `"type"`, `"\u00e9"`, `"é"`, `"x y"`, `"\u0061"`, `"c"`}
	var fields []string
	for range r.IntN(4) {
		fields = append(fields, keys[r.IntN(len(keys))]+" : "+randomBody(r, depth-1))
	}
	return "{ " + strings.Join(fields, " , ") + " }"
}

// Walking a body's bytes decides every filter as decoding the whole body
// into Go values and matching them did (matchWhole): 30,000 filters drawn
// from every operator, on bodies drawn to hold what a decoder might read
// otherwise; and a source's routes, their filters sharing one walk (and
// the matchers they have in common), each decide as they would alone.
func TestTheWalkDecidesAsDecodingTheWholeBody(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 5))
	for i := range 30_000 {
		spec := randomFilter(r, 4)
		body := randomBody(r, 4)
		if !json.Valid([]byte(body)) {
			t.Fatalf("the test made invalid JSON: %s", body)
		}
		f, err := Compile(map[string]any{"body": spec})
		if err != nil {
			continue // a regex or an operator's argument the drawing got wrong
		}
		in := &Input{Body: []byte(body)}
		if got, want := f.Match(in), matchWhole(f, &Input{Body: []byte(body)}); got != want {
			js, _ := json.Marshal(spec)
			t.Fatalf("case %d: filter %s on %s: %v, decoding the whole body %v", i, js, body, got, want)
		}
	}
	for i := range 3000 {
		var rs Routes
		var fs []*Filter
		for j := range 1 + r.IntN(6) {
			f, err := Compile(map[string]any{"body": randomFilter(r, 3)})
			if err != nil {
				continue
			}
			fs = append(fs, f)
			rs = append(rs, Route{Destination: fmt.Sprint("d", j), Filter: f})
		}
		body := []byte(randomBody(r, 4))
		in := &Input{Body: body}
		want, _ := rs.Plan().Pick("", in)
		if in.walks > 1 {
			t.Fatalf("case %d: %d routes walked the body %d times", i, len(rs), in.walks)
		}
		var alone []string
		for j, f := range fs {
			if matchWhole(f, &Input{Body: body}) {
				alone = append(alone, rs[j].Destination)
			}
		}
		if fmt.Sprint(want) != fmt.Sprint(alone) {
			t.Fatalf("case %d: on %s the routes want %v, each alone %v", i, body, want, alone)
		}
	}
}

// The text of a string, as the walk reads it, is encoding/json's:
// escapes, surrogate pairs and what is not UTF-8.
func FuzzText(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9\n"`, `"\ud800"`, `"\ud800\u0041"`, `"\ud83d\ude00"`, "\"\xff\xfe\"", `"\udc00\ud800"`, `"\/\b\f\r\t\\\""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want string
		// A string literal alone, as the walk hands it over.
		if json.Unmarshal([]byte(s), &want) != nil || !strings.HasPrefix(s, `"`) || !strings.HasSuffix(s, `"`) {
			return
		}
		w := walker{}
		if got := string(w.text([]byte(s))); got != want {
			t.Fatalf("%q: %q, encoding/json %q", s, got, want)
		}
	})
}

// A number is what json.Number's Float64 makes it, and a number beyond
// float64 is not one.
func TestParseNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "999999999999999", "9999999999999999", "123456789012345678901", "1.5", "-2e3", "1e400", "-1e400", "1e-400", "0.1"} {
		f, ok := parseNumber([]byte(s))
		want, err := json.Number(s).Float64()
		wantOK := err == nil && want-want == 0
		if ok != wantOK || (ok && f != want) {
			t.Errorf("%s: %v %v, want %v %v", s, f, ok, want, wantOK)
		}
	}
}
