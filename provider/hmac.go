package provider

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"strconv"
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
