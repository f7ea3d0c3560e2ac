package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/oncehook/oncehook/admin"
)

// replay is the older spelling of `events replay --source S --key K` and
// `dead retry [--destination D]`, kept for the scripts that have it: the
// same operator calls, so there is one replay (audited, and with --api
// against a running gateway as well as on the store directly).
func replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	source := fs.String("source", "", "the event's source")
	key := fs.String("key", "", "the event's key")
	retryDead := fs.Bool("dead", false, "replay every dead letter instead (as dead retry does)")
	destination := fs.String("destination", "", "with --dead: only this destination's")
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	if *retryDead == (*source != "" || *key != "") || (!*retryDead && (*source == "" || *key == "")) {
		fs.Usage()
		return errors.New("give either --source and --key, or --dead")
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	var n admin.Count
	if *retryDead {
		n, err = op.RetryDeadLetters(ctx, admin.DeadFilter{Destination: *destination, All: *destination == ""}, false)
	} else {
		n, err = op.ReplayEvents(ctx, admin.EventFilter{Source: *source, Key: *key}, false)
	}
	if err != nil {
		return err
	}
	if *of.json {
		return printJSON(stdout, n)
	}
	fmt.Fprintf(stdout, "requeued %s\n", plural(n.Count, "delivery", "deliveries"))
	return nil
}
