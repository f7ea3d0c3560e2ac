package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// NewLeaseToken names one lease. Outcomes carry it back, so that a worker
// whose lease expired and was taken over cannot record over the new owner.
func NewLeaseToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// EncodeHeader is how backends store an event's forwarded headers.
func EncodeHeader(h http.Header) string {
	if len(h) == 0 {
		return "{}"
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// DecodeHeader reads what EncodeHeader stored. A value that does not decode
// gives no headers: they are a courtesy to the destination, never a reason
// to hold a delivery back.
func DecodeHeader(s string) http.Header {
	var h http.Header
	if json.Unmarshal([]byte(s), &h) != nil || len(h) == 0 {
		return nil
	}
	return h
}
