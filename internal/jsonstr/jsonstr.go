// Package jsonstr decodes the content of a JSON string literal straight
// from its bytes, for the two readers that must not go through
// encoding/json: route filters, which read a body's strings in one pass
// without building Go values, and the presets' keys, which must keep what
// encoding/json would replace. One decoder, two answers to what a lone
// surrogate escape or a byte of invalid UTF-8 becomes (Mode).
package jsonstr

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Mode says what the decoder makes of text that is not a character.
type Mode int

const (
	// Replace decodes as encoding/json does: a surrogate escape that is
	// not half of a pair, and each byte that is not UTF-8, become U+FFFD.
	// Filters compare with it, so that a rule means what it would mean
	// against the decoded body.
	Replace Mode = iota
	// Lossless keeps what Replace loses: a lone surrogate becomes its
	// three-byte WTF-8 form (never valid UTF-8, so it cannot meet a real
	// character) and raw bytes stay as sent. Keys are read with it, so that
	// "evt_\ud800" and "evt_\udc00" stay two keys (invariant 12).
	Lossless
)

// AppendUnquoted appends the decoded content of a JSON string (s: what
// stands between the quotes, already checked by a JSON decoder) to b. An
// escape cut short, which a checked literal never has, is kept as written.
func AppendUnquoted(b, s []byte, mode Mode) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\' && r+1 < len(s):
			r++
			switch s[r] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr, ok := hex4(s[r+1:])
				if !ok {
					b = append(b, '\\', 'u')
					r++
					continue
				}
				r += 5
				if utf16.IsSurrogate(rr) {
					if rr < 0xdc00 && r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if lo, ok := hex4(s[r+2:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
							b = utf8.AppendRune(b, utf16.DecodeRune(rr, lo))
							r += 6
							continue
						}
					}
					if mode == Lossless {
						b = append(b, 0xe0|byte(rr>>12), 0x80|byte(rr>>6)&0x3f, 0x80|byte(rr)&0x3f)
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // " \ /
				b = append(b, s[r])
			}
			r++
		case c < utf8.RuneSelf || mode == Lossless:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return b
}

// hex4 is the rune of the four hex digits s begins with (false: fewer than
// four, or one that is not hex).
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
