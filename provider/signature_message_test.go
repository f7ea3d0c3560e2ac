package provider

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A refusal says what is wrong with the signature header: no timestamp,
// no signature, a signature that is not valid hex (or base64), or one
// that does not match. Found from outside: "Stripe-Signature:
// t=<now>,v1=zz" was told its v1= was missing, and its user looked for a
// header that was there.
func TestASignatureRefusalSaysWhatIsWrong(t *testing.T) {
	now := time.Unix(1700000000, 0)
	t0 := strconv.FormatInt(now.Unix(), 10)
	sixtyFour := strings.Repeat("ab", 32)
	type presetCase struct {
		preset func(Options) (Preset, error)
		secret string
		header string
		values map[string]string // header value → the refusal's words
	}
	cases := map[string]presetCase{
		"stripe": {newStripe, "whsec_x", "Stripe-Signature", map[string]string{
			"v1=" + sixtyFour:              "Stripe-Signature has no t=",
			"t=" + t0:                      "Stripe-Signature has no v1=",
			"t=" + t0 + ",v1=zz":           "Stripe-Signature's v1= is not valid hex",
			"t=" + t0 + ",v1=zz,v1=0x12":   "Stripe-Signature's v1= is not valid hex",
			"t=" + t0 + ",v1=" + sixtyFour: "no v1 signature matches",
			"t=" + t0 + ",v1=abcd":         "no v1 signature matches",
		}},
		"paddle": {newPaddle, "pdl_ntfset_x", "Paddle-Signature", map[string]string{
			"h1=" + sixtyFour:               "Paddle-Signature has no ts=",
			"ts=" + t0:                      "Paddle-Signature has no h1=",
			"ts=" + t0 + ";h1=zz":           "Paddle-Signature's h1= is not valid hex",
			"ts=" + t0 + ";h1=" + sixtyFour: "no h1 signature matches",
		}},
		"mercadopago": {newMercadoPago, "mp_x", "X-Signature", map[string]string{
			"v1=" + sixtyFour:               "x-signature has no ts=",
			"ts=" + t0:                      "x-signature has no v1=",
			"ts=" + t0 + ",v1=zz":           "x-signature's v1= is not valid hex",
			"ts=" + t0 + ",v1=" + sixtyFour: "x-signature does not match",
		}},
		"standard-webhooks": {newStandardWebhooks, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "Webhook-Signature", map[string]string{
			"v1a,abc":                             "webhook-signature has no v1 entry",
			"v1,!!notbase64":                      "webhook-signature's v1 entry is not valid base64",
			"v1,MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw": "no v1 signature matches",
		}},
	}
	for name, c := range cases {
		p, err := c.preset(Options{Secrets: []string{c.secret}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for value, want := range c.values {
			h := http.Header{c.header: {value}, "Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {t0}}
			u, _ := url.Parse("https://hooks.example/in/x?data.id=1")
			err := p.Verify(&Request{Header: h, Body: []byte(`{"id":"1","data":{"id":"1"}}`), URL: u}, now)
			if err == nil || !strings.HasSuffix(err.Error(), want) && !strings.Contains(err.Error(), want+":") {
				t.Errorf("%s, %s: %q: %v; want %q", name, c.header, value, err, want)
			}
		}
	}
}
