package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/oncehook/oncehook/api"
)

// tokens is `oncehook tokens`: the API's tokens (#45), over a running
// gateway's API only. create prints the value once, as the API answers it
// once; ls and show print fingerprints; rm revokes one on every replica.
func tokens(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokens", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	tenant := fs.String("tenant", "", "create: the tenant the token is one of (a tenant's token: its own, the default)")
	readOnly := fs.Bool("read-only", false, "create: the token may only read (GET)")
	publish := fs.String("publish", "", "create: outbox sources, comma-separated, the token may only publish to")
	pull := fs.String("pull", "", "create: pull destinations, comma-separated, the token may only pull from")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: oncehook tokens [ls]                      every API token: the file's and the API's (MANAGED), its tenant and rights, fingerprint
       oncehook tokens create NAME [--tenant T] [--read-only] [--publish a,b] [--pull d]   make one; its value is printed this once
       oncehook tokens show NAME                one token, without its value
       oncehook tokens rm NAME                  revoke one made through the API (every replica; its dashboard sessions end)
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
	if sub == "list" {
		sub = "ls"
	}
	want := map[string]int{"ls": 0, "create": 1, "show": 1, "rm": 1}
	n, ok := want[sub]
	if !ok {
		return fmt.Errorf("tokens %s: want ls, create, show or rm", terminalLine(sub))
	}
	if len(rest) != n {
		if n == 0 {
			return fmt.Errorf("tokens ls takes no argument (got %q)", rest[0])
		}
		return fmt.Errorf("usage: oncehook tokens %s NAME", sub)
	}
	c, err := of.client("tokens " + sub)
	if err != nil {
		return err
	}
	k := objectKind{kind: "token", plural: "tokens"}
	switch sub {
	case "create":
		v, err := c.CreateToken(ctx, api.TokenSpec{Name: rest[0], Tenant: *tenant, ReadOnly: *readOnly, Publish: commaList(*publish), Pull: commaList(*pull)})
		if err != nil {
			return objectRefused(k, "", err)
		}
		if *of.json {
			return printJSON(stdout, v)
		}
		fmt.Fprintf(stdout, "token %s created (%s)\n", terminalLine(v.Name), rights(v))
		fmt.Fprintf(stdout, "value: %s\n\nthis is the only time it is shown: the gateway keeps its hash only. Revoke it with: oncehook tokens rm %s\n",
			v.Token, terminalLine(v.Name))
		return nil
	case "show":
		v, err := c.Token(ctx, rest[0])
		if err != nil {
			return objectRefused(k, rest[0], err)
		}
		if *of.json {
			return printJSON(stdout, v)
		}
		tw := table(stdout)
		fmt.Fprintf(tw, "token\t%s\n", terminalLine(v.Name))
		fmt.Fprintf(tw, "managed by\t%s\n", v.ManagedBy)
		if v.Config != "" {
			fmt.Fprintf(tw, "config\t%s (change it there, and reload)\n", terminalLine(v.Config))
		}
		fmt.Fprintf(tw, "tenant\t%s\n", orDash(terminalLine(v.Tenant)))
		fmt.Fprintf(tw, "may\t%s\n", rights(v))
		fmt.Fprintf(tw, "fingerprint\t%s\n", v.Fingerprint)
		if v.CreatedAt != nil {
			fmt.Fprintf(tw, "created\t%s by %s\n", ts(*v.CreatedAt), terminalLine(v.CreatedBy))
		}
		return tw.Flush()
	case "rm":
		if err := c.DeleteToken(ctx, rest[0]); err != nil {
			return objectRefused(k, rest[0], err)
		}
		if *of.json {
			return printJSON(stdout, map[string]any{"name": rest[0], "deleted": true})
		}
		fmt.Fprintf(stdout, "token %s revoked\n", terminalLine(rest[0]))
		return nil
	}
	all, err := c.Tokens(ctx)
	if err != nil {
		return err
	}
	if *of.json {
		return printJSON(stdout, all)
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "TOKEN\tMANAGED\tTENANT\tMAY\tFINGERPRINT\tCREATED BY")
	for _, v := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", terminalLine(v.Name), v.ManagedBy, orDash(terminalLine(v.Tenant)), terminalLine(rights(v)),
			v.Fingerprint, orDash(terminalLine(v.CreatedBy)))
	}
	return tw.Flush()
}

// rights says what a token may do, in a few words.
func rights(v api.TokenView) string {
	switch {
	case len(v.Publish) > 0:
		return "publish to " + strings.Join(v.Publish, ",")
	case len(v.Pull) > 0:
		return "pull from " + strings.Join(v.Pull, ",")
	case v.ReadOnly:
		return "read"
	}
	return "read and change"
}

// commaList is a comma-separated flag's values (none for "").
func commaList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
