package sdktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
	twilio "github.com/twilio/twilio-go/client"

	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/provider"
)

// answer posts req and returns the status and the intake's verdict.
func answer(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &body)
	if body.Status == "" {
		body.Status = body.Error
	}
	return resp.StatusCode, body.Status
}

// signed is a request that preset p's Sign made, as `oncehook send` does.
func signed(t *testing.T, preset, secret, target string, body []byte, header http.Header) *http.Request {
	t.Helper()
	p, err := provider.New(preset, provider.Options{Secrets: []string{secret}, Key: []string{"json:id"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if err := provider.SignHTTP(p, req, body, secret, time.Now(), "d-1"); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestStripe(t *testing.T) {
	const secret = "whsec_sdk_stripe"
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/o.db
sources: [{name: stripe, preset: stripe, secrets: [`+secret+`]}]
`)
	body := []byte(`{"id":"evt_sdk_1","object":"event","type":"payment_intent.succeeded"}`)
	// What stripe-go signs, the gateway accepts.
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()})
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/stripe", bytes.NewReader(sp.Payload))
	req.Header.Set("Stripe-Signature", sp.Header)
	if status, verdict := answer(t, req); status != 200 || verdict != "accepted" {
		t.Fatalf("stripe-go's signature: %d %s", status, verdict)
	}
	// What the preset signs, stripe-go validates.
	r := signed(t, "stripe", secret, gw.URL+"/in/stripe", body, nil)
	if err := webhook.ValidatePayload(body, r.Header.Get("Stripe-Signature"), secret); err != nil {
		t.Fatalf("stripe-go rejects oncehook's signature: %v", err)
	}
}

func TestGitHub(t *testing.T) {
	const secret = "gh_sdk"
	for _, ct := range []string{"application/json", "application/x-www-form-urlencoded"} {
		body := []byte(`{"action":"opened"}`)
		if ct != "application/json" {
			body = []byte("payload=" + url.QueryEscape(string(body)))
		}
		r := signed(t, "github", secret, "http://x/in/gh", body, http.Header{"Content-Type": {ct}})
		if r.Header.Get("Content-Type") != ct {
			t.Fatalf("Content-Type %q became %q", ct, r.Header.Get("Content-Type"))
		}
		if _, err := github.ValidatePayloadFromBody(ct, bytes.NewReader(body), r.Header.Get("X-Hub-Signature-256"), []byte(secret)); err != nil {
			t.Fatalf("go-github rejects oncehook's %s signature: %v", ct, err)
		}
	}
}

func TestSlack(t *testing.T) {
	const secret = "slack_sdk_secret"
	body := []byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`)
	r := signed(t, "slack", secret, "http://x/in/slack", body, nil)
	sv, err := slack.NewSecretsVerifier(r.Header, secret)
	if err != nil {
		t.Fatal(err)
	}
	sv.Write(body)
	if err := sv.Ensure(); err != nil {
		t.Fatalf("slack-go rejects oncehook's signature: %v", err)
	}
}

// Twilio behind a proxy, configured as the README shows: public_url is the
// URL Twilio calls. A signature Twilio's own RequestValidator accepts for
// that URL is accepted by the gateway, which is reached at another host and
// path; so is a GET status callback, and a JSON body with bodySHA256.
func TestTwilio(t *testing.T) {
	const token = "twilio_sdk_token"
	const public = "https://hooks.example.com/in/twilio"
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/o.db
sources: [{name: twilio, preset: twilio, secrets: [`+token+`], public_url: "`+public+`"}]
`)
	validator := twilio.NewRequestValidator(token)
	sign := func(data string) string {
		m := hmac.New(sha1.New, []byte(token))
		m.Write([]byte(data))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}

	params := map[string]string{"MessageSid": "SM1", "MessageStatus": "delivered", "To": "+15550002222"}
	form := url.Values{}
	for k, v := range params {
		form.Set(k, v)
	}
	sig := sign(public + "MessageSidSM1MessageStatusdeliveredTo+15550002222") // URL + sorted name+value
	if !validator.Validate(public, params, sig) {
		t.Fatal("twilio-go rejects the test's own signature: the test is wrong")
	}
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/twilio", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", sig)
	if status, verdict := answer(t, req); status != 200 || verdict != "accepted" {
		t.Fatalf("a form callback twilio-go accepts: %d %s", status, verdict)
	}

	query := "MessageSid=SM2&MessageStatus=sent"
	getSig := sign(public + "?" + query)
	if !validator.Validate(public+"?"+query, map[string]string{}, getSig) {
		t.Fatal("twilio-go rejects the GET signature: the test is wrong")
	}
	req, _ = http.NewRequest(http.MethodGet, gw.URL+"/in/twilio?"+query, nil)
	req.Header.Set("X-Twilio-Signature", getSig)
	if status, verdict := answer(t, req); status != 200 || verdict != "accepted" {
		t.Fatalf("a GET status callback twilio-go accepts: %d %s", status, verdict)
	}

	// The preset's own signature (oncehook send), checked by twilio-go.
	jsonBody := []byte(`{"id":"EV1"}`)
	r := signed(t, "twilio", token, public, jsonBody, nil)
	if !validator.ValidateBody(r.URL.String(), jsonBody, r.Header.Get("X-Twilio-Signature")) {
		t.Fatalf("twilio-go rejects oncehook's JSON signature for %s", r.URL)
	}
	r = signed(t, "twilio", token, public, []byte(form.Encode()), nil)
	if !validator.Validate(public, params, r.Header.Get("X-Twilio-Signature")) {
		t.Fatal("twilio-go rejects oncehook's form signature")
	}
}

// Standard Webhooks both ways: the library's signature is accepted at
// intake, and what oncehook delivers to a destination with a secret, the
// library verifies, under one webhook-id across attempts.
func TestStandardWebhooks(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var verified, attempts int
	var ids []string
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if wh.Verify(body, r.Header) == nil {
			verified++
			ids = append(ids, r.Header.Get("webhook-id"))
		}
		if attempts == 1 {
			w.WriteHeader(http.StatusInternalServerError) // once, to see a retry keep its id
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer dest.Close()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/o.db
sources: [{name: sw, preset: standard-webhooks, secrets: [`+secret+`], destinations: [app]}]
destinations:
  - {name: app, url: "`+dest.URL+`", secret: `+secret+`, retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}}
`)
	body := []byte(`{"type":"user.created","data":{"id":"u_1"}}`)
	now := time.Now()
	sig, err := wh.Sign("msg_sdk_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/sw", bytes.NewReader(body))
	req.Header.Set("webhook-id", "msg_sdk_1")
	req.Header.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
	req.Header.Set("webhook-signature", sig)
	if status, verdict := answer(t, req); status != 200 || verdict != "accepted" {
		t.Fatalf("the library's signature: %d %s", status, verdict)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := verified == 2
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries verified by the Standard Webhooks library", verified, attempts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if ids[0] != ids[1] {
		t.Fatalf("webhook-id changed between attempts: %v", ids)
	}
	// And the preset's own signature, verified by the library.
	r := signed(t, "standard-webhooks", secret, "http://x/in/sw", body, nil)
	if err := wh.Verify(body, r.Header); err != nil {
		t.Fatalf("the library rejects oncehook's signature: %v", err)
	}
}
