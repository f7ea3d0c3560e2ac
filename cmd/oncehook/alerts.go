package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/oncehook/oncehook/admin"
)

const alertsUsage = `usage: oncehook alerts [ls] [--state open|acknowledged|resolved]  the alerts' issues, newest first
       oncehook alerts show ID      one issue, with its timeline
       oncehook alerts ack ID       acknowledge it: its channels are told nothing more until it resolves
       oncehook alerts resolve ID   resolve it by hand (its channels are told; if its condition still holds, a new issue opens)
`

// alerts: ls, show, ack, resolve.
func alerts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb := "ls"
	if len(args) > 0 && !helpAsked(args[0]) && args[0] != "" && args[0][0] != '-' {
		verb, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("alerts "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, alertsUsage); fs.PrintDefaults() }
	of := addOperatorFlags(fs)
	state := fs.String("state", "", "with ls: only issues in this state (open, acknowledged, resolved)")
	limit := fs.Int("limit", 50, "with ls: issues per page")
	cursor := fs.String("cursor", "", "with ls: the next page's cursor")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	var id int64
	switch verb {
	case "ls", "list":
		if len(rest) > 0 {
			return fmt.Errorf("alerts ls takes no argument (got %q)", rest[0])
		}
		if err := pageLimit(*limit); err != nil {
			return err
		}
	case "show", "ack", "acknowledge", "resolve":
		if len(rest) != 1 {
			return fmt.Errorf("usage: oncehook alerts %s ID", verb)
		}
		if id, err = strconv.ParseInt(rest[0], 10, 64); err != nil {
			return fmt.Errorf("issue id %q: want a number, as alerts ls prints it", rest[0])
		}
	default:
		fmt.Fprint(stderr, alertsUsage)
		return fmt.Errorf("alerts %s: want ls, show, ack or resolve", verb)
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	if verb == "ls" || verb == "list" {
		page, err := op.Issues(ctx, admin.IssueFilter{State: *state, Limit: *limit, Cursor: *cursor})
		if err != nil {
			return err
		}
		if *of.json {
			return printJSON(stdout, page)
		}
		printIssues(stdout, page)
		return nil
	}
	var is admin.IssueView
	switch verb {
	case "show":
		is, err = op.Issue(ctx, id)
	case "ack", "acknowledge":
		is, err = op.AcknowledgeIssue(ctx, id)
	default:
		is, err = op.ResolveIssue(ctx, id)
	}
	if err != nil {
		return err
	}
	if *of.json {
		return printJSON(stdout, is)
	}
	printIssue(stdout, is, verb == "show")
	return nil
}

// printIssues is a page of issues as a table.
func printIssues(w io.Writer, page admin.IssuePage) {
	if len(page.Issues) == 0 {
		fmt.Fprintln(w, "no issues")
		return
	}
	tw := table(w)
	fmt.Fprintln(tw, "ID\tSTATE\tKIND\tWHERE\tOPENED\tNOTICES\tMESSAGE")
	for _, is := range page.Issues {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s %s\t%s\t%d\t%s\n", is.ID, is.State, is.Kind, is.Scope, terminalLine(is.Name), ts(is.OpenedAt),
			is.Notices, terminalLine(is.Message))
	}
	tw.Flush()
	if page.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
	}
}

// printIssue is one issue (with its timeline when whole).
func printIssue(w io.Writer, is admin.IssueView, whole bool) {
	fmt.Fprintf(w, "issue %d: %s\n", is.ID, is.State)
	tw := table(w)
	fmt.Fprintf(tw, "kind\t%s\n", is.Kind)
	fmt.Fprintf(tw, "%s\t%s\n", is.Scope, terminalLine(is.Name))
	fmt.Fprintf(tw, "message\t%s\n", terminalLine(is.Message))
	fmt.Fprintf(tw, "value\t%.4g (threshold %.4g)\n", is.Value, is.Threshold)
	fmt.Fprintf(tw, "opened\t%s\n", ts(is.OpenedAt))
	if is.AcknowledgedAt != nil {
		fmt.Fprintf(tw, "acknowledged\t%s by %s\n", ts(*is.AcknowledgedAt), terminalLine(is.AcknowledgedBy))
	}
	if is.ResolvedAt != nil {
		by := "its condition ended"
		if is.ResolvedBy != "" {
			by = "by " + terminalLine(is.ResolvedBy)
		}
		fmt.Fprintf(tw, "resolved\t%s, %s\n", ts(*is.ResolvedAt), by)
	}
	fmt.Fprintf(tw, "notices\t%d\n", is.Notices)
	tw.Flush()
	if !whole || len(is.Timeline) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntimeline:")
	tw = table(w)
	for _, e := range is.Timeline {
		what := e.Event
		if e.Detail != "" {
			what += " " + e.Detail
		}
		if e.By != "" {
			what += " by " + terminalLine(e.By)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", ts(e.At), what)
	}
	tw.Flush()
}
