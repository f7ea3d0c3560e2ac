// Package redact makes URLs and the errors that quote them fit to show:
// in logs, answers, the dashboard, the CLI and stored attempt errors. One
// function for all of them, so that a secret in a URL is hidden the same
// way everywhere it could appear.
package redact

import (
	"errors"
	"net/url"
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
