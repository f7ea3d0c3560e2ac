package provider

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/jsonstr"
)

// keyText is a JSON string or number read as key text without loss.
//
// encoding/json turns every lone surrogate escape (\ud800) and every byte
// of invalid UTF-8 into U+FFFD, so "evt_\ud800", "evt_\udc00" and
// "evt_\ufffd" would decode to one string, one key, and two of the three
// events would be answered "duplicate" and never delivered (docs/design.md,
// invariant 12). keyText decodes the raw literal itself: escapes are
// decoded, a lone surrogate becomes its three-byte WTF-8 form (never valid
// UTF-8, so it cannot meet a real character), and raw bytes are kept as
// sent; SafeKey then percent-encodes whatever is not printable ASCII. A
// number keeps its digits as sent, so 1 and "1" make one key. Any other
// JSON value (object, array, bool, null) is no key text: "".
type keyText string

func (k *keyText) UnmarshalJSON(raw []byte) error {
	*k = ""
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	switch c := raw[0]; {
	case c == '"':
		*k = keyText(unquoteLossless(raw))
	case c == '-' || (c >= '0' && c <= '9'):
		*k = keyText(raw)
	}
	return nil
}

// unquoteLossless decodes a JSON string literal (quotes included, already
// validated by the decoder) without replacing anything: see keyText.
func unquoteLossless(lit []byte) string {
	s := lit[1 : len(lit)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s)
	}
	return string(jsonstr.AppendUnquoted(make([]byte, 0, len(s)), s, jsonstr.Lossless))
}

// rawField returns the value at path in a JSON document without decoding
// anything on the way but the objects and arrays it passes through: the
// value itself stays raw, for keyText.
func rawField(doc json.RawMessage, path []string) json.RawMessage {
	cur := bytes.TrimSpace(doc)
	for _, seg := range path {
		if len(cur) == 0 {
			return nil
		}
		switch cur[0] {
		case '{':
			var obj map[string]json.RawMessage
			if json.Unmarshal(cur, &obj) != nil {
				return nil
			}
			cur = bytes.TrimSpace(obj[seg])
		case '[':
			var arr []json.RawMessage
			i, err := strconv.Atoi(seg)
			if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
				return nil
			}
			cur = bytes.TrimSpace(arr[i])
		default:
			return nil
		}
	}
	return cur
}

// topKeyTexts reads the members a and b (lower-case ASCII names) of a
// body that is one JSON object, as decodeJSON into a struct of two
// keyText fields would, in one pass that checks the whole body is JSON
// (as json.Valid would: see jsonscan.go) and allocates nothing: a member
// name matches ignoring ASCII case, and the last of several wins. ok is
// false when it cannot say (the body is not valid JSON, or not an
// object, or a member's name is escaped or not ASCII, which
// encoding/json folds its own way): the caller decodes the body then.
func topKeyTexts(body []byte, a, b string) (va, vb keyText, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return "", "", false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return "", "", skipSpace(body, i+1) == len(body)
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return "", "", false
		}
		end := jsonString(body, i)
		if end < 0 {
			return "", "", false
		}
		name := body[i+1 : end-1]
		for _, c := range name {
			if c == '\\' || c >= utf8.RuneSelf {
				return "", "", false
			}
		}
		if i = skipSpace(body, end); i >= len(body) || body[i] != ':' {
			return "", "", false
		}
		i = skipSpace(body, i+1)
		vend := jsonValue(body, i, 1)
		if vend < 0 {
			return "", "", false
		}
		switch {
		case asciiFold(name, a):
			va.UnmarshalJSON(body[i:vend])
		case asciiFold(name, b):
			vb.UnmarshalJSON(body[i:vend])
		}
		if i = skipSpace(body, vend); i >= len(body) {
			return "", "", false
		}
		switch body[i] {
		case '}':
			if skipSpace(body, i+1) != len(body) {
				return "", "", false
			}
			return va, vb, true
		case ',':
			i = skipSpace(body, i+1)
		default:
			return "", "", false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// asciiFold reports whether name is lower, ignoring ASCII case (lower is
// lower-case).
func asciiFold(name []byte, lower string) bool {
	if len(name) != len(lower) {
		return false
	}
	for i := range name {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
