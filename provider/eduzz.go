package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// eduzz verifies x-signature, an HMAC-SHA256 of the raw body with the
// Developer Hub key. Eduzz does not state the encoding: hex is what is seen,
// and base64 is accepted too, since accepting both is no weaker.
//
// The key is the body id; the type, its event.
type eduzz struct{ macs keyedHMACs }

func newEduzz(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &eduzz{macs: newKeyedHMACs(sha256.New, secretBytes(opts.Secrets))}, nil
}

func (*eduzz) Name() string { return "eduzz" }

// With "Backup" on, Eduzz retries for up to 7 days.
func (*eduzz) DefaultWindow() time.Duration { return 8 * 24 * time.Hour }

func (p *eduzz) Verify(r *Request, _ time.Time) error {
	header := r.Header.Get("X-Signature") // x-signature; canonical, so Get need not allocate to canonicalise it
	sig := p.macs.offered()
	if header == "" {
		return signatureError("missing x-signature")
	}
	if !sig.addHex(header) && !sig.addBase64(header) {
		return signatureError("x-signature is neither hex nor base64")
	}
	if !p.macs.matchAny(&sig, r.Body) {
		return signatureError("x-signature does not match")
	}
	return nil
}

// Items: the type is the body's event (nutror.lesson_started, in Eduzz's
// own example), for filters and routes as every other preset's.
func (*eduzz) Items(r *Request) ([]Item, error) {
	v, err := bodyFields(r.Body, "id", "event")
	if err != nil {
		return nil, err
	}
	return one(v[0], v[1], r.Body), nil
}

func (*eduzz) Sign(r *Request, secret string, _ time.Time, _ string) error {
	r.Header.Set("x-signature", hex.EncodeToString(hmacWith(sha256.New, []byte(secret), r.Body)))
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}
