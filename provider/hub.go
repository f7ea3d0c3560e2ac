package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// hubMACs are the HMAC-SHA256s of the scheme GitHub and Meta share.
func hubMACs(opts Options) keyedHMACs {
	return newKeyedHMACs(sha256.New, secretBytes(opts.Secrets))
}

// verifyHubSignature checks X-Hub-Signature-256: sha256=<hex HMAC-SHA256>,
// the scheme GitHub and Meta share.
func verifyHubSignature(r *Request, macs keyedHMACs) error {
	header := r.Header.Get("X-Hub-Signature-256")
	if header == "" {
		return signatureError("missing X-Hub-Signature-256 header")
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	sig := macs.offered()
	if !ok || !sig.addHex(hexSig) {
		return signatureError("X-Hub-Signature-256 is not sha256=<hex>")
	}
	if !macs.matchAny(&sig, r.Body) {
		return signatureError("X-Hub-Signature-256 does not match")
	}
	return nil
}

func signHub(r *Request, secret string) {
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(hmacWith(sha256.New, []byte(secret), r.Body)))
}
