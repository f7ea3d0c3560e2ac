package oncehook_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Issue 41, item 16: requests with no Authorization were said to count
// toward the limit on wrong tokens, so that a probe, a browser or a
// script whose token variable is unset locked its address out. Over the
// gateway's own API listener, every route behind the tokens (the admin
// API, the effects API, the outbox's publish, the dashboard's login form
// sent empty) answers a request without a token 401, however often, and
// counts none of them: the right token works, and wrong tokens are still
// limited after the limit (10 a window), not before.
func TestRequestsWithoutATokenNeverCountAsWrongOnes(t *testing.T) {
	gw := startGateway(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: shop, preset: generic, unsigned: true, key: ["json:id"], outbox: true, destinations: [app]}
destinations: [{name: app, url: "http://127.0.0.1:1/never"}]
api: {tokens: [{name: ops, token: right-token-0123456789}]}
`)
	send := func(method, path, authorization, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, gw.APIURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		if strings.HasPrefix(path, "/ui/") {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", gw.APIURL)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	noToken := []struct{ method, path, body string }{
		{http.MethodGet, "/v1/events", ""},
		{http.MethodGet, "/v1/stats", ""},
		{http.MethodPost, "/v1/effects/order-1/claim", "{}"},
		{http.MethodPost, "/v1/publish/shop", `{"id":"o1"}`},
		{http.MethodPost, "/ui/login", url.Values{"token": {""}}.Encode()},
	}
	for round := range 6 { // 30 requests without a token, three times the limit
		for _, r := range noToken {
			if code := send(r.method, r.path, "", r.body); code != http.StatusUnauthorized {
				t.Fatalf("round %d, %s %s without a token: %d, want 401", round+1, r.method, r.path, code)
			}
		}
	}
	if code := send(http.MethodGet, "/v1/events", "Bearer right-token-0123456789", ""); code != http.StatusOK {
		t.Fatalf("the right token after 30 requests without one: %d, want 200", code)
	}
	for i := range 10 {
		if code := send(http.MethodGet, "/v1/events", "Bearer wrong-token", ""); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401 (the requests without a token used up none of the limit)", i+1, code)
		}
	}
	if code := send(http.MethodGet, "/v1/events", "Bearer wrong-token", ""); code != http.StatusTooManyRequests {
		t.Fatalf("the 11th wrong token: %d, want 429", code)
	}
	if code := send(http.MethodGet, "/v1/events", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token while the address is limited: %d, want 401", code)
	}
	if code := send(http.MethodGet, "/v1/events", "Bearer right-token-0123456789", ""); code != http.StatusOK {
		t.Fatalf("the right token while the address is limited: %d, want 200", code)
	}
}
