package provider

import (
	"slices"
	"strings"
	"testing"
)

// Every preset reads its provider's event type where providers.md (§2b)
// says the provider puts it.
func TestEventTypes(t *testing.T) {
	secret := Options{Secrets: []string{"s"}, Unsigned: true}
	cases := []struct {
		preset string
		opts   Options
		r      *Request
		want   []string // one per item
	}{
		{"stripe", secret, req(`{"id":"evt_1","object":"event","type":"invoice.paid"}`, nil), []string{"invoice.paid"}},
		{"github", secret, req(`{"action":"opened","number":7}`, map[string]string{"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "d1"}), []string{"pull_request.opened"}},
		{"github", secret, req(`{"ref":"refs/heads/main"}`, map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d2"}), []string{"push"}},
		{"github", secret, req(`payload=%7B%7D`, map[string]string{"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d3"}), []string{"ping"}},
		{"shopify", secret, req(`{"id":1}`, map[string]string{"X-Shopify-Topic": "orders/updated", "X-Shopify-Webhook-Id": "w"}), []string{"orders/updated"}},
		{"hotmart", secret, req(`{"id":"e1","event":"PURCHASE_APPROVED","version":"2.0.0","data":{"purchase":{"transaction":"HP1"}}}`, nil), []string{"PURCHASE_APPROVED"}},
		{"mercadopago", secret, req(`{"action":"payment.updated","type":"payment","data":{"id":"1"}}`, nil), []string{"payment.updated"}},
		{"mercadopago", secret, req(`{"type":"payment","data":{"id":"1"}}`, nil), []string{"payment"}},
		{"asaas", secret, req(`{"id":"evt_1","event":"PAYMENT_RECEIVED","payment":{"id":"pay_1"}}`, nil), []string{"PAYMENT_RECEIVED"}},
		{"paddle", secret, req(`{"event_id":"evt_01","event_type":"transaction.completed"}`, nil), []string{"transaction.completed"}},
		{"slack", secret, req(`{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`, nil), []string{"app_mention"}},
		{"slack", secret, req(`command=%2Fdeploy&trigger_id=t1`, nil), []string{"command"}},
		{"slack", secret, req(`payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%22t2%22%7D`, nil), []string{"block_actions"}},
		{"standard-webhooks", Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, req(`{"type":"user.created","data":{"id":"u_1"}}`, map[string]string{"webhook-id": "msg_1"}), []string{"user.created"}},
		{"evolution", secret, req(`{"event":"messages.upsert","instance":"i","data":{"key":{"id":"k1"}}}`, nil), []string{"messages.upsert"}},
		{"eduzz", secret, req(`{"id":"z154l2pvk6jltotg0xy86glx","event":"nutror.lesson_started","data":{},"sentDate":"2023-08-31T18:34:23.023Z"}`, nil), []string{"nutror.lesson_started"}},
		{"kiwify", secret, req(`{"order_id":"o1","webhook_event_type":"order_approved","order_status":"paid"}`, nil), []string{"order_approved"}},
		{"pagarme", secret, req(`{"id":"hook_1","type":"order.paid","data":{"id":"or_1"}}`, nil), []string{"order.paid"}},
		{"twilio", secret, req(`MessageSid=SM1&MessageStatus=delivered`, nil), []string{"message.delivered"}},
		{"twilio", secret, req(`CallSid=CA1&CallStatus=completed`, nil), []string{"call.completed"}},
		{"whatsapp", secret, req(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
			"messages":[{"id":"wamid.1","from":"55"}],"statuses":[{"id":"wamid.0","status":"read","recipient_id":"55"}]}}]}]}`, nil),
			[]string{"messages.message", "messages.status.read"}},
		{"whatsapp", secret, req(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"account_update","value":{"event":"VERIFIED"}}]}]}`, nil),
			[]string{"account_update"}},
		// The generic preset reads it where the source says, as its key.
		{"generic", Options{Unsigned: true, Key: []string{"json:id"}, Type: []string{"json:event.name"}}, req(`{"event":{"name":"lead.created"}}`, nil), []string{"lead.created"}},
		{"generic", Options{Unsigned: true, Key: []string{"json:id"}, Type: []string{"header:X-Topic", "json:action"}}, req(`{"action":"sent"}`, map[string]string{"X-Topic": "mail"}), []string{"mail.sent"}},
		{"generic", Options{Unsigned: true, Key: []string{"json:id"}}, req(`{"event":"x"}`, nil), []string{""}},
		// A source that overrides a preset's key keeps the preset's type.
		{"stripe", Options{Secrets: []string{"s"}, Key: []string{"json:data.object.id"}}, req(`{"id":"evt_1","type":"charge.succeeded","data":{"object":{"id":"ch_1"}}}`, nil), []string{"charge.succeeded"}},
	}
	for _, c := range cases {
		p, err := New(c.preset, c.opts)
		if err != nil {
			t.Fatalf("%s: %v", c.preset, err)
		}
		if c.r.URL == nil {
			c.r.URL = mustURL("https://gw.example/in/s")
		}
		items, err := p.Items(c.r)
		if err != nil {
			t.Fatalf("%s %s: %v", c.preset, c.r.Body, err)
		}
		var got []string
		for _, it := range items {
			got = append(got, it.Type)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %s: types %q, want %q", c.preset, c.r.Body, got, c.want)
		}
	}
}

// A type is text a person reads: a hostile one is kept with what is not
// readable percent-encoded, and cut to MaxTypeLen bytes, never dropped
// (found from outside: a type with CR/LF was dropped silently, and the
// event went untyped past every types: route).
func TestEventTypeKeepsAHostileTypeReadable(t *testing.T) {
	long := strings.Repeat("x", MaxTypeLen+1)
	for bad, want := range map[string]string{
		"invoice.paid\r\n":                       "invoice.paid%0D%0A",
		"a\x00b":                                 "a%00b",
		"a\nb":                                   "a%0Ab",
		"bidi\u202e":                             "bidi%E2%80%AE",
		"\xff":                                   "%FF",
		"pedido.atualização":                     "pedido.atualização",
		"50%off":                                 "50%off",
		long:                                     long[:MaxTypeLen],
		strings.Repeat("é", MaxTypeLen):          strings.Repeat("é", MaxTypeLen/2),
		strings.Repeat("x", MaxTypeLen-2) + "\n": strings.Repeat("x", MaxTypeLen-2), // never half an escape
	} {
		got := eventType(bad)
		if got != want || len(got) > MaxTypeLen || !readable(got) {
			t.Errorf("eventType(%q) = %q, want %q", bad, got, want)
		}
	}
	if got := eventType("pull_request", "", "opened"); got != "pull_request.opened" {
		t.Errorf("parts joined: %q", got)
	}
}
