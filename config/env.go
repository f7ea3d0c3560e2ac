package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// expandEnv replaces environment references in every scalar value of the
// document (never in keys or comments, and never as YAML structure), the
// way a shell does:
//
//	${NAME}            the variable; unset is an error
//	${NAME:-default}   default when NAME is unset or empty
//	${NAME-default}    default when NAME is unset
//	$NAME              as ${NAME}
//	$$                 a literal $
//
// Any other use of $ is an error naming the field, so that no secret can
// silently become the text "${NOPE:-x}" or "$SECRET". An expanded value is
// never expanded again.
func expandEnv(root *yaml.Node, lookup func(string) (string, bool)) ([]error, pathSet) {
	var errs []error
	var paths pathSet
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.ScalarNode:
			if !strings.Contains(n.Value, "$") {
				return
			}
			v, err := expandValue(n.Value, lookup)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w (line %d)", path, err, n.Line))
				paths = append(paths, path)
				return
			}
			// The value is text, whatever YAML would make of it ("true",
			// "a: b"), unless the field wants a number (concurrency).
			n.Value, n.Tag, n.Style = v, "", 0
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value))
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(root, "")
	return errs, paths
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func isNameStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
func isNameChar(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }

// expandValue expands one scalar (see expandEnv).
func expandValue(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", fmt.Errorf("%q: an unclosed ${", s)
			}
			ref := rest[1:end]
			j := 0
			for j < len(ref) && isNameChar(ref[j]) {
				j++
			}
			name, op := ref[:j], ref[j:]
			if name == "" || !isNameStart(name[0]) {
				return "", fmt.Errorf("${%s}: want ${NAME}, ${NAME:-default} or ${NAME-default} (write $$ for a literal $)", ref)
			}
			v, set := lookup(name)
			switch {
			case op == "":
				if !set {
					return "", fmt.Errorf("environment variable %s is not set", name)
				}
			case strings.HasPrefix(op, ":-"):
				if !set || v == "" {
					v = op[2:]
				}
			case strings.HasPrefix(op, "-"):
				if !set {
					v = op[1:]
				}
			default:
				return "", fmt.Errorf("${%s}: only ${NAME}, ${NAME:-default} and ${NAME-default} are supported (write $$ for a literal $)", ref)
			}
			b.WriteString(v)
			i += end + 1
		case rest != "" && isNameStart(rest[0]):
			j := 1
			for j < len(rest) && isNameChar(rest[j]) {
				j++
			}
			v, set := lookup(rest[:j])
			if !set {
				return "", fmt.Errorf("environment variable %s ($%s) is not set (write $$ for a literal $)", rest[:j], rest[:j])
			}
			b.WriteString(v)
			i += j
		default:
			return "", fmt.Errorf("%q: a $ that starts no variable; write $$ for a literal $", s)
		}
	}
	return b.String(), nil
}

// ExpandValue expands the environment references in one value as the
// config file's values are expanded (see expandEnv): what `oncehook
// apply` does to a file of objects, which are the config file's entries.
func ExpandValue(s string, lookup func(string) (string, bool)) (string, error) {
	return expandValue(s, lookup)
}

// EnvRef is the variable s names when s is one reference and nothing
// else ("${NAME}" or "$NAME"); ok is false otherwise. apply keeps a
// stored secret whose variable is not set, rather than refusing the
// file: an export writes every secret so.
func EnvRef(s string) (name string, ok bool) {
	switch {
	case strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}"):
		name = s[2 : len(s)-1]
	case strings.HasPrefix(s, "$"):
		name = s[1:]
	default:
		return "", false
	}
	if name == "" || !isNameStart(name[0]) {
		return "", false
	}
	for i := range len(name) {
		if !isNameChar(name[i]) {
			return "", false
		}
	}
	return name, true
}
