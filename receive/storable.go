package receive

import (
	"bytes"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/oncehook/oncehook/internal/tracing"
)

// What intake keeps of the values beside an event's body that a transport
// handed over. How a message is written is never a reason to lose it
// (invariant 23): a value no store could hold, or no delivery could carry
// back out, is stored in a form that can (a key: provider.SafeKey; an
// order entity: store.Entity), or, where it only informs (a Content-Type,
// a forwarded header, a trace parent), left out, and the event taken
// without it. A queue's message or an outbox publish can hold bytes an
// HTTP request cannot (a NUL, a line break), and no transport bounds
// what it carries by what PostgreSQL's text columns take.

// sendable reports whether v may be stored and sent back out as a header
// value of at most limit bytes: UTF-8 (what a store's text column takes),
// and nothing Go's HTTP client refuses to send (a NUL, a CR or an LF, any
// other control byte but a tab), as it checks before every request.
func sendable(v string, limit int) bool {
	return len(v) <= limit && utf8.ValidString(v) && httpguts.ValidHeaderFieldValue(v)
}

// contentTypeOf is the Content-Type an event is stored and delivered
// with: the one the transport gave (or the preset's), or, when that one
// cannot be (over 256 bytes, not UTF-8, a control byte in it), the one a
// message without any gets (DefaultContentType). The second bool says it
// was left out.
func contentTypeOf(given string, body []byte) (string, bool) {
	if sendable(given, maxContentType) {
		return given, false
	}
	return DefaultContentType(body), true
}

// DefaultContentType is the content type of a body that came without a
// usable one: application/json when it opens as a JSON object or array
// (what a POST of it would most likely have said), else none.
func DefaultContentType(body []byte) string {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		return "application/json"
	}
	return ""
}

// traceOf is the trace parent an event's deliveries continue: the one the
// transport carried when it is a W3C traceparent (as written back,
// normalised), else none. A header that is not one (a NUL in it, bytes
// that are not UTF-8, a megabyte of it) informs nothing and is not
// stored (invariant 23).
func traceOf(carried string) string {
	if carried == "" {
		return ""
	}
	return tracing.Parent(carried)
}
