package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/setup"
)

// The commands over the API's sources and destinations (#45): sources
// create|ls|show|update|rm, and the same verbs of destinations beside
// their queue's (ls, pause, ...). create and update read the object as
// the config file writes it, JSON or YAML (-f FILE, or - for stdin); a
// change works on a running gateway's API only (--api URL --token T):
// the gateway checks it and applies it to every part at once, which a
// command on the store could not.

// objectFlags are the flags of create and update (and rm's --if-version).
type objectFlags struct {
	file      *string
	ifVersion *int64
}

func addObjectFlags(fs *flag.FlagSet) objectFlags {
	return objectFlags{
		file:      fs.String("f", "", "create, update: the object (update: a merge patch of it) as JSON or YAML, the config file's fields; - reads stdin"),
		ifVersion: fs.Int64("if-version", 0, "update, rm: only if it is at this version (show's VERSION); another change came first otherwise"),
	}
}

// objectKind is what the commands need to know of a kind.
type objectKind struct {
	kind, plural string
	create       func(*api.Client, context.Context, any) (api.ObjectView, error)
	get          func(*api.Client, context.Context, string) (api.ObjectView, error)
	update       func(*api.Client, context.Context, string, any, int64) (api.ObjectView, error)
	remove       func(*api.Client, context.Context, string, int64) error
}

var (
	sourceKind = objectKind{kind: "source", plural: "sources", create: (*api.Client).CreateSource, get: (*api.Client).Source,
		update: (*api.Client).UpdateSource, remove: (*api.Client).DeleteSource}
	destinationKind = objectKind{kind: "destination", plural: "destinations", create: (*api.Client).CreateDestination,
		get: (*api.Client).Destination, update: (*api.Client).UpdateDestination, remove: (*api.Client).DeleteDestination}
)

// isObjectVerb reports whether sub is one of the object commands.
func isObjectVerb(sub string) bool {
	switch sub {
	case "create", "show", "update", "rm":
		return true
	}
	return false
}

// objectCmd runs sub (create, show, update, rm) of kind k with the
// arguments left after the flags.
func objectCmd(ctx context.Context, k objectKind, sub string, rest []string, of operatorFlags, obf objectFlags, stdout io.Writer) error {
	c, err := of.client(k.plural + " " + sub)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		if len(rest) != 0 || *obf.file == "" {
			return fmt.Errorf("usage: oncehook %s create -f FILE (JSON or YAML; - for stdin)", k.plural)
		}
		spec, err := readObjectFile(*obf.file)
		if err != nil {
			return err
		}
		v, err := k.create(c, ctx, spec)
		if err != nil {
			return objectRefused(k, "", err)
		}
		if *of.json {
			return printJSON(stdout, v)
		}
		printCreated(stdout, k, v, *of.api)
		return nil
	case "update":
		if len(rest) != 1 || *obf.file == "" {
			return fmt.Errorf("usage: oncehook %s update NAME -f PATCH [--if-version N] (a JSON merge patch, or its YAML)", k.plural)
		}
		patch, err := readObjectFile(*obf.file)
		if err != nil {
			return err
		}
		v, err := k.update(c, ctx, rest[0], patch, *obf.ifVersion)
		if err != nil {
			return objectRefused(k, rest[0], err)
		}
		if *of.json {
			return printJSON(stdout, v)
		}
		fmt.Fprintf(stdout, "%s %s updated: version %d\n", k.kind, terminalLine(v.Name), v.Version)
		return nil
	case "show":
		if len(rest) != 1 {
			return fmt.Errorf("usage: oncehook %s show NAME", k.plural)
		}
		v, err := k.get(c, ctx, rest[0])
		if err != nil {
			return objectRefused(k, rest[0], err)
		}
		if *of.json {
			return printJSON(stdout, v)
		}
		return printObject(stdout, k, v)
	case "rm":
		if len(rest) != 1 {
			return fmt.Errorf("usage: oncehook %s rm NAME [--if-version N]", k.plural)
		}
		if err := k.remove(c, ctx, rest[0], *obf.ifVersion); err != nil {
			return objectRefused(k, rest[0], err)
		}
		if *of.json {
			return printJSON(stdout, map[string]any{"name": rest[0], "deleted": true})
		}
		fmt.Fprintf(stdout, "%s %s deleted\n", k.kind, terminalLine(rest[0]))
		return nil
	}
	return fmt.Errorf("%s %s: want create, ls, show, update or rm", k.plural, sub)
}

// client is the API's Client the flags name; what works only there
// (command) says so without --api.
func (f operatorFlags) client(command string) (*api.Client, error) {
	if *f.api == "" {
		return nil, fmt.Errorf("%s works on a running gateway's API, which checks the change and applies it at once: pass --api URL --token T (or $%s and $%s)", command, apiEnv, tokenEnv)
	}
	token := *f.token
	if token == "" {
		token = os.Getenv(tokenEnv)
	}
	if token == "" {
		return nil, fmt.Errorf("--api needs --token (or $%s)", tokenEnv)
	}
	return api.NewClient(*f.api, token, nil), nil
}

// maxObjectFile bounds what -f reads (the API takes 64 KiB).
const maxObjectFile = 1 << 20

// readObjectFile reads one object, JSON or YAML (JSON is YAML), from
// path (- for stdin), as JSON for the API.
func readObjectFile(path string) (json.RawMessage, error) {
	text, name, err := readInput(path, maxObjectFile)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal(text, &v); err != nil {
		return nil, fmt.Errorf("%s: not JSON or YAML: %w", name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: want one object of the config file's fields (name: ..., preset: ...), as one entry of its list is written", name)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// objectRefused says the API's refusal of a change to (or read of) an
// object in the object's terms: every field at fault on its own line, by
// the name the file gives it (not a flag's, as cliError would). The
// error it returns is not an *api.Error, so cliError leaves it as it is.
func objectRefused(k objectKind, name string, err error) error {
	var e *api.Error
	if !errors.As(err, &e) {
		return err
	}
	what := k.kind
	if name != "" {
		what += " " + terminalLine(name)
	}
	switch {
	case len(e.Fields) > 1:
		var b strings.Builder
		fmt.Fprintf(&b, "%s refused:", what)
		for _, f := range e.Fields {
			b.WriteString("\n  " + terminalLine(f.Error))
		}
		return errors.New(b.String())
	case e.Status == 400:
		return fmt.Errorf("%s refused: %s", what, terminalLine(e.Body.Error))
	}
	return errors.New(terminalLine(e.Body.Error))
}

// printCreated is a create's answer: where the provider sends, and what
// to do next.
func printCreated(w io.Writer, k objectKind, v api.ObjectView, apiURL string) {
	fmt.Fprintf(w, "%s %s created (version %d)\n", k.kind, terminalLine(v.Name), v.Version)
	if k.kind != "source" {
		fmt.Fprintf(w, "\nnext:\n  route a source to it: oncehook sources update SOURCE -f PATCH with {\"destinations\": [..., %q]}\n", v.Name)
		fmt.Fprintf(w, "  watch its queue:      oncehook destinations ls --api %s\n", apiURL)
		return
	}
	preset, _ := v.Spec["preset"].(string)
	if v.IntakeURL == "" {
		fmt.Fprintf(w, "\nits events come from a queue or the outbox, not an intake URL\n")
	} else {
		fmt.Fprintf(w, "intake URL: %s\n", terminalLine(v.IntakeURL))
		fmt.Fprintf(w, "\nnext:\n  1. at %s (the dashboard shows these steps in Portuguese too):\n", providerName(preset))
		for _, step := range setup.Steps(preset, setup.EN) {
			fmt.Fprintf(w, "     - %s\n", step)
		}
		fmt.Fprintf(w, "  2. send a signed test event: oncehook send --url %s --preset %s --secret SECRET\n", terminalLine(v.IntakeURL), providerName(preset))
	}
	fmt.Fprintf(w, "  3. watch its events:         oncehook events ls --source %s --api %s\n", terminalLine(v.Name), apiURL)
	fmt.Fprintf(w, "  rotate its secret later:     oncehook sources update %s -f PATCH --if-version %d\n", terminalLine(v.Name), v.Version)
}

func providerName(preset string) string {
	if preset == "" {
		return "the provider"
	}
	return terminalLine(preset)
}

// printObject is show's table: what it is, and its spec as YAML (the
// file's fields; secrets as fingerprints).
func printObject(w io.Writer, k objectKind, v api.ObjectView) error {
	tw := table(w)
	fmt.Fprintf(tw, "%s\t%s\n", k.kind, terminalLine(v.Name))
	fmt.Fprintf(tw, "managed by\t%s\n", v.ManagedBy)
	if v.Config != "" {
		fmt.Fprintf(tw, "config\t%s (change it there, and reload)\n", terminalLine(v.Config))
	}
	if v.IntakeURL != "" {
		fmt.Fprintf(tw, "intake URL\t%s\n", terminalLine(v.IntakeURL))
	}
	if v.Version != 0 {
		fmt.Fprintf(tw, "version\t%d\n", v.Version)
	}
	if v.CreatedAt != nil {
		fmt.Fprintf(tw, "created\t%s by %s\n", ts(*v.CreatedAt), terminalLine(v.CreatedBy))
	}
	if v.UpdatedAt != nil && v.Version > 1 {
		fmt.Fprintf(tw, "updated\t%s by %s\n", ts(*v.UpdatedAt), terminalLine(v.UpdatedBy))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Spec) == 0 {
		return nil
	}
	out, err := yaml.Marshal(v.Spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s", terminalText(string(out)))
	return nil
}

// sources is `oncehook sources`: ls (the operator's list, on the store
// or the API), and create, show, update and rm over the API.
func sources(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sources", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	obf := addObjectFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: oncehook sources [ls]                     every source: the file's and the API's (MANAGED), its preset, routes, last 24h
       oncehook sources create -f FILE          create one through the API (JSON or YAML, the config file's fields; - for stdin)
       oncehook sources show NAME               one source: its intake URL, version, and fields (secrets as fingerprints)
       oncehook sources update NAME -f PATCH [--if-version N]   change one by a JSON merge patch (a field null: its default)
       oncehook sources rm NAME [--if-version N]  delete one (its intake answers 404; its events stay)
`)
		fs.PrintDefaults()
	}
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	sub := "ls"
	if len(rest) > 0 {
		sub, rest = rest[0], rest[1:]
	}
	if isObjectVerb(sub) {
		return objectCmd(ctx, sourceKind, sub, rest, of, obf, stdout)
	}
	if sub != "ls" && sub != "list" {
		return fmt.Errorf("sources %s: want ls, create, show, update or rm", terminalLine(sub))
	}
	if len(rest) != 0 {
		return fmt.Errorf("sources ls takes no argument (got %q)", rest[0])
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	list, err := op.Sources(ctx)
	if err != nil {
		return err
	}
	if *of.json {
		return printJSON(stdout, list)
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "SOURCE\tMANAGED\tPRESET\tTRANSPORT\tDESTINATIONS\tRECEIVED 24H\tDUPLICATES 24H")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", terminalLine(s.Name), s.ManagedBy, orDash(s.Preset), s.Transport,
			orDash(terminalLine(strings.Join(s.Destinations, ","))), s.Last24h.Received, s.Last24h.Duplicate)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// readInput reads what -f names, path (- for stdin), at most limit bytes,
// and the name to say it by in an error.
func readInput(path string, limit int) ([]byte, string, error) {
	var r io.Reader = os.Stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, path, err
		}
		defer f.Close()
		r, name = f, path
	}
	text, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, name, fmt.Errorf("%s: %w", name, err)
	}
	if len(text) > limit {
		return nil, name, fmt.Errorf("%s: over %d bytes", name, limit)
	}
	return text, name, nil
}
