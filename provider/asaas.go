package provider

import "time"

// asaas checks the asaas-access-token header, a static token set on the
// webhook, in constant time.
//
// The key is the body id (evt_...&n), which Asaas recommends. Its reply quirk:
// only 200 counts as success there (201 and 204 are failures, and 15
// failures pause the whole queue); intake always answers 200.
type asaas struct{ secrets [][]byte }

func newAsaas(opts Options) (Preset, error) {
	if err := requireSecrets(opts); err != nil {
		return nil, err
	}
	return &asaas{secrets: secretBytes(opts.Secrets)}, nil
}

func (*asaas) Name() string { return "asaas" }

// Asaas keeps undelivered events for 14 days.
func (*asaas) DefaultWindow() time.Duration { return 15 * 24 * time.Hour }

// DefaultOrder: the payment, by arrival.
func (*asaas) DefaultOrder() OrderDefault { return OrderDefault{Entity: "json:payment.id"} }

func (p *asaas) Verify(r *Request, _ time.Time) error {
	if !tokenMatches(r.Header.Get("asaas-access-token"), p.secrets) {
		return signatureError("asaas-access-token is missing or wrong")
	}
	return nil
}

func (*asaas) Items(r *Request) ([]Item, error) {
	v, err := bodyFields(r.Body, "id", "event")
	if err != nil {
		return nil, err
	}
	return one(v[0], v[1], r.Body), nil
}

func (*asaas) Sign(r *Request, secret string, _ time.Time, _ string) error {
	r.Header.Set("asaas-access-token", secret)
	setDefault(r.Header, "Content-Type", "application/json")
	return nil
}
