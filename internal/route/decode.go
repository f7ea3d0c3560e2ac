package route

import (
	"encoding/json"
	"unicode/utf8"
)

// need is what filters read of a body: at each level, the fields some
// filter names, and whether a matcher reads the value itself. A body is
// decoded only along it, so that what a filter costs follows what it asks
// for, not the body's size: decoding a whole 4 MiB body into Go values
// took some 100 MiB, outside the in-flight budget, for a filter that reads
// two fields.
type need struct {
	fields map[string]*need
	value  bool
}

func (n *need) field(name string) *need {
	if n.fields == nil {
		n.fields = map[string]*need{}
	}
	c := n.fields[name]
	if c == nil {
		c = &need{}
		n.fields[name] = c
	}
	return c
}

// add adds what m reads of a value to n.
func (n *need) add(m matcher) {
	switch x := m.(type) {
	case allOf:
		for _, c := range x {
			n.add(c)
		}
	case anyOf:
		for _, c := range x {
			n.add(c)
		}
	case not:
		n.add(x.m)
	case field:
		n.field(x.name).add(x.m)
	case containsAll:
		// The value is an array; each element is matched as a value.
		for _, c := range x {
			n.add(c)
		}
	default:
		n.value = true
	}
}

// merge adds o to n.
func (n *need) merge(o *need) {
	n.value = n.value || o.value
	for name, c := range o.fields {
		n.field(name).merge(c)
	}
}

// decodeNeeded decodes the parts of body that n asks for, as
// json.Decoder with UseNumber would decode them, and skips the rest
// without copying it; missing{} when body is not JSON. Arrays are decoded
// element by element with the same need (a field of an array is any
// element's). An object a filter reads no field of is object{}, and a
// scalar where only fields are read is nil: what the matchers see of
// them is the same.
func decodeNeeded(body []byte, n *need) any {
	if !json.Valid(body) {
		return missing{}
	}
	v, _ := decodeAt(body, skipSpace(body, 0), n)
	return v
}

// decodeAt decodes the value at b[i] along n, and says where it ends. Each
// byte is looked at once: a value nothing reads is skipped in one scan, a
// value read is walked in one descent (as deep as the body nests, which
// json.Valid bounds at 10,000).
func decodeAt(b []byte, i int, n *need) (any, int) {
	switch b[i] {
	case '{':
		if len(n.fields) == 0 {
			return object{}, valueEnd(b, i)
		}
		out := map[string]any{}
		i = skipSpace(b, i+1)
		for b[i] != '}' {
			ke := valueEnd(b, i)
			key := b[i:ke]
			i = skipSpace(b, ke)
			i = skipSpace(b, i+1) // the colon
			var end int
			if c := n.fields[unquote(key)]; c != nil {
				out[unquote(key)], end = decodeAt(b, i, c)
			} else {
				end = valueEnd(b, i)
			}
			i = skipSpace(b, end)
			if b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return out, i + 1
	case '[':
		out := []any{}
		scalar := false
		i = skipSpace(b, i+1)
		for b[i] != ']' {
			v, end := decodeAt(b, i, n)
			// Filters read an array as "any element": where only fields
			// are read, every scalar is alike, and one stands for all.
			if c := b[i]; n.value || c == '{' || c == '[' || !scalar {
				out = append(out, v)
				scalar = scalar || (c != '{' && c != '[')
			}
			i = skipSpace(b, end)
			if b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return out, i + 1
	}
	end := valueEnd(b, i)
	if !n.value {
		// Only fields are read here: a scalar has none, whatever it is.
		return nil, end
	}
	v := b[i:end]
	switch v[0] {
	case '"':
		return unquote(v), end
	case 't':
		return true, end
	case 'f':
		return false, end
	case 'n':
		return nil, end
	}
	return json.Number(v), end
}

// object is an object no filter reads a field of: the matchers that read
// a value itself see only that it is there and is no scalar or array (it
// costs no allocation, however many of them an array holds).
type object struct{}

// unquote is a JSON string's text (s is valid JSON), without a copy's
// detour when it holds no escape.
func unquote(s []byte) string {
	plain := true
	for _, c := range s[1 : len(s)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(s[1 : len(s)-1])
	}
	var out string
	json.Unmarshal(s, &out) // replaces invalid UTF-8 as the decoder does
	return out
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// valueEnd is where the JSON value starting at b[i] ends (b is valid
// JSON). It loops, never recurses: depth costs nothing.
func valueEnd(b []byte, i int) int {
	depth := 0
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
