package config

import (
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// Names a release changed are still read under their old name, with a
// warning, for one release more; the release after that refuses them.
// Each old name meant two things at once: apis: also named the admin
// API's own api: section, and the order mode stale also named the state
// of an older delivery it holds back.

// section is a top-level section's old name and its new one.
type section struct{ old, new string }

// renamedSections are the sections read under their old name too.
var renamedSections = []section{
	{"apis", "upstreams"},
}

// renameSections reads a top-level section under its old name as its new
// one, on the document itself, so that every check, line number and error
// that follows sees one name. It returns the warnings to give and the
// sections it renamed (for respell), or an error when both names are
// written.
func renameSections(root *yaml.Node) (warnings []string, done []section, err error) {
	for _, r := range renamedSections {
		old, both := -1, false
		for i := 0; i+1 < len(root.Content); i += 2 {
			switch root.Content[i].Value {
			case r.old:
				old = i
			case r.new:
				both = true
			}
		}
		if old < 0 {
			continue
		}
		if both {
			return nil, nil, fmt.Errorf("%s: the old name of %s, written beside it (line %d): keep %s only", r.old, r.new, root.Content[old].Line, r.new)
		}
		root.Content[old].Value = r.new
		warnings = append(warnings, fmt.Sprintf("%s: is now called %s: (the old name is read for one release more)", r.old, r.new))
		done = append(done, r)
	}
	return warnings, done, nil
}

// respell names the fields of errs as the file wrote them: a section read
// under its old name is checked under its new one, but its errors say the
// old (apis[0].prefix, not upstreams[0].prefix, which the file has
// nowhere).
func respell(done []section, errs []error) []error {
	if len(done) == 0 {
		return errs
	}
	out := make([]error, len(errs))
	for i, err := range errs {
		text := err.Error()
		for _, r := range done {
			text = fieldName(r.new).ReplaceAllString(text, "${1}"+r.old+"${2}")
		}
		out[i] = &respelled{err: err, text: text}
	}
	return out
}

// fieldName matches name where it starts a field's path (name[0],
// name.x, name:), not inside another word.
func fieldName(name string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^A-Za-z0-9_.\[])` + regexp.QuoteMeta(name) + `([\[.:])`)
}

// respelled is an error said in the file's names; it unwraps to the
// original.
type respelled struct {
	err  error
	text string
}

func (r *respelled) Error() string { return r.text }
func (r *respelled) Unwrap() error { return r.err }

// renameValues reads a setting's value under its old name as its new one.
func (c *Config) renameValues() {
	for i := range c.Sources {
		if o := c.Sources[i].Order; o != nil && o.Mode == "stale" {
			o.Mode = "latest"
			c.renamed = append(c.renamed, fmt.Sprintf("sources[%d].order.mode: stale is now called latest (the old name is read for one release more)", i))
		}
	}
}
