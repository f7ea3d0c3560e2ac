package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// GenericOptions describe an HMAC-SHA256 signature over the raw body, for
// providers without a preset of their own.
type GenericOptions struct {
	Header   string // where the signature is sent (default X-Signature)
	Encoding string // hex (default) or base64
	Prefix   string // stripped before decoding, e.g. "sha256="
}

// generic verifies HMAC-SHA256(secret, raw body) in a configurable header.
// It has no key of its own: the source must configure one (header, JSON path
// or a composite), because only the user knows which field is stable.
type generic struct {
	macs     keyedHMACs
	opts     GenericOptions
	unsigned bool
}

func newGeneric(opts Options) (Preset, error) {
	g := opts.Generic
	if g.Header == "" {
		g.Header = "X-Signature"
	}
	switch g.Encoding {
	case "":
		g.Encoding = "hex"
	case "hex", "base64":
	default:
		return nil, fmt.Errorf("signature encoding %q: want hex or base64", g.Encoding)
	}
	if len(opts.Key) == 0 {
		return nil, errors.New("key is required: header:Name or json:path (or several, for a composite)")
	}
	p := &generic{opts: g, unsigned: opts.Unsigned}
	if !opts.Unsigned {
		if err := requireSecrets(opts); err != nil {
			return nil, fmt.Errorf("%w (or set unsigned: true to accept unsigned requests)", err)
		}
	}
	p.macs = newKeyedHMACs(sha256.New, secretBytes(opts.Secrets))
	return p, nil
}

func (*generic) Name() string { return "generic" }

func (*generic) DefaultWindow() time.Duration { return 7 * 24 * time.Hour }

// offer takes s as a signature in the configured encoding, and reports
// whether it decoded.
func (p *generic) offer(sig *offered, s string) bool {
	if p.opts.Encoding == "base64" {
		return sig.addBase64(s)
	}
	return sig.addHex(s)
}

func (p *generic) Verify(r *Request, _ time.Time) error {
	if p.unsigned {
		return nil
	}
	header := r.Header.Get(p.opts.Header)
	if header == "" {
		return signatureError("missing %s header", p.opts.Header)
	}
	raw, ok := strings.CutPrefix(strings.TrimSpace(header), p.opts.Prefix)
	sig := p.macs.offered()
	if !ok || !p.offer(&sig, raw) {
		return signatureError("%s is not %s%s", p.opts.Header, p.opts.Prefix, p.opts.Encoding)
	}
	if !p.macs.matchAny(&sig, r.Body) {
		return signatureError("%s does not match", p.opts.Header)
	}
	return nil
}

// Items returns the whole body; the configured key rule (see New) sets Key.
func (*generic) Items(r *Request) ([]Item, error) {
	return []Item{{Body: r.Body}}, nil
}

func (p *generic) Sign(r *Request, secret string, _ time.Time, _ string) error {
	h := r.Header
	sig := hmacWith(sha256.New, []byte(secret), r.Body)
	enc := hex.EncodeToString(sig)
	if p.opts.Encoding == "base64" {
		enc = base64.StdEncoding.EncodeToString(sig)
	}
	h.Set(p.opts.Header, p.opts.Prefix+enc)
	setDefault(h, "Content-Type", "application/json")
	return nil
}
