package provider

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokenMatches compares a static token (Hotmart's hottok, Asaas's access
// token, a secret in the URL) with every secret in constant time. Both sides
// are hashed first so the comparison does not reveal the secret's length.
func tokenMatches(got string, secrets [][]byte) bool {
	if got == "" {
		return false
	}
	g := sha256.Sum256([]byte(got))
	ok := false
	for _, s := range secrets {
		want := sha256.Sum256(s)
		if hmac.Equal(g[:], want[:]) {
			ok = true
		}
	}
	return ok
}

func secretBytes(secrets []string) [][]byte {
	out := make([][]byte, len(secrets))
	for i, s := range secrets {
		out[i] = []byte(s)
	}
	return out
}

// decodeJSON decodes body into v, reporting ErrMalformed (in words a
// provider's engineer understands) when it is not JSON, not of the
// expected shape, or followed by anything but white space: a body is one
// JSON value, and bytes after it are not part of any event.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return jsonError("body", err)
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return malformed("body is not JSON: there is more after its value (at byte %d)", len(body)-len(rest))
	}
	return nil
}

// oneJSONValue is the one rule on a request's body that holds for every
// preset, applied in one place (keyed.Items): a body that opens a JSON
// object or array is exactly one JSON value, followed by nothing but white
// space. Bytes after the value belong to no event; before, presets that
// read only a field (github, standard-webhooks) stored them and answered
// 200 while stripe, whatsapp and generic refused the same bytes. A body
// that is not JSON (a form, empty) is left to the preset. json.Valid
// scans without copying the body.
func oneJSONValue(body []byte) error {
	start := bytes.TrimLeft(body, " \t\r\n")
	if len(start) == 0 || (start[0] != '{' && start[0] != '[') || json.Valid(body) {
		return nil
	}
	// Only to explain the refusal: Unmarshal validates first, and its
	// syntax error says where the body stops being one value.
	var v struct{}
	err := json.Unmarshal(body, &v)
	if syntax := (*json.SyntaxError)(nil); errors.As(err, &syntax) && syntax.Offset >= int64(len(body)) {
		return jsonError("body", io.ErrUnexpectedEOF)
	}
	if err != nil {
		return jsonError("body", err)
	}
	return malformed("body is not JSON")
}

// jsonError says what is wrong with the JSON in what (the body, or a part of
// it), without Go's type names: not JSON at all, or JSON of another shape
// than the provider sends.
func jsonError(what string, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return malformed("%s is not JSON (at byte %d: %s)", what, syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return malformed("%s is JSON, but a JSON %s where a JSON %s was expected", what, typ.Value, jsonKind(typ.Type))
		}
		return malformed("%s is JSON, but its field %q is a JSON %s where a JSON %s was expected", what, field, typ.Value, jsonKind(typ.Type))
	case errors.Is(err, io.EOF):
		return malformed("%s is empty; JSON was expected", what)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("%s is not JSON: it ends too early", what)
	}
	return malformed("%s is not JSON", what)
}

// jsonKind names the JSON kind a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string"
		}
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "value"
}

// setDefault sets a header that the caller did not set: Sign never
// overwrites what a user asked for (a form-encoded GitHub delivery, say).
func setDefault(h http.Header, name, value string) {
	if h.Get(name) == "" {
		h.Set(name, value)
	}
}

// single is the one item of a request that is not a batch.
func single(key string, body []byte) []Item { return []Item{{Key: key, Body: body}} }

// one is the single item of a request, with its event type.
func one(key, typ string, body []byte) []Item {
	return []Item{{Key: key, Body: body, Type: eventType(typ)}}
}

// MaxTypeLen bounds an event type.
const MaxTypeLen = 200

// eventType joins the parts of an event type a provider sent (GitHub's
// event and action: pull_request.opened), leaving out the empty ones. A
// type that is not text a person can read (not UTF-8, or holding a control
// or invisible formatting character) is kept with those bytes
// percent-encoded (invoice.paid%0D%0A), and one over MaxTypeLen bytes is
// cut there: a type routes its event (types: [invoice.*]), so it is never
// dropped for how it is written (invariant 23), and what is stored, shown
// and sent as X-Oncehook-Type is never a hostile string (a line break, a
// bidi override).
func eventType(parts ...string) string {
	var t string
	for _, p := range parts {
		switch {
		case p == "":
		case t == "":
			t = p
		default:
			t += "." + p
		}
	}
	if len(t) <= MaxTypeLen && readable(t) {
		return t
	}
	return readableType(t)
}

// readable reports whether s is UTF-8 without a control or invisible
// formatting character.
func readable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unreadable(r) {
			return false
		}
	}
	return true
}

func unreadable(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// readableType is t with every byte of an unreadable character (or of no
// UTF-8 character) percent-encoded, cut to MaxTypeLen bytes at a
// character, never inside an escape.
func readableType(t string) string {
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(t); {
		r, size := utf8.DecodeRuneInString(t[i:])
		piece := t[i : i+size]
		if r == utf8.RuneError && size == 1 || unreadable(r) {
			var esc []byte
			for j := 0; j < size; j++ {
				esc = append(esc, '%', hexdig[t[i+j]>>4], hexdig[t[i+j]&15])
			}
			piece = string(esc)
		}
		if b.Len()+len(piece) > MaxTypeLen {
			break
		}
		b.WriteString(piece)
		i += size
	}
	return b.String()
}

// bodyFields returns top-level fields of a JSON body as key text.
func bodyFields(body []byte, fields ...string) ([]string, error) {
	var doc map[string]keyText
	if err := decodeJSON(body, &doc); err != nil {
		return nil, err
	}
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = string(doc[f])
	}
	return out, nil
}

// bodyField returns a top-level field of a JSON body as key text.
func bodyField(body []byte, field string) (string, error) {
	var doc map[string]keyText
	if err := decodeJSON(body, &doc); err != nil {
		return "", err
	}
	return string(doc[field]), nil
}
