package provider

import "time"

// hotmart checks X-HOTMART-HOTTOK, a static per-account token (no HMAC, no
// timestamp), in constant time.
//
// The key is the envelope id, the event's unique code. The trap:
// data.purchase.transaction (HP...) is shared by every event of a purchase
// (APPROVED, COMPLETE, REFUNDED, CHARGEBACK, ...), so deduping on it would
// silently drop the refund after the approval.
type hotmart struct{ secrets [][]byte }

func newHotmart(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &hotmart{secrets: secretBytes(opts.Secrets)}, nil
}

func (*hotmart) Name() string { return "hotmart" }

// No retry schedule is documented; the event history (with manual resend)
// is kept for 60 days, so keys are too.
func (*hotmart) DefaultWindow() time.Duration { return 60 * 24 * time.Hour }

// DefaultOrder: the purchase's transaction, by arrival: creation_date
// changes between attempts.
func (*hotmart) DefaultOrder() OrderDefault {
	return OrderDefault{Entity: "json:data.purchase.transaction"}
}

func (p *hotmart) Verify(r *Request, _ time.Time) error {
	if !tokenMatches(r.Header.Get("X-HOTMART-HOTTOK"), p.secrets) {
		return signatureError("X-HOTMART-HOTTOK is missing or wrong")
	}
	return nil
}

func (*hotmart) Items(r *Request) ([]Item, error) {
	v, err := bodyFields(r.Body, "id", "event")
	if err != nil {
		return nil, err
	}
	return one(v[0], v[1], r.Body), nil
}

func (*hotmart) Sign(r *Request, secret string, _ time.Time, _ string) error {
	r.Header.Set("X-HOTMART-HOTTOK", secret)
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}
