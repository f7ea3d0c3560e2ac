// Package secretbox keeps the secrets given through the API (a source's
// provider secrets, a destination's signing secret) encrypted at rest,
// with keys the operator provides: AES-256-GCM, each sealed value naming
// the key that sealed it, so that keys rotate. The first key seals; every
// key opens. A rotation is: put the new key first and keep the old one
// after it; once every stored value was sealed again (any update does),
// drop the old key.
//
// The keys come from ONCEHOOK_SECRET_KEYS (comma-separated, each 32 bytes
// in standard base64: `openssl rand -base64 32`) or from a file the config
// names (secret_keys_file), one or more keys the same way, commas or new
// lines between them. A key that is not 32 bytes of base64 is an error at
// start, naming which one, never a gateway that cannot read what it
// stored.
//
// What is shown of a secret (the API's answers, the logs, the dashboard)
// is its Fingerprint, never the secret.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// EnvKeys is the environment variable the keys are read from.
const EnvKeys = "ONCEHOOK_SECRET_KEYS"

// HowToSet says how an operator gives the gateway a key, for an error
// that needs one.
const HowToSet = "set " + EnvKeys + " to a 32-byte key in standard base64 (generate one with `openssl rand -base64 32`; " +
	"several, comma-separated, rotate: the first encrypts, every one decrypts), or name a file of them in the config's secret_keys_file, and restart"

// prefix starts every sealed value: its format's version, so that a later
// format can be told apart, and a value that is not sealed is never
// taken for one.
const prefix = "ohsb1:"

// ErrNoKeys is Load's answer when no key is configured: the API then
// refuses secrets (HowToSet).
var ErrNoKeys = errors.New("no secret keys: " + HowToSet)

// ErrOpen is a sealed value that no key opens: sealed with a key that is
// no longer configured, or changed since it was sealed.
var ErrOpen = errors.New("a stored secret cannot be decrypted")

// Box seals and opens secrets with a list of keys. It holds no state
// beyond its keys and is safe for concurrent use.
type Box struct {
	keys []key
}

type key struct {
	id   [8]byte // sha256 of the key, cut: names it in a sealed value without revealing it
	aead cipher.AEAD
}

// New returns a Box over raw keys, each 32 bytes; the first seals.
func New(raw ...[]byte) (*Box, error) {
	if len(raw) == 0 {
		return nil, ErrNoKeys
	}
	b := &Box{}
	seen := map[[8]byte]bool{}
	for i, k := range raw {
		if len(k) != 32 {
			return nil, fmt.Errorf("secret key %d: %d bytes, want 32 (AES-256)", i+1, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("secret key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secret key %d: %w", i+1, err)
		}
		sum := sha256.Sum256(append([]byte("oncehook secret key id\x00"), k...))
		var id [8]byte
		copy(id[:], sum[:])
		if seen[id] {
			return nil, fmt.Errorf("secret key %d: given twice", i+1)
		}
		seen[id] = true
		b.keys = append(b.keys, key{id: id, aead: aead})
	}
	return b, nil
}

// Parse reads keys written as ONCEHOOK_SECRET_KEYS takes them: standard
// base64, separated by commas (or new lines, as a file may have them);
// spaces around each are ignored. Nothing at all is ErrNoKeys.
func Parse(text string) (*Box, error) {
	var raw [][]byte
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
	for _, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(f)
		if err != nil {
			// Never quoted: it is a key.
			return nil, fmt.Errorf("secret key %d: not standard base64 (want 32 random bytes, e.g. `openssl rand -base64 32`)", len(raw)+1)
		}
		raw = append(raw, k)
	}
	return New(raw...)
}

// Load reads the keys from the environment's ONCEHOOK_SECRET_KEYS (env,
// os.Getenv's shape) or from file (the config's secret_keys_file), not
// both: which key seals first would be a guess. Neither is ErrNoKeys,
// which a gateway starts without (the API then refuses secrets); a key
// that does not parse, or a file that cannot be read, is an error that
// stops the start.
func Load(env func(string) string, file string) (*Box, error) {
	fromEnv := strings.TrimSpace(env(EnvKeys))
	switch {
	case fromEnv != "" && file != "":
		return nil, fmt.Errorf("secret keys: both %s and secret_keys_file %s are set: give the keys in one place", EnvKeys, file)
	case file != "":
		text, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("secret keys: %w", err)
		}
		b, err := Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("secret_keys_file %s: %w", file, err)
		}
		return b, nil
	case fromEnv != "":
		b, err := Parse(fromEnv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeys, err)
		}
		return b, nil
	}
	return nil, ErrNoKeys
}

// Seal encrypts secret with the first key, bound to context (what the
// secret belongs to, "source/acme/secrets"): a sealed value copied to
// another object's row does not open there.
func (b *Box) Seal(secret, context string) string {
	k := b.keys[0]
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("secretbox: the system's random source failed: " + err.Error()) // crypto/rand never fails on supported systems
	}
	out := append(k.id[:], nonce...)
	out = k.aead.Seal(out, nonce, []byte(secret), []byte(context))
	return prefix + base64.RawURLEncoding.EncodeToString(out)
}

// Open decrypts a value Seal returned for the same context, with
// whichever configured key sealed it. A value no key opens (sealed with
// a key no longer given, altered, or for another context) wraps ErrOpen.
func (b *Box) Open(sealed, context string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return "", fmt.Errorf("%w: not a sealed value", ErrOpen)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("%w: not a sealed value", ErrOpen)
	}
	for _, k := range b.keys {
		if len(raw) < len(k.id)+k.aead.NonceSize()+k.aead.Overhead() || [8]byte(raw[:8]) != k.id {
			continue
		}
		nonce := raw[8 : 8+k.aead.NonceSize()]
		plain, err := k.aead.Open(nil, nonce, raw[8+len(nonce):], []byte(context))
		if err != nil {
			return "", fmt.Errorf("%w: it was altered, or sealed for another object", ErrOpen)
		}
		return string(plain), nil
	}
	return "", fmt.Errorf("%w: sealed with a key that is not among the configured ones (%s): put the key that sealed it back", ErrOpen, EnvKeys)
}

// Sealed reports whether v is a value Seal returned (by its form).
func Sealed(v string) bool { return strings.HasPrefix(v, prefix) }

// KeyIDs are the keys' ids, the first the one that seals, in hex: what
// doctor and the logs may show of the keys.
func (b *Box) KeyIDs() []string {
	out := make([]string, len(b.keys))
	for i, k := range b.keys {
		out[i] = hex.EncodeToString(k.id[:])
	}
	return out
}

// Fingerprint is what is shown of a secret: "sha256:" and the first 12
// hex digits of its SHA-256, enough to tell two secrets apart and to
// check which one is configured against a copy, and too few to find a
// secret of a provider's length by trying. It is the same for a secret
// wherever it is shown (the API, the dashboard), whatever key sealed it.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:6])
}
