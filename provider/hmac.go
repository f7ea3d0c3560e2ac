package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"sync"
	"time"
)

// anyMatch reports whether any candidate signature equals any expected one,
// comparing in constant time. Candidates that do not decode never match.
func anyMatch(expected [][]byte, candidates [][]byte) bool {
	ok := false
	for _, e := range expected {
		for _, c := range candidates {
			if hmac.Equal(e, c) {
				ok = true // keep going: no early exit that timing could reveal
			}
		}
	}
	return ok
}

func decodeHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

func decodeBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// checkTimestamp rejects a signed unix-seconds timestamp that is too old or
// too far in the future.
func checkTimestamp(ts string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return signatureError("timestamp %q is not a unix time", ts)
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > tolerance {
		return signatureError("timestamp is %s old, beyond the %s tolerance", d.Truncate(time.Second), tolerance)
	}
	if -d > tolerance {
		return signatureError("timestamp is %s in the future, beyond the %s tolerance", (-d).Truncate(time.Second), tolerance)
	}
	return nil
}

// keyedHMACs are the HMACs of a preset's secrets (rotation), each kept
// keyed between requests: hmac.New allocates and hashes the key's two
// pads on every call, and Reset only restores them.
type keyedHMACs []*sync.Pool

// keyedHMAC is one secret's HMAC and room to feed and read it without
// allocating.
type keyedHMAC struct {
	mac     hash.Hash
	scratch [64]byte
	sum     [64]byte
}

func newKeyedHMACs(h func() hash.Hash, secrets [][]byte) keyedHMACs {
	out := make(keyedHMACs, len(secrets))
	for i, s := range secrets {
		out[i] = &sync.Pool{New: func() any { return &keyedHMAC{mac: hmac.New(h, s)} }}
	}
	return out
}

// matchAny reports whether any of sigs is the HMAC, under any secret, of
// the message made of prefix, sep and body, comparing in constant time
// (as anyMatch: every pair is compared, no early exit).
func (ks keyedHMACs) matchAny(sigs [][sha256.Size]byte, prefix, sep string, body []byte) bool {
	ok := false
	for _, pool := range ks {
		k := pool.Get().(*keyedHMAC)
		k.mac.Reset()
		k.writeString(prefix)
		k.writeString(sep)
		k.mac.Write(body)
		sum := k.mac.Sum(k.sum[:0])
		for i := range sigs {
			if hmac.Equal(sum, sigs[i][:]) {
				ok = true
			}
		}
		pool.Put(k)
	}
	return ok
}

// writeString feeds s through the scratch buffer: a string converted to
// []byte for an interface's Write is a copy on the heap.
func (k *keyedHMAC) writeString(s string) {
	for len(s) > 0 {
		n := copy(k.scratch[:], s)
		k.mac.Write(k.scratch[:n])
		s = s[n:]
	}
}

// isHex reports whether s is what hex.DecodeString takes without error:
// an even number of hex digits (none too).
func isHex(s string) bool {
	if len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if hexDigits[s[i]] > 0xf {
			return false
		}
	}
	return true
}

// hexInto decodes s (isHex, len(dst)*2 digits) into dst.
func hexInto(dst []byte, s string) {
	for i := range dst {
		dst[i] = hexDigits[s[2*i]]<<4 | hexDigits[s[2*i+1]]
	}
}

// hexDigits is each byte's value as a hex digit, 0xff when it is none.
var hexDigits = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c], t[c-'a'+'A'] = c-'a'+10, c-'a'+10
	}
	return t
}()
