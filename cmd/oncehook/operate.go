package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/duration"
	"github.com/oncehook/oncehook/kinds"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// The operator's commands mirror the admin API: each works on the store
// directly (--config, as replay and migrate do) or on a running gateway's
// API (--api URL --token T, or ONCEHOOK_API and ONCEHOOK_API_TOKEN). On the
// store directly, a running gateway sees a change within seconds (a pause
// within 2s; a replay at its next poll, or at once on PostgreSQL).

const (
	apiEnv   = "ONCEHOOK_API"
	tokenEnv = "ONCEHOOK_API_TOKEN"
)

// operatorFlags are the flags every operator command takes.
type operatorFlags struct {
	config *string
	api    *string
	token  *string
	json   *bool
}

func addOperatorFlags(fs *flag.FlagSet) operatorFlags {
	return operatorFlags{
		config: fs.String("config", "", "config file: work on its store directly (default "+defaultConfigPath+", or $"+configEnv+")"),
		api:    fs.String("api", os.Getenv(apiEnv), "a running gateway's API URL, e.g. http://127.0.0.1:8081 (or $"+apiEnv+")"),
		token:  fs.String("token", "", "an API token, with --api (default $"+tokenEnv+")"),
		json:   fs.Bool("json", false, "print JSON instead of a table"),
	}
}

// open returns the Operator the flags name, and a func to close it.
func (f operatorFlags) open(ctx context.Context) (admin.Operator, context.Context, func(), error) {
	if *f.api != "" {
		token := *f.token
		if token == "" {
			token = os.Getenv(tokenEnv)
		}
		if token == "" {
			return nil, ctx, nil, fmt.Errorf("--api needs --token (or $%s)", tokenEnv)
		}
		return api.NewClient(*f.api, token, nil), ctx, func() {}, nil
	}
	cfg, _, err := f.loadConfig()
	if err != nil {
		return nil, ctx, nil, err
	}
	svc, ctx, done, err := configService(ctx, cfg)
	return svc, ctx, done, err
}

// loadConfig reads the config the flags name (--config, else
// $ONCEHOOK_CONFIG, else ./oncehook.yaml, else the demo's when its store
// is here), and says which.
func (f operatorFlags) loadConfig() (*config.Config, string, error) {
	path := *f.config
	if path == "" {
		path = os.Getenv(configEnv)
	}
	if path == "" {
		path = defaultConfigPath
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			// No config here: the demo's store, when the demo ran here (it
			// writes its database in the working directory), else say how
			// to reach a gateway.
			demo := config.Demo(config.DefaultListen)
			if _, err := os.Stat(sqlite.Path(demo.Store)); err != nil {
				return nil, "", fmt.Errorf("no %s here and no demo store (%s): pass --config F, or --api URL --token T for a running gateway (the demo's banner prints both)", path, sqlite.Path(demo.Store))
			}
			return demo, "the demo", nil
		}
	}
	cfg, err := oncehook.LoadConfig(path, kinds.All())
	return cfg, path, err
}

// openExistingStore opens cfg's store, one that is there: opening a
// SQLite store creates it, and run from another folder, a relative path
// would make an empty store there and answer from it, as if nothing were
// stored. An operator's command only reads and changes a store that is
// there.
func openExistingStore(ctx context.Context, cfg *config.Config) (store.Store, error) {
	if cfg.StoreScheme() == "sqlite" {
		path := sqlite.Path(cfg.Store)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			abs, _ := filepath.Abs(path)
			return nil, fmt.Errorf("no store at %s (store: %s; a relative path is read from the folder oncehook runs in): run from the gateway's folder, or use --api URL --token T", abs, cfg.Store)
		}
	}
	return openConfigStore(ctx, cfg)
}

// configService is the operator's service on cfg's store, its changes
// audited as cli:<user>.
func configService(ctx context.Context, cfg *config.Config) (*admin.Service, context.Context, func(), error) {
	st, err := openExistingStore(ctx, cfg)
	if err != nil {
		return nil, ctx, nil, err
	}
	// The API's sources and destinations are listed beside the file's,
	// as the running gateway lists them.
	sources, dests, err := oncehook.StoredCatalog(ctx, cfg, st)
	if err != nil {
		st.Close()
		return nil, ctx, nil, err
	}
	svc, err := admin.New(admin.Options{Store: st, Sources: sources, Destinations: dests})
	if err != nil {
		st.Close()
		return nil, ctx, nil, err
	}
	actor := "cli"
	if u, err := user.Current(); err == nil && u.Username != "" {
		actor = "cli:" + u.Username
	}
	return svc, admin.WithActor(ctx, actor), func() { st.Close() }, nil
}

// parseFlags parses a command's flags: -h and --help are flag.ErrHelp
// (the usage is printed, and the command exits 0); any other error is
// errUsage (the flag package already said what is wrong).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

// helpAsked reports whether arg asks for help, as the flag package reads
// -h and --help.
func helpAsked(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// parse parses flags wherever they stand among the arguments ("show 12
// --json" as well as "show --json 12") and returns the others.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return rest, nil
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// flagsOnly parses the flags of a command that takes no argument, before
// or after them, and refuses any argument: ignored, one ran the command on
// something else than it was given (`validate new.yaml` checked
// ./oncehook.yaml and said it was valid; `serve new.yaml` ran the demo).
// A file name where the command reads a config is pointed to --config.
func flagsOnly(fs *flag.FlagSet, args []string) error {
	rest, err := parse(fs, args)
	if err != nil || len(rest) == 0 {
		return err
	}
	if f := fs.Lookup("config"); f != nil && fs.Name() != "reload" && (strings.HasSuffix(rest[0], ".yaml") || strings.HasSuffix(rest[0], ".yml")) {
		return fmt.Errorf("%s takes no argument (got %q); did you mean --config %s?", fs.Name(), rest[0], rest[0])
	}
	return fmt.Errorf("%s takes no argument (got %q)", fs.Name(), rest[0])
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0) }

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// since reads --since (a duration back from now) into a time.
func since(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(-d)
}

// sinceBack refuses a --since that points ahead, which would read as no
// bound (every event) further on.
func sinceBack(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--since %s: want a span back from now, e.g. 1h or 7d", d)
	}
	return nil
}

// pageLimit refuses a --limit below one, which would read as the default
// page further on.
func pageLimit(n int) error {
	if n < 1 {
		return fmt.Errorf("--limit %d: want 1 to 500", n)
	}
	return nil
}

func parseTimeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time, e.g. 2026-11-30T15:00:00Z", name, v)
	}
	return t, nil
}

// events: ls, show, replay, deliver, skip.
func events(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: oncehook events ls|show|replay|deliver|skip [flags]")
		return errUsage
	}
	fs := flag.NewFlagSet("events "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	ef := addEventFlags(fs)
	if helpAsked(args[0]) {
		// "events --help": no subcommand yet, so no flag set parsed it.
		fmt.Fprintln(stderr, "usage: oncehook events ls|show|replay|deliver|skip [flags]")
		fs.PrintDefaults()
		return flag.ErrHelp
	}
	// What each takes besides flags, for its --help (the flag set's
	// default names only the flags, all of the events commands' alike).
	if synopsis, ok := eventsSynopsis[args[0]]; ok {
		fs.Usage = func() {
			fmt.Fprintf(stderr, "usage: oncehook events %s %s\n", args[0], synopsis)
			fs.PrintDefaults()
		}
	}
	rest, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if err := eventsTakes(fs, args[0], rest); err != nil {
		return err
	}
	if err := errors.Join(sinceBack(*ef.since), pageLimit(*ef.limit)); err != nil {
		return err
	}
	f, err := ef.filter()
	if err != nil {
		return err
	}
	op, ctx, done, err := ef.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	asJSON := *ef.json
	switch args[0] {
	case "ls", "list":
		if len(rest) > 0 {
			return fmt.Errorf("events ls takes no argument (got %q)", rest[0])
		}
		f.Limit, f.Cursor = *ef.limit, *ef.cursor
		return listEvents(ctx, op, f, asJSON, stdout)
	case "show":
		return showEvent(ctx, op, rest, asJSON, stdout, stderr)
	case "deliver":
		if len(rest) == 0 {
			return deliverEvents(ctx, op, f, *ef.dryRun, asJSON, stdout)
		}
		return deliverEvent(ctx, op, rest, *ef.destination, asJSON, stdout)
	case "skip":
		return skipEvent(ctx, op, rest, *ef.destination, asJSON, stdout)
	case "replay":
		return replayEvents(ctx, op, rest, f, *ef.dryRun, asJSON, stdout)
	}
	return fmt.Errorf("events %s: want ls, show, replay, deliver or skip", args[0])
}

// eventFlagsFor are the events commands that take each flag of theirs
// that not all of them take (the operator's flags, every one takes). The
// events commands share one flag set; a flag one of them does not read
// must be refused, not ignored: "events replay --destination D" replayed
// to every destination, and "events ls --destination D" listed every event.
var eventFlagsFor = map[string][]string{
	"limit": {"ls", "list"}, "cursor": {"ls", "list"},
	"dry-run": {"replay", "deliver"}, "all": {"replay", "deliver"}, "dead": {"replay"},
	"destination": {"deliver", "skip", "replay"},
	// The filter: which events ls lists, a bulk replay requeues and a
	// bulk deliver sends.
	"source": {"ls", "list", "replay", "deliver"}, "state": {"ls", "list", "replay", "deliver"}, "key": {"ls", "list", "replay", "deliver"},
	"type": {"ls", "list", "replay", "deliver"}, "key-prefix": {"ls", "list", "replay", "deliver"}, "since": {"ls", "list", "replay", "deliver"},
	"from": {"ls", "list", "replay", "deliver"}, "to": {"ls", "list", "replay", "deliver"},
	"where": {"ls", "list", "replay", "deliver"}, "scan": {"ls", "list", "replay", "deliver"},
}

// eventsTakes refuses a flag that the events command verb does not read,
// and a filter beside the id of one event to replay.
func eventsTakes(fs *flag.FlagSet, verb string, rest []string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		takers, ok := eventFlagsFor[f.Name]
		switch {
		case err != nil || !ok:
		case !slices.Contains(takers, verb):
			takers = slices.DeleteFunc(slices.Clone(takers), func(v string) bool { return v == "list" })
			do := "do"
			if len(takers) == 1 {
				do = "does"
			}
			err = fmt.Errorf("events %s does not take --%s (events %s %s)", verb, f.Name, strings.Join(takers, " and "), do)
		case verb == "replay" && len(rest) > 0 && f.Name != "dry-run":
			err = fmt.Errorf("events replay %s replays that one event: it takes no --%s (a filter without an id replays what it selects)", rest[0], f.Name)
		case verb == "deliver" && len(rest) > 0 && f.Name != "destination":
			err = fmt.Errorf("events deliver %s delivers that one event: it takes no --%s (a filter without an id delivers what it selects, --dry-run counting it first)", rest[0], f.Name)
		}
	})
	return err
}

// eventsSynopsis is what each events command takes, as its --help says.
var eventsSynopsis = map[string]string{
	"ls":      "[--source S] [--state S] [--key K] [--type T] [--since D] [--where FILTER [--scan N]] [--limit N] [--cursor C] [flags]",
	"show":    "ID | SOURCE KEY (a key as events ls prints it, or as the provider sent it; -- just before a key that starts with -) [flags]",
	"replay":  "[ID] | filter flags (--all for every stored event) [--destination D] [--dead] [--dry-run] [flags]",
	"deliver": "ID --destination D | filter flags (--all for every stored event) --destination D [--dry-run] [flags]",
	"skip":    "ID --destination D [flags]",
}

// eventFlags are the flags of every events command: the operator's, a
// filter, a page, and what replay, deliver and skip take.
type eventFlags struct {
	operatorFlags
	source, state, key, typ, prefix, from, to *string
	where                                     *string
	since                                     *time.Duration
	limit, scan                               *int
	cursor, destination                       *string
	dryRun, all, dead                         *bool
}

func addEventFlags(fs *flag.FlagSet) eventFlags {
	return eventFlags{
		operatorFlags: addOperatorFlags(fs),
		source:        fs.String("source", "", "only this source's events"),
		state:         fs.String("state", "", "only events in this state: "+strings.Join(store.EventStates(), ", ")),
		key:           fs.String("key", "", "only the event with this key"),
		typ:           fs.String("type", "", "only events of this type (a trailing * matches a prefix: invoice.*)"),
		prefix:        fs.String("key-prefix", "", "only keys starting with this"),
		since:         durationFlag(fs, "since", 0, "only events received in this last span, e.g. 1h or 7d"),
		from:          fs.String("from", "", "only events received at or after this time (RFC 3339)"),
		to:            fs.String("to", "", "only events received before this time (RFC 3339)"),
		where:         fs.String("where", "", `only events whose body and headers match this filter, written as a route's filter (JSON): '{"body":{"data":{"customer":"cus_1"}}}'`),
		scan:          fs.Int("scan", 0, fmt.Sprintf("with --where: read at most this many events, newest first (default %d)", admin.DefaultScan)),
		limit:         fs.Int("limit", 50, "with ls: events per page"),
		cursor:        fs.String("cursor", "", "with ls: the next page's cursor, as the previous page printed it"),
		dryRun:        fs.Bool("dry-run", false, "with replay or deliver by filter: only count what would be replayed or delivered"),
		all:           fs.Bool("all", false, "with replay or deliver and no filter: every stored event"),
		destination:   fs.String("destination", "", "with deliver: the destination their route passed over; with skip: the destination whose delivery to end; with a replay by filter: only the deliveries to this destination"),
		dead:          fs.Bool("dead", false, "with a replay by filter: only the dead letters among what it selects (retry them)"),
	}
}

// filter is the events the flags select (--from overrides --since).
func (ef eventFlags) filter() (admin.EventFilter, error) {
	f := admin.EventFilter{Source: *ef.source, Key: *ef.key, Type: *ef.typ, State: *ef.state, KeyPrefix: *ef.prefix, From: since(*ef.since), All: *ef.all,
		Where: *ef.where, Scan: *ef.scan, Dead: *ef.dead}
	if ef.destination != nil {
		f.Destination = *ef.destination // read by a replay; deliver and skip take it apart
	}
	var err error
	if *ef.from != "" {
		if f.From, err = parseTimeFlag("from", *ef.from); err != nil {
			return f, err
		}
	}
	f.To, err = parseTimeFlag("to", *ef.to)
	return f, err
}

// listEvents prints a page of events.
func listEvents(ctx context.Context, op admin.Operator, f admin.EventFilter, asJSON bool, stdout io.Writer) error {
	page, err := op.Events(ctx, f)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, page)
	}
	if len(page.Events) == 0 {
		// A header alone reads as a listing that broke; say what matched.
		fmt.Fprintln(stdout, "no events match"+unknownNames(ctx, op, f.Source, ""))
		searched(stdout, page.Searched)
		if page.NextCursor != "" { // a search stopped by its bound goes on from here
			fmt.Fprintf(stdout, "more: --cursor %s\n", page.NextCursor)
		}
		return nil
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "ID\tSOURCE\tKEY\tTYPE\tSTATE\tRECEIVED\tBYTES\tDELIVERIES")
	for _, e := range page.Events {
		key := e.Key
		if e.Keyless {
			key += " (keyless)"
		}
		typ := e.Type
		if typ == "" {
			typ = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", e.ID, e.Source, terminalLine(key), terminalLine(typ), e.State, ts(e.ReceivedAt), e.Size, e.DeliveryCount)
	}
	tw.Flush()
	searched(stdout, page.Searched)
	if page.NextCursor != "" {
		fmt.Fprintf(stdout, "more: --cursor %s\n", page.NextCursor)
	}
	return nil
}

// unknownNames explains an empty listing whose filter names a source or
// destination the config does not have: most often a typo, which would
// otherwise read as "nothing happened there". It is a hint, not a
// refusal: a source or destination removed from the config still lists
// the events stored under it. "" when every name is known (or the names
// cannot be read).
func unknownNames(ctx context.Context, op admin.Operator, source, destination string) string {
	var hint []string
	if h := unknownName(ctx, "source", source, op.Sources, func(s admin.SourceView) string { return s.Name }); h != "" {
		hint = append(hint, h)
	}
	if h := unknownName(ctx, "destination", destination, op.Destinations, func(d admin.DestinationView) string { return d.Name }); h != "" {
		hint = append(hint, h)
	}
	if len(hint) == 0 {
		return ""
	}
	return ": " + strings.Join(hint, "; ")
}

// unknownName says that name (when set) is not among the kind's names
// that list reads from the config, and which are; "" when it is, or when
// they cannot be read.
func unknownName[T any](ctx context.Context, kind, name string, list func(context.Context) ([]T, error), nameOf func(T) string) string {
	if name == "" {
		return ""
	}
	items, err := list(ctx)
	if err != nil {
		return ""
	}
	known := make([]string, len(items))
	for i, it := range items {
		known[i] = nameOf(it)
	}
	if slices.Contains(known, name) {
		return ""
	}
	if len(known) == 0 {
		known = []string{"none"}
	}
	return fmt.Sprintf("no %s named %q in the config (%ss: %s)", kind, name, kind, strings.Join(known, ", "))
}

// showEvent prints one event, found by its id or by its source and key,
// with its deliveries' attempts and its payload.
func showEvent(ctx context.Context, op admin.Operator, rest []string, asJSON bool, stdout, stderr io.Writer) error {
	var id int64
	switch len(rest) {
	case 1:
		var err error
		if id, err = strconv.ParseInt(rest[0], 10, 64); err != nil {
			return fmt.Errorf("event id %q: want a number, as events ls prints it (or: events show SOURCE KEY)", rest[0])
		}
	case 2:
		// The key as stored, as events ls prints it and replay --key and
		// ls --key take it; or, when no event has it, as the provider
		// sent it (from a log or its dashboard), which is stored in its
		// safe form (café is stored caf%C3%A9). Two events can answer,
		// one to each reading (keys %41 and %2541): the key as events ls
		// prints it is the one shown, as replay --key acts on it, and the
		// other is named, by its id.
		find := func(key string) (int64, error) {
			page, err := op.Events(ctx, admin.EventFilter{Source: rest[0], Key: key, Limit: 1})
			if err != nil || len(page.Events) == 0 {
				return 0, err
			}
			return page.Events[0].ID, nil
		}
		asStored, err := find(rest[1])
		if err != nil {
			return err
		}
		asSent := asStored
		if safe := provider.SafeKey(rest[1]); safe != rest[1] {
			if asSent, err = find(safe); err != nil {
				return err
			}
		}
		switch {
		case asStored == 0 && asSent == 0:
			return fmt.Errorf("no event with key %q in source %q", rest[1], rest[0])
		case asStored != 0 && asSent != 0 && asStored != asSent:
			fmt.Fprintf(stderr, "note: event %d, stored with key %q, is shown; event %d is the one whose provider sent %q (stored as %q): events show %d\n",
				asStored, rest[1], asSent, rest[1], provider.SafeKey(rest[1]), asSent)
			id = asStored
		case asStored != 0:
			id = asStored
		default:
			id = asSent
		}
	default:
		return errors.New("usage: oncehook events show ID, or events show SOURCE KEY")
	}
	e, err := op.Event(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, e)
	}
	fmt.Fprintf(stdout, "event %d  %s  %s  %s\n", e.ID, e.Source, terminalLine(e.Key), e.State)
	if e.Type != "" {
		fmt.Fprintf(stdout, "  type %s\n", terminalLine(e.Type))
	}
	fmt.Fprintf(stdout, "  received %s, dedup window until %s, %d bytes of %s\n", ts(e.ReceivedAt), ts(e.ExpiresAt), e.Size, e.ContentType)
	for name, vs := range e.Headers {
		fmt.Fprintf(stdout, "  %s: %s\n", name, terminalLine(strings.Join(vs, ", ")))
	}
	for _, d := range e.Deliveries {
		printDelivery(stdout, d)
	}
	if len(e.Filtered) > 0 {
		fmt.Fprintf(stdout, "passed over by %s (their types or filter): events deliver %d --destination D sends it to one\n",
			strings.Join(e.Filtered, ", "), e.ID)
	}
	body := e.Body
	if body == "" && len(e.BodyBase64) > 0 {
		body = fmt.Sprintf("(%d bytes, not UTF-8; --json shows them)", len(e.BodyBase64))
	}
	fmt.Fprintf(stdout, "payload:\n%s\n", terminalText(body))
	return nil
}

// printDelivery prints a delivery and its attempts, one a line.
func printDelivery(stdout io.Writer, d admin.DeliveryDetail) {
	// A replay starts the count again: say so, rather than print a
	// history of three attempts under "after 1 attempt".
	count := plural(d.Attempts, "attempt", "attempts")
	if len(d.History) > d.Attempts && d.Attempts > 0 {
		count += fmt.Sprintf(" since its last replay, %d in all", len(d.History))
	}
	fmt.Fprintf(stdout, "delivery to %s: %s after %s\n", d.Destination, d.State, count)
	for i, a := range d.History {
		if i > 0 && a.Attempt <= d.History[i-1].Attempt {
			fmt.Fprintln(stdout, "  replayed:")
		}
		// To the millisecond: a retry can follow its attempt within the
		// same second, and durations are kept in whole milliseconds.
		line := fmt.Sprintf("  #%d %s %4.0fms %s", a.Attempt, a.StartedAt.UTC().Format("2006-01-02 15:04:05.000"), a.DurationMS, a.Outcome)
		status := ""
		if a.Status != 0 {
			status = fmt.Sprintf("HTTP %d", a.Status)
			line += " " + status
		}
		// A destination's answer is whatever it sent: its control
		// bytes (ANSI escapes) must not reach the terminal. An error
		// that only repeats the status is not printed twice.
		if a.Error != "" && a.Error != status {
			line += " " + terminalLine(a.Error)
		}
		if a.Response != "" {
			line += " | " + terminalLine(a.Response)
		}
		fmt.Fprintln(stdout, line)
	}
}

// replayEvents replays one event (by id) or every event f selects.
func replayEvents(ctx context.Context, op admin.Operator, rest []string, f admin.EventFilter, dryRun, asJSON bool, stdout io.Writer) error {
	var n admin.Count
	switch len(rest) {
	case 1:
		id, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil {
			return fmt.Errorf("event id %q: want a number, as events ls prints it", rest[0])
		}
		if dryRun {
			return errors.New("--dry-run counts a filter's replay; one event's replay needs none")
		}
		if n, err = op.ReplayEvent(ctx, id); err != nil {
			return err
		}
	case 0:
		var err error
		if n, err = op.ReplayEvents(ctx, f, dryRun); err != nil {
			return err
		}
	default:
		return errors.New("usage: oncehook events replay ID, or oncehook events replay --source S --state dead ... [--dry-run]")
	}
	if asJSON {
		return printJSON(stdout, n)
	}
	switch {
	case n.DryRun:
		fmt.Fprintf(stdout, "would requeue %s (dry run)\n", plural(n.Count, "delivery", "deliveries"))
	case n.Count == 0 && len(rest) == 1:
		// One event, nothing requeued: say why, not a bare zero.
		fmt.Fprintf(stdout, "requeued 0 deliveries: event %s has none to requeue now (a delivery whose attempt is in flight is left to it; one routed nowhere has none): see events show %s\n", rest[0], rest[0])
	default:
		fmt.Fprintf(stdout, "requeued %s\n", plural(n.Count, "delivery", "deliveries"))
	}
	searched(stdout, n.Searched)
	return nil
}

// deliverEvents sends every event f selects to f.Destination, where their
// route passed over (those already there are counted and left alone).
func deliverEvents(ctx context.Context, op admin.Operator, f admin.EventFilter, dryRun, asJSON bool, stdout io.Writer) error {
	if f.Destination == "" {
		return errors.New("usage: oncehook events deliver --destination NAME, with an event's ID or filter flags (--where, --source, ...) [--dry-run]")
	}
	n, err := op.DeliverEvents(ctx, f, dryRun)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, n)
	}
	fmt.Fprintln(stdout, deliveredLine(n, f.Destination))
	searched(stdout, n.Searched)
	return nil
}

// deliveredLine says what a bulk delivery did, or in a dry run would do,
// and what it left alone.
func deliveredLine(n admin.Count, destination string) string {
	line := fmt.Sprintf("added a delivery to %s of %s", destination, plural(n.Count, "event", "events"))
	if n.DryRun {
		line = fmt.Sprintf("would add a delivery to %s of %s (dry run)", destination, plural(n.Count, "event", "events"))
	}
	var left []string
	if n.Already > 0 {
		left = append(left, fmt.Sprintf("%s already had one there, left alone (replay with --destination %s to send again)",
			plural(n.Already, "event", "events"), destination))
	}
	if n.Gone > 0 {
		left = append(left, fmt.Sprintf("%s had no body left (body_retention dropped it): nothing to deliver", plural(n.Gone, "event", "events")))
	}
	if len(left) > 0 {
		line += "; " + strings.Join(left, "; ")
	}
	return line
}

// skipEvent ends one event's pending delivery without delivering it: the
// way past a fifo head that cannot succeed.
func skipEvent(ctx context.Context, op admin.Operator, rest []string, destination string, asJSON bool, stdout io.Writer) error {
	return toDestination(ctx, "skip", op.SkipEvent, rest, destination, asJSON, stdout, func(id int64, n admin.Count) string {
		if n.Count == 0 {
			return fmt.Sprintf("event %d has no pending delivery to %s", id, destination)
		}
		return fmt.Sprintf("skipped event %d's delivery to %s: it is a dead letter now, and its entity's next event goes", id, destination)
	})
}

// deliverEvent sends one event where its route passed over.
func deliverEvent(ctx context.Context, op admin.Operator, rest []string, destination string, asJSON bool, stdout io.Writer) error {
	return toDestination(ctx, "deliver", op.DeliverEvent, rest, destination, asJSON, stdout, func(id int64, n admin.Count) string {
		if n.Count == 0 {
			return fmt.Sprintf("event %d already has a delivery to %s: replay it (events replay %d)", id, destination, id)
		}
		return fmt.Sprintf("added a delivery of event %d to %s", id, destination)
	})
}

// toDestination runs `events VERB ID --destination NAME` and says what it did.
func toDestination(ctx context.Context, verb string, act func(context.Context, int64, string) (admin.Count, error),
	rest []string, destination string, asJSON bool, stdout io.Writer, said func(int64, admin.Count) string) error {
	if len(rest) != 1 || destination == "" {
		return fmt.Errorf("usage: oncehook events %s ID --destination NAME", verb)
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil {
		return fmt.Errorf("event id %q: want a number, as events ls prints it", rest[0])
	}
	n, err := act(ctx, id, destination)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, n)
	}
	fmt.Fprintln(stdout, said(id, n))
	return nil
}

// dead: ls, retry, purge.
func dead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: oncehook dead ls|retry|purge [flags]")
		return errUsage
	}
	fs := flag.NewFlagSet("dead "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	destination := fs.String("destination", "", "only this destination's dead letters")
	source := fs.String("source", "", "only this source's dead letters")
	limit := fs.Int("limit", 50, "with ls: dead letters per page")
	cursor := fs.String("cursor", "", "with ls: the next page's cursor")
	dryRun := fs.Bool("dry-run", false, "with retry or purge: only count")
	all := fs.Bool("all", false, "with retry or purge and no filter: every dead letter")
	if helpAsked(args[0]) {
		// "dead --help": no subcommand yet, so no flag set parsed it.
		fmt.Fprintln(stderr, "usage: oncehook dead ls|retry|purge [flags]")
		fs.PrintDefaults()
		return flag.ErrHelp
	}
	rest, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("dead %s takes no argument (got %q)", args[0], rest[0])
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	f := admin.DeadFilter{Destination: *destination, Source: *source, All: *all}
	switch args[0] {
	case "ls", "list":
		if err := pageLimit(*limit); err != nil {
			return err
		}
		f.Limit, f.Cursor = *limit, *cursor
		page, err := op.DeadLetters(ctx, f)
		if err != nil {
			return err
		}
		if *of.json {
			return printJSON(stdout, page)
		}
		if len(page.DeadLetters) == 0 {
			fmt.Fprintln(stdout, "no dead letters match"+unknownNames(ctx, op, f.Source, f.Destination)) // as events ls says it
			return nil
		}
		tw := table(stdout)
		fmt.Fprintln(tw, "EVENT\tSOURCE\tKEY\tDESTINATION\tATTEMPTS\tLAST\tDIED")
		for _, d := range page.DeadLetters {
			last := d.LastError // it names the status when there was one
			if last == "" && d.LastStatus != 0 {
				last = fmt.Sprintf("HTTP %d", d.LastStatus)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.EventID, d.Source, d.Key, d.Destination, d.Attempts, terminalLine(last), ts(d.DiedAt))
		}
		tw.Flush()
		if page.NextCursor != "" {
			fmt.Fprintf(stdout, "more: --cursor %s\n", page.NextCursor)
		}
		return nil
	case "retry", "purge":
		var n admin.Count
		if args[0] == "retry" {
			n, err = op.RetryDeadLetters(ctx, f, *dryRun)
		} else {
			n, err = op.PurgeDeadLetters(ctx, f, *dryRun)
		}
		if err != nil {
			return err
		}
		if *of.json {
			return printJSON(stdout, n)
		}
		// One wording for every dry run: "would <verb> N ..." (as events
		// replay says it), and "<verbed> N ..." when done.
		verb, done := "requeue", "requeued"
		if args[0] == "purge" {
			verb, done = "purge", "purged"
		}
		if n.DryRun {
			fmt.Fprintf(stdout, "would %s %s (dry run)\n", verb, plural(n.Count, "dead letter", "dead letters"))
		} else {
			fmt.Fprintf(stdout, "%s %s\n", done, plural(n.Count, "dead letter", "dead letters"))
		}
		return nil
	}
	return fmt.Errorf("dead %s: want ls, retry or purge", args[0])
}

// destinations: ls, pause, resume.
func destinations(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("destinations", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	obf := addObjectFlags(fs)
	fs.Usage = func() {
		// Its subcommands, which the flag set's default usage leaves out.
		fmt.Fprint(stderr, `usage: oncehook destinations [ls]               each destination's queue: pending, in flight, dead, held
       oncehook destinations pause|resume NAME  hold a destination's deliveries (intake keeps accepting), and let them go
       oncehook destinations open-breaker|close-breaker NAME  its circuit breaker, by hand
       oncehook destinations create -f FILE     create one through the API (JSON or YAML, the config file's fields; - for stdin)
       oncehook destinations show NAME          one destination: its version and fields (secrets as fingerprints)
       oncehook destinations update NAME -f PATCH [--if-version N]   change one by a JSON merge patch
       oncehook destinations rm NAME [--if-version N]  delete one (refused while a source routes to it)
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
		return objectCmd(ctx, destinationKind, sub, rest, of, obf, stdout)
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	switch sub {
	case "ls", "list":
		list, err := op.Destinations(ctx)
		if err != nil {
			return err
		}
		if *of.json {
			return printJSON(stdout, list)
		}
		tw := table(stdout)
		fmt.Fprintln(tw, "DESTINATION\tMANAGED\tSTATE\tPENDING\tIN FLIGHT\tOLDEST PENDING\tDEAD\tDELIVERED 24H")
		for _, d := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\n", d.Name, orDash(d.ManagedBy), destinationState(d), d.Pending, d.Leased, oldestPending(d), d.Dead, d.Last24h.Delivered)
		}
		return tw.Flush()
	case "pause", "resume":
		if len(rest) != 1 {
			return fmt.Errorf("usage: oncehook destinations %s NAME", sub)
		}
		d, err := op.SetPaused(ctx, rest[0], sub == "pause")
		if err != nil {
			return err
		}
		if *of.json {
			return printJSON(stdout, d)
		}
		if d.Paused {
			fmt.Fprintf(stdout, "%s paused: its deliveries are held (%d pending); intake keeps accepting\n", d.Name, d.Pending)
		} else {
			fmt.Fprintf(stdout, "%s resumed: %d pending deliveries are due\n", d.Name, d.Pending)
		}
		return nil
	case "open-breaker", "close-breaker":
		if len(rest) != 1 {
			return fmt.Errorf("usage: oncehook destinations %s NAME", sub)
		}
		d, err := op.SetBreaker(ctx, rest[0], sub == "open-breaker")
		if err != nil {
			return err
		}
		if *of.json {
			return printJSON(stdout, d)
		}
		if d.Breaker != nil {
			fmt.Fprintf(stdout, "%s: breaker open until you close it; its deliveries are held (%d pending)\n", d.Name, d.Pending)
		} else {
			fmt.Fprintf(stdout, "%s: breaker closed; %d pending deliveries are due\n", d.Name, d.Pending)
		}
		return nil
	}
	return fmt.Errorf("destinations %s: want ls, create, show, update, rm, pause, resume, open-breaker or close-breaker", sub)
}

// destinationState says whether d sends its pending deliveries, and if
// not why, in the dashboard's words.
func destinationState(d admin.DestinationView) string {
	switch d.State {
	case admin.StateRemoved:
		return "removed from the config: held"
	case admin.StatePaused:
		if d.PausedSince != nil {
			return "paused since " + ts(*d.PausedSince)
		}
		return "paused"
	case admin.StateBreakerHalfOpen:
		return "breaker half-open (probing)"
	case admin.StateBreakerOpen:
		if d.Breaker.Manual {
			return "breaker open: held until closed by hand (opened by " + d.Breaker.OpenedBy + ")"
		}
		return "breaker open: held until " + ts(d.Breaker.Until) + " (" + d.Breaker.Reason + ")"
	case admin.StateRateLimited:
		return fmt.Sprintf("rate-limited: sending at %s, about %s to drain", d.Rate, (time.Duration(d.DrainSeconds) * time.Second).String())
	}
	return "active"
}

func oldestPending(d admin.DestinationView) string {
	if d.OldestPendingSeconds > 0 {
		return (time.Duration(d.OldestPendingSeconds) * time.Second).String()
	}
	return "-"
}

// reload asks a running gateway to read its config file anew (as SIGHUP
// does): through its API only, since it is the gateway that reloads.
func reload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	// The other operator commands work on the config's store; a reload
	// only on a running gateway, which reads its own file.
	fs.Lookup("config").Usage = "not taken: the gateway reloads the file it runs; pass --api, or send it SIGHUP (kill -HUP <pid>)"
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	if *of.api == "" {
		return fmt.Errorf("reload is a running gateway's: pass --api URL --token T (or $%s), or send it SIGHUP (kill -HUP <pid>)", apiEnv)
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	v, err := op.Reload(ctx)
	if err != nil {
		return err
	}
	if *of.json {
		return printJSON(stdout, v)
	}
	fmt.Fprintf(stdout, "reloaded %s: %s, %s\n", v.Config, plural(v.Sources, "source", "sources"), plural(v.Destinations, "destination", "destinations"))
	switch {
	case len(v.Changed) == 0 && len(v.Restart) == 0:
		fmt.Fprintln(stdout, "  nothing changed")
	case len(v.Changed) == 0:
		// Not "nothing changed" above "listen changed": what changed
		// waits for a restart, and nothing was applied now.
		fmt.Fprintln(stdout, "  nothing applied now")
	}
	for _, c := range v.Changed {
		fmt.Fprintln(stdout, "  "+c)
	}
	for _, f := range v.Restart {
		fmt.Fprintf(stdout, "  %s changed: it takes effect at a restart; the running value stays\n", f)
	}
	return nil
}

// stats prints the hourly (or daily) rollups.
func stats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	source := fs.String("source", "", "only this source")
	destination := fs.String("destination", "", "only this destination")
	sinceF := durationFlag(fs, "since", 24*time.Hour, "how far back, e.g. 24h or 7d")
	granularity := fs.String("granularity", "1h", "1h or 1d")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("stats takes no argument (got %q)", rest[0])
	}
	if err := sinceBack(*sinceF); err != nil {
		return err
	}
	q := admin.StatsQuery{Source: *source, Destination: *destination, From: since(*sinceF)}
	switch *granularity {
	case "1h":
		q.Granularity = admin.Hourly
	case "1d":
		q.Granularity = admin.Daily
	default:
		return fmt.Errorf("--granularity %q: want 1h or 1d", *granularity)
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	view, err := op.Stats(ctx, q)
	if said, field, _ := refusal(err); field == "from" {
		// The span's start is --since's: the flag the user set.
		return fmt.Errorf("--since: %s (of --granularity %s)", strings.TrimPrefix(said, "from: "), *granularity)
	}
	if err != nil {
		return err
	}
	if *of.json {
		return printJSON(stdout, view)
	}
	if len(view.Sources) == 0 && len(view.Destinations) == 0 {
		// Nothing printed at all reads as a command that failed.
		fmt.Fprintf(stdout, "nothing counted since %s%s\n", ts(q.From), unknownNames(ctx, op, q.Source, q.Destination))
		return nil
	}
	tw := table(stdout)
	if len(view.Sources) > 0 {
		fmt.Fprintln(tw, "SOURCE\tSPAN\tRECEIVED\tACCEPTED\tDUPLICATE\tKEYLESS\tREJECTED\tDUP RATE\tREPUBLISHED")
		for _, s := range view.Sources {
			for _, p := range s.Points {
				if p.Received == 0 && p.Requests == 0 {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f%%\t%d\n", sourceLabel(s.Name), ts(p.At), p.Received, p.Accepted, p.Duplicate, p.Keyless, p.RejectedTotal(), 100*p.DuplicateRate, p.Republished)
			}
			t := s.Total
			fmt.Fprintf(tw, "%s\ttotal\t%d\t%d\t%d\t%d\t%d\t%.1f%%\t%d\n", sourceLabel(s.Name), t.Received, t.Accepted, t.Duplicate, t.Keyless, t.RejectedTotal(), 100*t.DuplicateRate, t.Republished)
		}
	}
	if len(view.Destinations) > 0 {
		fmt.Fprintln(tw, "DESTINATION\tSPAN\tDELIVERED\tRETRY\tDEAD\tAVG LATENCY")
		for _, d := range view.Destinations {
			for _, p := range d.Points {
				if p.Delivered+p.Retry+p.Dead == 0 {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1fms\n", d.Name, ts(p.At), p.Delivered, p.Retry, p.Dead, p.LatencyAvgMS)
			}
		}
	}
	return tw.Flush()
}

// doctor runs the key doctor.
func doctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	of := addOperatorFlags(fs)
	source := fs.String("source", "", "only this source")
	exitZero := fs.Bool("exit-zero", false, "exit 0 even when something is found (by default a finding exits 3, as linters do)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("doctor takes no argument (got %q); use --source", rest[0])
	}
	op, ctx, done, err := of.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	rep, err := op.Doctor(ctx, *source)
	if err != nil {
		return err
	}
	found := len(rep.Store)
	for _, s := range rep.Sources {
		found += len(s.Findings)
	}
	if *of.json {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		printDoctor(stdout, rep)
	}
	if found > 0 && !*exitZero {
		return errFindings
	}
	return nil
}

// errFindings is the doctor's exit when it found something (exit 3).
var errFindings = errors.New("the doctor found something")

func printDoctor(stdout io.Writer, rep admin.DoctorReport) {
	if rep.Note != "" {
		fmt.Fprintf(stdout, "note: %s\n", rep.Note)
	}
	for _, f := range rep.Store {
		fmt.Fprintf(stdout, "store: %s: %s\n", f.Kind, f.Message)
	}
	for _, s := range rep.Sources {
		fmt.Fprintf(stdout, "%s: %d recent events, %d recent duplicates sampled\n", s.Source, s.SampledEvents, s.SampledDuplicates)
		if s.Note != "" {
			fmt.Fprintf(stdout, "  note: %s\n", s.Note)
		}
		if len(s.Findings) == 0 {
			fmt.Fprintln(stdout, "  ok: keys look right")
		}
		for _, f := range s.Findings {
			fmt.Fprintf(stdout, "  %s: %s\n", f.Kind, f.Message)
			// Identical bodies under distinct keys differ in no field:
			// a bare "fields:" line said nothing.
			if len(f.Fields) > 0 {
				fmt.Fprintf(stdout, "    fields: %s\n", strings.Join(f.Fields, ", "))
			}
			if len(f.Keys) > 0 {
				fmt.Fprintf(stdout, "    keys: %s\n", strings.Join(f.Keys, ", "))
			}
		}
	}
}

// durationFlag is a duration flag in the config's words ("7d" included):
// one parser for every duration a person writes.
func durationFlag(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	d := value
	fs.Var(duration.Flag{D: &d}, name, usage)
	return &d
}

// terminalLine is s fit for one line of a terminal: every control or
// invisible character (C0, C1, DEL, bidi controls, zero-width) written as
// a Go escape (\x1b, \u202e), so that no answer a destination sent can
// move the cursor, recolour the screen or reorder the text around it.
func terminalLine(s string) string { return escapeControls(s, false) }

// terminalText is terminalLine for a multi-line text (a payload): newlines
// and tabs are kept.
func terminalText(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepLines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i-1])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sourceLabel names a rollup's source: requests for a source the config
// does not have (or for no source at all) are counted without a name, as
// their metric is, so that strangers cannot choose labels.
func sourceLabel(name string) string {
	if name == "" {
		return "(unknown source)"
	}
	return name
}

// searched prints how far a search by content read (nil: it was no
// search).
func searched(w io.Writer, s *admin.Searched) {
	if s != nil {
		fmt.Fprintln(w, "search: "+s.Message)
	}
}
