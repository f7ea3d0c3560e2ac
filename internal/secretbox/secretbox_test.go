package secretbox_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/secretbox"
)

func newKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

func mustParse(t *testing.T, keys ...string) *secretbox.Box {
	t.Helper()
	b, err := secretbox.Parse(strings.Join(keys, ","))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Hostile and ordinary secrets alike come back byte for byte, and the
// sealed form holds none of them in clear.
func TestSealOpensAsWritten(t *testing.T) {
	b := mustParse(t, newKey(t))
	for _, s := range []string{"", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "a,b\nc\x00d", "\xff\xfe invalid utf-8", "é ünïcödé 😀", strings.Repeat("x", 1<<16), "ohsb1:looks sealed"} {
		sealed := b.Seal(s, "source/acme/secrets")
		if len(s) > 3 && strings.Contains(sealed, s) {
			t.Fatalf("the sealed value holds the secret in clear")
		}
		if !secretbox.Sealed(sealed) {
			t.Fatalf("Sealed(%q) is false", sealed)
		}
		got, err := b.Open(sealed, "source/acme/secrets")
		if err != nil || got != s {
			t.Fatalf("Open = %q, %v; want %q", got, err, s)
		}
	}
	if a, c := b.Seal("same", "x"), b.Seal("same", "x"); a == c {
		t.Fatal("two seals of one secret are equal: the nonce repeats")
	}
}

// The first key seals, every key opens: a value sealed under the old key
// still opens after the new one is put first, and a value sealed under
// the new one does not open with the old alone.
func TestRotation(t *testing.T) {
	oldKey, newK := newKey(t), newKey(t)
	before := mustParse(t, oldKey)
	sealedOld := before.Seal("s3cret", "c")
	after := mustParse(t, newK, oldKey)
	if got, err := after.Open(sealedOld, "c"); err != nil || got != "s3cret" {
		t.Fatalf("after rotation, the old value: %q, %v", got, err)
	}
	sealedNew := after.Seal("s3cret", "c")
	if _, err := before.Open(sealedNew, "c"); !errors.Is(err, secretbox.ErrOpen) || !strings.Contains(err.Error(), "not among the configured") {
		t.Fatalf("a value sealed with a key the box lacks: %v", err)
	}
	if got, err := mustParse(t, newK).Open(sealedNew, "c"); err != nil || got != "s3cret" {
		t.Fatalf("the new key alone: %q, %v", got, err)
	}
	if ids := after.KeyIDs(); len(ids) != 2 || ids[1] != before.KeyIDs()[0] {
		t.Fatalf("key ids %v, want the old key's id second", ids)
	}
}

// Every byte of a sealed value is covered: each one flipped, the value cut
// short or grown, or opened for another object, is refused, never opened
// to other bytes.
func TestTamperedIsRefused(t *testing.T) {
	b := mustParse(t, newKey(t))
	sealed := b.Seal("s3cret", "source/acme/secrets")
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(sealed, "ohsb1:"))
	for i := range raw {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x01
		if got, err := b.Open("ohsb1:"+base64.RawURLEncoding.EncodeToString(bad), "source/acme/secrets"); !errors.Is(err, secretbox.ErrOpen) {
			t.Fatalf("byte %d flipped: %q, %v", i, got, err)
		}
	}
	for _, v := range []string{"", "ohsb1:", "ohsb1:!!!", sealed[:len(sealed)-1], sealed + "AA", "plain secret", strings.Repeat("ohsb1:", 100)} {
		if _, err := b.Open(v, "source/acme/secrets"); !errors.Is(err, secretbox.ErrOpen) {
			t.Fatalf("Open(%q): %v", v, err)
		}
	}
	if _, err := b.Open(sealed, "source/other/secrets"); !errors.Is(err, secretbox.ErrOpen) {
		t.Fatalf("opened for another object: %v", err)
	}
}

// A key that is not 32 bytes of standard base64 is an error at start,
// naming which key and never quoting it; no key at all is ErrNoKeys, whose
// message says how to set one.
func TestMalformedKeysAreRefused(t *testing.T) {
	good := newKey(t)
	short := base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))
	for _, tc := range []struct{ keys, want string }{
		{good + "," + short, "secret key 2: 16 bytes, want 32"},
		{"not base64 at all!", "secret key 1: not standard base64"},
		{base64.URLEncoding.EncodeToString(make([]byte, 31)) + "_-", "not standard base64"},
		{good + "," + good, "secret key 2: given twice"},
	} {
		_, err := secretbox.Parse(tc.keys)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.keys, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), good) {
			t.Errorf("the error quotes a key: %v", err)
		}
	}
	for _, empty := range []string{"", " , ,\n"} {
		if _, err := secretbox.Parse(empty); !errors.Is(err, secretbox.ErrNoKeys) || !strings.Contains(err.Error(), "ONCEHOOK_SECRET_KEYS") {
			t.Errorf("Parse(%q) = %v, want ErrNoKeys saying how to set one", empty, err)
		}
	}
	if b := mustParse(t, " "+good+" ", "\n"+newKey(t)); len(b.KeyIDs()) != 2 {
		t.Fatal("spaces and new lines around keys are not ignored")
	}
}

// The keys come from the environment or a file the config names, not
// both; a file's keys may be on lines of their own.
func TestLoad(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == secretbox.EnvKeys {
				return v
			}
			return ""
		}
	}
	if _, err := secretbox.Load(env(""), ""); !errors.Is(err, secretbox.ErrNoKeys) {
		t.Fatalf("nothing set: %v", err)
	}
	b, err := secretbox.Load(env(k1+","+k2), "")
	if err != nil || len(b.KeyIDs()) != 2 {
		t.Fatalf("from the environment: %v", err)
	}
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(k2+"\n"+k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fb, err := secretbox.Load(env(""), file)
	if err != nil || fb.KeyIDs()[0] != b.KeyIDs()[1] {
		t.Fatalf("from a file: %v", err)
	}
	if _, err := secretbox.Load(env(k1), file); err == nil || !strings.Contains(err.Error(), "one place") {
		t.Fatalf("both set: %v", err)
	}
	if _, err := secretbox.Load(env("short"), ""); err == nil || !strings.Contains(err.Error(), "ONCEHOOK_SECRET_KEYS: secret key 1") {
		t.Fatalf("a bad key in the environment: %v", err)
	}
	if _, err := secretbox.Load(env(""), file+".missing"); err == nil || errors.Is(err, secretbox.ErrNoKeys) {
		t.Fatalf("a missing file: %v", err)
	}
}

// A fingerprint tells secrets apart, is stable, and holds no part of the
// secret.
func TestFingerprint(t *testing.T) {
	a, b := secretbox.Fingerprint("whsec_one_secret_value"), secretbox.Fingerprint("whsec_another_value")
	if a == b || a != secretbox.Fingerprint("whsec_one_secret_value") || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+12 {
		t.Fatalf("fingerprints %q and %q", a, b)
	}
	if strings.Contains(a, "whsec") {
		t.Fatal("the fingerprint holds the secret")
	}
}
