package jsonhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRouteWithEscapesEachArgument(t *testing.T) {
	r := Route{http.MethodPost, "/v1/effects/{key}/reset"}
	if got := r.With("order 1/2"); got != "/v1/effects/order%201%2F2/reset" {
		t.Fatalf("With = %q", got)
	}
	if r.Pattern() != "POST /v1/effects/{key}/reset" {
		t.Fatalf("Pattern = %q", r.Pattern())
	}
	// The pattern serves what With builds, the escaped slash included.
	mux := http.NewServeMux()
	var key string
	mux.HandleFunc(r.Pattern(), func(_ http.ResponseWriter, req *http.Request) { key = req.PathValue("key") })
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, r.With("order 1/2"), nil))
	if key != "order 1/2" {
		t.Fatalf("served key %q", key)
	}
	// A key that is a dot segment is escaped too: left as it is, the
	// server cleans it away and redirects to another route ("." and ".."
	// are keys like any other).
	for _, k := range []string{".", "..", "a.b", "..."} {
		key = ""
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, r.With(k), nil))
		if key != k {
			t.Errorf("With(%q) = %q: served key %q, answer %d; want the key", k, r.With(k), key, rec.Code)
		}
	}
}

func TestWriteJSONNeverLetsABrowserSniff(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, http.StatusNotFound, "not_found", "no source named <script>")
	h := rec.Header()
	if rec.Code != 404 || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Type") != "application/json" ||
		rec.Body.String() != `{"error":"no source named <script>","reason":"not_found"}`+"\n" {
		t.Fatalf("%d %v %s", rec.Code, h, rec.Body)
	}
}

// An answer over MaxAnswer is an error, not a cut answer that reads as
// another one.
func TestDoRefusesAnAnswerOverMaxAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"result":"`+strings.Repeat("x", 100)+`"}`)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "t", nil)
	c.MaxAnswer = 50
	if status, body, err := c.Do(context.Background(), http.MethodGet, "/", nil, nil); err == nil {
		t.Fatalf("a 113-byte answer with MaxAnswer 50: %d %q; want an error", status, body)
	}
	c.MaxAnswer = 113
	if _, body, err := c.Do(context.Background(), http.MethodGet, "/", nil, nil); err != nil || len(body) != 113 {
		t.Fatalf("a 113-byte answer with MaxAnswer 113: %d bytes, %v", len(body), err)
	}
}
