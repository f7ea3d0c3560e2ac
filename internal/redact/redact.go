// Package redact makes URLs and the errors that quote them fit to show:
// in logs, answers, the dashboard, the CLI and stored attempt errors. One
// function for all of them, so that a secret in a URL is hidden the same
// way everywhere it could appear.
package redact

import (
	"encoding/json"
	"errors"
	"net/url"
	"sort"
	"strings"
)

// Mask replaces what is hidden.
const Mask = "xxxxx"

// harmless are query parameters whose values are kept: they configure a
// connection and carry no secret (store URLs: sslmode=disable), and
// hiding them would hide what an operator needs to see.
var harmless = map[string]bool{
	"sslmode": true, "user": true, "connect_timeout": true, "application_name": true, "target_session_attrs": true,
	"pool_max_conns": true, "pool_min_conns": true, "_pragma": true, "_txlock": true, "dial_timeout": true,
	"read_timeout": true, "write_timeout": true, "protocol": true,
}

// roles are the schemes whose user name alone is a database role, not a
// secret: an operator needs to see which role a store URL connects as.
var roles = map[string]bool{"postgres": true, "postgresql": true}

// URL returns raw with the password of its user info and the value of
// every query parameter (but a few harmless ones) replaced by Mask:
// destinations put API keys in the query (?api_key=, ?token=, ?code=),
// under any name, or bare (?SECRET), which is masked whole. A user name
// without a password (or with an empty one) is masked too (https://SECRET@host: a token often
// stands there alone), but for a database's role (postgres://app@db). A
// value that is not a URL is not shown at all.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u2s(u)
}

func u2s(u *url.URL) string {
	c := *u
	if c.User != nil {
		switch pw, has := c.User.Password(); {
		case has && pw != "":
			c.User = url.UserPassword(c.User.Username(), Mask)
		case has: // https://KEY:@host, basic auth with the key as user
			c.User = url.UserPassword(Mask, "")
		case !roles[strings.ToLower(c.Scheme)]:
			c.User = url.User(Mask)
		}
	}
	if c.RawQuery != "" {
		var parts []string
		for _, kv := range strings.Split(c.RawQuery, "&") {
			name, _, hasValue := strings.Cut(kv, "=")
			switch n, err := url.QueryUnescape(name); {
			case kv == "":
				parts = append(parts, kv)
			case !hasValue:
				parts = append(parts, Mask) // ?SECRET: a value with no name
			case err == nil && harmless[strings.ToLower(n)]:
				parts = append(parts, kv)
			default:
				parts = append(parts, name+"="+Mask)
			}
		}
		c.RawQuery = strings.Join(parts, "&")
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// Error returns err with the URL of every *url.Error in it redacted (what
// net/http's client returns quotes the whole URL, query included).
func Error(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	return &redacted{err: err, ue: ue}
}

// redacted is an error whose text hides its URL but that still unwraps to
// the original (errors.Is for timeouts and cancellation keeps working).
type redacted struct {
	err error
	ue  *url.Error
}

func (r *redacted) Error() string {
	msg := r.err.Error()
	if u, err := url.Parse(r.ue.URL); err == nil {
		return strings.ReplaceAll(msg, r.ue.URL, u2s(u))
	}
	return strings.ReplaceAll(msg, r.ue.URL, "(a URL)")
}

func (r *redacted) Unwrap() error { return r.err }

// credentialHeaders are the header names whose values are credentials: a
// destination's `headers` carry its API key in one of them.
var credentialHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "X-Api-Key": true, "Api-Key": true, "Cookie": true,
	"X-Auth-Token": true,
}

// Header returns h with the values of credential headers (Authorization,
// X-Api-Key, Cookie, ...) replaced by Mask, for showing what a delivery
// sends.
func Header(h map[string][]string) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		if credentialHeaders[canonical(k)] {
			out[k] = []string{Mask}
		} else {
			out[k] = v
		}
	}
	return out
}

// canonical is net/textproto's canonical form of an ASCII header name.
func canonical(k string) string {
	b := []byte(strings.ToLower(k))
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		upper = c == '-'
	}
	return string(b)
}

// Secrets are what a request carries that URL and Header hide, as they
// may come back in text: a destination's answer that quotes the URL it
// was called at (?api_key=...) or the headers it got, and an error that
// does. Hide masks them there, as URL masks them in the URL.
type Secrets struct {
	r *strings.Replacer
	// partial are the forms a cut text may end with a start of.
	partial []string
}

// minBare is the shortest value hidden wherever it stands in a text;
// shorter ones (?v=2) are hidden only after their name (v=2), or every
// "2" in an answer would go.
const minBare = 6

// minPartial is the shortest start of a secret hidden at the end of a
// text cut in the middle of it.
const minPartial = 4

// SecretsOf returns the secrets of a request to u with header: what URL
// hides of u (the password of its user info, or a user name alone but a
// database role; the value of each query parameter but the harmless
// ones) and what Header hides of header (each credential header's value,
// and each word of it after its scheme: the token after "Bearer"). Nil
// when there are none.
func SecretsOf(u *url.URL, header map[string][]string) *Secrets {
	var values []string
	var pairs []string // name=value, hidden after its name whatever its length
	if u != nil {
		if u.User != nil {
			pw, has := u.User.Password()
			values = append(values, pw)
			if !has || pw == "" {
				if !roles[strings.ToLower(u.Scheme)] {
					values = append(values, u.User.Username())
				}
			}
		}
		for _, kv := range strings.Split(u.RawQuery, "&") {
			name, value, hasValue := strings.Cut(kv, "=")
			n, err := url.QueryUnescape(name)
			switch {
			case kv == "":
			case !hasValue:
				values = append(values, name) // ?SECRET: a value with no name
			case err == nil && harmless[strings.ToLower(n)]:
			default:
				if v, err := url.QueryUnescape(value); err == nil {
					values = append(values, v)
				}
				values = append(values, value)
				pairs = append(pairs, name, value)
			}
		}
	}
	for k, vs := range header {
		if !credentialHeaders[canonical(k)] {
			continue
		}
		for _, v := range vs {
			values = append(values, v)
			if f := strings.Fields(v); len(f) > 1 {
				values = append(values, f[1:]...) // not the scheme
			}
		}
	}
	return secretsFrom(values, pairs)
}

// Values returns the secrets that are values alone (a transformation's
// env: an API key a script puts wherever it likes), hidden wherever they
// stand in a text, as written and in the escaped forms SecretsOf hides;
// one shorter than 6 bytes is not hidden (it would hide every "prod" or
// "2" in an answer). Nil when there are none.
func Values(values []string) *Secrets { return secretsFrom(values, nil) }

// secretsFrom builds the Secrets of values (hidden wherever they stand)
// and of pairs (name, value, ...: hidden after their name whatever their
// length).
func secretsFrom(values, pairs []string) *Secrets {
	forms := map[string]bool{}
	for _, v := range values {
		if len(v) < minBare {
			continue
		}
		// As written, escaped for a query or a path, and as JSON writes
		// it (json_encode escapes a slash).
		for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v), jsonEscaped(v), strings.ReplaceAll(v, "/", `\/`)} {
			forms[f] = true
		}
	}
	var olds []string
	for f := range forms {
		olds = append(olds, f)
	}
	for i := 0; i < len(pairs); i += 2 {
		olds = append(olds, pairs[i]+"="+pairs[i+1])
	}
	if len(olds) == 0 {
		return nil
	}
	// The longest first: where two overlap, the whole one is hidden.
	sort.Slice(olds, func(i, j int) bool {
		return len(olds[i]) > len(olds[j]) || len(olds[i]) == len(olds[j]) && olds[i] < olds[j]
	})
	args := make([]string, 0, 2*len(olds))
	s := &Secrets{}
	for _, o := range olds {
		if name, _, ok := strings.Cut(o, "="); ok && !forms[o] {
			args = append(args, o, name+"="+Mask)
			continue
		}
		args = append(args, o, Mask)
		s.partial = append(s.partial, o)
	}
	s.r = strings.NewReplacer(args...)
	return s
}

// jsonEscaped is v as it stands inside a JSON string.
func jsonEscaped(v string) string {
	b, _ := json.Marshal(v)
	return string(b[1 : len(b)-1])
}

// Hide returns text with every secret replaced by Mask, and a start of
// one (4 bytes or more) that text ends with: a text cut to a length may
// have cut a secret in two. A nil Secrets hides nothing.
func (s *Secrets) Hide(text string) string {
	if s == nil || text == "" {
		return text
	}
	text = s.r.Replace(text)
	for _, p := range s.partial {
		for n := len(p) - 1; n >= minPartial; n-- {
			if strings.HasSuffix(text, p[:n]) {
				return text[:len(text)-n] + Mask
			}
		}
	}
	return text
}
