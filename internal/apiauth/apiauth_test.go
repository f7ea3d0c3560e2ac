package apiauth

import (
	"net/http"
	"testing"
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
