package provider

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// fuzzSecret is every fuzzed preset's secret. The fuzzer never sees it.
const fuzzSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// signatureHeaders are every header some preset reads a credential from;
// the fuzzer fills them all with the same attacker-chosen value.
var signatureHeaders = []string{
	"Stripe-Signature", "X-Hub-Signature-256", "X-Hub-Signature", "webhook-id", "webhook-timestamp", "webhook-signature",
	"svix-id", "svix-timestamp", "svix-signature", "X-Shopify-Hmac-Sha256", "X-HOTMART-HOTTOK", "x-signature", "x-request-id",
	"asaas-access-token", "X-Slack-Signature", "X-Slack-Request-Timestamp", "Paddle-Signature", "X-Twilio-Signature",
	"Authorization", "apikey", "X-Signature",
}

func fuzzPresets(f *testing.F) []Preset {
	var ps []Preset
	for _, name := range Names() {
		p, err := New(name, Options{Secrets: []string{fuzzSecret}, Key: []string{"json:id"}})
		if err != nil {
			f.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func seedBodies(f *testing.F) {
	body, _ := sampleBody("whatsapp")
	f.Add(body, "sha256=00", "data.id=1&signature=00")
	f.Add([]byte(`{"id":"evt_1","object":"event"}`), "t=1700000000,v1=bce9a00f758174fb9cfd3d82017e3ec7737916b93f0dd1a7b3278e0ff974fd7e", "")
	f.Add([]byte(`{"event":"messages.set","instance":"i","data":[{"key":{"id":"A"}},{"keyId":"B","status":3}]}`), "Bearer a.b.c", "")
	f.Add([]byte(`MessageSid=SM1&MessageStatus=sent`), "jhERA+ZCEcC34xez9AikhwZJE0U=", "bodySHA256=00")
	f.Add([]byte(`{"type":"url_verification","challenge":"x"}`), "v0=00", "")
	f.Add([]byte(``), "", "")
	f.Add([]byte(`[1,2,{"entry":null}]`), "ts=1;h1=00", "")
}

// FuzzVerify: whatever an attacker puts in the body, the credential headers
// and the query, no preset panics and none accepts a request it did not
// get the secret for.
func FuzzVerify(f *testing.F) {
	seedBodies(f)
	presets := fuzzPresets(f)
	f.Fuzz(func(t *testing.T, body []byte, credential, query string) {
		h := http.Header{}
		for _, name := range signatureHeaders {
			h.Set(name, credential)
		}
		u := &url.URL{Scheme: "https", Host: "hooks.example.com", Path: "/in/x", RawQuery: query}
		for _, p := range presets {
			r := &Request{Method: http.MethodPost, URL: u, Header: h, Body: body, PathToken: credential}
			if err := p.Verify(r, time.Unix(1700000000, 0)); !errors.Is(err, ErrSignature) {
				t.Fatalf("%s accepted a request without the secret (err %v): body %q credential %q query %q", p.Name(), err, body, credential, query)
			}
			if hs, ok := p.(Handshaker); ok {
				if _, isHandshake, err := hs.Handshake(r, time.Unix(1700000000, 0)); isHandshake && err == nil {
					t.Fatalf("%s answered a handshake without the secret", p.Name())
				}
			}
		}
	})
}

// FuzzItems: no splitter panics on any body, and an error is always
// ErrMalformed (intake's 400), never something else.
func FuzzItems(f *testing.F) {
	seedBodies(f)
	presets := fuzzPresets(f)
	f.Fuzz(func(t *testing.T, body []byte, header, query string) {
		u := &url.URL{Scheme: "https", Host: "hooks.example.com", Path: "/in/x", RawQuery: query}
		h := http.Header{"X-Github-Delivery": {header}, "Webhook-Id": {header}}
		for _, p := range presets {
			items, err := p.Items(&Request{Method: http.MethodPost, URL: u, Header: h, Body: body})
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: error %v is not ErrMalformed", p.Name(), err)
			}
			if len(items) > len(body)+1 {
				t.Fatalf("%s: %d items from %d bytes", p.Name(), len(items), len(body))
			}
		}
	})
}
