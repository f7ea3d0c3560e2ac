package provider

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"time"
)

// pagarme accepts Pagar.me's v4 postback signature, X-Hub-Signature:
// sha1=<hex HMAC-SHA1(api key, raw body)>, or, for v5 (which documents no
// body signature), a secret in the path: POST /in/{source}/{secret}.
//
// The key is the body id (hook_... in v5). type + data.id is a business key,
// not the event: one order emits several hooks.
type pagarme struct {
	secrets [][]byte // v5's secret in the path
	macs    keyedHMACs
}

func newPagarme(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	secrets := secretBytes(opts.Secrets)
	return &pagarme{secrets: secrets, macs: newKeyedHMACs(sha1.New, secrets)}, nil
}

func (*pagarme) Name() string { return "pagarme" }

// AcceptsPathSecret: v5 signs nothing, so its secret travels in the URL.
func (*pagarme) AcceptsPathSecret() bool { return true }

// The resend count is configurable per account; a week covers it.
func (*pagarme) DefaultWindow() time.Duration { return 7 * 24 * time.Hour }

// DefaultOrder: the resource in data, by arrival.
func (*pagarme) DefaultOrder() OrderDefault { return OrderDefault{Entity: "json:data.id"} }

func (p *pagarme) Verify(r *Request, _ time.Time) error {
	if tokenMatches(r.PathToken, p.secrets) {
		return nil
	}
	hexSig, ok := strings.CutPrefix(r.Header.Get("X-Hub-Signature"), "sha1=")
	sig := p.macs.offered()
	if !ok || !sig.addHex(hexSig) {
		if r.PathToken != "" {
			return signatureError("the secret in the path is not one of the source's, and there is no X-Hub-Signature: sha1=<hex>")
		}
		return signatureError("no X-Hub-Signature: sha1=<hex> and no secret in the path")
	}
	if !p.macs.matchAny(&sig, r.Body) {
		return signatureError("X-Hub-Signature does not match")
	}
	return nil
}

func (*pagarme) Items(r *Request) ([]Item, error) {
	v, err := bodyFields(r.Body, "id", "type")
	if err != nil {
		return nil, err
	}
	return one(v[0], v[1], r.Body), nil
}

func (*pagarme) Sign(r *Request, secret string, _ time.Time, _ string) error {
	r.Header.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(hmacWith(sha1.New, []byte(secret), r.Body)))
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}
