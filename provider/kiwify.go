package provider

import (
	"crypto/sha1"
	"encoding/hex"
	"time"
)

// kiwify verifies Kiwify's sales webhooks: the URL gets
// ?signature=<hex HMAC-SHA1(token, raw body)>. The token itself is never
// sent.
//
// Kiwify documents no event id, so the key is order_id + webhook_event_type
// + order_status. (Kiwify's banking webhooks are another scheme: their
// envelope id changes on every retry, and they are signed with Ed25519.)
type kiwify struct{ macs keyedHMACs }

func newKiwify(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &kiwify{macs: newKeyedHMACs(sha1.New, secretBytes(opts.Secrets))}, nil
}

func (*kiwify) Name() string { return "kiwify" }

// Kiwify's retry policy is not documented; a week is the safe side.
func (*kiwify) DefaultWindow() time.Duration { return 7 * 24 * time.Hour }

// DefaultOrder: the order, by arrival.
func (*kiwify) DefaultOrder() OrderDefault { return OrderDefault{Entity: "json:order_id"} }

func (p *kiwify) Verify(r *Request, _ time.Time) error {
	sig := p.macs.offered()
	if !sig.addHex(r.URL.Query().Get("signature")) {
		return signatureError("missing or malformed signature query parameter")
	}
	if !p.macs.matchAny(&sig, r.Body) {
		return signatureError("signature does not match")
	}
	return nil
}

func (*kiwify) Items(r *Request) ([]Item, error) {
	var doc map[string]keyText
	if err := decodeJSON(r.Body, &doc); err != nil {
		return nil, err
	}
	return one(joinKey(string(doc["order_id"]), string(doc["webhook_event_type"]), string(doc["order_status"])), string(doc["webhook_event_type"]), r.Body), nil
}

func (*kiwify) Sign(r *Request, secret string, _ time.Time, _ string) error {
	q := r.URL.Query()
	q.Set("signature", hex.EncodeToString(hmacWith(sha1.New, []byte(secret), r.Body)))
	r.URL.RawQuery = q.Encode()
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}

// decodesWholeBody: Items decodes the body whole (see wholeBodyDecoder).
func (*kiwify) decodesWholeBody() {}
