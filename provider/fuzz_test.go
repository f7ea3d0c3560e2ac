package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
			if hs := Describe(p).Handshake; hs != nil {
				if _, isHandshake, err := hs(r, time.Unix(1700000000, 0)); isHandshake && err == nil {
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

// FuzzStripeItems: Stripe's one walk over the body (topKeyTexts) finds
// the same id and type as decoding it with encoding/json, and a body it
// does not take gets the same error as before.
func FuzzStripeItems(f *testing.F) {
	for _, s := range []string{
		`{"id":"evt_1","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","type":"x"}}}`,
		`{"ID":"evt_1","Type":"a","id":"evt_2"}`, `{"id":"a","id":{"x":1}}`, `{"id":1e5,"type":null}`,
		`{"\u0069d":"evt_e","type":"t"}`, `{"ıd":"evt_dotless","type":"t"}`, `{"id":"evt_\ud800","type":"t\"q\\"}`,
		`  {"data":[{"id":"no"},"]}"],"id":"yes"} `, `{}`, `[]`, `null`, `"s"`, `{"id":"a"} x`, `{"id":"a"`,
		`{"id":-0.5,"type":true}`, `{"pad":"\\\\","id":"b\\"}`, "{\"id\":\"a\",\t\"type\" :\r\n\"b\"}",
		`{"id":"a","type":"b"}x`, `{"id":01}`, `{"id":"a",}`, `{"id":"\u00e9","type":"\x"}`, "{\"id\":\"a\x01\"}", `{"id":"a"}}`,
	} {
		f.Add([]byte(s))
	}
	var p stripe
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotErr := p.Items(&Request{Body: body})
		want, wantErr := stripeDecoded(body)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("body %q: error %v, encoding/json's %v", body, gotErr, wantErr)
		}
		if len(got) != len(want) || (len(got) == 1 && (got[0].Key != want[0].Key || got[0].Type != want[0].Type || string(got[0].Body) != string(want[0].Body))) {
			t.Fatalf("body %q: items %+v, encoding/json's %+v", body, got, want)
		}
	})
}

// stripeVerifyBefore is Stripe's Verify as it was before its one pass
// over the header: FuzzStripeVerify holds the new one to it.
func stripeVerifyBefore(secrets [][]byte, tolerance time.Duration, r *Request, now time.Time) error {
	header := r.Header.Get("Stripe-Signature")
	if header == "" {
		return signatureError("missing Stripe-Signature header")
	}
	var ts string
	var sigs [][]byte
	given := 0
	for _, pair := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			given++
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	// (Its messages since #41: no t=, no v1=, and a v1= that is not hex
	// are three answers, no longer one.)
	switch {
	case ts == "":
		return signatureError("Stripe-Signature has no t=")
	case given == 0:
		return signatureError("Stripe-Signature has no v1=")
	case len(sigs) == 0:
		return signatureError("Stripe-Signature's v1= is not valid hex")
	}
	// A new HMAC per secret per request, as every preset did before
	// keeping them keyed (keyedHMACs).
	match := false
	for _, s := range secrets {
		want := hmacWith(sha256.New, s, []byte(ts), []byte("."), r.Body)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				match = true
			}
		}
	}
	if !match {
		return signatureError("no v1 signature matches")
	}
	return checkTimestamp(ts, now, tolerance)
}

// FuzzStripeVerify: whatever the header and the body, Stripe's Verify
// says what it said before (the same error, or none), under two secrets
// (a rotation); the seeds sign with either.
func FuzzStripeVerify(f *testing.F) {
	secrets := []string{"whsec_old", "whsec_new"}
	now := time.Unix(1700000000, 0)
	for i, s := range secrets {
		body := []byte(`{"id":"evt_` + strconv.Itoa(i) + `"}`)
		sig := hex.EncodeToString(hmacWith(sha256.New, []byte(s), []byte("1700000000."), body))
		f.Add(body, "t=1700000000,v1="+sig)
		f.Add(body, " t=1700000000 , v1=00,v1="+strings.ToUpper(sig)+",v0=x,")
		f.Add(body, "t=1699990000,v1="+sig)
		f.Add(body, "v1="+sig+",t=1700000000,t=abc")
	}
	f.Add([]byte("{}"), "t=1700000000,v1=")
	f.Add([]byte("{}"), "t=1700000000,v1=0")
	f.Add([]byte("{}"), "t=1700000000,v1=zz,v1=abcd")
	f.Add([]byte("{}"), "")
	p, err := newStripe(Options{Secrets: secrets})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		r := &Request{Header: http.Header{"Stripe-Signature": {header}}, Body: body}
		got := p.Verify(r, now)
		want := stripeVerifyBefore(secretBytes(secrets), 300*time.Second, r, now)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Fatalf("header %q body %q: %v, before %v", header, body, got, want)
		}
	})
}

// FuzzJSONValid: the scanner topKeyTexts reads bodies with takes exactly
// what json.Valid takes.
func FuzzJSONValid(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"\u00e9\n",{}],"b":{"c":[]}}`, ` 0 `, `-`, `01`, `1.`, `1e`, `.5`, `"\x"`, `"\u12"`,
		"\"\x01\"", "\"\xff\xfe\"", `[1,]`, `{"a":1,}`, `{"a" 1}`, `[`, `]`, `tru`, `nul`, `{"a":1}{}`, "\t\r\n[]\n", ``,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"k":` + strings.Repeat(`{"k":`, 9998) + `1` + strings.Repeat("}", 9999), `"abcdefgh\"ijklmnop"`, `"abcdefghijklmn\\"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("%q: valid %t, json.Valid %t", b, got, want)
		}
	})
}
