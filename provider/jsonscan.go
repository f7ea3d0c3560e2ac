package provider

import "encoding/binary"

// A JSON scanner that only says where a value ends, and so whether the
// bytes are JSON at all, taking exactly what json.Valid takes
// (FuzzJSONValid): topKeyTexts reads a body's top-level members with it
// in one pass, where json.Valid's byte-at-a-time state machine and then
// the walk were two. It allocates nothing.

// maxJSONDepth is encoding/json's bound on nested objects and arrays.
const maxJSONDepth = 10000

// validJSON reports whether b is one JSON value with nothing but white
// space around it: json.Valid.
func validJSON(b []byte) bool {
	end := jsonValue(b, skipSpace(b, 0), 0)
	return end >= 0 && skipSpace(b, end) == len(b)
}

// jsonValue is the index after the JSON value that starts at b[i], or
// -1 when none does; depth is how many objects and arrays enclose it.
func jsonValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		return jsonString(b, i)
	case '{':
		if depth >= maxJSONDepth {
			return -1
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			if i = jsonString(b, i); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = jsonValue(b, skipSpace(b, i+1), depth+1); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case '}':
				return i + 1
			case ',':
				i = skipSpace(b, i+1)
			default:
				return -1
			}
		}
	case '[':
		if depth >= maxJSONDepth {
			return -1
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = jsonValue(b, i, depth+1); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case ']':
				return i + 1
			case ',':
				i = skipSpace(b, i+1)
			default:
				return -1
			}
		}
	case 't':
		return jsonWord(b, i, "true")
	case 'f':
		return jsonWord(b, i, "false")
	case 'n':
		return jsonWord(b, i, "null")
	}
	return jsonNumber(b, i)
}

func jsonWord(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// jsonNumber is the index after the number at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// jsonString is the index after the string that opens at b[i] (a
// quote), or -1. Any byte but a control character, a quote or a
// backslash stands for itself (encoding/json does not ask for UTF-8);
// a backslash escapes one of "\/bfnrt, or a u and four hex digits.
func jsonString(b []byte, i int) int {
	j := i + 1
	for {
		// Eight plain bytes at a time, the rest one by one.
		for len(b)-j >= 8 && !specialInWord(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		if j >= len(b) {
			return -1
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if j+1 >= len(b) {
				return -1
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if len(b)-j < 6 {
					return -1
				}
				for _, h := range b[j+2 : j+6] {
					if hexDigits[h] > 0xf {
						return -1
					}
				}
				j += 6
			default:
				return -1
			}
		default:
			j++
		}
	}
}

// specialInWord reports whether any of the eight bytes of w is a quote,
// a backslash or a control character (below 0x20): the bytes a string's
// scan must stop at. (Exact: each test below flags a byte only if some
// byte of w is one it looks for.)
func specialInWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	return zero(w^(ones*'"'))|zero(w^(ones*'\\'))|((w-ones*0x20)&^w&highs) != 0
}
