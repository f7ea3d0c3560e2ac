package channel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/config"
)

// emailKind sends each notice as a plain-text email over SMTP (net/smtp:
// the standard library's client speaks EHLO, STARTTLS, AUTH PLAIN and
// the envelope, which is all a relay needs; a library would add nothing
// here). By default the connection is upgraded with STARTTLS before AUTH
// or anything else is said, and a server that does not offer it is an
// error; port 465 is TLS from the first byte.
var emailKind = kind{
	check: func(f string, c config.AlertChannel, fail config.FailFunc) {
		s := c.SMTP
		if s.Host == "" {
			fail(f+".smtp.host", "required for an email channel")
		}
		if s.From == "" {
			fail(f+".smtp.from", "required for an email channel")
		}
		if len(s.To) == 0 {
			fail(f+".smtp.to", "required for an email channel: at least one address")
		}
		if s.Username != "" && s.Password == "" {
			fail(f+".smtp.password", "required with a username (write it as \"${ENV}\")")
		}
		if c.URL != "" {
			fail(f+".url", "an email channel has no URL (its server is smtp.host)")
		}
		if len(c.Headers) > 0 {
			fail(f+".headers", "an email channel sends no HTTP headers")
		}
	},
	build: func(c config.AlertChannel, d Deps) Channel {
		e := emailChannel{name: c.Name, smtp: c.SMTP, starttls: c.SMTP.StartTLS == nil || *c.SMTP.StartTLS}
		if e.smtp.Port == 0 {
			e.smtp.Port = 587
		}
		if d.TLS != nil {
			e.tls = d.TLS.Clone()
		} else {
			e.tls = &tls.Config{}
		}
		e.tls.ServerName = e.smtp.Host
		e.tls.MinVersion = max(e.tls.MinVersion, tls.VersionTLS12)
		return e
	},
}

type emailChannel struct {
	name     string
	smtp     config.SMTP // Password is never in an error or a log
	starttls bool
	tls      *tls.Config
}

// emailTimeout bounds a whole send when ctx has no deadline.
const emailTimeout = 30 * time.Second

func (c emailChannel) Name() string { return c.name }

func (c emailChannel) Send(ctx context.Context, n Notice) error {
	if err := c.send(ctx, n); err != nil {
		return fmt.Errorf("channel %s: %w", c.name, err)
	}
	return nil
}

func (c emailChannel) send(ctx context.Context, n Notice) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, emailTimeout)
		defer cancel()
	}
	addr := net.JoinHostPort(c.smtp.Host, strconv.Itoa(c.smtp.Port))
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	// The SMTP exchange does not take ctx: the deadline and a close when
	// ctx ends bound it.
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	implicit := c.smtp.Port == 465
	if implicit {
		conn = tls.Client(conn, c.tls)
	}
	cl, err := smtp.NewClient(conn, c.smtp.Host)
	if err != nil {
		conn.Close()
		return err
	}
	defer cl.Close()
	if err := cl.Hello("oncehook"); err != nil {
		return err
	}
	if c.starttls && !implicit {
		if ok, _ := cl.Extension("STARTTLS"); !ok {
			return fmt.Errorf("%s offers no STARTTLS (set smtp.starttls: false only for a relay on a trusted network)", addr)
		}
		if err := cl.StartTLS(c.tls); err != nil {
			return fmt.Errorf("STARTTLS: %w", err)
		}
	}
	if c.smtp.Username != "" {
		// PlainAuth refuses to send the password over a connection
		// without TLS, but to localhost.
		if err := cl.Auth(smtp.PlainAuth("", c.smtp.Username, c.smtp.Password, c.smtp.Host)); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	from, err := mail.ParseAddress(c.smtp.From)
	if err != nil {
		return err
	}
	if err := cl.Mail(from.Address); err != nil {
		return err
	}
	for _, to := range c.smtp.To {
		a, err := mail.ParseAddress(to)
		if err != nil {
			return err
		}
		if err := cl.Rcpt(a.Address); err != nil {
			return fmt.Errorf("RCPT %s: %w", a.Address, err)
		}
	}
	w, err := cl.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(c.message(n, from)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := cl.Quit(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Subject is the email's subject: what happened and where.
func Subject(n Notice) string { return "[oncehook] " + summarize(n).Title }

// message is the email: headers, then the summary as quoted-printable
// UTF-8 text.
func (c emailChannel) message(n Notice, from *mail.Address) []byte {
	s := summarize(n)
	var b bytes.Buffer
	h := func(name, value string) { fmt.Fprintf(&b, "%s: %s\r\n", name, value) }
	h("From", from.String())
	h("To", strings.Join(c.smtp.To, ", "))
	h("Subject", mime.QEncoding.Encode("utf-8", Subject(n)))
	date := n.At
	if date.IsZero() {
		date = time.Now()
	}
	h("Date", date.Format(time.RFC1123Z))
	if n.Key != "" {
		// The same notice has the same Message-ID: a mail system that
		// dedups shows it once.
		sum := sha256.Sum256([]byte(n.Key))
		h("Message-ID", "<"+hex.EncodeToString(sum[:16])+"@oncehook>")
	}
	h("Auto-Submitted", "auto-generated")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	qp.Write([]byte(strings.ReplaceAll(s.text(), "\n", "\r\n")))
	qp.Close()
	return b.Bytes()
}
