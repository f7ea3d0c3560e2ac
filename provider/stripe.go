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
	macs      keyedHMACs
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
	p.macs = newKeyedHMACs(sha256.New, secretBytes(opts.Secrets))
	return p, nil
}

func (*stripe) Name() string { return "stripe" }

// Live mode retries for up to 3 days; a day more covers late manual resends.
func (*stripe) DefaultWindow() time.Duration { return 4 * 24 * time.Hour }

// DefaultOrder: the object the event is about, versioned by created (Unix
// seconds: two events can share one, and an equal version is not stale).
func (*stripe) DefaultOrder() OrderDefault {
	return OrderDefault{Entity: "json:data.object.id", Version: "json:created", Unit: UnixSeconds}
}

func (p *stripe) Verify(r *Request, now time.Time) error {
	header := r.Header.Get("Stripe-Signature")
	if header == "" {
		return signatureError("missing Stripe-Signature header")
	}
	// One pass over the header, nothing allocated: the signatures that
	// could match (32 bytes of hex) are decoded into sigs; any other hex
	// (even empty) is a v1 that matches nothing, as before.
	var ts string
	sigs := p.macs.offered()
	for rest, more := header, true; more; {
		var pair string
		pair, rest, more = strings.Cut(rest, ",")
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs.addHex(v)
		}
	}
	if err := sigs.lacking("Stripe-Signature", ts, "t=", "v1=", "hex"); err != nil {
		return err
	}
	if !p.macs.matchAny(&sigs, r.Body, ts, ".") {
		return signatureError("no v1 signature matches")
	}
	return checkTimestamp(ts, now, p.tolerance)
}

// Items reads the body's id and type in one walk over it (topKeyTexts);
// a body that walk does not take (not one valid JSON object, or a member
// name it does not compare byte for byte) is decoded as it always was.
func (*stripe) Items(r *Request) ([]Item, error) {
	if id, typ, ok := topKeyTexts(r.Body, "id", "type"); ok {
		return one(string(id), string(typ), r.Body), nil
	}
	return stripeDecoded(r.Body)
}

// stripeDecoded is Items by encoding/json: the errors a body that is not
// one JSON object gets, and what topKeyTexts must always agree with
// (FuzzStripeItems).
func stripeDecoded(body []byte) ([]Item, error) {
	var env struct {
		ID   keyText `json:"id"`
		Type keyText `json:"type"`
	}
	if err := decodeJSON(body, &env); err != nil {
		return nil, err
	}
	return one(string(env.ID), string(env.Type), body), nil
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
