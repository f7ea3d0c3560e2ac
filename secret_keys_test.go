package oncehook_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/kinds"
)

// A wrong or malformed secret key is an error at start that names it
// (never quoting it), never a gateway that would answer every provider
// 401 because it cannot read the secrets it stored (#45).
func TestAMalformedSecretKeyStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
	for _, tc := range []struct {
		name, env, file, want string
	}{
		{"short key in the environment", good + ",c2hvcnQ=", "", "ONCEHOOK_SECRET_KEYS: secret key 2: 5 bytes, want 32"},
		{"not base64", "%%%", "", "secret key 1: not standard base64"},
		{"short key in the file", "", keys, "secret_keys_file " + keys + ": secret key 1: 5 bytes"},
		{"missing file", "", filepath.Join(dir, "nope"), "nope"},
		{"both", good, keys, "one place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "store: sqlite://" + filepath.Join(t.TempDir(), "db") + "\nsources: [{name: s, preset: generic, unsigned: true, key: json:id}]\n"
			if tc.file != "" {
				text += "secret_keys_file: " + tc.file + "\n"
			}
			cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			env := func(name string) string {
				if name == "ONCEHOOK_SECRET_KEYS" {
					return tc.env
				}
				return ""
			}
			gw, err := oncehook.New(context.Background(), cfg, oncehook.Options{Kinds: kinds.All(), Getenv: env})
			if err == nil {
				gw.Close()
				t.Fatal("the gateway started")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), good) {
				t.Fatalf("error %q, want %q and no key", err, tc.want)
			}
		})
	}
}
