package provider

import (
	"net/http"
	"testing"
	"time"
)

// hmacPresets are the presets that verify an HMAC of the request, with
// the options that reach it (generic's encodings differ in decoding).
var hmacPresets = []struct {
	name, preset string
	opts         Options
}{
	{"stripe", "stripe", Options{}},
	{"github", "github", Options{}},
	{"whatsapp", "whatsapp", Options{}},
	{"shopify", "shopify", Options{}},
	{"slack", "slack", Options{}},
	{"paddle", "paddle", Options{Tolerance: time.Hour}},
	{"mercadopago", "mercadopago", Options{}},
	{"standard-webhooks", "standard-webhooks", Options{}},
	{"svix", "svix", Options{}},
	{"pagarme", "pagarme", Options{}},
	{"kiwify", "kiwify", Options{}},
	{"eduzz", "eduzz", Options{}},
	{"generic", "generic", Options{Key: []string{"json:id"}}},
	{"generic-base64", "generic", Options{Key: []string{"json:id"}, Generic: GenericOptions{Header: "X-Sig", Encoding: "base64", Prefix: "sha256="}}},
	{"twilio", "twilio", Options{}},
}

// benchSecret signs every benchmarked request; standard-webhooks and svix
// take it as whsec_<base64>, the others as raw bytes.
const benchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// signedRequest is a request p.Sign signed with secret at now: a form body
// for Twilio, a real-shaped Stripe event (2.4 KB) for the others.
func signedRequest(tb testing.TB, p Preset, preset, secret string, now time.Time) *Request {
	tb.Helper()
	body := []byte(stripeInvoicePaid)
	if preset == "twilio" {
		body, _ = sampleBody("twilio")
	}
	r := &Request{Method: http.MethodPost, URL: mustURL("https://hooks.example.com/in/x"), Header: http.Header{}, Body: body}
	if err := p.Sign(r, secret, now, "msg_1"); err != nil {
		tb.Fatal(err)
	}
	return r
}

// BenchmarkVerify verifies one signed request per preset family, with one
// secret: what a source pays per request to know who sent it.
func BenchmarkVerify(b *testing.B) {
	now := time.Unix(1700000000, 0)
	for _, c := range hmacPresets {
		b.Run(c.name, func(b *testing.B) {
			opts := c.opts
			opts.Secrets = []string{benchSecret}
			p, err := New(c.preset, opts)
			if err != nil {
				b.Fatal(err)
			}
			r := signedRequest(b, p, c.preset, benchSecret, now)
			b.ReportAllocs()
			b.SetBytes(int64(len(r.Body)))
			for b.Loop() {
				if err := p.Verify(r, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
