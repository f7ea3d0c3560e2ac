package provider

import (
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

var updateVerdicts = flag.Bool("update-verdicts", false, "rewrite testdata/verify_verdicts.txt from what Verify says now")

// signatureField is where each HMAC preset carries its signature: a header,
// or (kiwify) the query parameter "?signature".
var signatureField = map[string]string{
	"stripe": "Stripe-Signature", "github": "X-Hub-Signature-256", "whatsapp": "X-Hub-Signature-256",
	"shopify": "X-Shopify-Hmac-Sha256", "slack": "X-Slack-Signature", "paddle": "Paddle-Signature",
	"mercadopago": "x-signature", "standard-webhooks": "webhook-signature", "svix": "svix-signature",
	"pagarme": "X-Hub-Signature", "kiwify": "?signature", "eduzz": "x-signature", "generic": "X-Signature",
	"generic-base64": "X-Sig", "twilio": "X-Twilio-Signature",
}

// signatureMutations turn a signed request's signature field into another
// value: valid encodings of wrong signatures, wrong lengths, encodings that
// do not decode, extra entries, nothing at all. Each one's verdict (and
// its error's words) is what a provider's engineer sees.
var signatureMutations = []struct {
	name string
	f    func(string) string
}{
	{"as signed", func(s string) string { return s }},
	{"upper case", strings.ToUpper},
	{"lower case", strings.ToLower},
	{"empty", func(string) string { return "" }},
	{"last char dropped", func(s string) string { return s[:len(s)-1] }},
	{"last two dropped", func(s string) string { return s[:len(s)-2] }},
	{"00 appended", func(s string) string { return s + "00" }},
	{"0 appended", func(s string) string { return s + "0" }},
	{"== appended", func(s string) string { return s + "==" }},
	{"AAAA appended", func(s string) string { return s + "AAAA" }},
	{"newline inside", func(s string) string { return s[:len(s)/2] + "\n" + s[len(s)/2:] }},
	{"spaces around", func(s string) string { return " " + s + " " }},
	{"last four AAAA", func(s string) string { return s[:len(s)-4] + "AAAA" }},
	{"last four 0000", func(s string) string { return s[:len(s)-4] + "0000" }},
	{"last four zzzz", func(s string) string { return s[:len(s)-4] + "zzzz" }},
	{"first digit flipped", flipFirstDigit},
	{"hex to base64", reencode(hex.DecodeString, base64.StdEncoding.EncodeToString)},
	{"base64 to hex", reencode(base64.StdEncoding.DecodeString, hex.EncodeToString)},
	{"then ,v1=00", func(s string) string { return s + ",v1=00" }},
	{"then ;h1=00", func(s string) string { return s + ";h1=00" }},
	{"then ,v1=", func(s string) string { return s + ",v1=" }},
	{"then ;h1=", func(s string) string { return s + ";h1=" }},
	{"then v1,AAAA", func(s string) string { return s + " v1,AAAA" }},
	{"then v1,", func(s string) string { return s + " v1," }},
	{"then v1a,AAAA", func(s string) string { return s + " v1a,AAAA" }},
	{"v1=00, before", func(s string) string { return "v1=00," + s }},
	{"h1=00; before", func(s string) string { return "h1=00;" + s }},
	{"v1,AAAA before", func(s string) string { return "v1,AAAA " + s }},
	{"doubled with ,", func(s string) string { return s + "," + s }},
	{"doubled with ;", func(s string) string { return s + ";" + s }},
	{"doubled with space", func(s string) string { return s + " " + s }},
}

// flipFirstDigit changes the first digit after the last '=' or ','
// (base64 padding aside): a valid encoding of another signature, of the
// right length.
func flipFirstDigit(s string) string {
	i := strings.LastIndexAny(strings.TrimRight(s, "="), "=,") + 1
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '8':
			return s[:i] + string(c+1) + s[i+1:]
		case c == '9':
			return s[:i] + "0" + s[i+1:]
		}
	}
	return s
}

// reencode re-encodes the part after the last '=' or ',' (base64 padding
// aside), when it decodes.
func reencode(decode func(string) ([]byte, error), encode func([]byte) string) func(string) string {
	return func(s string) string {
		trimmed := strings.TrimRight(s, "=")
		i := strings.LastIndexAny(trimmed, "=,") + 1
		b, err := decode(s[i:])
		if err != nil {
			return s + "!"
		}
		return s[:i] + encode(b)
	}
}

// verdicts is every HMAC preset's verdict on requests signed with either of
// its two secrets (a rotation) or a third it does not have, with the
// signature mutated every way, and on a changed body.
func verdicts(t *testing.T) string {
	now := time.Unix(1700000000, 0)
	secrets := []string{benchSecret, "whsec_dGhlIG5ldyBzZWNyZXQgb2YgdGhlIHJvdGF0aW9u"}
	other := "whsec_bm90IGEgc2VjcmV0IG9mIHRoaXMgc291cmNl"
	var out strings.Builder
	for _, c := range hmacPresets {
		opts := c.opts
		opts.Secrets = secrets
		p, err := New(c.preset, opts)
		if err != nil {
			t.Fatal(err)
		}
		field := signatureField[c.name]
		for si, secret := range append(secrets, other) {
			for _, m := range signatureMutations {
				r := signedRequest(t, p, c.preset, secret, now)
				if q, ok := strings.CutPrefix(field, "?"); ok {
					query := r.URL.Query()
					query.Set(q, m.f(query.Get(q)))
					r.URL.RawQuery = query.Encode()
				} else {
					r.Header.Set(field, m.f(r.Header.Get(field)))
				}
				fmt.Fprintf(&out, "%s\tsecret %d\t%s\t%s\n", c.name, si, m.name, verdict(p.Verify(r, now)))
			}
			r := signedRequest(t, p, c.preset, secret, now)
			r.Body = append(r.Body[:len(r.Body):len(r.Body)], ' ')
			fmt.Fprintf(&out, "%s\tsecret %d\tbody changed\t%s\n", c.name, si, verdict(p.Verify(r, now)))
		}
		r := signedRequest(t, p, c.preset, secrets[0], now)
		if strings.HasPrefix(field, "?") {
			r.URL.RawQuery = ""
		} else {
			r.Header.Del(field)
		}
		fmt.Fprintf(&out, "%s\tsignature missing\t%s\n", c.name, verdict(p.Verify(r, now)))
	}
	return out.String()
}

func verdict(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}

// TestVerifyVerdicts holds every HMAC preset to the verdicts, and the
// words of its errors, that testdata/verify_verdicts.txt records: written
// before presets kept their HMACs keyed between requests, it is what that
// change must not alter.
func TestVerifyVerdicts(t *testing.T) {
	got := verdicts(t)
	const path = "testdata/verify_verdicts.txt"
	if *updateVerdicts {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d verdicts, %s records %d", len(gotLines), path, len(wantLines))
	}
	for i := range gotLines {
		if gotLines[i] != wantLines[i] {
			t.Errorf("got  %s\nwant %s", gotLines[i], wantLines[i])
		}
	}
}
