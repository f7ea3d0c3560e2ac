package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// verifyHubSignature checks X-Hub-Signature-256: sha256=<hex HMAC-SHA256>,
// the scheme GitHub and Meta share.
func verifyHubSignature(r *Request, secrets [][]byte) error {
	header := r.Header.Get("X-Hub-Signature-256")
	if header == "" {
		return signatureError("missing X-Hub-Signature-256 header")
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	sig := decodeHex(hexSig)
	if !ok || sig == nil {
		return signatureError("X-Hub-Signature-256 is not sha256=<hex>")
	}
	if !signedBy(sha256.New, secrets, r.Body).matches(sig) {
		return signatureError("X-Hub-Signature-256 does not match")
	}
	return nil
}

func signHub(r *Request, secret string) {
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(hmacWith(sha256.New, []byte(secret), r.Body)))
}
