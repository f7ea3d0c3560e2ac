package receive

import (
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// writeAnswer writes a 200 answer exactly as jsonhttp.WriteJSON does, byte
// for byte and header for header (FuzzAnswer), without reflection: the
// answer is on intake's hot path, and its strings are almost always
// plain (keys are SafeKey's printable ASCII, statuses are ours). An
// answer holding a string that JSON would escape is left to WriteJSON.
func writeAnswer(w http.ResponseWriter, resp Response) {
	bp := answers.Get().(*[]byte)
	defer answers.Put(bp)
	b, ok := appendAnswer((*bp)[:0], resp)
	if !ok {
		jsonhttp.WriteJSON(w, http.StatusOK, resp)
		return
	}
	*bp = b
	h := w.Header()
	// WriteJSON's three headers (their names canonical, as Set would put
	// them), their values in one array; each capped at its length, so
	// that adding to one copies it.
	v := make([]string, 3)
	v[0], v[1], v[2] = "application/json", "nosniff", "no-store"
	h["Content-Type"], h["X-Content-Type-Options"], h["Cache-Control"] = v[0:1:1], v[1:2:2], v[2:3:3]
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// answers are writeAnswer's buffers.
var answers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// appendAnswer appends resp as encoding/json encodes it (and the newline
// json.Encoder ends it with); false when a string in it is not plain.
func appendAnswer(b []byte, resp Response) ([]byte, bool) {
	if resp.Events == nil || !plain(resp.Status) {
		return b, false
	}
	b = append(b, `{"status":"`...)
	b = append(b, resp.Status...)
	b = append(b, `","events":[`...)
	for i, e := range resp.Events {
		if !plain(e.Key) || !plain(e.Status) {
			return b, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":"`...)
		b = append(b, e.Key...)
		b = append(b, `","status":"`...)
		b = append(b, e.Status...)
		b = append(b, '"')
		if e.Keyless {
			b = append(b, `,"keyless":true`...)
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...), true
}

// plain reports whether s is printable ASCII without a quote or a
// backslash: what encoding/json writes as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Answer writes HTTP's answer to the rejection, the one for every
// endpoint that takes events or bodies on intake's terms (intake, POST
// /v1/publish, the Idempotency-Key proxy): its status in the one error
// shape, with Retry-After where a retry soon is worth it (the store: 5 s;
// memory: 1 s), and Connection: close when the body was not read to its
// end (the connection cannot carry another request).
func (rej *Rejection) Answer(w http.ResponseWriter) {
	switch rej.Reason {
	case ReasonUnavailable:
		w.Header().Set("Retry-After", "5")
	case ReasonOverloaded:
		w.Header().Set("Retry-After", "1")
	}
	if rej.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(rej.retryAfter))
	}
	if rej.unread {
		w.Header().Set("Connection", "close")
	}
	jsonhttp.WriteJSON(w, rej.Status, rej.ErrorResponse())
}

// BodyRejection is the rejection of a body that could not be read whole
// (intake's, or ReadBody's): over the limit (413), no room in the
// in-flight budget or cut to make room for bodies that arrived in full
// (503, retry), below the pace floor (408), or broken off (400).
func BodyRejection(err error) *Rejection {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return rejection(http.StatusRequestEntityTooLarge, ReasonTooLarge, "the body is over "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
	case errors.Is(err, errOverloaded):
		return rejection(http.StatusServiceUnavailable, ReasonOverloaded, "too many request bytes in flight; retry later")
	case errors.Is(err, errEvicted):
		rej := rejection(http.StatusServiceUnavailable, ReasonOverloaded,
			"the body was still arriving when the memory it held was needed for bodies that arrived in full; retry later")
		rej.unread = true
		return rej
	case errors.Is(err, errSlowBody):
		rej := rejection(http.StatusRequestTimeout, ReasonSlowBody, "the body arrived too slowly; it was cut")
		rej.unread = true
		return rej
	}
	return rejection(http.StatusBadRequest, ReasonUnreadable, "could not read the body")
}
