package provider

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// keyOf returns the key of the single item preset p finds in r.
func keyOf(t *testing.T, p Preset, r *Request) string {
	t.Helper()
	items, err := p.Items(r)
	if err != nil {
		t.Fatalf("Items: %v", err)
	}
	if len(items) != 1 {
		t.Fatalf("%d items", len(items))
	}
	return items[0].Key
}

// Invariant 12: parts that contain ":" must not run together. Before parts
// were escaped, each pair below made one key, and the second event of each
// pair was answered "duplicate" and lost.
func TestCompositeKeysDoNotCollide(t *testing.T) {
	generic := mustNew(t, "generic", Options{Unsigned: true, Key: []string{"json:a", "json:b"}})
	mp := mustNew(t, "mercadopago", Options{Secrets: []string{"s"}})
	kiwify := mustNew(t, "kiwify", Options{Secrets: []string{"s"}})
	evo := mustNew(t, "evolution", Options{Secrets: []string{"s"}})
	twilio := mustNew(t, "twilio", Options{Secrets: []string{"s"}})
	form := func(v url.Values) *Request {
		return &Request{Method: "POST", URL: &url.URL{Path: "/in/t"}, Header: http.Header{}, Body: []byte(v.Encode())}
	}
	pairs := []struct {
		name string
		p    Preset
		a, b *Request
	}{
		{"generic", generic, req(`{"a":"x:y","b":"z"}`, nil), req(`{"a":"x","b":"y:z"}`, nil)},
		{"generic backslash", generic, req(`{"a":"x\\","b":":z"}`, nil), req(`{"a":"x\\:","b":"z"}`, nil)},
		{"mercadopago", mp,
			req(`{"type":"payment","action":"payment.updated","data":{"id":"1:2"}}`, nil),
			req(`{"type":"payment:1","action":"payment.updated","data":{"id":"2"}}`, nil)},
		{"mercadopago action", mp,
			req(`{"type":"payment","action":"x","data":{"id":"1:y"}}`, nil),
			req(`{"type":"payment","action":"y:x","data":{"id":"1"}}`, nil)},
		{"kiwify", kiwify,
			req(`{"order_id":"o:1","webhook_event_type":"order_approved","order_status":"paid"}`, nil),
			req(`{"order_id":"o","webhook_event_type":"1:order_approved","order_status":"paid"}`, nil)},
		{"evolution instance chosen by the user", evo,
			req(`{"event":"messages.upsert","instance":"shop:a","data":{"key":{"id":"M1"}}}`, nil),
			req(`{"event":"messages.upsert","instance":"shop","data":{"key":{"id":"a:M1"}}}`, nil)},
		{"evolution update vs upsert", evo,
			req(`{"event":"e","instance":"i","data":{"keyId":"K","status":"READ"}}`, nil),
			req(`{"event":"e","instance":"i","data":{"id":"K:READ"}}`, nil)},
		{"twilio", twilio,
			form(url.Values{"MessageSid": {"SM1:queued"}, "MessageStatus": {"sent"}}),
			form(url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"queued:sent"}})},
		{"twilio sid alone vs sid and status", twilio,
			form(url.Values{"MessageSid": {"SM1:sent"}}),
			form(url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}})},
	}
	for _, c := range pairs {
		t.Run(c.name, func(t *testing.T) {
			ka, kb := keyOf(t, c.p, c.a), keyOf(t, c.p, c.b)
			if ka == "" || kb == "" || ka == kb {
				t.Fatalf("keys %q and %q: two different events must get two different keys", ka, kb)
			}
		})
	}
}

// Keys without ":" or "\" read as before: the provider's ids joined by ":".
func TestCompositeKeysReadAsTheProvidersIDs(t *testing.T) {
	generic := mustNew(t, "generic", Options{Unsigned: true, Key: []string{"json:a", "json:b"}})
	if k := keyOf(t, generic, req(`{"a":"x","b":"y"}`, nil)); k != "x:y" {
		t.Fatalf("key %q, want x:y", k)
	}
	if k := keyOf(t, generic, req(`{"a":"x:y","b":"z"}`, nil)); k != `x\:y:z` {
		t.Fatalf("key %q, want x\\:y:z", k)
	}
	one := mustNew(t, "generic", Options{Unsigned: true, Key: []string{"json:a"}})
	if k := keyOf(t, one, req(`{"a":"urn:x:1"}`, nil)); k != "urn:x:1" {
		t.Fatalf("a one-part key is not escaped: %q", k)
	}
}

// A deliberate choice, documented in the README: a JSON number and a string
// of the same digits are one id, since a provider may write it either way.
func TestNumberAndStringOfTheSameDigitsAreOneKey(t *testing.T) {
	p := mustNew(t, "generic", Options{Unsigned: true, Key: []string{"json:a", "json:b"}})
	if ka, kb := keyOf(t, p, req(`{"a":1,"b":"1"}`, nil)), keyOf(t, p, req(`{"a":"1","b":1}`, nil)); ka != kb || ka != "1:1" {
		t.Fatalf("keys %q, %q: want both 1:1", ka, kb)
	}
}

func TestSafeKey(t *testing.T) {
	long := strings.Repeat("k", MaxKeyLen+1)
	cases := []struct{ in, want string }{
		{"evt_1", "evt_1"},
		{`x\:y:z`, `x\:y:z`},
		{"o2\r\nX-Evil: 1", "o2%0D%0AX-Evil:%201"},
		{"a\x00b", "a%00b"},
		{"café", "caf%C3%A9"},
		{"caf\xe9", "caf%E9"},
		{"100%", "100%25"},
		{"a%20b", "a%2520b"},
		{strings.Repeat("k", MaxKeyLen), strings.Repeat("k", MaxKeyLen)},
		// A key that looks like a digest is not one (found from outside:
		// it was answered as the duplicate of the long key it names).
		{DigestPrefix + "622b", "sha256%3A622b"},
		{"sha256", "sha256"},
		{"sha256%3A622b", "sha256%253A622b"},
	}
	for _, c := range cases {
		if got := SafeKey(c.in); got != c.want {
			t.Errorf("SafeKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	d := SafeKey(long)
	if !strings.HasPrefix(d, DigestPrefix) || len(d) != len(DigestPrefix)+64 || SafeKey(long) != d {
		t.Fatalf("SafeKey of a long key = %q: want a stable digest", d)
	}
	if SafeKey(long+"x") == d {
		t.Fatal("two long keys share a digest")
	}
	if SafeKey(d) == d {
		t.Fatalf("the key %q, sent as it is, meets the digest of a long key", d)
	}
	// Percent-encoding can push a key over the limit.
	if got := SafeKey(strings.Repeat("\n", MaxKeyLen/3+1)); !strings.HasPrefix(got, DigestPrefix) {
		t.Fatalf("an encoded key over the limit: %q", got)
	}
}

// FuzzSafeKey: whatever a provider sends as an id, the key is a valid
// header value of bounded size, and two different ids never share one.
func FuzzSafeKey(f *testing.F) {
	for _, s := range []string{"", "evt_1", "a\x00b", "a%00b", "caf\xe9", "café", strings.Repeat("x", 600), "\r\n",
		"evt_\xed\xa0\x80", "evt_\xed\xaf\xbf", "evt_\xed\xb0\x80", "evt_\ufffd", "evt_\xff", "evt_\U0001F600"} {
		f.Add(s, s+"%")
	}
	f.Add(strings.Repeat("k", MaxKeyLen+1), SafeKey(strings.Repeat("k", MaxKeyLen+1)))
	f.Add("evt_\xed\xa0\x80", "evt_\ufffd")
	f.Add("evt_\xed\xb0\x80", "evt_\xed\xaf\xbf")
	stripe, _ := New("stripe", Options{Secrets: []string{"s"}})
	fromJSON := func(t *testing.T, id string, escape bool) string {
		body := `{"id":` + jsonLiteral(id, escape) + `,"object":"event"}`
		items, err := stripe.Items(&Request{Body: []byte(body)})
		if err != nil {
			t.Fatalf("id %q as %s: %v", id, body, err)
		}
		return SafeKey(items[0].Key)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, kb := SafeKey(a), SafeKey(b)
		for i := 0; i < len(ka); i++ {
			if c := ka[i]; c <= ' ' || c >= 0x7f {
				t.Fatalf("SafeKey(%q) = %q holds byte %#x: not printable ASCII", a, ka, c)
			}
		}
		if len(ka) > MaxKeyLen {
			t.Fatalf("SafeKey(%q) is %d bytes", a, len(ka))
		}
		if a != b && ka == kb {
			t.Fatalf("SafeKey(%q) == SafeKey(%q) == %q", a, b, ka)
		}
		// Injectivity from what the provider sent: an id written in JSON,
		// escaped or raw, lone surrogates (as WTF-8 here, as \uD800 in the
		// JSON) and invalid bytes included, gives back exactly its own key,
		// so distinct ids keep distinct keys.
		if got := fromJSON(t, a, false); got != ka {
			t.Fatalf("id %q sent raw: key %q, want %q", a, got, ka)
		}
		if got := fromJSON(t, a, true); got != ka {
			t.Fatalf("id %q sent escaped (%s): key %q, want %q", a, jsonLiteral(a, true), got, ka)
		}
	})
}

// jsonLiteral writes s as a JSON string the way some provider might: its
// WTF-8 surrogates as \uD8xx escapes (a pair that would join is kept raw),
// and, when escape is set, every other non-ASCII character as \u escapes
// too. Invalid bytes are sent raw, as a careless provider would.
func jsonLiteral(s string, escape bool) string {
	var b strings.Builder
	b.WriteByte('"')
	highEscaped := false
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0xed && i+2 < len(s) && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2] >= 0x80 && s[i+2] <= 0xbf {
			r := rune(c&0x0f)<<12 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
			if r >= 0xdc00 && highEscaped {
				b.WriteString(s[i : i+3]) // \uD800\uDC00 would be one character
				highEscaped = false
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
				highEscaped = r < 0xdc00
			}
			i += 3
			continue
		}
		highEscaped = false
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case r == utf8.RuneError && size == 1:
			b.WriteByte(c)
		case escape && r >= 0x80:
			r1, r2 := utf16.EncodeRune(r)
			if r1 == utf8.RuneError {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// Found from outside: ids that differ only in a lone surrogate or an
// invalid byte were all decoded to U+FFFD, so "evt_\ud800", "evt_\udbff",
// "evt_\udc00" and "evt_\ufffd" made one key and three were answered
// "duplicate". Every preset that reads its key from JSON keeps them apart.
func TestLoneSurrogatesKeepIdsDistinct(t *testing.T) {
	ids := []string{`evt_\ud800`, `evt_\udbff`, `evt_\udc00`, `evt_\ufffd`, "evt_\xff", "evt_\xfe", `evt_\ud83d\ude00`}
	presets := []struct {
		p    Preset
		body func(id string) string
	}{
		{mustNew(t, "stripe", Options{Secrets: []string{"s"}}), func(id string) string { return `{"id":"` + id + `"}` }},
		{mustNew(t, "hotmart", Options{Secrets: []string{"s"}}), func(id string) string { return `{"id":"` + id + `","event":"PURCHASE_APPROVED"}` }},
		{mustNew(t, "generic", Options{Unsigned: true, Key: []string{"json:data.id"}}), func(id string) string { return `{"data":{"id":"` + id + `"}}` }},
		{mustNew(t, "whatsapp", Options{Secrets: []string{"s"}}), func(id string) string {
			return `{"entry":[{"changes":[{"field":"messages","value":{"messages":[{"id":"` + id + `"}]}}]}]}`
		}},
		{mustNew(t, "evolution", Options{Secrets: []string{"s"}}), func(id string) string {
			return `{"event":"messages.upsert","instance":"i","data":{"key":{"id":"` + id + `"}}}`
		}},
		{mustNew(t, "slack", Options{Secrets: []string{"s"}}), func(id string) string { return `{"type":"event_callback","event_id":"` + id + `"}` }},
	}
	for _, pc := range presets {
		seen := map[string]string{}
		for _, id := range ids {
			key := SafeKey(keyOf(t, pc.p, req(pc.body(id), nil)))
			if other, ok := seen[key]; ok {
				t.Errorf("%s: ids %q and %q share the key %q", pc.p.Name(), other, id, key)
			}
			seen[key] = id
		}
		// A pair is one character, escaped or not: the same event.
		if a, b := keyOf(t, pc.p, req(pc.body(`evt_\ud83d\ude00`), nil)), keyOf(t, pc.p, req(pc.body("evt_😀"), nil)); a != b {
			t.Errorf("%s: an escaped pair %q and the raw character %q give different keys", pc.p.Name(), a, b)
		}
	}
}

// Found from outside: `{"id":"evt_tg1","object":"event"} garbage` was
// accepted, and later by github and standard-webhooks while stripe,
// whatsapp and generic refused it; a body is one JSON value, at every
// preset alike. Each preset's own sample body, with bytes after it, is
// ErrMalformed (intake's 400); with white space after it, it is what it was.
func TestTrailingBytesAfterTheJSONValueAreMalformedAtEveryPreset(t *testing.T) {
	for _, name := range Names() {
		p := mustNew(t, name, Options{Secrets: []string{fuzzSecret}, Key: keyFor(name)})
		sample, _ := sampleBody(name)
		hdr := map[string]string{"X-GitHub-Delivery": "d1", "webhook-id": "msg_1", "svix-id": "msg_1", "X-GitHub-Event": "push"}
		req := func(body string, h map[string]string) *Request {
			r := req(body, h)
			r.URL = &url.URL{Scheme: "https", Host: "hooks.example.com", Path: "/in/x"}
			return r
		}
		want, err := p.Items(req(string(sample), hdr))
		if err != nil {
			t.Fatalf("%s: its sample body: %v", name, err)
		}
		for _, tail := range []string{" garbage", `{"id":"b"}`, " 1", `"x"`, "]", "\x00"} {
			for _, body := range []string{string(sample) + tail, `{"id":"evt_tg1","object":"event"}` + tail, `[{"id":"a"}]` + tail} {
				if body[0] != '{' && body[0] != '[' {
					continue // a form (twilio's sample): not JSON, the preset's own to read
				}
				if _, err := p.Items(req(body, hdr)); !errors.Is(err, ErrMalformed) {
					t.Errorf("%s: %q: %v, want ErrMalformed", name, body, err)
				}
			}
		}
		if sample[0] != '{' {
			continue // a form: not JSON, the preset's own to read
		}
		got, err := p.Items(req(" \r\n"+string(sample)+"\r\n \t", hdr))
		if err != nil || len(got) != len(want) || got[0].Key != want[0].Key || got[0].Type != want[0].Type {
			t.Errorf("%s: white space around its sample: %+v, %v; want %+v", name, got, err, want)
		}
	}
}

// A malformed body is explained in JSON's words: no Go type names, and JSON
// of another shape is not called "not JSON".
func TestMalformedBodiesAreExplainedWithoutGoInternals(t *testing.T) {
	stripe := mustNew(t, "stripe", Options{Secrets: []string{"s"}})
	whatsapp := mustNew(t, "whatsapp", Options{Secrets: []string{"s"}})
	cases := []struct {
		p    Preset
		body string
		want string
	}{
		{stripe, `[1,2]`, "body is JSON, but a JSON array where a JSON object was expected"},
		{stripe, `{"id":`, "body is not JSON: it ends too early"},
		{stripe, ``, "body is empty"},
		{whatsapp, `{"entry":{"id":1}}`, `its field "entry" is a JSON object where a JSON array was expected`},
		{whatsapp, `{"entry":[{"changes":[{"field":"messages","value":{"messages":{"id":"x"}}}]}]}`, "value.messages (a list of updates) is JSON, but a JSON object where a JSON array was expected"},
	}
	for _, c := range cases {
		_, err := c.p.Items(req(c.body, nil))
		if err == nil || !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: %v, want ErrMalformed", c.body, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") || strings.Contains(msg, "unmarshal") {
			t.Errorf("%s: %q, want it to say %q in JSON's words", c.body, msg, c.want)
		}
	}
	if k := keyOf(t, stripe, req(`{"id":12345}`, nil)); k != "12345" {
		t.Errorf("a numeric id: key %q", k)
	}
}

// Mercado Pago sends payment.updated for every change of one payment
// (approved, then refunded): the same type, data.id and action, told apart
// only by the notification's own id. Keyed without it, the refund was
// answered "duplicate" and never delivered (invariant 12); a retry of one
// notification keeps its key.
func TestMercadoPagoUpdatesOfOnePaymentAreDistinctEvents(t *testing.T) {
	mp := mustNew(t, "mercadopago", Options{Secrets: []string{"s"}})
	approved := keyOf(t, mp, req(`{"id":112233445566,"type":"payment","action":"payment.updated","data":{"id":"1234567890"}}`, nil))
	refunded := keyOf(t, mp, req(`{"id":112233449999,"type":"payment","action":"payment.updated","data":{"id":"1234567890"}}`, nil))
	retried := keyOf(t, mp, req(`{"id":"112233445566","type":"payment","action":"payment.updated","data":{"id":"1234567890"}}`, nil))
	if approved == refunded {
		t.Fatalf("two updates of one payment got one key %q: the second would be answered duplicate and lost", approved)
	}
	if retried != approved {
		t.Fatalf("a retry of one notification got %q, then %q", approved, retried)
	}
	if want := "payment:1234567890:payment.updated:112233445566"; approved != want {
		t.Fatalf("key %q, want %q", approved, want)
	}
}
