package provider

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func reqURL(method, rawURL, body string, h map[string]string) *Request {
	r := req(body, h)
	r.Method = method
	r.URL = mustURL(rawURL)
	return r
}

// Vectors from providers.md, section 3, for the presets beyond the spine's.
func TestMoreVectors(t *testing.T) {
	at := time.Unix(1700000000, 0)
	mpAt := time.UnixMilli(1742505638683)
	cases := []struct {
		name, preset string
		opts         Options
		now          time.Time
		r            *Request
		key          string
	}{
		{"shopify", "shopify", Options{Secrets: []string{"shpss_test_secret"}}, at,
			reqURL("POST", "https://x/in/shop", `{"id":820982911946154508,"email":"jon@example.com"}`, map[string]string{
				"X-Shopify-Hmac-Sha256": "LnwdZPLBbdjkBwPD/lDL1/rYEGby/GHPtL1aAH6Dxjc=", "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}),
			"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
		// Shopify's duplicate rule: one X-Shopify-Event-Id on several webhooks
		// (several subscriptions to one topic) is one event.
		{"shopify keys on the event id when sent", "shopify", Options{Secrets: []string{"shpss_test_secret"}}, at,
			reqURL("POST", "https://x/in/shop", `{"id":820982911946154508,"email":"jon@example.com"}`, map[string]string{
				"X-Shopify-Hmac-Sha256": "LnwdZPLBbdjkBwPD/lDL1/rYEGby/GHPtL1aAH6Dxjc=", "X-Shopify-Webhook-Id": "sub-2-delivery",
				"X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5"}),
			"98880550-7158-44d4-b7cd-2c97c8a091b5"},
		{"shopify during rotation", "shopify", Options{Secrets: []string{"shpss_new", "shpss_test_secret"}}, at,
			reqURL("POST", "https://x/in/shop", `{"id":820982911946154508,"email":"jon@example.com"}`, map[string]string{
				"X-Shopify-Hmac-Sha256": "LnwdZPLBbdjkBwPD/lDL1/rYEGby/GHPtL1aAH6Dxjc=", "X-Shopify-Webhook-Id": "w1"}),
			"w1"},
		{"whatsapp empty batch", "whatsapp", Options{Secrets: []string{"meta_app_secret_test"}}, at,
			reqURL("POST", "https://x/in/wa", `{"object":"whatsapp_business_account","entry":[]}`, map[string]string{
				"X-Hub-Signature-256": "sha256=8f1c69f3c50e172785b483ad84a36a6c64b4e199e23810fbd5e084d9300f6452"}),
			"-"},
		{"mercadopago", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456&type=payment", `{"action":"payment.updated","type":"payment","data":{"id":"123456"}}`, map[string]string{
				"x-signature": "ts=1742505638683,v1=b1cc1a34bd2768e117d85d1b9babb722d32cfd2df1b359ef809170500556d3c7", "x-request-id": "bb56a2f1-6aae-46ac-982e-9dcd3581d08e"}),
			"payment:123456:payment.updated"},
		{"mercadopago alphanumeric id", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=ORD01ABC&type=order", `{"action":"order.processed","type":"order","data":{"id":"ORD01ABC"}}`, map[string]string{
				"x-signature": "ts=1742505638683,v1=4c956c10d995bfe419dabd10bff1519257f426d321462f34fee19bcb83d642fa", "x-request-id": "req-1"}),
			"order:ORD01ABC:order.processed"},
		{"mercadopago with a name written escaped", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456&type=payment", `{"action":"payment.updated","type":"payment","d\u0061ta":{"id" : "123456"}}`, map[string]string{
				"x-signature": "ts=1742505638683,v1=b1cc1a34bd2768e117d85d1b9babb722d32cfd2df1b359ef809170500556d3c7", "x-request-id": "bb56a2f1-6aae-46ac-982e-9dcd3581d08e"}),
			"payment:123456:payment.updated"},
		{"mercadopago without request id", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456", `{"action":"payment.created","type":"payment","data":{"id":"123456"}}`, map[string]string{
				"x-signature": "ts=1742505638683,v1=76ee0f650b950acb44959c82d76635213c2e07c74413f71a573cb743c0de463a"}),
			"payment:123456:payment.created"},
		{"slack event", "slack", Options{Secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5"}}, time.Unix(1531420618, 0),
			reqURL("POST", "https://x/in/slack", "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c", map[string]string{
				"X-Slack-Request-Timestamp": "1531420618", "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}),
			"398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"},
		{"twilio", "twilio", Options{Secrets: []string{"twilio_test_token"}}, at,
			reqURL("POST", "https://example.com/twilio/sms", "MessageSid=SM123&From=%2B15550001111&To=%2B15550002222&Body=Hi", map[string]string{
				"X-Twilio-Signature": "jhERA+ZCEcC34xez9AikhwZJE0U="}),
			"SM123"},
		{"twilio with :443 added", "twilio", Options{Secrets: []string{"twilio_test_token"}}, at,
			reqURL("POST", "https://example.com:443/twilio/sms", "MessageSid=SM123&From=%2B15550001111&To=%2B15550002222&Body=Hi", map[string]string{
				"X-Twilio-Signature": "jhERA+ZCEcC34xez9AikhwZJE0U="}),
			"SM123"},
		{"twilio official", "twilio", Options{Secrets: []string{"12345"}}, at,
			reqURL("POST", "https://mycompany.com/myapp.php?foo=1&bar=2", "CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212", map[string]string{
				"X-Twilio-Signature": "0/KCTR6DLpKmkAf8muzZqo1nDgQ="}),
			"CA1234567890ABCDE"},
		// public_url is the URL configured at Twilio, as the README shows it;
		// the proxy forwards to another host and path.
		{"twilio behind a proxy", "twilio", Options{Secrets: []string{"twilio_test_token"}, PublicURL: "https://example.com/twilio/sms"}, at,
			reqURL("POST", "http://10.0.0.5:8080/in/twilio", "MessageSid=SM123&From=%2B15550001111&To=%2B15550002222&Body=Hi", map[string]string{
				"X-Twilio-Signature": "jhERA+ZCEcC34xez9AikhwZJE0U="}),
			"SM123"},
		// Twilio's documented example (its SDKs' RequestValidator gives the
		// same signature), received behind a proxy: the query stays.
		{"twilio official behind a proxy", "twilio", Options{Secrets: []string{"12345"}, PublicURL: "https://mycompany.com/myapp.php"}, at,
			reqURL("POST", "http://10.0.0.5/in/twilio?foo=1&bar=2", "CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212", map[string]string{
				"X-Twilio-Signature": "0/KCTR6DLpKmkAf8muzZqo1nDgQ="}),
			"CA1234567890ABCDE"},
		// A status callback sent by GET: the parameters are in the signed URL.
		{"twilio GET status callback", "twilio", Options{Secrets: []string{"twilio_test_token"}}, at,
			reqURL("GET", "https://example.com/twilio/status?MessageSid=SM9&MessageStatus=delivered&To=%2B15550002222", "", map[string]string{
				"X-Twilio-Signature": "nebnI8E01Y9PseWHWMCJo3Ug5kk="}),
			"SM9:delivered"},
		{"paddle", "paddle", Options{Secrets: []string{"pdl_ntfset_test_secret"}}, at.Add(2 * time.Second),
			reqURL("POST", "https://x/in/paddle", `{"event_id":"evt_01test","event_type":"transaction.completed"}`, map[string]string{
				"Paddle-Signature": "ts=1700000000;h1=f3201a354cfcd9b0e365e6d5fcbdf7fea3923c1219c4cbc55f29ec66b02eed51"}),
			"evt_01test"},
		{"paddle rotation, second h1", "paddle", Options{Secrets: []string{"pdl_ntfset_test_secret"}}, at,
			reqURL("POST", "https://x/in/paddle", `{"event_id":"evt_01test","event_type":"transaction.completed"}`, map[string]string{
				"Paddle-Signature": "ts=1700000000;h1=00;h1=f3201a354cfcd9b0e365e6d5fcbdf7fea3923c1219c4cbc55f29ec66b02eed51"}),
			"evt_01test"},
		{"kiwify", "kiwify", Options{Secrets: []string{"kiwify_test_token"}}, at,
			reqURL("POST", "https://x/in/kiwify?signature=8d96d141a95f896cf6a19d2e75398940ece4bfed", `{"order_id":"ord_1","order_status":"paid","webhook_event_type":"order_approved"}`, nil),
			"ord_1:order_approved:paid"},
		{"eduzz", "eduzz", Options{Secrets: []string{"eduzz_test_key"}}, at,
			reqURL("POST", "https://x/in/eduzz", `{"id":"z154l2pvk6jltotg0xy86glx","event":"nutror.lesson_started","data":{},"sentDate":"2023-08-31T18:34:23.023Z"}`, map[string]string{
				"x-signature": "666a38a71fe83358c6e30bd55f3137588e709f6c6d16dc9be3e73a657da16cba"}),
			"z154l2pvk6jltotg0xy86glx"},
		{"hotmart keys on the envelope id, not the transaction", "hotmart", Options{Secrets: []string{"hottok_1"}}, at,
			reqURL("POST", "https://x/in/hotmart", `{"id":"42338ce6-7974-4519-854a-cae504d820a1","creation_date":1747540995368,"event":"PURCHASE_APPROVED","version":"2.0.0","data":{"purchase":{"transaction":"HP2363007968","status":"APPROVED"}}}`, map[string]string{
				"X-HOTMART-HOTTOK": "hottok_1"}),
			"42338ce6-7974-4519-854a-cae504d820a1"},
		{"asaas", "asaas", Options{Secrets: []string{"asaas_tok"}}, at,
			reqURL("POST", "https://x/in/asaas", `{"id":"evt_05b708f961d739ea7eba7e4db318f621&368604920","event":"PAYMENT_RECEIVED","payment":{"id":"pay_080225913252"}}`, map[string]string{
				"asaas-access-token": "asaas_tok"}),
			"evt_05b708f961d739ea7eba7e4db318f621&368604920"},
		{"pagarme v4 signature", "pagarme", Options{Secrets: []string{"ak_test"}}, at,
			reqURL("POST", "https://x/in/pagarme", `{"id":"hook_1","type":"order.paid"}`, map[string]string{
				"X-Hub-Signature": "sha1=" + hexHMACSHA1("ak_test", `{"id":"hook_1","type":"order.paid"}`)}),
			"hook_1"},
		{"evolution secret in the path", "evolution", Options{Secrets: []string{"evo_secret"}}, at,
			pathToken(reqURL("POST", "https://x/in/evo/evo_secret", `{"event":"messages.upsert","instance":"inst1","data":{"key":{"id":"3EB0A","remoteJid":"55119@s.whatsapp.net"}}}`, nil), "evo_secret"),
			"messages.upsert:inst1:3EB0A"},
		{"evolution messages.update keys on keyId and status", "evolution", Options{Secrets: []string{"evo_secret"}}, at,
			reqURL("POST", "https://x/in/evo", `{"event":"messages.update","instance":"inst1","data":{"keyId":"3EB0A","status":"READ"}}`, map[string]string{"apikey": "evo_secret"}),
			"messages.update:inst1:3EB0A:READ"},
		{"evolution jwt", "evolution", Options{Secrets: []string{"evo_jwt_key"}}, at,
			reqURL("POST", "https://x/in/evo", `{"event":"messages.upsert","instance":"inst1","data":{"key":{"id":"M9"}}}`, map[string]string{
				"Authorization": "Bearer " + evoJWT("evo_jwt_key", at, at.Add(600*time.Second))}),
			"messages.upsert:inst1:M9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			items := verifiedItems(t, c.preset, c.opts, c.r, c.now)
			if c.key == "-" {
				if len(items) != 0 {
					t.Fatalf("items %+v, want none", items)
				}
				return
			}
			if len(items) != 1 || items[0].Key != c.key {
				t.Fatalf("items = %+v, want one with key %q", items, c.key)
			}
		})
	}
}

func pathToken(r *Request, tok string) *Request { r.PathToken = tok; return r }

func hexHMACSHA1(key, body string) string {
	p, _ := New("pagarme", Options{Secrets: []string{key}})
	r := &Request{Header: http.Header{}, Body: []byte(body)}
	p.Sign(r, key, time.Now(), "")
	return strings.TrimPrefix(r.Header.Get("X-Hub-Signature"), "sha1=")
}

func evoJWT(key string, iat, exp time.Time) string {
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iat": iat.Unix(), "exp": exp.Unix(), "app": "evolution", "action": "webhook"}).SignedString([]byte(key))
	return tok
}

// The negative cases listed in providers.md, and the traps, all 401.
func TestMoreRejections(t *testing.T) {
	at := time.Unix(1700000000, 0)
	mpAt := time.UnixMilli(1742505638683)
	mpHeaders := map[string]string{
		"x-signature": "ts=1742505638683,v1=b1cc1a34bd2768e117d85d1b9babb722d32cfd2df1b359ef809170500556d3c7", "x-request-id": "bb56a2f1-6aae-46ac-982e-9dcd3581d08e"}
	slackURLVerification := `{"type":"url_verification","challenge":"abc123"}`
	cases := []struct {
		name, preset string
		opts         Options
		now          time.Time
		r            *Request
	}{
		{"meta body with \\u00e9 decoded", "whatsapp", Options{Secrets: []string{"meta_app_secret_test"}}, at,
			reqURL("POST", "https://x/in/wa", `{"text":"café"}`, map[string]string{"X-Hub-Signature-256": "sha256=04d7a5ab9b020bdd93ec1ad1394a9084ed39eef1aba490d1090117de70a4c0ed"})},
		{"mercadopago data.id from the body, not the query", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=999999", `{"type":"payment","data":{"id":"123456"}}`, mpHeaders)},
		{"mercadopago body data.id differs from the signed one", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456", `{"type":"payment","data":{"id":"777"}}`, mpHeaders)},
		// The body is unsigned: only its data.id binds it to the signature,
		// so a second data.id that another parser would read instead of the
		// signed one is refused. encoding/json folds case and takes the last.
		{"mercadopago body data.id beside a signed ID", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456", `{"type":"payment","data":{"id":"999999","ID":"123456"}}`, mpHeaders)},
		{"mercadopago body data beside a signed Data", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456", `{"type":"payment","data":{"id":"999999"},"Data":{"id":"123456"}}`, mpHeaders)},
		{"mercadopago body data given twice, once escaped", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456", `{"type":"payment","d\u0061ta":{"id":"999999"},"data":{"id":"123456"}}`, mpHeaders)},
		{"mercadopago body data.id given twice", "mercadopago", Options{Secrets: []string{"mp_test_secret"}}, mpAt,
			reqURL("POST", "https://x/in/mp?data.id=123456", `{"type":"payment","data":{"id":"999999","id":"123456"}}`, mpHeaders)},
		{"mercadopago stale with a tolerance set", "mercadopago", Options{Secrets: []string{"mp_test_secret"}, Tolerance: time.Hour}, mpAt.Add(2 * time.Hour),
			reqURL("POST", "https://x/in/mp?data.id=123456", `{"type":"payment","data":{"id":"123456"}}`, mpHeaders)},
		{"slack stale", "slack", Options{Secrets: []string{"slack_test_signing_secret"}}, at.Add(6 * time.Minute),
			reqURL("POST", "https://x/in/slack", slackURLVerification, map[string]string{"X-Slack-Request-Timestamp": "1700000000", "X-Slack-Signature": "v0=5ae3cc8ebb76d9022906ab319981baef8f461f855c77416d78c93414a3e1911c"})},
		{"slack from the future", "slack", Options{Secrets: []string{"slack_test_signing_secret"}}, at.Add(-6 * time.Minute),
			reqURL("POST", "https://x/in/slack", slackURLVerification, map[string]string{"X-Slack-Request-Timestamp": "1700000000", "X-Slack-Signature": "v0=5ae3cc8ebb76d9022906ab319981baef8f461f855c77416d78c93414a3e1911c"})},
		{"paddle stale beyond 5s", "paddle", Options{Secrets: []string{"pdl_ntfset_test_secret"}}, at.Add(6 * time.Second),
			reqURL("POST", "https://x/in/paddle", `{"event_id":"evt_01test","event_type":"transaction.completed"}`, map[string]string{"Paddle-Signature": "ts=1700000000;h1=f3201a354cfcd9b0e365e6d5fcbdf7fea3923c1219c4cbc55f29ec66b02eed51"})},
		{"twilio with a changed param", "twilio", Options{Secrets: []string{"twilio_test_token"}}, at,
			reqURL("POST", "https://example.com/twilio/sms", "MessageSid=SM123&From=%2B15550001111&To=%2B15550002222&Body=Bye", map[string]string{"X-Twilio-Signature": "jhERA+ZCEcC34xez9AikhwZJE0U="})},
		{"twilio at another path", "twilio", Options{Secrets: []string{"twilio_test_token"}}, at,
			reqURL("POST", "https://example.com/twilio/voice", "MessageSid=SM123&From=%2B15550001111&To=%2B15550002222&Body=Hi", map[string]string{"X-Twilio-Signature": "jhERA+ZCEcC34xez9AikhwZJE0U="})},
		{"kiwify without signature", "kiwify", Options{Secrets: []string{"kiwify_test_token"}}, at,
			reqURL("POST", "https://x/in/kiwify", `{"order_id":"ord_1"}`, nil)},
		{"hotmart wrong token", "hotmart", Options{Secrets: []string{"hottok_1"}}, at,
			reqURL("POST", "https://x/in/hotmart", `{"id":"x"}`, map[string]string{"X-HOTMART-HOTTOK": "hottok_2"})},
		{"asaas missing token", "asaas", Options{Secrets: []string{"asaas_tok"}}, at,
			reqURL("POST", "https://x/in/asaas", `{"id":"x"}`, nil)},
		{"evolution expired jwt", "evolution", Options{Secrets: []string{"evo_jwt_key"}}, at.Add(20 * time.Minute),
			reqURL("POST", "https://x/in/evo", `{}`, map[string]string{"Authorization": "Bearer " + evoJWT("evo_jwt_key", at, at.Add(600*time.Second))})},
		{"evolution jwt with another key", "evolution", Options{Secrets: []string{"evo_jwt_key"}}, at,
			reqURL("POST", "https://x/in/evo", `{}`, map[string]string{"Authorization": "Bearer " + evoJWT("other", at, at.Add(600*time.Second))})},
		{"evolution wrong path secret", "evolution", Options{Secrets: []string{"evo_secret"}}, at,
			pathToken(reqURL("POST", "https://x/in/evo/nope", `{}`, nil), "nope")},
		{"eduzz wrong", "eduzz", Options{Secrets: []string{"eduzz_test_key"}}, at,
			reqURL("POST", "https://x/in/eduzz", `{"id":"z"}`, map[string]string{"x-signature": "666a38a71fe83358c6e30bd55f3137588e709f6c6d16dc9be3e73a657da16cba"})},
		{"shopify old secret only", "shopify", Options{Secrets: []string{"shpss_new"}}, at,
			reqURL("POST", "https://x/in/shop", `{"id":820982911946154508,"email":"jon@example.com"}`, map[string]string{"X-Shopify-Hmac-Sha256": "LnwdZPLBbdjkBwPD/lDL1/rYEGby/GHPtL1aAH6Dxjc="})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := mustNew(t, c.preset, c.opts).Verify(c.r, c.now); !errors.Is(err, ErrSignature) {
				t.Fatalf("Verify = %v, want ErrSignature", err)
			}
		})
	}
}

func TestHandshakes(t *testing.T) {
	wa := Describe(mustNew(t, "whatsapp", Options{Secrets: []string{"s"}, VerifyToken: "vt"}))
	get := reqURL("GET", "https://x/in/wa?hub.mode=subscribe&hub.verify_token=vt&hub.challenge=1158201444", "", nil)
	reply, ok, err := wa.Handshake(get, time.Now())
	if err != nil || !ok || reply.Status != 200 || string(reply.Body) != "1158201444" {
		t.Fatalf("WhatsApp handshake: %+v %v %v", reply, ok, err)
	}
	bad := reqURL("GET", "https://x/in/wa?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1", "", nil)
	if _, ok, err := wa.Handshake(bad, time.Now()); !ok || !errors.Is(err, ErrSignature) {
		t.Fatalf("wrong verify token: %v %v", ok, err)
	}
	if _, ok, _ := wa.Handshake(reqURL("POST", "https://x/in/wa", "{}", nil), time.Now()); ok {
		t.Fatal("a POST is not a WhatsApp handshake")
	}

	sl := Describe(mustNew(t, "slack", Options{Secrets: []string{"slack_test_signing_secret"}}))
	post := reqURL("POST", "https://x/in/slack", `{"type":"url_verification","challenge":"abc123"}`, map[string]string{
		"X-Slack-Request-Timestamp": "1700000000", "X-Slack-Signature": "v0=5ae3cc8ebb76d9022906ab319981baef8f461f855c77416d78c93414a3e1911c"})
	reply, ok, err = sl.Handshake(post, time.Unix(1700000000, 0))
	if err != nil || !ok || string(reply.Body) != "abc123" {
		t.Fatalf("Slack url_verification (vector): %+v %v %v", reply, ok, err)
	}
	post.Header.Set("X-Slack-Signature", "v0=00")
	if _, ok, err := sl.Handshake(post, time.Unix(1700000000, 0)); !ok || !errors.Is(err, ErrSignature) {
		t.Fatalf("unsigned url_verification: %v %v", ok, err)
	}
}

// A realistic WhatsApp batch: 1000 updates, statuses repeating the same
// wamid across sent, delivered and read. Each (id, status) is its own event;
// each carries Meta's envelope with just its update.
func TestWhatsAppBatchSplitsPerUpdate(t *testing.T) {
	body, want := whatsappBatch(1000)
	p := mustNew(t, "whatsapp", Options{Secrets: []string{"s"}})
	items, err := p.Items(&Request{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1000 {
		t.Fatalf("%d items, want 1000", len(items))
	}
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it.Key] {
			t.Fatalf("key %q twice", it.Key)
		}
		seen[it.Key] = true
		sub, err := p.Items(&Request{Body: it.Body})
		if err != nil || len(sub) != 1 || sub[0].Key != it.Key {
			t.Fatalf("an item's body is not a one-update WhatsApp payload with the same key: %s (%v, %+v)", it.Body, err, sub)
		}
		if !strings.Contains(string(it.Body), `"phone_number_id":"PNID"`) {
			t.Fatalf("item lost the metadata: %s", it.Body)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("missing key %q", k)
		}
	}
}

// whatsappBatch builds n updates: inbound messages, and statuses for
// outbound wamids, each going sent → delivered → read.
func whatsappBatch(n int) ([]byte, map[string]bool) {
	want := map[string]bool{}
	var msgs, statuses []string
	for i := 0; len(msgs)+len(statuses) < n; i++ {
		if i%4 == 0 {
			id := fmt.Sprintf("wamid.IN%04d", i)
			msgs = append(msgs, fmt.Sprintf(`{"from":"5511999990000","id":%q,"timestamp":"1700000000","type":"text","text":{"body":"caf\u00e9 %d"}}`, id, i))
			want[id] = true
			continue
		}
		out := fmt.Sprintf("wamid.OUT%04d", i/4)
		st := []string{"sent", "delivered", "read"}[i%4-1]
		statuses = append(statuses, fmt.Sprintf(`{"id":%q,"status":%q,"timestamp":"1700000001","recipient_id":"5511999990000"}`, out, st))
		want[out+":"+st] = true
	}
	value := func(list string, items []string) string {
		return fmt.Sprintf(`{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550001111","phone_number_id":"PNID"},%q:[%s]}}`, list, strings.Join(items, ","))
	}
	body := fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"WABA","changes":[%s,%s]}]}`, value("messages", msgs), value("statuses", statuses))
	return []byte(body), want
}

func TestEvolutionHistorySyncSplitsArrays(t *testing.T) {
	p := mustNew(t, "evolution", Options{Secrets: []string{"s"}})
	body := `{"event":"messages.set","instance":"inst1","data":[{"key":{"id":"A"}},{"key":{"id":"B"}},{"key":{"id":"A"}}],"date_time":"x"}`
	items, err := p.Items(&Request{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, it := range items {
		keys = append(keys, it.Key)
		if !strings.Contains(string(it.Body), `"instance":"inst1"`) || strings.Contains(string(it.Body), `"data":[`) {
			t.Fatalf("item body %s: want the envelope with one data item", it.Body)
		}
	}
	if strings.Join(keys, ",") != "messages.set:inst1:A,messages.set:inst1:B,messages.set:inst1:A" {
		t.Fatalf("keys %v", keys)
	}
}

// Issue 26, item 6, at the presets that build their items (WhatsApp wraps
// each update in Meta's envelope; Evolution repeats its envelope around
// each item of data): a batch whose items would pass MaxItemBytes stops
// with ErrTooLarge before building them, so what Items allocates follows
// the bound, not the batch's length (the bound's 4 times the request, and
// the decoder's and encoder's copies: about 11 times, more under the race
// detector); under the bound it builds them all.
func TestBuiltItemsStopAtTheBound(t *testing.T) {
	big := strings.Repeat("n", 200<<10)
	batches := map[string]func(n int) string{
		"whatsapp": func(n int) string {
			var ms []string
			for i := range n {
				ms = append(ms, fmt.Sprintf(`{"from":"5511900000000","id":"wamid.M%d","type":"text"}`, i))
			}
			return `{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{"contacts":[{"profile":{"name":"` + big +
				`"},"wa_id":"5511900000000"}],"messages":[` + strings.Join(ms, ",") + `]}}]}]}`
		},
		"evolution": func(n int) string {
			var ds []string
			for i := range n {
				ds = append(ds, fmt.Sprintf(`{"key":{"id":"M%d"}}`, i))
			}
			return `{"event":"messages.upsert","instance":"i","extra":"` + big + `","data":[` + strings.Join(ds, ",") + `]}`
		},
	}
	for name, batch := range batches {
		p := mustNew(t, name, Options{Secrets: []string{"s"}})
		for _, n := range []int{1, 8, 100, 1000} {
			body := batch(n)
			bound := 4*int64(len(body)) + 64<<10
			r := req(body, nil)
			r.MaxItemBytes = bound
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			items, err := p.Items(r)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			var held int64
			for _, it := range items {
				held += int64(len(it.Body))
			}
			t.Logf("%s, %d items (%d KiB): %d built, err %v, %d KiB allocated", name, n, len(body)>>10, len(items), err, alloc>>10)
			switch {
			case n <= 3 && (err != nil || len(items) != n):
				t.Errorf("%s, %d items: %d built, %v; want all, under the bound", name, n, len(items), err)
			case n > 4 && !errors.Is(err, ErrTooLarge):
				t.Errorf("%s, %d items of %d KiB each: %v, want ErrTooLarge", name, n, len(big)>>10, err)
			}
			if held > bound {
				t.Errorf("%s, %d items: they hold %d bytes, over the bound %d", name, n, held, bound)
			}
			if limit := uint64(24 * len(body)); alloc > limit {
				t.Errorf("%s, %d items: %d KiB allocated for a %d KiB request, want under %d KiB", name, n, alloc>>10, len(body)>>10, limit>>10)
			}
		}
	}
}

// A Standard Webhooks secret is the base64 after whsec_: one with nothing
// after it keys the HMAC with no bytes, which anybody can compute. It is
// refused as an empty secret is, not taken to verify forgeries.
func TestAStandardWebhooksSecretWithNoKeyIsRefused(t *testing.T) {
	for _, preset := range []string{"standard-webhooks", "svix"} {
		for _, secret := range []string{"whsec_", ""} {
			if _, err := New(preset, Options{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", secret}}); err == nil || !strings.Contains(err.Error(), "secrets[1]") {
				t.Errorf("%s with secret %q: New = %v, want an error naming secrets[1]", preset, secret, err)
			}
		}
	}
	if _, err := DecodeStandardSecret("whsec_"); err == nil {
		t.Error(`DecodeStandardSecret("whsec_") = nil error; a destination would sign with an empty key`)
	}
}

// Mercado Pago signs the data.id in the URL it calls: a request whose
// query was dropped on the way fails with an answer that says so, not
// only "does not match", which sends its user to check the secret.
func TestMercadoPagoWithoutTheQuerySaysWhy(t *testing.T) {
	mp := mustNew(t, "mercadopago", Options{Secrets: []string{"mp_test_secret"}})
	r := reqURL("POST", "https://x/in/mp", `{"type":"payment","action":"payment.updated","data":{"id":"123456"}}`, map[string]string{
		"x-signature": "ts=1742505638683,v1=b1cc1a34bd2768e117d85d1b9babb722d32cfd2df1b359ef809170500556d3c7", "x-request-id": "bb56a2f1-6aae-46ac-982e-9dcd3581d08e"})
	err := mp.Verify(r, time.UnixMilli(1742505638683))
	if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "no ?data.id=") {
		t.Fatalf("Verify = %v, want ErrSignature saying the URL has no ?data.id=", err)
	}
}

// TestDescribeReadsEveryTrait holds Describe to the optional interfaces:
// a preset that implements one has it in its traits as New returns it,
// through the wrapper that replaces its key and type rules, and a preset
// that implements none has none.
func TestDescribeReadsEveryTrait(t *testing.T) {
	for _, name := range Names() {
		opts := Options{Secrets: []string{"whsec_c2VjcmV0X3NlY3JldA=="}, VerifyToken: "tok", Unsigned: true, Key: []string{"json:id"}, Type: []string{"json:type"}}
		p, err := New(name, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		inner, err := presets[name](opts)
		if err != nil {
			t.Fatal(err)
		}
		tr := Describe(p)
		_, fw := inner.(Forwarder)
		_, ps := inner.(PathSecreter)
		_, hs := inner.(Handshaker)
		_, ga := inner.(GetAccepter)
		_, ct := inner.(ContentTyper)
		_, or := inner.(Orderer)
		for _, c := range []struct {
			what      string
			has, read bool
		}{
			{"Forwarder", fw, len(tr.Forward) > 0},
			{"PathSecreter", ps, tr.PathSecret},
			{"Handshaker", hs, tr.Handshake != nil},
			{"GetAccepter", ga, tr.AcceptsGet != nil},
			{"ContentTyper", ct, tr.ContentType != nil},
			{"Orderer", or, tr.Order.Entity != ""},
		} {
			if c.has != c.read {
				t.Errorf("%s: implements %s %v, but its traits say %v", name, c.what, c.has, c.read)
			}
		}
	}
	if tr := Describe(mustNew(t, "stripe", Options{Secrets: []string{"s3cret"}})); tr.Order != (OrderDefault{Entity: "json:data.object.id", Version: "json:created", Unit: UnixSeconds}) {
		t.Errorf("stripe's order: %+v", tr.Order)
	}
	if tr := Describe(mustNew(t, "github", Options{Secrets: []string{"s3cret"}})); len(tr.Forward) == 0 || tr.Order.Entity != "" {
		t.Errorf("github: forwards X-GitHub-Event and names no entity: %+v", tr)
	}
}
