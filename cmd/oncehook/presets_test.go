package main_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/testenv"
)

// presetCase is one provider, end to end: a source configured with the
// preset, and what `oncehook send` posts to it.
type presetCase struct {
	preset, secret, body, id string
	keys                     []string // the event keys the request carries
	path                     string   // after /in/, default the preset's name
	extra                    string   // more source config
}

var presetCases = []presetCase{
	{preset: "stripe", secret: "whsec_e2e", body: `{"id":"evt_e2e","object":"event","type":"invoice.paid"}`, keys: []string{"evt_e2e"}},
	{preset: "github", secret: "gh_e2e", body: `{"action":"opened","number":1}`, id: "72d3162e-cc78-11e3-81ab-4c9367dc0958", keys: []string{"72d3162e-cc78-11e3-81ab-4c9367dc0958"}},
	{preset: "standard-webhooks", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", body: `{"type":"user.created","data":{"id":"u_1"}}`, id: "msg_e2e_1", keys: []string{"msg_e2e_1"}},
	{preset: "svix", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", body: `{"type":"user.created","data":{"id":"u_2"}}`, id: "msg_e2e_2", keys: []string{"msg_e2e_2"}},
	{preset: "shopify", secret: "shpss_e2e", body: `{"id":820982911946154508,"email":"jon@example.com"}`, id: "b54557e4-e2e", keys: []string{"b54557e4-e2e"}},
	{preset: "whatsapp", secret: "meta_e2e", extra: "    verify_token: vt_e2e\n",
		body: `{"object":"whatsapp_business_account","entry":[{"id":"WABA","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"PNID"},"messages":[{"id":"wamid.IN1","type":"text","text":{"body":"caf\u00e9"}}],"statuses":[{"id":"wamid.OUT1","status":"sent"},{"id":"wamid.OUT1","status":"delivered"}]}}]}]}`,
		keys: []string{"wamid.IN1", "wamid.OUT1:sent", "wamid.OUT1:delivered"}},
	{preset: "evolution", secret: "evo_e2e", body: `{"event":"messages.upsert","instance":"inst1","data":{"key":{"id":"3EB0E2E","remoteJid":"5511@s.whatsapp.net"}}}`, keys: []string{"messages.upsert:inst1:3EB0E2E"}},
	{preset: "evolution", secret: "evo_e2e", path: "evolution/evo_e2e", body: `{"event":"messages.update","instance":"inst1","data":{"keyId":"3EB0E2E","status":"READ"}}`, keys: []string{"messages.update:inst1:3EB0E2E:READ"}},
	{preset: "hotmart", secret: "hottok_e2e", body: `{"id":"42338ce6-e2e","event":"PURCHASE_APPROVED","data":{"purchase":{"transaction":"HP1"}}}`, keys: []string{"42338ce6-e2e"}},
	{preset: "mercadopago", secret: "mp_e2e", id: "req-e2e", body: `{"id":1,"type":"payment","action":"payment.updated","data":{"id":"123456"}}`, keys: []string{"payment:123456:payment.updated:1"}},
	{preset: "asaas", secret: "asaas_e2e", body: `{"id":"evt_05b7&368604920","event":"PAYMENT_RECEIVED"}`, keys: []string{"evt_05b7&368604920"}},
	{preset: "slack", secret: "slack_e2e", body: `{"type":"event_callback","event_id":"Ev0E2E","event":{"type":"message"}}`, keys: []string{"Ev0E2E"}},
	{preset: "paddle", secret: "pdl_e2e", body: `{"event_id":"evt_01e2e","event_type":"transaction.completed"}`, keys: []string{"evt_01e2e"}},
	{preset: "twilio", secret: "twilio_e2e", id: "idem-e2e", body: `MessageSid=SMe2e&MessageStatus=delivered&To=%2B15550002222`, keys: []string{"idem-e2e"}},
	{preset: "kiwify", secret: "kiwify_e2e", body: `{"order_id":"ord_e2e","order_status":"paid","webhook_event_type":"order_approved"}`, keys: []string{"ord_e2e:order_approved:paid"}},
	{preset: "eduzz", secret: "eduzz_e2e", body: `{"id":"zE2E","event":"nutror.lesson_started","data":{}}`, keys: []string{"zE2E"}},
	{preset: "pagarme", secret: "ak_e2e", body: `{"id":"hook_e2e","type":"order.paid"}`, keys: []string{"hook_e2e"}},
}

// Every preset through the real server with `oncehook send`: the first send
// is accepted, the second is a duplicate, and each event is delivered once.
func TestEveryPresetEndToEnd(t *testing.T) {
	dir := t.TempDir()
	sink := testenv.NewSink(t)
	var cfg strings.Builder
	cfg.WriteString("listen: 127.0.0.1:0\nstore: sqlite://./events.db\nsources:\n")
	done := map[string]bool{}
	for _, c := range presetCases {
		if done[c.preset] {
			continue
		}
		done[c.preset] = true
		fmt.Fprintf(&cfg, "  - name: %s\n    preset: %s\n    secrets: [%q]\n    destinations: [app]\n%s", c.preset, c.preset, c.secret, c.extra)
	}
	fmt.Fprintf(&cfg, "destinations:\n  - name: app\n    url: %s\n    retry: {max_attempts: 3, base_delay: 10ms, max_delay: 20ms}\n", sink.URL)
	path := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, dir, "--config", path)

	wantDelivered := map[string]bool{}
	for _, c := range presetCases {
		target := c.path
		if target == "" {
			target = c.preset
		}
		args := []string{"send", "--url", p.URL + "/in/" + target, "--preset", c.preset, "--secret", c.secret, "--body", c.body}
		if c.id != "" {
			args = append(args, "--id", c.id)
		}
		for i, want := range []string{`"status":"accepted"`, `"status":"duplicate"`} {
			out, err := exec.Command(binary, args...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "#1 200 ") || !strings.Contains(string(out), want) {
				t.Fatalf("%s (send %d): %v\n%s\nwant 200 and %s", c.preset, i+1, err, out, want)
			}
			for _, k := range c.keys {
				if !strings.Contains(string(out), fmt.Sprintf("%q", k)) && !strings.Contains(string(out), strings.ReplaceAll(fmt.Sprintf("%q", k), "&", `\u0026`)) {
					t.Fatalf("%s: answer does not name key %q:\n%s", c.preset, k, out)
				}
			}
		}
		for _, k := range c.keys {
			wantDelivered[c.preset+":"+k] = true
		}
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(sink.ByKey()) >= len(wantDelivered) }) {
		t.Fatalf("delivered %v, want %d events", sink.ByKey(), len(wantDelivered))
	}
	time.Sleep(200 * time.Millisecond)
	got := sink.ByKey()
	for k := range wantDelivered {
		if got[k] != 1 {
			t.Errorf("%s delivered %d times, want 1", k, got[k])
		}
	}
	if len(got) != len(wantDelivered) {
		t.Errorf("delivered %d distinct events, want %d: %v", len(got), len(wantDelivered), got)
	}

	// Headers a destination routes on travel with the event; credentials
	// never do.
	for _, d := range sink.Deliveries() {
		switch {
		case strings.HasPrefix(d.Key, "github:") && d.Header.Get("X-GitHub-Event") != "ping":
			t.Errorf("GitHub delivery without X-GitHub-Event: %v", d.Header)
		case strings.HasPrefix(d.Key, "shopify:") && d.Header.Get("X-Shopify-Topic") != "orders/create":
			t.Errorf("Shopify delivery without X-Shopify-Topic: %v", d.Header)
		case strings.HasPrefix(d.Key, "hotmart:") && d.Header.Get("X-Hotmart-Hottok") != "":
			t.Errorf("Hotmart's token was forwarded to the destination")
		}
		if d.Header.Get("Stripe-Signature") != "" || d.Header.Get("Authorization") != "" {
			t.Errorf("%s: a provider credential or signature was forwarded: %v", d.Key, d.Header)
		}
	}

	// Handshakes answer without creating events.
	resp, err := http.Get(p.URL + "/in/whatsapp?hub.mode=subscribe&hub.verify_token=vt_e2e&hub.challenge=8817")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "8817" {
		t.Fatalf("WhatsApp handshake: %d %q", resp.StatusCode, b)
	}
	// The challenge is echoed as the caller sent it: never sniffed as HTML.
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("WhatsApp handshake headers %v: want X-Content-Type-Options: nosniff", resp.Header)
	}
	if resp, _ := http.Get(p.URL + "/in/whatsapp?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1"); resp == nil || resp.StatusCode != 401 {
		t.Fatalf("WhatsApp handshake with a wrong token: %v", resp)
	}
	out, err := exec.Command(binary, "send", "--url", p.URL+"/in/slack", "--preset", "slack", "--secret", "slack_e2e",
		"--body", `{"token":"t","challenge":"ch4ll3nge","type":"url_verification"}`).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "#1 200 ch4ll3nge") {
		t.Fatalf("Slack url_verification: %v\n%s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(sink.ByKey()); n != len(wantDelivered) {
		t.Fatalf("a handshake created an event: %d delivered", n)
	}
}
