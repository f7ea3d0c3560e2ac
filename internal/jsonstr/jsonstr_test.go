package jsonstr_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/oncehook/oncehook/internal/jsonstr"
)

// literals are JSON strings (quotes included) with every kind of escape, a
// surrogate pair, lone surrogates of each half, and raw bytes that are not
// UTF-8.
var literals = []string{
	`""`, `"plain"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u00E9"`,
	`"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, `"x\ud800y"`, `"\ud800\u0041"`,
	`"\udc00\ud800"`, `"\ud800\ud800\udc00"`, "\"caf\xe9\"", "\"\xff\xfe\"",
	"\"\x7f\"", `"\u0000"`, `"evt_\ufffd"`,
}

// Replace decodes as encoding/json does, byte for byte, so a filter means
// what it would mean against the decoded body.
func TestReplaceDecodesAsEncodingJSON(t *testing.T) {
	for _, lit := range literals {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%q: %v", lit, err)
		}
		got := jsonstr.AppendUnquoted(nil, []byte(lit[1:len(lit)-1]), jsonstr.Replace)
		if string(got) != want {
			t.Errorf("%q: got %q, encoding/json %q", lit, got, want)
		}
	}
}

// Lossless keeps apart what encoding/json folds into U+FFFD: each lone
// surrogate and each raw byte decodes to a text of its own.
func TestLosslessKeepsWhatReplaceFolds(t *testing.T) {
	cases := map[string]string{
		`"\ud800"`:             "\xed\xa0\x80",
		`"\udc00"`:             "\xed\xb0\x80",
		`"\ud83d\ude00"`:       "\U0001F600",
		`"\ud800\u0041"`:       "\xed\xa0\x80A",
		"\"caf\xe9\"":          "caf\xe9",
		`"evt_\ufffd"`:         "evt_\ufffd",
		`"\ud800\ud800\udc00"`: "\xed\xa0\x80\U00010000",
		`"a\"b\\c\/\n"`:        "a\"b\\c/\n",
	}
	seen := map[string]string{}
	for lit, want := range cases {
		got := string(jsonstr.AppendUnquoted(nil, []byte(lit[1:len(lit)-1]), jsonstr.Lossless))
		if got != want {
			t.Errorf("%s: got %q, want %q", lit, got, want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s decode to one text %q", lit, other, got)
		}
		seen[got] = lit
	}
}

// An escape cut short (which a checked literal never has) is kept as
// written, never read past the end.
func TestCutEscapesAreKept(t *testing.T) {
	for _, in := range []string{`\`, `\u`, `\u12`, `\uzzzz`, `\ud800\u`, `\ud800\udc`} {
		for _, m := range []jsonstr.Mode{jsonstr.Replace, jsonstr.Lossless} {
			_ = jsonstr.AppendUnquoted(nil, []byte(in), m) // must not panic
		}
	}
}

func ExampleAppendUnquoted() {
	lone := []byte(`evt_\ud800`)
	fmt.Printf("%+q\n", jsonstr.AppendUnquoted(nil, lone, jsonstr.Replace))
	fmt.Printf("%+q\n", jsonstr.AppendUnquoted(nil, lone, jsonstr.Lossless))
	// Output:
	// "evt_\ufffd"
	// "evt_\xed\xa0\x80"
}
