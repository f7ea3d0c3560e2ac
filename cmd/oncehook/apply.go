package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/redact"
)

// export and apply (#45): the API's sources and destinations as a file
// of the config file's shape (sources: and destinations: lists), and
// back. A secret never leaves the gateway (the API shows its
// fingerprint), so export writes each as an environment reference,
// ${SOURCE_ACME_STRIPE_SECRETS_0}, its fingerprint beside it, and apply
// expands the file's references as the config file's are expanded; a
// field that is one reference to a variable that is not set is left as
// stored, so that applying an export never overwrites a secret with
// junk. A URL the API shows masked (an api_key in its query) is written
// so too.

// maxApplyFile bounds what apply reads.
const maxApplyFile = 64 << 20

// export is `oncehook export`.
func export(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	out := fs.String("o", "", "write to this file (created 0600) instead of stdout")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: oncehook export [-o FILE] --api URL --token T   (or --config F: its store directly, with $ONCEHOOK_SECRET_KEYS)
  the sources and destinations created through the API (not the config file's), as YAML
  that oncehook apply -f takes; each secret as ${VARIABLE} with its fingerprint beside it
`)
		fs.PrintDefaults()
	}
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	var lister objectLister
	from := *of.api
	if *of.api != "" {
		c, err := of.client("export")
		if err != nil {
			return err
		}
		lister = apiLister{c}
	} else {
		// On the store directly (--config), as sources ls --config: no
		// gateway needed, but the keys that open the secrets are, to
		// take their fingerprints.
		cfg, path, err := of.loadConfig()
		if err != nil {
			return err
		}
		st, err := openExistingStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		srcs, dsts, err := oncehook.StoredObjects(ctx, cfg, st, os.Getenv)
		if err != nil {
			return err
		}
		lister, from = storedLister{srcs, dsts}, "the store of "+path
	}
	doc, n, err := exportDocument(ctx, lister, from)
	if err != nil {
		return err
	}
	text, err := yamlText(doc)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err := stdout.Write(text)
		return err
	}
	if err := os.WriteFile(*out, text, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d objects to %s\n", n, *out)
	return nil
}

func yamlText(doc *yaml.Node) ([]byte, error) {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// objectLister is where export reads the API's objects: a running
// gateway's API, or its store directly.
type objectLister interface {
	// objects are the API's objects of kind k, as the API shows them.
	objects(ctx context.Context, k objectKind) ([]api.ObjectView, error)
}

type apiLister struct{ c *api.Client }

func (l apiLister) objects(ctx context.Context, k objectKind) ([]api.ObjectView, error) {
	var names []string
	if k.kind == sourceKind.kind {
		list, err := l.c.Sources(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range list {
			if s.ManagedBy == "api" {
				names = append(names, s.Name)
			}
		}
	} else {
		list, err := l.c.Destinations(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range list {
			if d.ManagedBy == "api" {
				names = append(names, d.Name)
			}
		}
	}
	var out []api.ObjectView
	for _, name := range names {
		v, err := k.get(l.c, ctx, name)
		if err != nil {
			var e *api.Error
			if errors.As(err, &e) && e.Status == 404 {
				continue // deleted since the list
			}
			return nil, fmt.Errorf("%s %s: %w", k.kind, terminalLine(name), err)
		}
		out = append(out, v)
	}
	return out, nil
}

type storedLister struct{ sources, destinations []api.ObjectView }

func (l storedLister) objects(_ context.Context, k objectKind) ([]api.ObjectView, error) {
	if k.kind == sourceKind.kind {
		return l.sources, nil
	}
	return l.destinations, nil
}

// exportDocument reads the API's objects (destinations first: apply
// creates them in the file's order of kinds, and a source routes to
// destinations) as a YAML document; n is how many.
func exportDocument(ctx context.Context, l objectLister, from string) (*yaml.Node, int, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	root.HeadComment = fmt.Sprintf(`oncehook export of %s at %s: the sources and destinations created
through the API (the config file's are not here). oncehook apply -f THIS_FILE
creates or updates them. A secret is not exported (the API shows only its
fingerprint): each is written as ${VARIABLE}; set the variable to restore
the secret, or leave it unset and apply keeps the one stored. A URL the API
shows masked is written so too.`, terminalLine(from), time.Now().UTC().Format(time.RFC3339))
	envs := map[string]bool{}
	n := 0
	for _, k := range []objectKind{destinationKind, sourceKind} {
		views, err := l.objects(ctx, k)
		if err != nil {
			return nil, 0, err
		}
		list := &yaml.Node{Kind: yaml.SequenceNode}
		for _, v := range views {
			list.Content = append(list.Content, exportNode(v.Spec, exportPath{kind: k.kind, name: v.Name, envs: envs}))
			n++
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k.plural}, list)
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}, n, nil
}

// exportPath is where in which object exportNode is.
type exportPath struct {
	kind, name string
	path       []string
	envs       map[string]bool // the variables named so far
}

func (p exportPath) at(elem string) exportPath {
	p.path = append(slices.Clone(p.path), elem)
	return p
}

// variable is the environment variable a secret at p is written as:
// SOURCE_ACME_STRIPE_SECRETS_0, DESTINATION_HOOKS_HEADERS_AUTHORIZATION;
// one taken already (two names alike but for case or punctuation) gets
// a number.
func (p exportPath) variable() string {
	var b strings.Builder
	for _, r := range strings.ToUpper(strings.Join(append([]string{p.kind, p.name}, p.path...), "_")) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	v := b.String()
	for i := 2; p.envs[v]; i++ {
		v = fmt.Sprintf("%s_%d", b.String(), i)
	}
	p.envs[v] = true
	return v
}

// exportNode is v, an object's spec as the API shows it (or a value in
// it), as YAML: a secret's fingerprint becomes ${VARIABLE} with the
// fingerprint in a comment, a masked URL likewise, and every $ of a value
// $$, so that apply's expansion reads back the text the API has.
func exportNode(v any, p exportPath) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		if fp, ok := v["fingerprint"].(string); ok && len(v) == 1 {
			return &yaml.Node{Kind: yaml.ScalarNode, Value: "${" + p.variable() + "}", LineComment: "secret " + terminalLine(fp)}
		}
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := slices.Sorted(maps.Keys(v))
		if i := slices.Index(keys, "name"); i > 0 {
			keys = append([]string{"name"}, slices.Delete(keys, i, i+1)...)
		}
		for _, k := range keys {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, exportNode(v[k], p.at(k)))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i, e := range v {
			n.Content = append(n.Content, exportNode(e, p.at(fmt.Sprint(i))))
		}
		return n
	case string:
		if len(p.path) > 0 && p.path[len(p.path)-1] == "url" && strings.Contains(v, redact.Mask) {
			return &yaml.Node{Kind: yaml.ScalarNode, Value: "${" + p.variable() + "}", LineComment: "shown masked: " + terminalLine(v)}
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.ReplaceAll(v, "$", "$$")}
	}
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
	return &n
}

// applyObject is one object of an apply's file.
type applyObject struct {
	kind objectKind
	spec map[string]any
	name string
	// kept are the fields (dotted: "secrets", "headers.Authorization")
	// the file gives as a variable that is not set: left as stored.
	kept map[string]string // field: the variable
}

// readApplyFile reads a file of objects: sources: and destinations:
// lists of the config file's entries, its values expanded as the config
// file's are.
func readApplyFile(path string, lookup func(string) (string, bool)) ([]applyObject, error) {
	text, name, err := readInput(path, maxApplyFile)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("%s: not JSON or YAML: %w", name, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty: want sources: and destinations: lists, as oncehook export writes them", name)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping of sources: and destinations: lists, as oncehook export writes them", name)
	}
	lists := map[string]*yaml.Node{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i].Value, root.Content[i+1]
		if key != "sources" && key != "destinations" {
			return nil, fmt.Errorf("%s: %s (line %d): apply takes sources: and destinations: only, the API's objects; the rest of a config file is the file's", name, terminalLine(key), root.Content[i].Line)
		}
		if val.Kind != yaml.SequenceNode && !(val.Kind == yaml.ScalarNode && val.Tag == "!!null") {
			return nil, fmt.Errorf("%s: %s (line %d): want a list", name, key, val.Line)
		}
		lists[key] = val
	}
	var out []applyObject
	var errs []error
	// Destinations first: a source routes to them.
	for _, k := range []objectKind{destinationKind, sourceKind} {
		list := lists[k.plural]
		if list == nil {
			continue
		}
		seen := map[string]bool{}
		for i, item := range list.Content {
			at := fmt.Sprintf("%s[%d]", k.plural, i)
			o, err := readApplyObject(k, item, lookup)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (line %d): %w", at, item.Line, err))
				continue
			}
			if seen[o.name] {
				errs = append(errs, fmt.Errorf("%s (line %d): %s %s is in the file twice", at, item.Line, k.kind, terminalLine(o.name)))
				continue
			}
			seen[o.name] = true
			out = append(out, o)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", name, errors.Join(errs...))
	}
	return out, nil
}

func readApplyObject(k objectKind, item *yaml.Node, lookup func(string) (string, bool)) (applyObject, error) {
	o := applyObject{kind: k, kept: map[string]string{}}
	if item.Kind != yaml.MappingNode {
		return o, errors.New("want a mapping of the config file's fields (name: ..., ...)")
	}
	if err := expandApply(item, "", o.kept, lookup); err != nil {
		return o, err
	}
	var spec map[string]any
	if err := item.Decode(&spec); err != nil {
		return o, err
	}
	o.spec = spec
	o.name, _ = spec["name"].(string)
	if o.name == "" {
		return o, errors.New("name: want the object's name")
	}
	return o, nil
}

// expandApply expands the values under n (a mapping at path) as the
// config file's are, but takes out a field that is one reference to a
// variable that is not set, recording it in kept; a list holding one is
// taken out whole (a list is replaced whole by a merge patch).
func expandApply(n *yaml.Node, path string, kept map[string]string, lookup func(string) (string, bool)) error {
	var errs []error
	var content []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		field := key.Value
		if path != "" {
			field = path + "." + key.Value
		}
		if v, ok := unsetRef(val, lookup); ok {
			kept[field] = v
			continue
		}
		switch val.Kind {
		case yaml.MappingNode:
			if err := expandApply(val, field, kept, lookup); err != nil {
				errs = append(errs, err)
			}
		case yaml.SequenceNode:
			if v, ok := unsetRefIn(val, lookup); ok {
				kept[field] = v
				continue
			}
			for j, e := range val.Content {
				if err := expandScalars(e, fmt.Sprintf("%s[%d]", field, j), kept, lookup); err != nil {
					errs = append(errs, err)
				}
			}
		case yaml.ScalarNode:
			if err := expandScalars(val, field, kept, lookup); err != nil {
				errs = append(errs, err)
			}
		}
		content = append(content, key, val)
	}
	n.Content = content
	return errors.Join(errs...)
}

func expandScalars(n *yaml.Node, field string, kept map[string]string, lookup func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.MappingNode:
		return expandApply(n, field, kept, lookup)
	case yaml.SequenceNode:
		var errs []error
		for j, e := range n.Content {
			errs = append(errs, expandScalars(e, fmt.Sprintf("%s[%d]", field, j), kept, lookup))
		}
		return errors.Join(errs...)
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := config.ExpandValue(n.Value, lookup)
		if err != nil {
			return fmt.Errorf("%s: %w (line %d)", field, err, n.Line)
		}
		// Text, whatever YAML would make of it: a secret "123" stays
		// a string.
		n.Value, n.Tag, n.Style = v, "!!str", 0
	}
	return nil
}

// unsetRef reports whether n is a scalar that is one reference to a
// variable that is not set, and which.
func unsetRef(n *yaml.Node, lookup func(string) (string, bool)) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		return "", false
	}
	name, ok := config.EnvRef(n.Value)
	if !ok {
		return "", false
	}
	_, set := lookup(name)
	return name, !set
}

// unsetRefIn is unsetRef of any element of a list.
func unsetRefIn(n *yaml.Node, lookup func(string) (string, bool)) (string, bool) {
	for _, e := range n.Content {
		if v, ok := unsetRef(e, lookup); ok {
			return v, true
		}
	}
	return "", false
}

// apply is `oncehook apply`.
func apply(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	file := fs.String("f", "", "the file of objects (sources: and destinations:, as export writes them), YAML or JSON; - reads stdin")
	dryRun := fs.Bool("dry-run", false, "print what would be created, updated and deleted, and change nothing")
	prune := fs.Bool("prune", false, "delete the API's sources and destinations the file does not name (never the config file's)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: oncehook apply -f FILE [--dry-run] [--prune] --api URL --token T
  create or update the file's sources and destinations through the API, and print
  each: created, updated (the fields changed), unchanged, or refused
`)
		fs.PrintDefaults()
	}
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("usage: oncehook apply -f FILE (sources: and destinations:, as oncehook export writes them; - for stdin)")
	}
	objects, err := readApplyFile(*file, os.LookupEnv)
	if err != nil {
		return err
	}
	c, err := of.client("apply")
	if err != nil {
		return err
	}
	a := applier{c: c, w: table(stdout), dryRun: *dryRun}
	err = a.run(ctx, objects, *prune)
	if ferr := a.w.Flush(); err == nil {
		err = ferr
	}
	verb := "applied"
	if *dryRun {
		verb = "plan (--dry-run: nothing changed)"
	}
	fmt.Fprintf(stdout, "%s: %d created, %d updated, %d unchanged", verb, a.count["created"], a.count["updated"], a.count["unchanged"])
	if *prune {
		fmt.Fprintf(stdout, ", %d deleted", a.count["deleted"])
	}
	if a.count["refused"] > 0 {
		fmt.Fprintf(stdout, ", %d refused", a.count["refused"])
	}
	fmt.Fprintln(stdout)
	if err != nil {
		return err
	}
	if a.count["refused"] > 0 {
		return fmt.Errorf("%d refused: the config file defines them; change them there, and reload", a.count["refused"])
	}
	return nil
}

// applier applies a file's objects one by one, printing each.
type applier struct {
	c      *api.Client
	w      *tabwriter.Writer
	dryRun bool
	count  map[string]int
}

func (a *applier) say(k objectKind, name, what string) {
	fmt.Fprintf(a.w, "%s\t%s\t%s\n", k.kind, shortName(name), what)
}

// shortName is name as a line shows it: escaped, and cut at 100
// characters (a name past 200 is refused, and its refusal says its
// length).
func shortName(name string) string {
	if r := []rune(name); len(r) > 100 {
		name = string(r[:100]) + "..."
	}
	return terminalLine(name)
}

// run applies objects in order (destinations first), and stops at the
// first that fails: the ones before it are applied, as printed; the rest
// are not tried. An object the config file defines is refused, and the
// rest go on.
func (a *applier) run(ctx context.Context, objects []applyObject, prune bool) error {
	a.count = map[string]int{}
	named := map[string]bool{}
	for _, o := range objects {
		named[o.kind.kind+"\x00"+o.name] = true
		outcome, err := a.one(ctx, o)
		if err != nil {
			a.say(o.kind, o.name, "failed: "+oneLine(err))
			return fmt.Errorf("apply stopped at %s %s: the objects above it are as printed; the ones after it were not tried", o.kind.kind, shortName(o.name))
		}
		a.count[outcome]++
	}
	if !prune {
		return nil
	}
	return a.prune(ctx, named)
}

// oneLine is err on one line, its fields at fault joined.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.ReplaceAll(err.Error(), "\n  ", "; "), "\n", "; ")
}

// one applies one object and says what became of it.
func (a *applier) one(ctx context.Context, o applyObject) (string, error) {
	k := o.kind
	v, err := k.get(a.c, ctx, o.name)
	var e *api.Error
	switch {
	case errors.As(err, &e) && e.Status == 404:
		if len(o.kept) > 0 {
			field := slices.Sorted(maps.Keys(o.kept))[0]
			return "", fmt.Errorf("%s: $%s is not set, and there is no stored %s %s to keep it from: set it", field, o.kept[field], k.kind, terminalLine(o.name))
		}
		if a.dryRun {
			a.say(k, o.name, "would create")
			return "created", nil
		}
		v, err := k.create(a.c, ctx, o.spec)
		if err != nil {
			return "", objectRefused(k, "", err)
		}
		a.say(k, o.name, fmt.Sprintf("created (version %d)", v.Version))
		return "created", nil
	case err != nil:
		return "", objectRefused(k, o.name, err)
	}
	patch, changed := oncehook.ObjectPatch(k.kind, v.Spec, o.spec, func(field string) bool { _, ok := o.kept[field]; return ok })
	if v.ManagedBy == "file" {
		msg := fmt.Sprintf("%s %s is defined in the config file %s: change it there, and reload", k.kind, o.name, v.Config)
		if !a.dryRun {
			// The gateway's own words (a 409).
			if _, err := k.update(a.c, ctx, o.name, map[string]any{}, 0); err != nil {
				var e *api.Error
				if errors.As(err, &e) {
					msg = e.Body.Error
				}
			}
		}
		a.say(k, o.name, "refused: "+terminalLine(msg))
		return "refused", nil
	}
	if a.dryRun {
		if len(changed) == 0 {
			a.say(k, o.name, fmt.Sprintf("unchanged (version %d)", v.Version))
			return "unchanged", nil
		}
		a.say(k, o.name, "would update: "+terminalLine(strings.Join(changed, ", ")))
		return "updated", nil
	}
	// The gateway compares the values themselves (a secret in clear, a
	// URL's masked part) and stores nothing when nothing changes; at the
	// version read, so that a change made meanwhile is not overwritten.
	nv, err := k.update(a.c, ctx, o.name, patch, v.Version)
	if err != nil {
		return "", objectRefused(k, o.name, err)
	}
	if nv.Version == v.Version {
		a.say(k, o.name, fmt.Sprintf("unchanged (version %d)", nv.Version))
		return "unchanged", nil
	}
	a.say(k, o.name, fmt.Sprintf("updated (version %d): %s", nv.Version, terminalLine(strings.Join(nv.Changed, ", "))))
	return "updated", nil
}

// prune deletes the API's objects the file does not name: sources
// first (a destination a source routes to cannot go before it).
func (a *applier) prune(ctx context.Context, named map[string]bool) error {
	srcs, err := a.c.Sources(ctx)
	if err != nil {
		return err
	}
	dsts, err := a.c.Destinations(ctx)
	if err != nil {
		return err
	}
	type victim struct {
		k    objectKind
		name string
	}
	var gone []victim
	for _, s := range srcs {
		if s.ManagedBy == "api" && !named[sourceKind.kind+"\x00"+s.Name] {
			gone = append(gone, victim{sourceKind, s.Name})
		}
	}
	for _, d := range dsts {
		if d.ManagedBy == "api" && !named[destinationKind.kind+"\x00"+d.Name] {
			gone = append(gone, victim{destinationKind, d.Name})
		}
	}
	for _, v := range gone {
		if a.dryRun {
			a.say(v.k, v.name, "would delete (--prune: not in the file)")
			a.count["deleted"]++
			continue
		}
		if err := v.k.remove(a.c, ctx, v.name, 0); err != nil {
			a.say(v.k, v.name, "failed: "+oneLine(objectRefused(v.k, v.name, err)))
			return fmt.Errorf("apply --prune stopped at %s %s", v.k.kind, terminalLine(v.name))
		}
		a.say(v.k, v.name, "deleted (--prune: not in the file)")
		a.count["deleted"]++
	}
	return nil
}
