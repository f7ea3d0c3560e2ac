package provider

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestKeyedHMACsUnderConcurrentRotation: many goroutines verify at once
// with every HMAC preset, built with two secrets (a rotation), alternating
// requests signed with either secret, with a secret the source does not
// have, and with a changed body, and each verdict must be the one that
// request deserves. A pooled HMAC that were not Reset before use would
// carry the previous message into the next and reject good requests; one
// pool shared across secrets would hand a secret's HMAC to another's turn
// and reject what the other signed. Run under -race.
func TestKeyedHMACsUnderConcurrentRotation(t *testing.T) {
	now := time.Unix(1700000000, 0)
	secrets := []string{benchSecret, "whsec_dGhlIG5ldyBzZWNyZXQgb2YgdGhlIHJvdGF0aW9u"}
	other := "whsec_bm90IGEgc2VjcmV0IG9mIHRoaXMgc291cmNl"
	const workers, rounds = 8, 40
	for _, c := range hmacPresets {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.Secrets = secrets
			p, err := New(c.preset, opts)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range workers {
				// Each worker's own requests: the order the pooled HMACs
				// see messages in differs from worker to worker.
				type signed struct {
					r    *Request
					good bool
				}
				var rs []signed
				for i, s := range []string{secrets[w%2], other, secrets[(w+1)%2]} {
					r := signedRequest(t, p, c.preset, s, now)
					rs = append(rs, signed{r, i != 1})
					if c.preset != "mercadopago" { // its body is not signed
						changed := *r
						changed.Body = append(bytes.Clone(r.Body), strings.Repeat(" ", w+1)...)
						rs = append(rs, signed{&changed, false})
					}
				}
				wg.Go(func() {
					for round := range rounds {
						for i := range rs {
							s := rs[(i+round)%len(rs)]
							err := p.Verify(s.r, now)
							if s.good && err != nil {
								t.Errorf("worker %d round %d: a request signed with a configured secret was refused: %v", w, round, err)
								return
							}
							if !s.good && err == nil {
								t.Errorf("worker %d round %d: a request that is not signed with a configured secret was accepted", w, round)
								return
							}
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestMatchAnyIsAFreshHMAC: keyedHMACs say what an HMAC keyed anew for
// the one message says, for every hash the presets use, with parts and a
// body, whatever was verified before with the same pooled HMACs.
func TestMatchAnyIsAFreshHMAC(t *testing.T) {
	secrets := [][]byte{[]byte("first secret"), []byte("second, a rotation's")}
	for _, h := range []struct {
		name string
		new  func() hash.Hash
	}{{"sha1", sha1.New}, {"sha256", sha256.New}, {"sha512", sha512.New}} {
		ks := newKeyedHMACs(h.new, secrets)
		for i, m := range []struct {
			parts []string
			body  string
		}{
			{nil, ""}, {nil, "body"}, {[]string{"1700000000", "."}, `{"id":"evt_1"}`},
			{[]string{strings.Repeat("long part ", 20), "", ":"}, strings.Repeat("x", 1000)}, {[]string{"manifest;"}, ""},
		} {
			var message []byte
			for _, p := range m.parts {
				message = append(message, p...)
			}
			message = append(message, m.body...)
			for si, s := range secrets {
				want := hmacWith(h.new, s, message)
				for _, offer := range []struct {
					name  string
					sigs  []string
					match bool
				}{
					{"hex", []string{hex.EncodeToString(want)}, true},
					{"upper hex after others", []string{"00", "", strings.Repeat("ab", len(want)), strings.ToUpper(hex.EncodeToString(want))}, true},
					{"base64", []string{"b64:" + base64.StdEncoding.EncodeToString(want)}, true},
					{"truncated", []string{hex.EncodeToString(want[:len(want)-1])}, false},
					{"other secret's", []string{hex.EncodeToString(hmacWith(h.new, []byte("not configured"), message))}, false},
					{"one digit off", []string{"0" + hex.EncodeToString(want)[1:], "1" + hex.EncodeToString(want)[1:]}, want[0]>>4 == 0 || want[0]>>4 == 1},
					{"beyond the room on the stack", append(strings.Fields(strings.Repeat(strings.Repeat("cd", len(want))+" ", 6)), hex.EncodeToString(want)), true},
					{"none of many", strings.Fields(strings.Repeat(strings.Repeat("cd", len(want))+" ", 6)), false},
				} {
					o := ks.offered()
					for _, sig := range offer.sigs {
						if b, ok := strings.CutPrefix(sig, "b64:"); ok {
							o.addBase64(b)
						} else {
							o.addHex(sig)
						}
					}
					if got := ks.matchAny(&o, []byte(m.body), m.parts...); got != offer.match {
						t.Errorf("%s message %d secret %d %s: match %t, want %t", h.name, i, si, offer.name, got, offer.match)
					}
				}
			}
		}
	}
}

// FuzzOffered: a signature decodes (and is kept, when as long as the
// HMAC) exactly when encoding/hex or encoding/base64 decodes it, to the
// same bytes: the presets' words for a signature that is not hex or not
// base64 stay what they were.
func FuzzOffered(f *testing.F) {
	for _, s := range []string{"", "00", "0", "zz", "AAAA", "AA==", "A===", "AB\ncd==", "LnwdZPLBbdjkBwPD/lDL1/rYEGby/GHPtL1aAH6Dxjc=",
		strings.Repeat("ab", 32), strings.Repeat("A", 44), strings.Repeat("A\r\n", 50) + "AA==", strings.Repeat("A", 200)} {
		f.Add(s)
	}
	ks := newKeyedHMACs(sha256.New, [][]byte{[]byte("s")})
	f.Fuzz(func(t *testing.T, s string) {
		for _, enc := range []struct {
			name   string
			add    func(*offered, string) bool
			decode func(string) ([]byte, error)
		}{
			{"hex", (*offered).addHex, hex.DecodeString},
			{"base64", (*offered).addBase64, base64.StdEncoding.DecodeString},
		} {
			o := ks.offered()
			ok := enc.add(&o, s)
			want, err := enc.decode(s)
			if ok != (err == nil) || o.decoded != map[bool]int{true: 1}[ok] {
				t.Fatalf("%s %q: decoded %t (%d), encoding/%s: %v", enc.name, s, ok, o.decoded, enc.name, err)
			}
			kept := ok && len(want) == sha256.Size
			if (o.kept == 1) != kept || kept && !hmac.Equal(o.room[0][:sha256.Size], want) {
				t.Fatalf("%s %q: kept %d %x, want %s", enc.name, s, o.kept, o.room[0][:sha256.Size], fmt.Sprint(want))
			}
		}
	})
}
