package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// order: reset. An entity's order is the store's to keep; the one thing an
// operator does to it by hand is forget a version delivered, when one far
// ahead made the entity's later events stale.
func order(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("order", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: oncehook order reset --source S --entity E [--destination D]")
		fmt.Fprintln(stderr, "Forgets the version delivered of an entity (to one destination, or all), so that its next event is current again.")
		fs.PrintDefaults()
	}
	of := addOperatorFlags(fs)
	source := fs.String("source", "", "the ordered source")
	entity := fs.String("entity", "", "the entity's id, as the source's order rule reads it (e.g. Stripe's data.object.id)")
	destination := fs.String("destination", "", "only this destination (default: every destination)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] != "reset" {
		fs.Usage()
		return errUsage
	}
	if *source == "" || *entity == "" {
		return errors.New("order reset: --source and --entity are required")
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	n, err := op.ResetOrder(ctx, *source, *entity, *destination)
	if err != nil {
		return err
	}
	if *of.json {
		return printJSON(stdout, n)
	}
	where := "every destination"
	if *destination != "" {
		where = *destination
	}
	if n.Count == 0 {
		fmt.Fprintf(stdout, "%s/%s: no version kept for %s; nothing to reset\n", *source, *entity, where)
		return nil
	}
	fmt.Fprintf(stdout, "%s/%s: forgot the version delivered to %s (%d reset); its next event is current again (events already stale stay so: replay them)\n",
		*source, *entity, where, n.Count)
	return nil
}
