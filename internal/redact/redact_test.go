package redact_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/redact"
)

func TestURLHidesPasswordsAndQueryValues(t *testing.T) {
	cases := map[string]string{
		"https://crm.example/hook?api_key=S&x=1":         "https://crm.example/hook?api_key=xxxxx&x=xxxxx",
		"https://u:S@crm.example/hook":                   "https://u:xxxxx@crm.example/hook",
		"https://crm.example/hook#S":                     "https://crm.example/hook",
		"postgres://u:S@db/x?sslmode=disable&password=S": "postgres://u:xxxxx@db/x?sslmode=disable&password=xxxxx",
		"https://crm.example/hook?flag":                  "https://crm.example/hook?xxxxx",
		"http://[::1:bad":                                "(a URL that does not parse)",
		// Found from outside: a bare query value, a user name alone.
		"https://crm.example/hook?S":                 "https://crm.example/hook?xxxxx",
		"https://crm.example/hook?S&sslmode=disable": "https://crm.example/hook?xxxxx&sslmode=disable",
		"https://crm.example/hook?a=1&&S":            "https://crm.example/hook?a=xxxxx&&xxxxx",
		"https://S@crm.example/hook":                 "https://xxxxx@crm.example/hook",
		"https://S:@crm.example/hook":                "https://xxxxx:@crm.example/hook",
		"redis://S@cache:6379/0":                     "redis://xxxxx@cache:6379/0",
		"postgres://app@db/x?sslmode=disable":        "postgres://app@db/x?sslmode=disable",
	}
	for in, want := range cases {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%s) = %s, want %s", in, got, want)
		}
		if strings.Contains(in, "S") && strings.Contains(redact.URL(in), "S") {
			t.Errorf("URL(%s) shows the secret", in)
		}
	}
}

// What net/http's client returns quotes the URL whole; Error hides its
// secrets and still unwraps to the original.
func TestErrorHidesTheURLInAClientError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://u:PW@127.0.0.1:1/hook?api_key=S3CRET", nil)
	_, err := http.DefaultClient.Do(req)
	if err == nil {
		t.Fatal("port 1 answered")
	}
	red := redact.Error(err)
	if strings.Contains(red.Error(), "S3CRET") || strings.Contains(red.Error(), "PW") || !strings.Contains(red.Error(), "api_key=xxxxx") {
		t.Fatalf("%q", red.Error())
	}
	if !errors.Is(red, err) {
		t.Fatal("the redacted error does not unwrap to the original")
	}
	if redact.Error(nil) != nil {
		t.Fatal("Error(nil) is not nil")
	}
}

// An answer or an error that quotes the request's URL or headers shows
// none of what URL and Header hide, in whatever form it quotes it.
func TestSecretsAreHiddenInTextThatEchoesThem(t *testing.T) {
	u, _ := url.Parse("https://u:PW-0123456@crm.example/hook?api_key=S3CRET%2Fkey&v=2&sslmode=disable&BARETOKEN1")
	s := redact.SecretsOf(u, map[string][]string{"Authorization": {"Bearer tok-abcdef"}, "X-Team": {"team-visible"}})
	cases := map[string]string{
		`{"error":"bad key","url":"/hook?api_key=S3CRET%2Fkey&v=2&sslmode=disable&BARETOKEN1"}`: `{"error":"bad key","url":"/hook?api_key=xxxxx&v=xxxxx&sslmode=disable&xxxxx"}`,
		`{"args":{"api_key":"S3CRET/key"}}`:                                                     `{"args":{"api_key":"xxxxx"}}`,
		`{"args":{"api_key":"S3CRET\/key"}}`:                                                    `{"args":{"api_key":"xxxxx"}}`,
		`key S3CRET%2Fkey and S3CRET/key`:                                                       `key xxxxx and xxxxx`,
		`headers: Authorization: Bearer tok-abcdef`:                                             `headers: Authorization: xxxxx`,
		`token tok-abcdef; team team-visible`:                                                   `token xxxxx; team team-visible`,
		`user u, password PW-0123456`:                                                           `user u, password xxxxx`,
		`v=2 is short: hidden after its name; 2 is not`:                                         `v=xxxxx is short: hidden after its name; 2 is not`,
		// A text cut in the middle of a secret hides what is left of it.
		`{"url":"/hook?api_key=S3CR`: `{"url":"/hook?api_key=xxxxx`,
		`Bearer is a word; ok`:       `Bearer is a word; ok`,
		``:                           ``,
	}
	for in, want := range cases {
		if got := s.Hide(in); got != want {
			t.Errorf("Hide(%s)\n = %s\nwant %s", in, got, want)
		}
	}
	// Nothing to hide: the text as it is.
	plain, _ := url.Parse("https://crm.example/hook?sslmode=disable")
	if s := redact.SecretsOf(plain, map[string][]string{"X-Team": {"a"}}); s != nil || s.Hide("sslmode=disable") != "sslmode=disable" {
		t.Errorf("a URL with nothing secret: %v", s)
	}
}
