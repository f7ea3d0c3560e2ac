package dashboard

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/alert"
)

// Every string is in both languages, with the same format verbs; and every
// key the templates use exists.
func TestCatalogIsComplete(t *testing.T) {
	// The files as they are in the repository, not as embedded.
	c, err := loadCatalog(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.langs) < 2 || c.langs[0].Code != "en" {
		t.Fatalf("languages %v: want English first and at least one more", c.langs)
	}
	en := c.langs[0].msgs
	verbs := regexp.MustCompile(`%[a-z]`)
	for _, l := range c.langs[1:] {
		if l.Name == "" {
			t.Errorf("%s has no language.name", l.Code)
		}
		for k, v := range en {
			p, ok := l.msgs[k]
			if !ok {
				t.Errorf("%s lacks %q", l.Code, k)
				continue
			}
			if fmt.Sprint(verbs.FindAllString(v, -1)) != fmt.Sprint(verbs.FindAllString(p, -1)) {
				t.Errorf("%s %q: verbs differ: %q vs %q", l.Code, k, v, p)
			}
		}
		for k := range l.msgs {
			if _, ok := en[k]; !ok {
				t.Errorf("en lacks %q, which %s has", k, l.Code)
			}
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
	c, err := loadCatalog(translationFS)
	if err != nil {
		t.Fatal(err)
	}
	pick, fromAcceptLanguage := c.pick, c.fromAcceptLanguage
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

// Adding a language is adding a file: a catalog of en and es serves es,
// and falls back to English for a key es lacks.
func TestALanguageIsAFile(t *testing.T) {
	c, err := loadCatalog(fstest.MapFS{
		"translations/en.json": {Data: []byte(`{"language.name":"English","nav.events":"Events","more":"More"}`)},
		"translations/es.json": {Data: []byte(`{"language.name":"Español","nav.events":"Eventos"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	es := c.fromAcceptLanguage("es-MX,es;q=0.9")
	if es.Code != "es" || es.Name != "Español" || es.T("nav.events") != "Eventos" || es.T("more") != "More" {
		t.Fatalf("es: %s %s %q %q", es.Code, es.Name, es.T("nav.events"), es.T("more"))
	}
}

// Numbers read as the language writes them, and a latency in the unit a
// person reads it in: issue 26 found "274142.2 ms" beside "1.061" on one
// pt-BR page, and chart days as MM-DD in pt-BR.
func TestNumbersTimesAndDaysPerLanguage(t *testing.T) {
	c, err := loadCatalog(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	en, pt := c.pick("en"), c.pick("pt-BR")
	if pt.Code != "pt-BR" {
		t.Fatalf("picked %q for pt-BR", pt.Code)
	}
	day := time.Date(2026, 11, 24, 15, 0, 0, 0, time.UTC)
	for _, c := range []struct{ got, want string }{
		{en.Latency(0.4), "0.4 ms"}, {pt.Latency(0.4), "0,4 ms"},
		{en.Latency(999.94), "999.9 ms"}, {en.Latency(1500), "1.50 s"}, {pt.Latency(1500), "1,50 s"},
		{en.Latency(59_000), "59.00 s"}, {en.Latency(274142.2), "4.6 min"}, {pt.Latency(274142.2), "4,6 min"},
		{en.Latency(90 * 60_000), "90.0 min"}, {pt.Latency(1234 * 60_000), "1.234,0 min"}, {en.Latency(1234 * 60_000), "1,234.0 min"},
		{en.Pct(0.123), "12.3%"}, {pt.Pct(0.123), "12,3%"}, {pt.Pct(0), "0,0%"}, {en.Pct(1), "100.0%"},
		{en.Dec(-0.5, 1), "-0.5"}, {pt.Dec(-1234.5, 1), "-1.234,5"},
		{en.Day(day), "11-24"}, {pt.Day(day), "24/11"},
		{en.T("alert.breaker_open"), "breaker open"}, {pt.T("alert.duplicate_rate"), "taxa de duplicatas acima da base"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	// Every alert kind is said in words, not as its identifier.
	for _, k := range []string{alert.KindDuplicateRate, alert.KindDeadLetters, alert.KindBreakerOpen, alert.KindOldestPending} {
		for _, l := range []Lang{en, pt} {
			if got := l.T("alert." + k); got == "alert."+k || strings.Contains(got, "_") {
				t.Errorf("%s: alert %s reads %q", l.Code, k, got)
			}
		}
	}
}

// A config section a page names, "(upstreams:)", is one the config has,
// in every language: the effects page said "(apis:)", a name renamed a
// release before (read with a warning, then refused).
func TestPagesNameTheConfigAsItIs(t *testing.T) {
	c, err := loadCatalog(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			sections[name] = true
		}
	}
	if !sections["upstreams"] || !sections["sources"] {
		t.Fatalf("config sections %v: the yaml tags were not read", sections)
	}
	named := regexp.MustCompile(`\(([a-z_]+):\)`)
	seen := 0
	for _, l := range c.langs {
		for k, v := range l.msgs {
			for _, m := range named.FindAllStringSubmatch(v, -1) {
				seen++
				if !sections[m[1]] {
					t.Errorf("%s %q names the config section %s:, which the config does not have: %q", l.Code, k, m[1], v)
				}
			}
		}
	}
	if seen == 0 {
		t.Error("no translation names a config section: the pattern is wrong")
	}
}

// An audit target the tenant reached is written with its prefix's words
// in the reader's language, and the rest as any target.
func TestAuditTargetsOfTenantsPerLanguage(t *testing.T) {
	c, err := loadCatalog(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	en, pt := c.pick("en"), c.pick("pt-BR")
	for _, c := range []struct {
		l           Lang
		target, say string
	}{
		{en, "tenant acme: all events", "tenant acme: all events"},
		{pt, "tenant acme: all events", "cliente acme: todos os eventos"},
		{pt, "every tenant: type=order.paid", "todos os clientes: type=order.paid"},
		{pt, "tenant acme: issue 7", "cliente acme: problema de alerta 7"},
		{pt, "tenant acme: source=acme-a", "cliente acme: source=acme-a"},
		{pt, "destination acme-app", "destino acme-app"},
		{pt, "tenant: x", "tenant: x"},
	} {
		if got := auditTarget(c.l, c.target); got != c.say {
			t.Errorf("%s: %q reads %q, want %q", c.l.Code, c.target, got, c.say)
		}
	}
}
