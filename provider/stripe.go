package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// stripe verifies Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...], an
// HMAC-SHA256 of "<t>.<raw body>" keyed by the endpoint secret used as raw
// bytes (whsec_... is not decoded). Several v1 entries appear while a secret
// is rolled; any one matching is enough. Unlike stripe-go, timestamps too far
// in the future are rejected as well as stale ones.
//
// The key is the body's id (evt_...), stable across Stripe's retries. The
// trap: one business change emits several events with different ids, and the
// same object id appears in many events, so the object id is never the key.
type stripe struct {
	secrets   [][]byte
	tolerance time.Duration
}

func newStripe(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	p := &stripe{tolerance: opts.Tolerance}
	if p.tolerance == 0 {
		p.tolerance = 300 * time.Second
	}
	for _, s := range opts.Secrets {
		p.secrets = append(p.secrets, []byte(s))
	}
	return p, nil
}

func (*stripe) Name() string { return "stripe" }

// Live mode retries for up to 3 days; a day more covers late manual resends.
func (*stripe) DefaultWindow() time.Duration { return 4 * 24 * time.Hour }

func (p *stripe) Verify(r *Request, now time.Time) error {
	header := r.Header.Get("Stripe-Signature")
	if header == "" {
		return signatureError("missing Stripe-Signature header")
	}
	var ts string
	var sigs [][]byte
	for _, pair := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b := decodeHex(v); b != nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return signatureError("Stripe-Signature has no t= or no v1=")
	}
	if !signedBy(sha256.New, p.secrets, []byte(ts), []byte("."), r.Body).matches(sigs...) {
		return signatureError("no v1 signature matches")
	}
	return checkTimestamp(ts, now, p.tolerance)
}

func (*stripe) Items(r *Request) ([]Item, error) {
	var env struct {
		ID   keyText `json:"id"`
		Type keyText `json:"type"`
	}
	if err := decodeJSON(r.Body, &env); err != nil {
		return nil, err
	}
	return one(string(env.ID), string(env.Type), r.Body), nil
}

func (*stripe) Sign(r *Request, secret string, now time.Time, _ string) error {
	h := r.Header
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := hmacWith(sha256.New, []byte(secret), []byte(ts), []byte("."), r.Body)
	h.Set("Stripe-Signature", fmt.Sprintf("t=%s,v1=%s", ts, hex.EncodeToString(sig)))
	setDefault(h, "Content-Type", "application/json; charset=utf-8")
	return nil
}

// decodesWholeBody: Items decodes the body whole (see wholeBodyDecoder).
func (*stripe) decodesWholeBody() {}
