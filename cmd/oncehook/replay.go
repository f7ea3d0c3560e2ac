package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/admin"
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
	if err := parseFlags(fs, args); err != nil {
		return err
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
	// Through the operator's service, as `events replay` and `dead retry`
	// are: the same store operations, and written to the audit log.
	svc, ctx, done, err := configService(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	var n admin.Count
	if *dead {
		n, err = svc.RetryDeadLetters(ctx, admin.DeadFilter{Destination: *destination, All: *destination == ""}, false)
	} else {
		var page admin.EventPage
		page, err = svc.Events(ctx, admin.EventFilter{Source: *source, Key: *key, Limit: 1})
		if err == nil && len(page.Events) == 0 {
			return fmt.Errorf("replay %s:%s: no such event stored (never received, or swept after its window)", *source, *key)
		}
		if err == nil {
			n, err = svc.ReplayEvent(ctx, page.Events[0].ID)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "requeued %s\n", plural(n.Count, "delivery", "deliveries"))
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
