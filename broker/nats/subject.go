package nats

import (
	"strings"
	"unicode/utf8"
)

// subject is a publish subject template: literal text with {source} and
// {type} in it.
type subject struct {
	template string
	fixed    bool // no placeholder: the template is the subject
}

func newSubject(template string) subject {
	return subject{template: template, fixed: !strings.Contains(template, "{")}
}

// maxTypeBytes bounds what an event's type adds to a subject: a subject
// travels in the protocol's control line (4 KiB by default) with the
// reply subject and the headers' size.
const maxTypeBytes = 256

// render is the subject for an event of source and type. The values are
// dropped into the template as subject tokens: a dot in them separates
// tokens, as it does in Stripe's invoice.paid (events.stripe.invoice.paid,
// which a subscriber filters as events.stripe.invoice.>). What NATS
// forbids in a publish subject is replaced by '_': whitespace and control
// characters, the wildcards '*' and '>' (a publish to them would be
// refused), bytes that are not UTF-8, and an empty token (a leading,
// trailing or doubled dot, or no type at all). The subject routes; it is
// not the event's identity (Nats-Msg-Id is), so two types that differ
// only in such characters may share a subject.
func (s subject) render(source, typ string) string {
	if s.fixed {
		return s.template
	}
	if len(typ) > maxTypeBytes {
		typ = typ[:maxTypeBytes]
	}
	out := strings.ReplaceAll(s.template, "{source}", token(source))
	return strings.ReplaceAll(out, "{type}", token(typ))
}

// token makes v safe inside a subject, keeping its dots as separators.
func token(v string) string {
	parts := strings.Split(v, ".")
	for i, p := range parts {
		parts[i] = part(p)
	}
	return strings.Join(parts, ".")
}

func part(p string) string {
	if p == "" {
		return "_"
	}
	if p == "*" || p == ">" {
		return "_"
	}
	ok := utf8.ValidString(p)
	for i := 0; ok && i < len(p); i++ {
		switch c := p[i]; {
		case c <= ' ', c == 0x7f, c == '*', c == '>':
			ok = false
		}
	}
	if ok {
		return p
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(p, "_") {
		switch {
		case r <= ' ', r == 0x7f, r == '*', r == '>', r == utf8.RuneError:
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
