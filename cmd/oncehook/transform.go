package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/internal/transform"
	"github.com/oncehook/oncehook/kinds"
	"github.com/oncehook/oncehook/store"
)

// transformCmd: test. Runs a destination's transformation on an event (a
// file, or a stored one) as an attempt would, and prints what would be sent,
// with the time and memory the run took. It sends nothing.
func transformCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("transform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: oncehook transform test --config F --destination D (--event FILE | --id N) [--source S --key K --type T]")
		fmt.Fprintln(stderr, "Runs the destination's transformation on an event, as a delivery attempt would, and prints what would be sent. Nothing is sent.")
		fs.PrintDefaults()
	}
	path := fs.String("config", "", "config file (default: $"+configEnv+", else ./oncehook.yaml)")
	destination := fs.String("destination", "", "the destination whose transformation runs")
	eventFile := fs.String("event", "", "a file holding the event's body, as the provider sends it")
	id := fs.Int64("id", 0, "a stored event's id (oncehook events ls): its body, headers, key, type and received time")
	source := fs.String("source", "", "with --event: the event's source (default: the first that routes to the destination)")
	key := fs.String("key", "test", "with --event: the event's key (Math.random is seeded from it)")
	typ := fs.String("type", "", "with --event: the event's type")
	contentType := fs.String("content-type", "application/json", "with --event: the body's content type")
	attempt := fs.Int("attempt", 1, "the attempt's number, as the script's context.attempt")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] != "test" {
		fs.Usage()
		return errUsage
	}
	if *destination == "" || (*eventFile == "") == (*id == 0) {
		return errors.New("transform test: --destination and one of --event FILE or --id N are required")
	}
	cfg, _, err := resolveConfig(*path, false)
	if err != nil {
		return err
	}
	if cfg == nil {
		return fmt.Errorf("transform test: no config: pass --config, set %s, or write %s", configEnv, defaultConfigPath)
	}
	i := slices.IndexFunc(cfg.Destinations, func(d config.Destination) bool { return d.Name == *destination })
	if i < 0 {
		return fmt.Errorf("transform test: no destination %q in the config", *destination)
	}
	cd := cfg.Destinations[i]
	if cd.Transform == nil {
		return fmt.Errorf("transform test: destination %q has no transform", cd.Name)
	}
	scripts, err := oncehook.Transformations(cfg, kinds.All())
	if err != nil {
		return fmt.Errorf("transform test: %w", err)
	}
	for _, s := range scripts {
		defer s.Close()
	}
	script := scripts[cd.Name]
	lease := store.LeasedDelivery{Destination: cd.Name, Attempt: *attempt, ContentType: *contentType, ReceivedAt: time.Now().UTC()}
	if *eventFile != "" {
		body, err := os.ReadFile(*eventFile)
		if err != nil {
			return fmt.Errorf("transform test: %w", err)
		}
		lease.Body, lease.Key, lease.Type, lease.Source = body, *key, *typ, *source
		if lease.Source == "" {
			lease.Source = routedFrom(cfg, cd.Name)
		}
	} else {
		e, err := storedEvent(ctx, cfg, *id)
		if err != nil {
			return err
		}
		lease = e.Delivery(cd.Name, *attempt)
	}
	dest := oncehook.DeliveryDestination(cd, script, nil)

	run, err := measuredRun(ctx, &dest, lease)
	if err != nil {
		return err
	}
	run.destination, run.script = cd.Name, script
	if *asJSON {
		return run.printJSON(stdout)
	}
	return run.print(stdout)
}

// transformRun is one run of a destination's script by transform test:
// what it made, and what it cost.
type transformRun struct {
	destination string
	script      *transform.Script
	*deliver.Preview
	took      time.Duration
	allocated uint64 // on Go's heap
	grew      int64  // the process's peak resident memory
}

// measuredRun runs dest's script on lease, as a delivery attempt would,
// measuring its time and memory.
func measuredRun(ctx context.Context, dest *deliver.Destination, lease store.LeasedDelivery) (*transformRun, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	peakBefore := peakRSS()
	start := time.Now()
	p, err := deliver.PreviewTransform(ctx, dest, lease)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		return nil, fmt.Errorf("transform test: %w (after %s)", err, took.Round(time.Microsecond))
	}
	return &transformRun{Preview: p, took: took, allocated: after.TotalAlloc - before.TotalAlloc, grew: max(peakRSS()-peakBefore, 0)}, nil
}

// droppedErr is the run's error when the script set a header it may not
// set: it is sent without its value. The run succeeded, but not as the
// script meant, which a check in CI must hear.
func (r *transformRun) droppedErr() error {
	if len(r.Output.Dropped) == 0 {
		return nil
	}
	names := make([]string, len(r.Output.Dropped))
	for i, d := range r.Output.Dropped {
		names[i] = d.Header
	}
	return fmt.Errorf("transform test: the script sets %s, not its to set: a delivery is sent without its value", strings.Join(names, ", "))
}

func (r *transformRun) printJSON(stdout io.Writer) error {
	res := r.Output
	dropped := make([]map[string]string, len(res.Dropped))
	for i, d := range res.Dropped {
		dropped[i] = map[string]string{"header": d.Header, "why": d.Why}
	}
	if err := printJSON(stdout, map[string]any{
		"destination": r.destination, "script": r.script.Name(), "script_digest": r.script.Digest(),
		"skipped": res.Skip, "url": r.URL, "content_type": r.Message.ContentType, "headers": r.Header,
		"body": string(r.Body), "sent_digest": res.Digest(), "took_ms": float64(r.took.Microseconds()) / 1000,
		"go_allocated_bytes": r.allocated, "peak_rss_growth_bytes": r.grew, "logs": res.Logs,
		"dropped_headers": dropped, "env": r.script.EnvNames(),
	}); err != nil {
		return err
	}
	return r.droppedErr()
}

func (r *transformRun) print(stdout io.Writer) error {
	res, msg := r.Output, r.Message
	fmt.Fprintf(stdout, "destination %s, script %s (%s)\n", r.destination, r.script.Name(), r.script.Digest())
	if names := r.script.EnvNames(); len(names) > 0 {
		fmt.Fprintf(stdout, "process.env: %s (their values are shown as %s wherever they stand)\n", strings.Join(names, ", "), redact.Mask)
	}
	fmt.Fprintf(stdout, "took %s; memory: %s allocated on Go's heap, the process's peak grew by %s (the script's own, QuickJS's, is bounded by max_memory)\n",
		r.took.Round(time.Microsecond), bytesText(int64(r.allocated)), bytesText(r.grew))
	for _, l := range res.Logs {
		fmt.Fprintln(stdout, "console:", l)
	}
	if res.Skip {
		fmt.Fprintln(stdout, "skipped: the script returned null (or set cancel): this destination would not get the event")
		return nil
	}
	fmt.Fprintln(stdout)
	if r.URL != "" {
		fmt.Fprintf(stdout, "POST %s\n", r.URL)
	}
	if msg.ContentType != "" {
		fmt.Fprintf(stdout, "Content-Type: %s\n", msg.ContentType)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		for _, v := range r.Header[k] {
			fmt.Fprintf(stdout, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintf(stdout, "\n%s\n\nsent digest %s\n", r.Body, res.Digest())
	for _, d := range res.Dropped {
		fmt.Fprintf(stdout, "dropped: %s (%s)\n", d.Header, d.Why)
	}
	return r.droppedErr()
}

// routedFrom is the first source that routes to the destination, the one an
// event from a file is taken to come from.
func routedFrom(cfg *config.Config, destination string) string {
	for _, s := range cfg.Sources {
		for _, d := range s.Destinations {
			if d.Name == destination {
				return s.Name
			}
		}
	}
	return "cli"
}

func storedEvent(ctx context.Context, cfg *config.Config, id int64) (admin.EventDetail, error) {
	svc, ctx, done, err := configService(ctx, cfg)
	if err != nil {
		return admin.EventDetail{}, err
	}
	defer done()
	e, err := svc.Event(ctx, id)
	if err != nil {
		return e, fmt.Errorf("transform test: event %d: %w", id, err)
	}
	return e, nil
}

// peakRSS is the process's peak resident memory (Linux's VmHWM), 0 where
// it cannot be read.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
