package provider

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
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
	// Percent-encoding can push a key over the limit.
	if got := SafeKey(strings.Repeat("\n", MaxKeyLen/3+1)); !strings.HasPrefix(got, DigestPrefix) {
		t.Fatalf("an encoded key over the limit: %q", got)
	}
}

// FuzzSafeKey: whatever a provider sends as an id, the key is a valid
// header value of bounded size, and two different ids never share one.
func FuzzSafeKey(f *testing.F) {
	for _, s := range []string{"", "evt_1", "a\x00b", "a%00b", "caf\xe9", "café", strings.Repeat("x", 600), "\r\n"} {
		f.Add(s, s+"%")
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
	})
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
