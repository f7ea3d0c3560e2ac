package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/config"
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
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	// An unknown name is a typo, not "nothing to replay".
	if *source != "" && !slices.ContainsFunc(cfg.Sources, func(s config.Source) bool { return s.Name == *source }) {
		return fmt.Errorf("--source %q: no such source in %s (%s)", *source, *path, names(cfg.Sources, func(s config.Source) string { return s.Name }))
	}
	if *destination != "" && !slices.ContainsFunc(cfg.Destinations, func(d config.Destination) bool { return d.Name == *destination }) {
		return fmt.Errorf("--destination %q: no such destination in %s (%s)", *destination, *path, names(cfg.Destinations, func(d config.Destination) string { return d.Name }))
	}
	st, err := openConfigStore(ctx, cfg)
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
	fmt.Fprintf(stdout, "requeued %s\n", plural(n, "delivery", "deliveries"))
	return nil
}

func names[T any](items []T, name func(T) string) string {
	if len(items) == 0 {
		return "none configured"
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return "known: " + strings.Join(out, ", ")
}
