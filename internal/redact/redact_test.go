package redact_test

import (
	"context"
	"errors"
	"net/http"
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
