package oncehook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// textFault finds the first string of body, a JSON document, that JSON
// can carry but Go's decoder would not keep as written: raw bytes that
// are not UTF-8, or an escaped lone surrogate ("\ud800"). The decoder
// turns either into U+FFFD without a word, so a secret given so would be
// stored as other bytes than the caller's, and every signature made with
// it refused. It names the field (as the API names one: "secrets[0]",
// "transform.inline"; "" for the body itself or a field's name) and what
// is wrong; ok is false when every string is as written. A body that is
// not JSON is left to the decoder to refuse.
func textFault(body []byte) (field, fault string, ok bool) {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) {
		return "", "", false // the common case: nothing to walk
	}
	w := &textWalker{dec: json.NewDecoder(bytes.NewReader(body)), body: body}
	t, raw, err := w.next()
	if err != nil {
		return "", "", false
	}
	w.value("", t, raw)
	return w.field, w.fault, w.fault != ""
}

// textWalker reads a document token by token, keeping the raw bytes of
// each (the decoder's offsets) to judge them as written.
type textWalker struct {
	dec          *json.Decoder
	body         []byte
	last         int64
	field, fault string
}

func (w *textWalker) next() (json.Token, []byte, error) {
	t, err := w.dec.Token()
	off := min(w.dec.InputOffset(), int64(len(w.body)))
	raw := w.body[min(w.last, off):off]
	w.last = off
	return t, raw, err
}

// value walks t (read as raw) at path, and what it holds; it stops at the
// first fault or error.
func (w *textWalker) value(path string, t json.Token, raw []byte) {
	if w.fault != "" {
		return
	}
	switch t := t.(type) {
	case string:
		if f := rawTextFault(raw); f != "" {
			w.field, w.fault = path, f
		}
	case json.Delim:
		for i := 0; w.fault == "" && w.dec.More(); i++ {
			if t == '[' {
				v, raw, err := w.next()
				if err != nil {
					return
				}
				w.value(path+"["+strconv.Itoa(i)+"]", v, raw)
				continue
			}
			k, raw, err := w.next()
			if err != nil {
				return
			}
			if f := rawTextFault(raw); f != "" {
				w.field, w.fault = path, "a field's name "+f
				return
			}
			v, raw, err := w.next()
			if err != nil {
				return
			}
			name, _ := k.(string)
			if path != "" {
				name = path + "." + name
			}
			w.value(name, v, raw)
		}
		_, _, _ = w.next() // the closing delimiter
	}
}

// rawTextFault says what is wrong with raw, a JSON string as written
// (with what came before it: a separator, spaces), or "".
func rawTextFault(raw []byte) string {
	if !utf8.Valid(raw) {
		return "holds bytes that are not UTF-8: send the body as UTF-8 (JSON's \\u escapes for what it cannot show)"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' || i+6 > len(raw) {
			i++ // an escape of one character: \\, \", \n, ...
			continue
		}
		r, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 32)
		if err != nil {
			return "" // not JSON: the decoder refuses it
		}
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return fmt.Sprintf("holds \\u%04x, half of a UTF-16 pair without its first half: JSON would read it as U+FFFD, not as sent", r)
		case r >= 0xd800 && r <= 0xdbff:
			lo := uint64(0)
			if i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				lo, _ = strconv.ParseUint(string(raw[i+8:i+12]), 16, 32)
			}
			if lo < 0xdc00 || lo > 0xdfff {
				return fmt.Sprintf("holds \\u%04x, half of a UTF-16 pair without its second half: JSON would read it as U+FFFD, not as sent", r)
			}
			i += 11
		default:
			i += 5
		}
	}
	return ""
}
