package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// replay requeues stored events for delivery, on purpose: one event by its
// source and key, or every dead letter (of one destination). The running
// gateway picks them up (at once on PostgreSQL, within seconds on SQLite).
func replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfigPath, "config file")
	source := fs.String("source", "", "the event's source")
	key := fs.String("key", "", "the event's key")
	dead := fs.Bool("dead", false, "replay every dead letter instead")
	destination := fs.String("destination", "", "with --dead: only this destination's")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *dead == (*source != "" || *key != "") || (!*dead && (*source == "" || *key == "")) {
		fs.Usage()
		return errors.New("give either --source and --key, or --dead")
	}
	_, st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.Close()
	var n int
	if *dead {
		n, err = st.ReplayDead(ctx, *destination, time.Now())
	} else {
		n, err = st.Replay(ctx, *source, *key, time.Now())
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "requeued %d deliveries\n", n)
	return nil
}
