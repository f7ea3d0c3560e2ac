package config

import (
	"strings"
	"testing"
)

// A source read alone, as the API takes it, is read as the file's are:
// the same field names and checks, its one key rule as a list of one, its
// errors naming its own fields without a file's line, and nothing
// expanded: a "$" in a secret is a "$".
func TestReadSourceAsTheFileReadsIt(t *testing.T) {
	s, err := ReadSource([]byte(`{"name": "a", "preset": "generic", "key": "json:id", "secrets": ["s3c$RET ${HOME}"], "destinations": ["x", {"name": "y", "types": ["order.*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Key) != 1 || s.Key[0] != "json:id" || s.Secrets[0] != "s3c$RET ${HOME}" || len(s.Destinations) != 2 || s.Destinations[1].Types[0] != "order.*" {
		t.Fatalf("read %+v", s)
	}
	for body, want := range map[string]string{
		`{"name": "a", "presett": "stripe"}`:      "presett: unknown field; did you mean preset?",
		`{"name": "a", "window": "soon"}`:         "window:",
		`{"name": "a", "order": {"mdoe": "x"}}`:   "order.mdoe: unknown field",
		`{"name": "a", "secrets": "one"}`:         "secrets: want a list",
		`{"name": "a", "name": "b"}`:              "name: given twice",
		`[]`:                                      "want a JSON object",
		`{"name": "a", "destinations": [[1]]}`:    "destinations[0]",
		"{\"name\": \"a\", \"preset\": \"\x00\"}": "",
	} {
		_, err := ReadSource([]byte(body))
		if want == "" {
			continue // read or refused, never a panic
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "(line") {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// Merge puts the API's objects after the file's, with the file's
// defaults, and refuses a name the file gives, naming both.
func TestMergeKeepsTheFilesNames(t *testing.T) {
	c := &Config{Sources: []Source{{Name: "filed"}}, Destinations: []Destination{{Name: "app"}}}
	m, err := c.Merge([]Source{{Name: "api"}}, []Destination{{Name: "crm"}})
	if err != nil || len(m.Sources) != 2 || m.Sources[1].OnMissingKey != "accept" || m.Destinations[1].Retry.MaxAttempts != 12 || len(c.Sources) != 1 {
		t.Fatalf("merged %+v, %v", m, err)
	}
	if _, err := c.Merge([]Source{{Name: "filed"}}, []Destination{{Name: "app"}}); err == nil ||
		!strings.Contains(err.Error(), "source filed: defined in the config file") || !strings.Contains(err.Error(), "destination app: defined in the config file") {
		t.Fatalf("a name the file gives: %v", err)
	}
}

// A source's public_url is answered as its intake URL and signed over: a
// value that is not an http(s) URL (a line break, an unexpanded
// reference) is refused, in the file and through the API alike.
func TestPublicURLIsAURL(t *testing.T) {
	for _, u := range []string{"\r\nX-Injected: 1", "$${HOME}", "ftp://x/in/t", "/in/t"} {
		_, err := Parse([]byte("sources: [{name: t, preset: twilio, secrets: [s], public_url: \""+u+"\"}]\n"), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), "sources[0].public_url") {
			t.Errorf("public_url %q: %v", u, err)
		}
	}
	if _, err := Parse([]byte("sources: [{name: t, preset: twilio, secrets: [s], public_url: \"https://hooks.example.com/in/t\"}]\n"), func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
}
