package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Names a release changed are still read under their old name, with a
// warning, for one release more; the release after that refuses them.
// Each old name meant two things at once: apis: also named the admin
// API's own api: section, and the order mode stale also named the state
// of an older delivery it holds back.

// renameSections reads a top-level section under its old name as its new
// one, on the document itself, so that every check, line number and error
// that follows sees one name. It returns the warnings to give, or an
// error when both names are written.
func renameSections(root *yaml.Node) (warnings []string, err error) {
	renamed := []struct{ old, new string }{
		{"apis", "upstreams"},
	}
	for _, r := range renamed {
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
			return nil, fmt.Errorf("%s: the old name of %s, written beside it (line %d): keep %s only", r.old, r.new, root.Content[old].Line, r.new)
		}
		root.Content[old].Value = r.new
		warnings = append(warnings, fmt.Sprintf("%s: is now called %s: (the old name is read for one release more)", r.old, r.new))
	}
	return warnings, nil
}

// renameValues reads a setting's value under its old name as its new one.
func (c *Config) renameValues() {
	for i := range c.Sources {
		if o := c.Sources[i].Order; o != nil && o.Mode == "stale" {
			o.Mode = "latest"
			c.renamed = append(c.renamed, fmt.Sprintf("sources[%d].order.mode: stale is now called latest (the old name is read for one release more)", i))
		}
	}
}
