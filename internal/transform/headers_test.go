package transform

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestOneHeaderUnderTwoNames: the script is given lowercased names and may set X-Env beside the x-env it
// got. Which one is sent must not depend on a map's order: the changed value is sent on every run, and two
// changed values that disagree are the script's error.
func TestOneHeaderUnderTwoNames(t *testing.T) {
	s := mustCompile(t, "env.js", `addHandler("transform", (request) => { request.headers["X-Env"] = "staging"; return request; });`, Options{})
	req := stripeRequest(`{"id":"evt_1"}`)
	req.Header.Set("X-Env", "prod")
	for i := 0; i < 40; i++ {
		out, err := s.Run(context.Background(), req, event("evt_1"))
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Header.Get("X-Env"); got != "staging" {
			t.Fatalf("run %d sent X-Env %q, want staging", i+1, got)
		}
	}
	both := mustCompile(t, "both.js", `addHandler("transform", (request) => { request.headers["X-Env"] = "a"; request.headers["x-env"] = "b"; return request; });`, Options{})
	_, err := both.Run(context.Background(), req, event("evt_1"))
	if err == nil || !strings.Contains(err.Error(), `headers "X-Env" and "x-env" are one header`) {
		t.Fatalf("two values for one header: %v", err)
	}
}

// TestHeaderValueHTTPRefuses: a value net/http's client refuses (a control character other than the tab) is
// the script's error, a dead letter that says so, and not a send that fails as a network error, retried and
// counted by the breaker. A tab and non-ASCII bytes are values HTTP takes.
func TestHeaderValueHTTPRefuses(t *testing.T) {
	for _, v := range []string{`a\u0001b`, `a\u001fb`, `a\u007fb`, `a\u000bb`} {
		s := mustCompile(t, "ctl.js", `addHandler("transform", (r) => { r.headers["x-ctl"] = "`+v+`"; return r; });`, Options{})
		_, err := s.Run(context.Background(), stripeRequest(`{}`), event("k"))
		var se *Error
		if !errors.As(err, &se) || se.Kind != KindInvalid || !strings.Contains(err.Error(), "control character") {
			t.Errorf("%s: err %v, want the script's error naming the control character", v, err)
		}
	}
	s := mustCompile(t, "ok.js", `addHandler("transform", (r) => { r.headers["x-ok"] = "a\tb é"; return r; });`, Options{})
	out, err := s.Run(context.Background(), stripeRequest(`{}`), event("k"))
	if err != nil || out.Header.Get("X-Ok") != "a\tb é" {
		t.Fatalf("tab and non-ASCII: %v %q", err, out.Header.Get("X-Ok"))
	}
}
