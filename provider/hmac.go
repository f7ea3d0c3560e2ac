package provider

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"strconv"
	"sync"
	"time"
)

// checkTimestamp rejects a signed unix-seconds timestamp that is too old or
// too far in the future, with ErrSignatureAge: a preset calls it once the
// signature matched.
func checkTimestamp(ts string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return signatureError("timestamp %q is not a unix time", ts)
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > tolerance {
		return ageError("timestamp is %s old, beyond the %s tolerance", d.Truncate(time.Second), tolerance)
	}
	if -d > tolerance {
		return ageError("timestamp is %s in the future, beyond the %s tolerance", (-d).Truncate(time.Second), tolerance)
	}
	return nil
}

// ageError is an ErrSignatureAge, which is an ErrSignature too, and says
// only what an ErrSignature says.
func ageError(format string, args ...any) error {
	return signatureAge{signatureError(format, args...)}
}

type signatureAge struct{ error }

func (e signatureAge) Is(target error) bool { return target == ErrSignatureAge }
func (e signatureAge) Unwrap() error        { return e.error }

// hmacWith returns HMAC-h(key, parts...): a signature as a provider makes
// it (Sign). Verify never calls it: it would key a new HMAC per request,
// which keyedHMACs does once per preset.
func hmacWith(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// keyedHMACs are the HMACs of a preset's secrets (rotation), each kept
// keyed between requests: hmac.New allocates and hashes the key's two
// pads on every call, and Reset only restores them. Every HMAC preset
// builds its keyedHMACs once, when it is built, and verifies with them.
type keyedHMACs struct {
	pools []*sync.Pool // one per secret: a pooled HMAC is never shared across secrets
	size  int          // the HMAC's length, the only length that can match
}

// keyedHMAC is one secret's HMAC and room to feed and read it without
// allocating.
type keyedHMAC struct {
	mac     hash.Hash
	scratch [64]byte
	sum     [sha512.Size]byte
}

func newKeyedHMACs(h func() hash.Hash, secrets [][]byte) keyedHMACs {
	ks := keyedHMACs{pools: make([]*sync.Pool, len(secrets)), size: h().Size()}
	for i, s := range secrets {
		ks.pools[i] = &sync.Pool{New: func() any { return &keyedHMAC{mac: hmac.New(h, s)} }}
	}
	return ks
}

// offered returns an empty set of signatures for these HMACs.
func (ks keyedHMACs) offered() offered { return offered{size: ks.size} }

// matchAny reports whether any offered signature is the HMAC, under any
// secret, of the message made of parts then body, comparing in constant
// time: every secret's HMAC is computed and compared with every offered
// signature, with no early exit that timing could reveal.
func (ks keyedHMACs) matchAny(o *offered, body []byte, parts ...string) bool {
	ok := false
	for _, pool := range ks.pools {
		k := pool.Get().(*keyedHMAC)
		k.mac.Reset()
		for _, p := range parts {
			k.writeString(p)
		}
		k.mac.Write(body)
		sum := k.mac.Sum(k.sum[:0])
		for i := range min(o.kept, len(o.room)) {
			if hmac.Equal(sum, o.room[i][:o.size]) {
				ok = true
			}
		}
		for _, sig := range o.more {
			if hmac.Equal(sum, sig) {
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

// offered are the signatures a request carries, decoded on the caller's
// stack. Only those as long as the HMAC are kept, since no other can
// match; given counts every one the request gave, and decoded every one
// that decoded, whatever its length (even empty), for the presets that
// tell "no signature" and "not hex" from "no match" (see lacking).
type offered struct {
	size    int
	given   int
	decoded int
	kept    int
	room    [4][sha512.Size]byte
	more    [][]byte // the kept ones beyond room: a header with many signatures
}

// lacking says what header (named as the provider names it) lacks: its
// timestamp (ts, written tsField) or a signature (written sigField); or
// that every signature it gave is not valid encoding (hex, base64). Nil
// when it has a timestamp and a signature that decoded, which may still
// not match. A signature that is not hex is not a missing one: the
// operator looking at "no v1=" checks the wrong thing.
func (o *offered) lacking(header, ts, tsField, sigField, encoding string) error {
	switch {
	case ts == "" && tsField != "":
		return signatureError("%s has no %s", header, tsField)
	case o.given == 0:
		return signatureError("%s has no %s", header, sigField)
	case o.decoded == 0:
		return signatureError("%s's %s is not valid %s", header, sigField, encoding)
	}
	return nil
}

// keep returns where the next signature of the HMAC's length goes.
func (o *offered) keep() []byte {
	o.kept++
	if o.kept <= len(o.room) {
		return o.room[o.kept-1][:o.size]
	}
	o.more = append(o.more, make([]byte, o.size))
	return o.more[len(o.more)-1]
}

// addHex takes s as hex, as hex.DecodeString would (an even number of hex
// digits, none too), and reports whether it decoded.
func (o *offered) addHex(s string) bool {
	o.given++
	if !isHex(s) {
		return false
	}
	o.decoded++
	if len(s) == 2*o.size {
		hexInto(o.keep(), s)
	}
	return true
}

// addBase64 takes s as standard base64, as base64.StdEncoding.DecodeString
// would (padded; \r and \n skipped), and reports whether it decoded.
func (o *offered) addBase64(s string) bool {
	o.given++
	var src [128]byte
	var dst [96]byte // base64.StdEncoding.DecodedLen(len(src))
	var sig []byte
	if len(s) <= len(src) {
		n := copy(src[:], s)
		m, err := base64.StdEncoding.Decode(dst[:], src[:n])
		if err != nil {
			return false
		}
		sig = dst[:m]
	} else {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return false
		}
		sig = b
	}
	o.decoded++
	if len(sig) == o.size {
		copy(o.keep(), sig)
	}
	return true
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
