package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oncehook/oncehook/store"
)

// decodeEntity undoes StorableEntity's "%" form: what proves it keeps
// distinct entities distinct.
func decodeEntity(t *testing.T, s string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(s, "%")
	if !ok {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		if rest[i] != '%' {
			b.WriteByte(rest[i])
			continue
		}
		v, err := strconv.ParseUint(rest[i+1:i+3], 16, 8)
		if err != nil {
			t.Fatalf("%q: a %% not followed by two hex digits", s)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String()
}

// Invariant 23 for order entities: every entity is written in a form
// every store holds (UTF-8, no NUL, bounded), an entity any store holds
// as it is is written as it is, one entity is always written the same,
// and two distinct entities are never written alike.
func TestStorableEntityKeepsDistinctEntitiesDistinct(t *testing.T) {
	long := strings.Repeat("x", store.MaxEntityLen+1)
	sum := sha256.Sum256([]byte(long))
	for entity, want := range map[string]string{
		"ord_1": "ord_1", "pedido-ção": "pedido-ção", "a b\r\n\t": "a b\r\n\t", "\ufffd": "\ufffd",
		strings.Repeat("y", store.MaxEntityLen): strings.Repeat("y", store.MaxEntityLen),
		"a\x00b":                                "%a%00b", "a\xffb": "%a%FFb", "a\xed\xa0\x80b": "%a%ED%A0%80b", "100%": "100%", "100%\x00": "%100%25%00",
		"%a%00b": "%%25a%2500b", "sha256:x": "%sha256:x", long: "sha256:" + hex.EncodeToString(sum[:]),
	} {
		if got := store.StorableEntity(entity); got != want {
			t.Errorf("%.40q: %.60q, want %.60q", entity, got, want)
		}
	}

	alphabet := []string{"\x00", "%", "\xff", "\xed", "\xa0", "\x80", "a", "é", "\ufffd", "sha256:", "2", "5", strings.Repeat("z", 100)}
	rng := rand.New(rand.NewPCG(23, 41))
	seen := map[string]string{}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		entity := b.String()
		got := store.StorableEntity(entity)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 || len(got) > store.MaxEntityLen {
			t.Fatalf("%q is written %q: not UTF-8, a NUL, or over %d bytes", entity, got, store.MaxEntityLen)
		}
		if again := store.StorableEntity(entity); again != got {
			t.Fatalf("%q is written %q, then %q", entity, got, again)
		}
		if other, ok := seen[got]; ok && other != entity {
			t.Fatalf("%q and %q are both written %q", other, entity, got)
		}
		seen[got] = entity
		if !strings.HasPrefix(got, "sha256:") && decodeEntity(t, got) != entity {
			t.Fatalf("%q is written %q, which decodes to %q", entity, got, decodeEntity(t, got))
		}
	}
}
