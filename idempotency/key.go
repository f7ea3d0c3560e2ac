package idempotency

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// The one reading of an Idempotency-Key, wherever a client hands oncehook
// one to honour: this middleware (and the proxy in front of upstreams:),
// and the outbox (POST /v1/publish/{source}, and PublishTx's header). The
// IETF httpapi draft makes the header an RFC 8941 Item whose value is a
// String ("ord_q1", quoted), and says a client MUST NOT send it twice;
// many clients send the key bare (ord_q1). Both are one key, so a client
// that switches from one spelling to the other is not taken for a new
// request; the header given twice is refused, since which one the client
// meant cannot be told.

// KeyFrom reads the Idempotency-Key of a request's headers with ParseKey:
// "" and no error when there is none.
func KeyFrom(h http.Header) (string, error) {
	vs, ok := h[Header]
	if !ok || len(vs) == 0 {
		return "", nil
	}
	return ParseKey(vs)
}

// RefuseKey answers 400 for a key ParseKey refused, saying why: the one
// answer of every place a key arrives.
func RefuseKey(w http.ResponseWriter, err error) {
	jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: err.Error(), Reason: "invalid", Field: Header})
}

// ParseKey reads an Idempotency-Key header, as the draft defines it: an
// RFC 8941 sf-string ("8e03978e-40d5-43e8-bc93-6894a57f9324": printable
// ASCII, where a backslash escapes only a quote or a backslash), or, as
// many clients send it, bare: token characters only. values are the
// header's lines: more than one is refused.
func ParseKey(values []string) (string, error) {
	if len(values) != 1 {
		return "", fmt.Errorf("Idempotency-Key: give the header once (it came %d times, and which key was meant cannot be told)", len(values))
	}
	v := strings.Trim(values[0], " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		closed := false
		for i := 1; i < len(v) && !closed; i++ {
			switch c := v[i]; {
			case c == '\\':
				if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
					return "", errors.New(`Idempotency-Key: in a quoted key a backslash escapes only " or \ (an RFC 8941 string)`)
				}
				i++
				b.WriteByte(v[i])
			case c == '"':
				if i != len(v)-1 {
					return "", errors.New("Idempotency-Key: nothing may follow the closing quote (one key, not a list: was the header given twice?)")
				}
				closed = true
			case c < 0x20 || c > 0x7e:
				return "", errors.New("Idempotency-Key: printable ASCII only")
			default:
				b.WriteByte(c)
			}
		}
		if !closed {
			return "", errors.New("Idempotency-Key: the quoted key has no closing quote")
		}
		key = b.String()
	} else {
		for i := 0; i < len(v); i++ {
			if !tokenChar(v[i]) {
				if v[i] == ',' {
					return "", errors.New("Idempotency-Key: one key, not a list (was the header given twice?); quote a key that holds a comma")
				}
				return "", errors.New(`Idempotency-Key: a bare key holds only letters, digits and !#$%&'*+-.^_` + "`" + `|~:/; quote it ("...") for spaces or other characters`)
			}
		}
		key = v
	}
	if key == "" || len(key) > 255 {
		return "", errors.New("Idempotency-Key: want 1 to 255 characters")
	}
	return key, nil
}

// FormatKey writes a key ParseKey read in the one form every spelling of
// it is sent on as: bare when it is made of token characters (most keys:
// a UUID, ord_q1), else an RFC 8941 string. ParseKey reads it back as
// key, so an API behind the proxy sees "ord_q1" and ord_q1 alike, as the
// proxy does.
func FormatKey(key string) string {
	bare := key != ""
	for i := 0; i < len(key) && bare; i++ {
		bare = tokenChar(key[i])
	}
	if bare {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// tokenChar is an RFC 9110 tchar, or ':' and '/' as an RFC 8941 token
// allows.
func tokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}
