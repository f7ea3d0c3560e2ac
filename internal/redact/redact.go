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

// URL returns raw with the password of its user info and the value of
// every query parameter (but a few harmless ones) replaced by Mask:
// destinations put API keys in the query (?api_key=, ?token=, ?code=),
// under any name. A value that is not a URL is not shown at all.
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
		if _, has := c.User.Password(); has {
			c.User = url.UserPassword(c.User.Username(), Mask)
		}
	}
	if c.RawQuery != "" {
		var parts []string
		for _, kv := range strings.Split(c.RawQuery, "&") {
			name, _, hasValue := strings.Cut(kv, "=")
			if n, err := url.QueryUnescape(name); err == nil && harmless[strings.ToLower(n)] || !hasValue {
				parts = append(parts, kv)
				continue
			}
			parts = append(parts, name+"="+Mask)
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
