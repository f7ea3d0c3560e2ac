package dashboard

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Lang is a language of the dashboard. Many of our users run Hotmart,
// Mercado Pago, Asaas and WhatsApp operations in Brazil: every string is in
// English and Brazilian Portuguese (a test checks that no key lacks one).
type Lang struct {
	Code string
	Name string
	msgs map[string]string
	en   map[string]string // what a key missing here falls back to
}

// T translates key, formatting args into it when it has verbs.
func (l Lang) T(key string, args ...any) string {
	s, ok := l.msgs[key]
	if !ok {
		s, ok = l.en[key]
		if !ok {
			return key
		}
	}
	if len(args) > 0 {
		return fmt.Sprintf(s, args...)
	}
	return s
}

// Num writes an integer with the language's digit grouping.
func (l Lang) Num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	sep := ","
	if l.Code == "pt-BR" {
		sep = "."
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(sep)
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Dec writes f with digits decimals and the language's decimal mark (a
// comma in Portuguese), so that "1.061" (a thousand and sixty-one, in
// pt-BR's grouping) never stands beside "274142.2".
func (l Lang) Dec(f float64, digits int) string {
	s := strconv.FormatFloat(f, 'f', digits, 64)
	whole, frac, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseInt(whole, 10, 64)
	out := l.Num(n)
	if n == 0 && strings.HasPrefix(whole, "-") {
		out = "-0"
	}
	if frac == "" {
		return out
	}
	mark := "."
	if l.Code == "pt-BR" {
		mark = ","
	}
	return out + mark + frac
}

// Pct writes a ratio (0.123) as a percentage (12.3%).
func (l Lang) Pct(f float64) string { return l.Dec(100*f, 1) + "%" }

// Latency writes a time in milliseconds in the unit a person reads it in:
// ms under a second, s under a minute, min beyond ("4.6 min", not
// "274142.2 ms").
func (l Lang) Latency(ms float64) string {
	switch {
	case ms < 1000:
		return l.Dec(ms, 1) + " ms"
	case ms < 60_000:
		return l.Dec(ms/1000, 2) + " s"
	}
	return l.Dec(ms/60_000, 1) + " min"
}

// Day writes a day as a chart's axis labels it: month-day in English,
// day/month in Portuguese.
func (l Lang) Day(t time.Time) string {
	if l.Code == "pt-BR" {
		return t.UTC().Format("02/01")
	}
	return t.UTC().Format("01-02")
}

// HTML is T for strings that hold markup of our own.
func (l Lang) HTML(key string) template.HTML { return template.HTML(l.T(key)) }

// The languages are data, as Miniflux keeps them: translations/<code>.json,
// a flat map from key to text (fmt verbs where the text takes values),
// its own name under "language.name". Adding a language is adding a file;
// the completeness test holds every file to en.json.
//
//go:embed translations/*.json
var translationFS embed.FS

// catalog is every language of the translations, English first.
type catalog struct {
	langs []Lang
}

// loadCatalog reads every translations/*.json of fsys.
func loadCatalog(fsys fs.FS) (*catalog, error) {
	files, err := fs.Glob(fsys, "translations/*.json")
	if err != nil {
		return nil, err
	}
	c := &catalog{}
	var en map[string]string
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var msgs map[string]string
		if err := json.Unmarshal(b, &msgs); err != nil {
			return nil, fmt.Errorf("dashboard: %s: %w", f, err)
		}
		code := strings.ReplaceAll(strings.TrimSuffix(path.Base(f), ".json"), "_", "-")
		l := Lang{Code: code, Name: msgs["language.name"], msgs: msgs}
		if code == "en" {
			en = msgs
			c.langs = append([]Lang{l}, c.langs...)
		} else {
			c.langs = append(c.langs, l)
		}
	}
	if en == nil {
		return nil, errors.New("dashboard: translations/en.json is missing")
	}
	for i := range c.langs {
		c.langs[i].en = en
	}
	return c, nil
}

// pick returns the language code names (any case, - or _), or one that
// shares its primary tag ("pt" is pt-BR), or English.
func (c *catalog) pick(code string) Lang {
	l, _ := c.match(code)
	return l
}

func (c *catalog) match(code string) (Lang, bool) {
	code = strings.ToLower(strings.ReplaceAll(code, "_", "-"))
	primary, _, _ := strings.Cut(code, "-")
	for _, l := range c.langs {
		if strings.ToLower(l.Code) == code {
			return l, true
		}
	}
	for _, l := range c.langs {
		if p, _, _ := strings.Cut(strings.ToLower(l.Code), "-"); p == primary {
			return l, true
		}
	}
	return c.langs[0], false
}

// fromAcceptLanguage picks the best of our languages for an
// Accept-Language header ("pt-BR,pt;q=0.9,en;q=0.8").
func (c *catalog) fromAcceptLanguage(h string) Lang {
	type choice struct {
		tag string
		q   float64
	}
	var cs []choice
	for _, part := range strings.Split(h, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		if tag != "" {
			cs = append(cs, choice{strings.ToLower(tag), q})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].q > cs[j].q })
	for _, ch := range cs {
		if ch.q <= 0 {
			continue
		}
		if l, ok := c.match(ch.tag); ok {
			return l
		}
	}
	return c.langs[0]
}
