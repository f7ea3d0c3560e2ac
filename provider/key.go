package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// How event keys are written. Two rules keep docs/design.md's invariant 12 (distinct
// events keep distinct keys, and every accepted key is deliverable):
//
//  1. A key built from several parts escapes each part before joining them
//     with ":" (a "\" becomes "\\" and a ":" becomes "\:"), so parts that
//     contain ":" can never run together: ("x:y", "z") is `x\:y:z` and
//     ("x", "y:z") is `x:y\:z`. A part without ":" or "\" is written as it
//     is, so most keys read exactly as the provider's ids.
//  2. Every key is made safe to carry in a header (Idempotency-Key) and
//     bounded in size by SafeKey, at intake, before it is claimed.
//
// A JSON number and a string of the same digits make the same part (1 and
// "1" are both "1"): a provider may serialise one id both ways, and treating
// them as different events would deliver one event twice.

// MaxKeyLen is the longest key stored and sent as it is. A longer key is
// replaced by its digest (see SafeKey): dedup stays exact, and no event is
// dropped for the size of its id.
const MaxKeyLen = 512

// DigestPrefix starts every key that SafeKey replaced by a digest.
const DigestPrefix = "sha256:"

// joinKey joins key parts, escaped, with ":", or returns "" when any part is
// missing: a partial key would merge events that differ.
func joinKey(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if p == "" {
			return ""
		}
		if i > 0 {
			b.WriteByte(':')
		}
		escapeKeyPart(&b, p)
	}
	return b.String()
}

func escapeKeyPart(b *strings.Builder, p string) {
	if !strings.ContainsAny(p, `:\`) {
		b.WriteString(p)
		return
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == ':' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
}

// SafeKey returns key as it is stored, answered and sent as Idempotency-Key:
//   - every byte outside printable ASCII (controls, space, DEL, and every
//     byte of a non-ASCII or invalid UTF-8 sequence), and "%" itself, is
//     percent-encoded (%0D, %C3%A9, %25): the result is a valid header value
//     that no proxy trims or folds, and different keys stay different;
//   - a result longer than MaxKeyLen becomes DigestPrefix + the hex SHA-256
//     of the key, which is deterministic, so every copy of the event still
//     gets the same key; a key that starts with DigestPrefix itself has that
//     prefix's colon encoded (sha256%3A...), so it never meets a digest.
//
// A key that is already safe and short is returned unchanged.
func SafeKey(key string) string {
	enc := key
	if needsEscape(key) {
		var b strings.Builder
		b.Grow(len(key) + 16)
		const hexdig = "0123456789ABCDEF"
		for i := 0; i < len(key); i++ {
			c := key[i]
			if c > 0x20 && c < 0x7f && c != '%' {
				b.WriteByte(c)
				continue
			}
			b.WriteByte('%')
			b.WriteByte(hexdig[c>>4])
			b.WriteByte(hexdig[c&15])
		}
		enc = b.String()
	}
	if len(enc) > MaxKeyLen {
		sum := sha256.Sum256([]byte(key))
		return DigestPrefix + hex.EncodeToString(sum[:])
	}
	if strings.HasPrefix(enc, DigestPrefix) {
		// A key sent as "sha256:<64 hex>" would be the digest of some long
		// key, and one would be answered as the other's duplicate: its
		// colon is encoded (no raw key holds "%3A": % is itself encoded).
		enc = DigestPrefix[:len(DigestPrefix)-1] + "%3A" + enc[len(DigestPrefix):]
	}
	return enc
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c >= 0x7f || c == '%' {
			return true
		}
	}
	return false
}
