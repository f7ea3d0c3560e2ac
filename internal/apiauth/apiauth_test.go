package apiauth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Found from outside: "Authorization: bearer T" was 401; the scheme is
// case-insensitive.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	for h, want := range map[string]string{
		"Bearer tok": "tok", "bearer tok": "tok", "BEARER tok": "tok", "Bearer  tok ": "tok",
		"Basic tok": "", "Bearertok": "", "": "", "tok": "",
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", h)
		if got := Bearer(r); got != want {
			t.Errorf("Authorization %q: token %q, want %q", h, got, want)
		}
	}
}

// The limit is per address and per window: another address is not
// limited by the first one's failures, the window's end lifts the limit,
// and a right token is accepted at every point of it. Memory stays bounded
// however many addresses fail.
func TestFailuresArePerAddressAndWindow(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	a := NewWith([]Token{{Name: "ops", Value: "right-token-0123456789"}}, Options{MaxFailures: 3, FailureWindow: time.Minute, Now: func() time.Time { return now }})
	for step := range 5 {
		_, ok, limited := a.CheckFrom("10.0.0.1", "wrong")
		if ok || (limited > 0) != (step >= 3) {
			t.Fatalf("wrong token %d: ok=%v limited=%s", step+1, ok, limited)
		}
		if c, ok, limited := a.CheckFrom("10.0.0.1", "right-token-0123456789"); !ok || limited != 0 || c.Name != "ops" {
			t.Fatalf("the right token after %d wrong ones: %v %v %s", step+1, c, ok, limited)
		}
		now = now.Add(time.Second)
	}
	if _, _, limited := a.CheckFrom("10.0.0.2", "wrong"); limited != 0 {
		t.Fatalf("another address is limited: %s", limited)
	}
	if _, _, limited := a.CheckFrom("10.0.0.1", "wrong"); limited != time.Minute-5*time.Second {
		t.Fatalf("limited for %s, want the rest of the window (55s)", limited)
	}
	now = now.Add(time.Minute)
	if _, _, limited := a.CheckFrom("10.0.0.1", "wrong"); limited != 0 {
		t.Fatalf("still limited after the window: %s", limited)
	}
	for i := range 3 * maxClients {
		a.CheckFrom(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255), "wrong")
	}
	if n := len(a.failures.by); n > maxClients {
		t.Fatalf("%d addresses remembered, want at most %d", n, maxClients)
	}
}

// Found from outside: requests without any token (a browser, a probe, a
// script whose token variable is unset) counted as wrong tokens, so an
// address that had sent none was told 429 "too many requests with a wrong
// token". No token is 401, however often; wrong tokens are still limited,
// and a missing one in between neither uses up nor lifts the limit.
func TestNoTokenIsNeverCountedAsAWrongOne(t *testing.T) {
	a := NewWith([]Token{{Name: "ops", Value: "right-token-0123456789"}}, Options{MaxFailures: 3, FailureWindow: time.Minute})
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	send := func(authorization string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/events", nil)
		r.RemoteAddr = "203.0.113.7:40000"
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 20 {
		if code := send(""); code != http.StatusUnauthorized {
			t.Fatalf("request %d without a token: %d, want 401", i+1, code)
		}
	}
	if code := send("Basic b3BzOnB3"); code != http.StatusUnauthorized {
		t.Fatalf("another scheme (no bearer token): %d, want 401", code)
	}
	for i := range 3 {
		if code := send("Bearer wrong-" + fmt.Sprint(i)); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d after the tokenless requests: %d, want 401 (they used up nothing)", i+1, code)
		}
	}
	if code := send("Bearer wrong-again"); code != http.StatusTooManyRequests {
		t.Fatalf("a 4th wrong token: %d, want 429", code)
	}
	if code := send(""); code != http.StatusUnauthorized {
		t.Fatalf("no token while limited: %d, want 401", code)
	}
	if code := send("Bearer right-token-0123456789"); code != http.StatusNoContent {
		t.Fatalf("the right token while limited: %d, want it served", code)
	}
}

// Found from outside: a wrong token was told "a bearer token from
// api.tokens is required", as if none had been sent. Each now says what
// was wrong, and neither says more than that.
func TestUnauthorizedSaysWhetherATokenWasSent(t *testing.T) {
	a := New([]Token{{Name: "ops", Value: "right-token-0123456789"}})
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for authorization, want := range map[string]string{
		"":                  "a bearer token from api.tokens is required",
		"Basic b3BzOnB3":    "a bearer token from api.tokens is required",
		"Bearer not-it":     "the bearer token is not one of api.tokens",
		"bearer right-toke": "the bearer token is not one of api.tokens",
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/events", nil)
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), want) || strings.Contains(w.Body.String(), "right-token") {
			t.Errorf("Authorization %q: %d %s, want 401 saying %q", authorization, w.Code, w.Body, want)
		}
	}
}

// One host on IPv6 holds a whole /64 and picks any address in it for each
// connection: counted per address, it guessed tokens without a limit. The
// addresses of one /64 share one count (an IPv4 address stays its own);
// another /64 has its own, and the right token is still always accepted.
func TestWrongTokensFromOneIPv6NetworkShareOneLimit(t *testing.T) {
	a := NewWith([]Token{{Name: "ops", Value: "right-token-0123456789"}}, Options{MaxFailures: 3, FailureWindow: time.Minute})
	for i := range 5 {
		_, _, limited := a.CheckFrom(fmt.Sprintf("2001:db8:1:2::%x", i+1), "wrong")
		if (limited > 0) != (i >= 3) {
			t.Fatalf("wrong token %d from its own address in one /64: limited=%s", i+1, limited)
		}
	}
	if _, ok, limited := a.CheckFrom("2001:db8:1:2::99", "right-token-0123456789"); !ok || limited != 0 {
		t.Fatalf("the right token from the limited /64: %v %s", ok, limited)
	}
	if _, _, limited := a.CheckFrom("2001:db8:1:3::1", "wrong"); limited != 0 {
		t.Fatalf("another /64 is limited: %s", limited)
	}
	for i := range 4 {
		if _, _, limited := a.CheckFrom(fmt.Sprintf("192.0.2.%d", i+1), "wrong"); limited != 0 {
			t.Fatalf("IPv4 %d: limited by its neighbours: %s", i+1, limited)
		}
	}
}

// A token created through the API is given by its hash only: its value
// is accepted, beside the file's tokens; a hash not in HashOf's form
// matches nothing, and the empty value never does.
func TestAStoredTokensHashIsCheckedBesideTheFiles(t *testing.T) {
	const value = "ohk_0123456789abcdef0123456789abcdef"
	a := New([]Token{
		{Name: "file", Value: "file-token-0123456789"},
		{Name: "stored", Hash: HashOf(value), Tenant: "acme"},
		{Name: "broken", Hash: "md5:abc"},
	})
	if c, ok := a.Check(value); !ok || c.Name != "stored" || c.Tenant != "acme" {
		t.Fatalf("the stored token: %+v %v", c, ok)
	}
	if c, ok := a.Check("file-token-0123456789"); !ok || c.Name != "file" {
		t.Fatalf("the file's token: %+v %v", c, ok)
	}
	for _, v := range []string{"", HashOf(value), "md5:abc"} {
		if _, ok := a.Check(v); ok {
			t.Errorf("%q accepted", v)
		}
	}
	if s := a.SessionToken(Caller{Name: "stored"}); s == "" {
		t.Error("no session for the stored token")
	} else if c, ok := a.Session(s); !ok || c.Name != "stored" {
		t.Errorf("its session: %+v %v", c, ok)
	}
	if ValidHash("sha256:"+strings.Repeat("g", 64)) || !ValidHash(HashOf("x")) {
		t.Error("ValidHash")
	}
}
