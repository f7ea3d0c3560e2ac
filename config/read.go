package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the file at path and checks it field by field (see Parse).
func Load(path string) (*Config, error) { return LoadWith(path, nil) }

// LoadWith is Load, with the parts' check (see ParseWith).
func LoadWith(path string, check Checker) (*Config, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := parse(text, os.LookupEnv, filepath.Dir(path), check)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// ErrEmpty is returned for a config with no settings at all.
var ErrEmpty = errors.New("the config is empty: it needs at least sources (oncehook init writes a commented sample)")

// Parse checks field names and types (every error names the field:
// sources[0].presett: unknown field), expands environment references,
// applies defaults and checks each field, and reports every error at
// once: fixing
// one must not reveal the next. What the checks say of a field that is
// already reported is left out as its echo: a field of the wrong type is
// validated as if unset, and a record with a misspelled field (a
// misspelled preset is also a missing one) reports only the misspelling.
// Only a misspelled top-level section stops there: the whole rest would
// be its echo.
//
// What only the parts can say (a preset, a filter, a transformation) and
// the defaults they decide (a preset's window) are ParseWith's: Parse's
// config is checked whole, and completed, when a gateway is built from it
// (oncehook.New), or by oncehook.ParseConfig.
func Parse(text []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return parse(text, lookupEnv, "", nil)
}

// ParseWith is Parse, and check on what the fields say: its errors come
// with the fields' own, each with its line, none the echo of another.
//
// A destination's transform file is read relative to the working
// directory here; LoadWith reads it relative to the config file's folder.
func ParseWith(text []byte, lookupEnv func(string) (string, bool), check Checker) (*Config, error) {
	return parse(text, lookupEnv, "", check)
}

func parse(text []byte, lookupEnv func(string) (string, bool), dir string, check Checker) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, ErrEmpty
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, ErrEmpty
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the config must be a mapping of settings (listen, store, sources, destinations, ...)", root.Line)
	}
	// Every error at once, each with its field and line: the environment
	// references, then the fields' names and types, then what they say.
	renamed, sections, err := renameSections(root)
	if err != nil {
		return nil, err
	}
	lines := linesOf(root)
	envErrs, envPaths := expandEnv(root, lookupEnv)
	var faulty pathSet
	errs := append(envErrs, checkNode(root, reflect.TypeFor[Config](), "", &faulty, check)...)
	if slices.Contains(faulty, "") {
		return nil, errors.Join(respell(sections, errs)...) // a misspelled section
	}
	cfg := Config{dir: dir, renamed: renamed}
	if err := root.Decode(&cfg); err != nil {
		return nil, errors.Join(respell(sections, append(errs, err))...)
	}
	cfg.renameValues()
	if err := cfg.setDefaults(); err != nil {
		return nil, errors.Join(respell(sections, append(errs, err))...)
	}
	for _, err := range cfg.validate(lines, check) {
		// A field whose reference did not expand, or that is misspelled
		// or of the wrong type, is already reported; what validation says
		// of its text (or its default) is only the echo.
		if !envPaths.covers(err.Error()) && !faulty.covers(err.Error()) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(respell(sections, errs)...)
	}
	return &cfg, nil
}

// fieldLines maps a field's path (sources[0].preset) to its line.
type fieldLines map[string]int

// linesOf reads every field's line from the document.
func linesOf(root *yaml.Node) fieldLines {
	lines := fieldLines{}
	var walk func(n *yaml.Node, path string, line int)
	walk = func(n *yaml.Node, path string, line int) {
		if path != "" {
			lines[path] = line
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value), n.Content[i].Line)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), c.Line)
			}
		}
	}
	walk(root, "", root.Line)
	return lines
}

// at is " (line N)" for path, or for the nearest enclosing field written
// in the file (a default has no line of its own); "" without lines.
func (l fieldLines) at(path string) string {
	for p := path; p != ""; {
		if n, ok := l[p]; ok {
			return fmt.Sprintf(" (line %d)", n)
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ""
}

// pathSet is fields already reported: their environment references
// failed, or they are of the wrong type, or (for a misspelled field) the
// record that holds them.
type pathSet []string

// covers reports whether an error (written "path: ...") is about one of
// the set's fields, a field inside one, or the top-level record (a source,
// a destination) that holds one: a record's own check reads its fields
// together (a source's preset options), so its error may be their echo.
// An error about any other field around one is reported: a destination
// listed twice is still listed twice, whatever its filter's reference.
func (s pathSet) covers(msg string) bool {
	field, _, _ := strings.Cut(msg, ": ")
	record := strings.HasSuffix(field, "]") && !strings.ContainsAny(field, ". ")
	for _, p := range s {
		if field == p || strings.HasPrefix(field, p+".") || strings.HasPrefix(field, p+"[") ||
			record && (strings.HasPrefix(p, field+".") || strings.HasPrefix(p, field+"[")) {
			return true
		}
	}
	return false
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkNode checks that n can be decoded into a value of type t, naming the
// field path of every problem: unknown fields, a list where a value is
// wanted, a number or duration that does not parse. It adds each field at
// fault to faulty (for a misspelled field, its record: "" for the top
// level) and mends the document so that the rest still decodes: a value
// of the wrong type becomes unset, a field given twice keeps its first.
func checkNode(n *yaml.Node, t reflect.Type, path string, faulty *pathSet, kinds Checker) []error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	where := path
	if where == "" {
		where = "config"
	}
	fail := func(format string, args ...any) []error {
		err := fmt.Errorf("%s: %s (line %d)", where, fmt.Sprintf(format, args...), n.Line)
		*faulty = append(*faulty, path)
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
		return []error{err}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty value: the default
	}
	for t.Kind() == reflect.Pointer {
		// An optional block (consume:, publish:, order:) is checked as
		// the block it points to: its misspelled fields are named too.
		t = t.Elem()
	}
	if t == reflect.TypeFor[Consume]() || t == reflect.TypeFor[Publish]() {
		return checkQueueNode(n, t == reflect.TypeFor[Consume](), path, faulty, kinds)
	}
	if t == reflect.TypeFor[Transform]() {
		if n.Kind == yaml.ScalarNode {
			return checkNode(n, reflect.TypeFor[string](), path, faulty, kinds)
		}
		return checkNode(n, reflect.TypeFor[transformFields](), path, faulty, kinds)
	}
	if t == reflect.TypeFor[SourceDestination]() {
		if n.Kind == yaml.ScalarNode {
			return checkNode(n, reflect.TypeFor[string](), path, faulty, kinds)
		}
		return checkNode(n, reflect.TypeFor[sourceDestinationFields](), path, faulty, kinds)
	}
	if t == reflect.TypeFor[[]string]() && n.Kind == yaml.ScalarNode && (strings.HasSuffix(path, ".key") || strings.HasSuffix(path, ".type") || path == "key" || path == "type") {
		// A source's one key or type rule may be written alone
		// (type: "json:event"): it is a list of one. (A source read
		// alone, as the API takes it, has them at its top: "key".)
		one := *n
		*n = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: n.Line, Column: n.Column, Content: []*yaml.Node{&one}}
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if n.Kind != yaml.ScalarNode {
			return fail("want a single value")
		}
		if err := reflect.New(t).Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			return fail("%v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping of fields")
		}
		return checkFields(n, t, path, faulty, kinds)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fail("want a list")
		}
		var errs []error
		for i, c := range n.Content {
			errs = append(errs, checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), faulty, kinds)...)
		}
		return errs
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping")
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), faulty, kinds)...)
		}
		return errs
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return fail("want a single value")
		}
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode {
			return fail("want a number")
		}
		if _, err := strconv.Atoi(n.Value); err != nil {
			return fail("%q: want a whole number", n.Value)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode {
			return fail("want true or false")
		}
		if _, err := strconv.ParseBool(n.Value); err != nil {
			return fail("%q: want true or false", n.Value)
		}
	}
	return nil
}

// checkFields checks a mapping n that decodes into the struct type t:
// every field known (or named with its closest known one), none given
// twice, each of its own type (checkNode).
func checkFields(n *yaml.Node, t reflect.Type, path string, faulty *pathSet, kinds Checker) []error {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	var errs []error
	seen := map[string]bool{}
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		ft, ok := fields[key]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: unknown field (line %d)%s", join(path, key), n.Content[i].Line, suggest(key, fields)))
			*faulty = append(*faulty, path)
		case seen[key]:
			errs = append(errs, fmt.Errorf("%s: given twice (line %d)", join(path, key), n.Content[i].Line))
			*faulty = append(*faulty, join(path, key))
			continue // the decoder refuses a key given twice
		default:
			errs = append(errs, checkNode(val, ft, join(path, key), faulty, kinds)...)
		}
		seen[key] = true
		kept = append(kept, n.Content[i], val)
	}
	n.Content = kept
	return errs
}

// suggest names the known field closest to a misspelled one.
func suggest(key string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	return Suggest(key, names)
}

// Suggest names the known word closest to a misspelled one, if any is
// close: "; did you mean stripe?" (a field's name, a preset's).
func Suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, name := range known {
		if d := editDistance(key, name); d < bestDist || d == bestDist && name < best {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
