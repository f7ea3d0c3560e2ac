package transform

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// A script reads the values its destination's config names (transform.env) as process.env.NAME, the way
// Hookdeck's scripts read their environment. They are fixed when the script is compiled (a reload compiles
// anew), so they keep a run a pure function of the event (invariant 21); they are secrets (an API key the
// script puts in a header), so what oncehook shows of a run (its errors, its logs, a preview of what it
// sends) has them masked (Script.Hide).
//
// A name the config does not set is caught twice: Compile refuses a script that names one literally
// (process.env.NAME, process.env["NAME"], const {NAME} = process.env), so `oncehook validate`, `oncehook
// transform test` and a reload say so before any event meets it; and a read the text does not show (a
// name computed at run time) fails that run with an error naming the variable, not a TypeError about
// undefined further on, nor the ReferenceError of a sandbox with no process at all.

// envName is what a name in transform.env may be: an environment variable's name, which is also a
// JavaScript identifier (process.env.NAME reads it).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidEnvName says whether name may be one of transform.env's names.
func ValidEnvName(name string) bool { return envName.MatchString(name) }

// envRead is a literal read of one of process.env's values: process.env.NAME, process.env?.NAME,
// process.env["NAME"] (any quote); spaces and line breaks between the parts, as JavaScript allows.
var envRead = regexp.MustCompile(`\bprocess\s*(?:\?\.|\.)\s*env\s*(?:(?:\?\.|\.)\s*([A-Za-z_$][A-Za-z0-9_$]*)|(?:\?\.)?\s*\[\s*(?:"([^"\\\n]*)"|'([^'\\\n]*)'|` + "`" + `([^` + "`" + `\\$]*)` + "`" + `)\s*\])`)

// envDestructure is a destructuring of process.env: {A, B: b, C = "x"} = process.env.
var envDestructure = regexp.MustCompile(`\{([^{}]*)\}\s*=\s*process\s*(?:\?\.|\.)\s*env\b`)

// envRef is one name a script reads from process.env, where its text says so.
type envRef struct {
	name         string
	line, column int
}

// envRefs are the names source reads from process.env literally, in order, with where (its comments are
// not read: a name in one is not a read).
func envRefs(source string) []envRef {
	code := withoutComments(source)
	var refs []envRef
	at := func(off int) (int, int) {
		before := source[:off]
		return strings.Count(before, "\n") + 1, off - strings.LastIndexByte(before, '\n')
	}
	for _, m := range envRead.FindAllStringSubmatchIndex(code, -1) {
		for g := 1; g <= 4; g++ {
			if m[2*g] >= 0 {
				line, col := at(m[0])
				refs = append(refs, envRef{name: code[m[2*g]:m[2*g+1]], line: line, column: col})
				break
			}
		}
	}
	for _, m := range envDestructure.FindAllStringSubmatchIndex(code, -1) {
		line, col := at(m[0])
		for _, part := range strings.Split(code[m[2]:m[3]], ",") {
			name := strings.TrimSpace(part)
			if i := strings.IndexAny(name, ":="); i >= 0 {
				name = strings.TrimSpace(name[:i])
			}
			name = strings.Trim(name, `"'`)
			if name == "" || strings.HasPrefix(name, "...") || strings.HasPrefix(name, "[") {
				continue
			}
			refs = append(refs, envRef{name: name, line: line, column: col})
		}
	}
	slices.SortStableFunc(refs, func(a, b envRef) int {
		if a.line != b.line {
			return a.line - b.line
		}
		return a.column - b.column
	})
	return refs
}

// withoutComments is source with its comments blanked (each byte a space, a line break kept), so that
// offsets and lines in it are source's. Strings and template literals are kept, and a comment's
// markers inside one are not a comment. A regular expression literal is not told from a division: one
// that holds a quote may hide the rest of its line from the check (never more: a quoted string ends
// at its line's end), which the run-time check still covers.
func withoutComments(source string) string {
	b := []byte(source)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := strings.Index(source[i+2:], "*/")
			stop := len(b)
			if end >= 0 {
				stop = i + 2 + end + 2
			}
			for ; i < stop; i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
			i--
		case c == '"' || c == '\'' || c == '`':
			for i++; i < len(b) && b[i] != c; i++ {
				if b[i] == '\\' {
					i++
				} else if b[i] == '\n' && c != '`' {
					break
				}
			}
		}
	}
	return string(b)
}

// checkEnv is the error of a script that literally reads a name env does not set, nil when it reads
// none: the first such read, at its line, and every name it reads that is missing.
func (s *Script) checkEnv(source string, env map[string]string) error {
	var missing []string
	var first envRef
	for _, r := range envRefs(source) {
		if _, ok := env[r.name]; ok || slices.Contains(missing, r.name) {
			continue
		}
		if missing == nil {
			first = r
		}
		missing = append(missing, r.name)
	}
	if missing == nil {
		return nil
	}
	msg := "process.env." + strings.Join(missing, ", process.env.")
	if len(missing) == 1 {
		msg += " is read but not set: the destination's transform.env " + envHas(env) + " (add it there"
	} else {
		msg += " are read but not set: the destination's transform.env " + envHas(env) + " (add them there"
	}
	return &Error{Script: s.name, Kind: KindEnv, Line: first.line, Column: first.column,
		Message: msg + ", as NAME: ${NAME} to take a value from the gateway's environment)"}
}

// EnvNames are the names the script's env sets (Options.Env), sorted; never their values.
func (s *Script) EnvNames() []string { return slices.Sorted(maps.Keys(s.opts.Env)) }

// envHas says which names env sets, for an error (never their values).
func envHas(env map[string]string) string {
	if len(env) == 0 {
		return "sets none"
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	return "sets only " + strings.Join(names, ", ")
}

// envJSON is env as the sandbox's __oncehook_env takes it, with the sentence its missing names' error
// ends with.
func envJSON(env map[string]string) (string, error) {
	for k := range env {
		if !ValidEnvName(k) {
			return "", fmt.Errorf("env: %q is not a variable's name (letters, digits and _, not first a digit)", k)
		}
	}
	if env == nil {
		env = map[string]string{}
	}
	b, err := json.Marshal(struct {
		Values map[string]string `json:"values"`
		Has    string            `json:"has"`
	}{env, envHas(env)})
	return string(b), err
}
