package dashboard

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every string is in both languages, with the same format verbs; and every
// key the templates use exists.
func TestCatalogIsComplete(t *testing.T) {
	en, pt := catalog["en"], catalog["pt-BR"]
	verbs := regexp.MustCompile(`%[a-z]`)
	for k, v := range en {
		p, ok := pt[k]
		if !ok {
			t.Errorf("pt-BR lacks %q", k)
			continue
		}
		if fmt.Sprint(verbs.FindAllString(v, -1)) != fmt.Sprint(verbs.FindAllString(p, -1)) {
			t.Errorf("%q: verbs differ: %q vs %q", k, v, p)
		}
	}
	for k := range pt {
		if _, ok := en[k]; !ok {
			t.Errorf("en lacks %q", k)
		}
	}
	used := regexp.MustCompile(`\.T "([a-z0-9_.]+)"`)
	entries, err := os.ReadDir("templates")
	if err != nil || len(entries) < 10 {
		t.Fatalf("templates: %d entries, %v: a wrong path would check nothing", len(entries), err)
	}
	for _, e := range entries {
		b, err := os.ReadFile("templates/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range used.FindAllStringSubmatch(string(b), -1) {
			if _, ok := en[m[1]]; !ok {
				t.Errorf("%s uses %q, which the catalog lacks", e.Name(), m[1])
			}
		}
	}
	// Keys built from values: states, doctor findings, errors.
	for _, k := range []string{"pending", "delivered", "dead", "stored", "failed", "done", "expired"} {
		if _, ok := en["state."+k]; !ok {
			t.Errorf("state.%s missing", k)
		}
	}
	for _, k := range []string{"not_found", "unauthorized", "csrf", "read_only", "bad_request", "unavailable", "internal"} {
		if _, ok := en["error."+k]; !ok {
			t.Errorf("error.%s missing", k)
		}
	}
}

func TestAcceptLanguage(t *testing.T) {
	for h, want := range map[string]string{
		"":                            "en",
		"pt-BR":                       "pt-BR",
		"pt":                          "pt-BR",
		"en-US,en;q=0.9,pt;q=0.8":     "en",
		"fr;q=1,pt-BR;q=0.7,en;q=0.3": "pt-BR",
		"pt;q=0,en;q=0.1":             "en",
	} {
		if got := fromAcceptLanguage(h).Code; got != want {
			t.Errorf("%q: %s, want %s", h, got, want)
		}
	}
	if n := pick("pt-BR").Num(1234567); n != "1.234.567" {
		t.Errorf("pt-BR number %s", n)
	}
	if n := pick("en").Num(-1234); n != "-1,234" {
		t.Errorf("en number %s", n)
	}
	if !strings.Contains(pick("pt-BR").T("signed_in_as", "ops"), "ops") {
		t.Error("format")
	}
}
