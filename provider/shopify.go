package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"time"
)

// shopify verifies X-Shopify-Hmac-Sha256: base64(HMAC-SHA256(client secret,
// raw body)). After a secret rotation Shopify may sign with the old secret
// for up to an hour, so configure both. The newer Events product sends the
// same headers without the X- prefix; both are read.
//
// The key is X-Shopify-Event-Id when sent, else X-Shopify-Webhook-Id.
// Shopify's "ignore duplicates" page keys on the event id: it is the same on
// every webhook about one event, including the copies that several
// subscriptions to one topic each deliver, which the per-delivery webhook id
// tells apart. The trap: the body's id is the resource (the order), shared by
// every webhook about it.
type shopify struct{ macs keyedHMACs }

func newShopify(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &shopify{macs: newKeyedHMACs(sha256.New, secretBytes(opts.Secrets))}, nil
}

func (*shopify) Name() string { return "shopify" }

// ForwardHeaders: the topic and the shop are only in headers.
func (*shopify) ForwardHeaders() []string {
	return []string{"X-Shopify-Topic", "X-Shopify-Shop-Domain", "X-Shopify-Webhook-Id", "X-Shopify-Event-Id",
		"X-Shopify-Triggered-At", "X-Shopify-API-Version", "Shopify-Topic", "Shopify-Shop-Domain", "Shopify-Event-Id"}
}

// Shopify retries 8 times over 4 hours; a day leaves room for late resends.
func (*shopify) DefaultWindow() time.Duration { return 2 * 24 * time.Hour }

// DefaultOrder: the resource, versioned by its updated_at (RFC 3339).
func (*shopify) DefaultOrder() OrderDefault {
	return OrderDefault{Entity: "json:id", Version: "json:updated_at"}
}

func firstHeader(r *Request, names ...string) string {
	for _, n := range names {
		if v := r.Header.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func (p *shopify) Verify(r *Request, _ time.Time) error {
	header := firstHeader(r, "X-Shopify-Hmac-Sha256", "Shopify-Hmac-Sha256")
	if header == "" {
		return signatureError("missing X-Shopify-Hmac-Sha256 header")
	}
	sig := p.macs.offered()
	if !sig.addBase64(header) {
		return signatureError("X-Shopify-Hmac-Sha256 is not base64")
	}
	if !p.macs.matchAny(&sig, r.Body) {
		return signatureError("X-Shopify-Hmac-Sha256 does not match")
	}
	return nil
}

func (*shopify) Items(r *Request) ([]Item, error) {
	return one(firstHeader(r, "X-Shopify-Event-Id", "Shopify-Event-Id", "X-Shopify-Webhook-Id", "Shopify-Webhook-Id"),
		firstHeader(r, "X-Shopify-Topic", "Shopify-Topic"), r.Body), nil
}

func (*shopify) Sign(r *Request, secret string, now time.Time, id string) error {
	r.Header.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(hmacWith(sha256.New, []byte(secret), r.Body)))
	if id != "" {
		r.Header.Set("X-Shopify-Webhook-Id", id)
		setDefault(r.Header, "X-Shopify-Event-Id", id)
	}
	if r.Header.Get("X-Shopify-Topic") == "" {
		r.Header.Set("X-Shopify-Topic", "orders/create")
	}
	r.Header.Set("X-Shopify-Triggered-At", now.UTC().Format(time.RFC3339Nano))
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}
