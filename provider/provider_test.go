package provider

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func req(body string, h map[string]string) *Request {
	hdr := http.Header{}
	for k, v := range h {
		hdr.Set(k, v)
	}
	return &Request{Method: http.MethodPost, Header: hdr, Body: []byte(body)}
}

func mustNew(t *testing.T, name string, opts Options) Preset {
	t.Helper()
	p, err := New(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// verifiedItems builds preset with opts, verifies r at now and splits it
// into its items, failing the test if either step fails.
func verifiedItems(t *testing.T, preset string, opts Options, r *Request, now time.Time) []Item {
	t.Helper()
	p := mustNew(t, preset, opts)
	if err := p.Verify(r, now); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	items, err := p.Items(r)
	if err != nil {
		t.Fatalf("Items: %v", err)
	}
	return items
}

// Vectors from providers.md, section 3.
func TestVectors(t *testing.T) {
	at1700 := time.Unix(1700000000, 0)
	cases := []struct {
		name   string
		preset string
		opts   Options
		now    time.Time
		r      *Request
		key    string
	}{
		{"stripe", "stripe", Options{Secrets: []string{"whsec_test_stripe_secret"}}, at1700.Add(10 * time.Second),
			req(`{"id":"evt_test_001","object":"event","type":"payment_intent.succeeded"}`, map[string]string{
				"Stripe-Signature": "t=1700000000,v1=bce9a00f758174fb9cfd3d82017e3ec7737916b93f0dd1a7b3278e0ff974fd7e"}),
			"evt_test_001"},
		{"github", "github", Options{Secrets: []string{"gh_test_secret"}}, at1700,
			req(`{"action":"opened","number":1}`, map[string]string{
				"X-Hub-Signature-256": "sha256=09e66d98da1d7d68ec3a007f256b022814415af661b4f5e59ed977726db32fa9",
				"X-GitHub-Delivery":   "72d3162e-cc78-11e3-81ab-4c9367dc0958"}),
			"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"github official", "github", Options{Secrets: []string{"It's a Secret to Everybody"}}, at1700,
			req(`Hello, World!`, map[string]string{
				"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}),
			""},
		{"standard-webhooks", "standard-webhooks", Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, at1700,
			req(`{"type":"user.created","data":{"id":"u_1"}}`, map[string]string{
				"webhook-id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "webhook-timestamp": "1700000000",
				"webhook-signature": "v1,hTDnRmqvTlv4/f3TW/o2MB6QZp7angCSXJHrMDHSeYc="}),
			"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"},
		{"standard-webhooks official", "standard-webhooks", Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, time.Unix(1614265330, 0),
			req(`{"test": 2432232314}`, map[string]string{
				"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
				"webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}),
			"msg_p5jXN8AQM9LWM0D4loKWxJek"},
		{"svix headers", "standard-webhooks", Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, time.Unix(1614265330, 0),
			req(`{"test": 2432232314}`, map[string]string{
				"svix-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "svix-timestamp": "1614265330",
				"svix-signature": "v1,bm90IGl0 v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}),
			"msg_p5jXN8AQM9LWM0D4loKWxJek"},
		{"generic (meta vector, hex with prefix)", "generic", Options{
			Secrets: []string{"meta_app_secret_test"}, Key: []string{"json:object"},
			Generic: GenericOptions{Header: "X-Hub-Signature-256", Prefix: "sha256="}}, at1700,
			req(`{"object":"whatsapp_business_account","entry":[]}`, map[string]string{
				"X-Hub-Signature-256": "sha256=8f1c69f3c50e172785b483ad84a36a6c64b4e199e23810fbd5e084d9300f6452"}),
			"whatsapp_business_account"},
		{"generic (shopify vector, base64)", "generic", Options{
			Secrets: []string{"shpss_test_secret"}, Key: []string{"header:X-Shopify-Webhook-Id"},
			Generic: GenericOptions{Header: "X-Shopify-Hmac-Sha256", Encoding: "base64"}}, at1700,
			req(`{"id":820982911946154508,"email":"jon@example.com"}`, map[string]string{
				"X-Shopify-Hmac-Sha256": "LnwdZPLBbdjkBwPD/lDL1/rYEGby/GHPtL1aAH6Dxjc=", "X-Shopify-Webhook-Id": "b54557e4"}),
			"b54557e4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			items := verifiedItems(t, c.preset, c.opts, c.r, c.now)
			if len(items) != 1 || items[0].Key != c.key {
				t.Fatalf("items = %+v, want one with key %q", items, c.key)
			}
		})
	}
}

func TestRejections(t *testing.T) {
	at1700 := time.Unix(1700000000, 0)
	stripeBody := `{"id":"evt_test_001","object":"event","type":"payment_intent.succeeded"}`
	stripeSig := "bce9a00f758174fb9cfd3d82017e3ec7737916b93f0dd1a7b3278e0ff974fd7e"
	stripeOpts := Options{Secrets: []string{"whsec_test_stripe_secret"}}
	swOpts := Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	swBody := `{"type":"user.created","data":{"id":"u_1"}}`
	swHeaders := func(ts, sig string) map[string]string {
		return map[string]string{"webhook-id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "webhook-timestamp": ts, "webhook-signature": sig}
	}
	cases := []struct {
		name   string
		preset string
		opts   Options
		now    time.Time
		r      *Request
	}{
		{"stripe stale", "stripe", stripeOpts, at1700.Add(301 * time.Second), req(stripeBody, map[string]string{"Stripe-Signature": "t=1700000000,v1=" + stripeSig})},
		{"stripe future", "stripe", stripeOpts, at1700.Add(-301 * time.Second), req(stripeBody, map[string]string{"Stripe-Signature": "t=1700000000,v1=" + stripeSig})},
		{"stripe wrong secret", "stripe", Options{Secrets: []string{"whsec_other"}}, at1700, req(stripeBody, map[string]string{"Stripe-Signature": "t=1700000000,v1=" + stripeSig})},
		{"stripe body changed", "stripe", stripeOpts, at1700, req(stripeBody+" ", map[string]string{"Stripe-Signature": "t=1700000000,v1=" + stripeSig})},
		{"stripe v0 only", "stripe", stripeOpts, at1700, req(stripeBody, map[string]string{"Stripe-Signature": "t=1700000000,v0=" + stripeSig})},
		{"stripe missing", "stripe", stripeOpts, at1700, req(stripeBody, nil)},
		{"github wrong", "github", Options{Secrets: []string{"gh_test_secret"}}, at1700, req(`{"action":"opened","number":2}`, map[string]string{
			"X-Hub-Signature-256": "sha256=09e66d98da1d7d68ec3a007f256b022814415af661b4f5e59ed977726db32fa9"})},
		{"github sha1 only", "github", Options{Secrets: []string{"gh_test_secret"}}, at1700, req(`{}`, map[string]string{"X-Hub-Signature": "sha1=00"})},
		{"standard too new", "standard-webhooks", swOpts, at1700.Add(-6 * time.Minute), req(swBody, swHeaders("1700000000", "v1,hTDnRmqvTlv4/f3TW/o2MB6QZp7angCSXJHrMDHSeYc="))},
		{"standard too old", "standard-webhooks", swOpts, at1700.Add(6 * time.Minute), req(swBody, swHeaders("1700000000", "v1,hTDnRmqvTlv4/f3TW/o2MB6QZp7angCSXJHrMDHSeYc="))},
		{"standard v1a alone", "standard-webhooks", swOpts, at1700, req(swBody, swHeaders("1700000000", "v1a,hTDnRmqvTlv4/f3TW/o2MB6QZp7angCSXJHrMDHSeYc="))},
		{"generic decoded unicode", "generic", Options{Secrets: []string{"meta_app_secret_test"}, Key: []string{"json:text"},
			Generic: GenericOptions{Header: "X-Hub-Signature-256", Prefix: "sha256="}}, at1700,
			req(`{"text":"café"}`, map[string]string{"X-Hub-Signature-256": "sha256=04d7a5ab9b020bdd93ec1ad1394a9084ed39eef1aba490d1090117de70a4c0ed"})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := mustNew(t, c.preset, c.opts).Verify(c.r, c.now)
			if !errors.Is(err, ErrSignature) {
				t.Fatalf("Verify = %v, want ErrSignature", err)
			}
		})
	}
}

func TestStripeSecondV1AndRotatedSecrets(t *testing.T) {
	body := `{"id":"evt_test_001","object":"event","type":"payment_intent.succeeded"}`
	p := mustNew(t, "stripe", Options{Secrets: []string{"whsec_new", "whsec_test_stripe_secret"}})
	r := req(body, map[string]string{"Stripe-Signature": "t=1700000000,v1=" + "00ff" + ",v1=bce9a00f758174fb9cfd3d82017e3ec7737916b93f0dd1a7b3278e0ff974fd7e"})
	if err := p.Verify(r, time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
}

func TestEscapedUnicodeVerifiesOnRawBytes(t *testing.T) {
	p := mustNew(t, "generic", Options{Secrets: []string{"meta_app_secret_test"}, Key: []string{"json:text"},
		Generic: GenericOptions{Header: "X-Hub-Signature-256", Prefix: "sha256="}})
	r := req(`{"text":"caf\u00e9"}`, map[string]string{"X-Hub-Signature-256": "sha256=04d7a5ab9b020bdd93ec1ad1394a9084ed39eef1aba490d1090117de70a4c0ed"})
	if err := p.Verify(r, time.Now()); err != nil {
		t.Fatal(err)
	}
	items, err := p.Items(r)
	if err != nil || items[0].Key != "café" {
		t.Fatalf("items %+v, %v", items, err)
	}
}

// unsignedBody lists presets whose provider authenticates the sender but
// does not sign the body (a static token, a JWT): tampering with the body
// cannot be detected there, by design of the provider.
var unsignedBody = map[string]bool{"asaas": true, "evolution": true, "hotmart": true}

// Sign must produce what Verify accepts, for every preset: that is what
// `oncehook send` relies on. And a body changed after signing must fail.
func TestSignRoundTrip(t *testing.T) {
	now := time.Now()
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			secret := "s3cret"
			if name == "standard-webhooks" || name == "svix" {
				secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			}
			p := mustNew(t, name, Options{Secrets: []string{secret}, Key: keyFor(name)})
			body, tampered := sampleBody(name)
			r := &Request{Method: http.MethodPost, URL: mustURL("https://hooks.example.com/in/x"), Header: http.Header{}, Body: body}
			if err := p.Sign(r, secret, now, "msg_1"); err != nil {
				t.Fatal(err)
			}
			if err := p.Verify(r, now); err != nil {
				t.Fatalf("Verify(Sign(...)) = %v", err)
			}
			items, err := p.Items(r)
			if err != nil || len(items) == 0 || items[0].Key == "" {
				t.Fatalf("Items = %+v, %v: want a keyed event", items, err)
			}
			if unsignedBody[name] {
				return
			}
			r.Body = tampered
			if err := p.Verify(r, now); !errors.Is(err, ErrSignature) {
				t.Fatalf("tampered body verified: %v", err)
			}
		})
	}
}

// A request signed an hour ago says ErrSignatureAge only when its
// signature matches (it is the provider's, made then: a queue's backlog
// takes it); a wrong signature as old says ErrSignature alone, whatever
// the preset checks first. Every preset that signs a timestamp, both
// ways (an hour old, an hour ahead).
func TestOnlyAMatchingSignatureIsTooOld(t *testing.T) {
	now := time.Now()
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			secret := "s3cret"
			if name == "standard-webhooks" || name == "svix" {
				secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			}
			p := mustNew(t, name, Options{Secrets: []string{secret}, Key: keyFor(name), Tolerance: time.Minute})
			body, _ := sampleBody(name)
			signed := func(secret string, at time.Time) *Request {
				r := &Request{Method: http.MethodPost, URL: mustURL("https://hooks.example.com/in/x"), Header: http.Header{}, Body: body}
				if err := p.Sign(r, secret, at, "msg_1"); err != nil {
					t.Fatal(err)
				}
				return r
			}
			other := "other"
			if name == "standard-webhooks" || name == "svix" {
				other = "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 24 b"))
			}
			for _, at := range []time.Time{now.Add(-time.Hour), now.Add(time.Hour)} {
				err := p.Verify(signed(secret, at), now)
				if err == nil {
					if timestamped[name] {
						t.Fatalf("signed at %v: verified an hour away", at)
					}
					continue
				}
				if !timestamped[name] || !errors.Is(err, ErrSignatureAge) || !errors.Is(err, ErrSignature) {
					t.Fatalf("signed at %v with the secret: %v (timestamped: %v)", at, err, timestamped[name])
				}
				if err := p.Verify(signed(other, at), now); !errors.Is(err, ErrSignature) || errors.Is(err, ErrSignatureAge) {
					t.Fatalf("signed at %v with another secret: %v, want ErrSignature, not ErrSignatureAge", at, err)
				}
			}
		})
	}
}

// timestamped are the presets whose signature covers a time that
// Verify checks (Evolution: its JWT's exp and iat; Mercado Pago: only
// with a tolerance set).
var timestamped = map[string]bool{"evolution": true, "stripe": true, "paddle": true, "slack": true, "standard-webhooks": true, "svix": true, "mercadopago": true}

// sampleBody is a realistic body for a preset, and the same with one
// meaningful change.
func sampleBody(name string) (body, tampered []byte) {
	switch name {
	case "mercadopago":
		return []byte(`{"id":1,"type":"payment","action":"payment.updated","data":{"id":"123456"}}`),
			[]byte(`{"id":1,"type":"payment","action":"payment.updated","data":{"id":"999999"}}`)
	case "whatsapp":
		return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{"messages":[{"id":"wamid.1"}]}}]}]}`),
			[]byte(`{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{"messages":[{"id":"wamid.2"}]}}]}]}`)
	case "kiwify":
		return []byte(`{"order_id":"o1","order_status":"paid","webhook_event_type":"order_approved"}`),
			[]byte(`{"order_id":"o1","order_status":"refunded","webhook_event_type":"order_approved"}`)
	case "twilio":
		return []byte(`MessageSid=SM1&MessageStatus=delivered&Body=ol%C3%A1`), []byte(`MessageSid=SM1&MessageStatus=failed&Body=ol%C3%A1`)
	case "paddle", "slack":
		return []byte(`{"event_id":"evt_1","x":"é"}`), []byte(`{"event_id":"evt_2","x":"é"}`)
	case "evolution":
		return []byte(`{"event":"messages.upsert","instance":"i1","data":{"key":{"id":"M1"}}}`), nil
	}
	return []byte(`{"id":"evt_1","x":"é"}`), []byte(`{"id":"evt_2","x":"é"}`)
}

func keyFor(name string) []string {
	if name == "generic" {
		return []string{"json:id"}
	}
	return nil
}

func TestKeyRules(t *testing.T) {
	rule, err := ParseKeyRule([]string{"json:type", "json:data.items.1.id", "header:X-Shop"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Shop": {"s1"}}
	key, err := rule.Extract(h, []byte(`{"type":"t","data":{"items":[{"id":1},{"id":12345678901234567890}]}}`))
	if err != nil || key != "t:12345678901234567890:s1" {
		t.Fatalf("key %q, %v", key, err)
	}
	if key, _ := rule.Extract(h, []byte(`{"type":"t"}`)); key != "" {
		t.Fatalf("partial composite gave key %q, want none", key)
	}
	if _, err := rule.Extract(h, []byte(`{"type":`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad JSON: %v", err)
	}
	for _, bad := range []string{"json:", "body:x", "header"} {
		if _, err := ParseKeyRule([]string{bad}); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// Found from outside: each refusal says what was wrong with the request,
// not a neighbouring fault (a malformed Slack signature read "missing", a
// wrong secret in Pagar.me's path read "no secret in the path").
func TestRefusalsSayWhatIsWrong(t *testing.T) {
	now := time.Unix(1700000000, 0)
	slack := map[string]string{"X-Slack-Request-Timestamp": "1700000000"}
	cases := []struct {
		preset string
		r      *Request
		want   string
	}{
		{"slack", req(`{}`, slack), "missing X-Slack-Request-Timestamp or X-Slack-Signature"},
		{"slack", req(`{}`, map[string]string{"X-Slack-Request-Timestamp": "1700000000", "X-Slack-Signature": "V0=00"}), "X-Slack-Signature is not v0=<hex>"},
		{"eduzz", req(`{}`, nil), "missing x-signature"},
		{"eduzz", req(`{}`, map[string]string{"X-Signature": "not a signature"}), "x-signature is neither hex nor base64"},
		{"pagarme", pathToken(req(`{}`, nil), "wrong"), "the secret in the path is not one of the source's"},
		{"pagarme", req(`{}`, nil), "no X-Hub-Signature: sha1=<hex> and no secret in the path"},
	}
	for _, c := range cases {
		err := mustNew(t, c.preset, Options{Secrets: []string{"s3cret"}}).Verify(c.r, now)
		if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a signature error saying %q", c.preset, err, c.want)
		}
	}
}

// Known is Names as a lookup: every listed preset, and nothing else (the
// case and the spelling count).
func TestKnownIsWhatNamesLists(t *testing.T) {
	for _, name := range Names() {
		if !Known(name) {
			t.Errorf("%s is listed but not known", name)
		}
	}
	for _, name := range []string{"", "Stripe", "stripe ", "nope", "stripe\x00", "\xff"} {
		if Known(name) {
			t.Errorf("%q is known", name)
		}
	}
}
