package provider

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"hash"
	"strings"
)

// hmacWith returns HMAC-h(key, parts...).
func hmacWith(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// hmacs are the signatures every configured secret would give a message.
type hmacs [][]byte

// signedBy computes, for each secret, the HMAC-h of the message made of
// parts, so that a signature can be checked against all of them (rotation).
func signedBy(h func() hash.Hash, secrets [][]byte, parts ...[]byte) hmacs {
	out := make(hmacs, len(secrets))
	for i, s := range secrets {
		out[i] = hmacWith(h, s, parts...)
	}
	return out
}

// matches reports whether any of sigs equals any expected signature,
// comparing in constant time.
func (expected hmacs) matches(sigs ...[]byte) bool { return anyMatch(expected, sigs) }

// tokenMatches compares a static token (Hotmart's hottok, Asaas's access
// token, a secret in the URL) with every secret in constant time. Both sides
// are hashed first so the comparison does not reveal the secret's length.
func tokenMatches(got string, secrets [][]byte) bool {
	if got == "" {
		return false
	}
	g := sha256.Sum256([]byte(got))
	ok := false
	for _, s := range secrets {
		want := sha256.Sum256(s)
		if hmac.Equal(g[:], want[:]) {
			ok = true
		}
	}
	return ok
}

func secretBytes(secrets []string) [][]byte {
	out := make([][]byte, len(secrets))
	for i, s := range secrets {
		out[i] = []byte(s)
	}
	return out
}

// decodeJSON decodes body into v, reporting ErrMalformed when it is not JSON.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return malformed("body is not JSON: %v", err)
	}
	return nil
}

// jsonText turns a decoded JSON scalar into key text: strings as they are,
// numbers in their original digits. Anything else is "".
func jsonText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	}
	return ""
}

// joinKey joins key parts with ":", or returns "" when any part is missing:
// a partial key would merge events that differ.
func joinKey(parts ...string) string {
	for _, p := range parts {
		if p == "" {
			return ""
		}
	}
	return strings.Join(parts, ":")
}

// single is the one item of a request that is not a batch.
func single(key string, body []byte) []Item { return []Item{{Key: key, Body: body}} }

// bodyField returns a top-level field of a JSON body as key text.
func bodyField(body []byte, field string) (string, error) {
	var doc map[string]any
	if err := decodeJSON(body, &doc); err != nil {
		return "", err
	}
	return jsonText(doc[field]), nil
}
