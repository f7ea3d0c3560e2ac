// Command oncehook runs the gateway and its tools. It only parses flags and
// configuration and calls the library; everything it does is callable from Go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
)

const usage = `oncehook: every webhook event takes effect exactly once.

Usage:
  oncehook serve [--config oncehook.yaml]   run the gateway (no config: demo mode on SQLite)
  oncehook validate [--config F]            check a config without serving
  oncehook init [--force] [path]            write a commented sample config
  oncehook send --url URL --preset P ...    sign a payload as provider P does and send it
  oncehook migrate [--config oncehook.yaml] apply the store's pending migrations
  oncehook replay --source S --key K        redeliver one stored event (same Idempotency-Key; = events replay)
  oncehook replay --dead [--destination D]  redeliver the dead letters (= dead retry)
  oncehook events ls|show ID|replay         list, read and replay stored events (--type invoice.*)
  oncehook events deliver ID --destination D  send an event where its route passed over
  oncehook events skip ID --destination D     end a pending delivery undelivered (past a fifo head)
  oncehook order reset --source S --entity E  forget an entity's delivered version (one far ahead made it stale)
  oncehook dead ls|retry|purge              list, retry and purge dead letters
  oncehook sources [ls|create|show|update|rm]   every source, file's and API's; create and change the API's (-f FILE)
  oncehook destinations [ls|pause|resume]   destinations' queues; hold and release them
  oncehook destinations create|show|update|rm   create and change destinations through the API (-f FILE)
  oncehook destinations open-breaker|close-breaker NAME   a destination's circuit breaker, by hand
  oncehook tokens [ls|create|show|rm]       API tokens: make one (for a tenant) through the API, list, revoke
  oncehook export [-o FILE]                 the API's sources and destinations as YAML (secrets as ${VARIABLE}s)
  oncehook apply -f FILE [--dry-run] [--prune]  create or update them from such a file: created, updated, unchanged
  oncehook alerts [ls|show|ack|resolve]     the alerts' issues; acknowledge or resolve one
  oncehook listen DEST --forward-to URL    forward a pull destination's deliveries to a local app (--api URL --token T)
  oncehook stats [--source S] [--since 24h] the hourly counts: received, duplicates, rejected
  oncehook reload --api URL --token T       a running gateway reads its config anew (as SIGHUP)
  oncehook doctor [--source S]              check that sources' keys look right
  oncehook outbox ddl --db postgres|mysql [--table T] [--trigger]   the SQL of an outbox table in your database
  oncehook transform test --destination D --event FILE|--id N   what a destination's transformation would send
  oncehook health [--probe readyz|livez]    ask the gateway on this host (a container's HEALTHCHECK)
  oncehook version                          the release, its commit and build date, Go and the SQLite driver

The operator commands (events, dead, sources ls, destinations, alerts, order, stats, doctor) work on
the config's store directly (--config) or on a running gateway's API
(--api URL --token T, or $ONCEHOOK_API and $ONCEHOOK_API_TOKEN).

Run 'oncehook <command> --help' for a command's flags.
`

func main() {
	// SIGHUP reloads serve's config (serve listens for it itself); for the
	// other commands (a closed terminal) it stops them as SIGTERM does,
	// rather than killing one mid-commit.
	stopOn := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		stopOn = append(stopOn, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopOn...)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // the help the user asked for is printed; nothing failed
		}
		if errors.Is(err, errFindings) {
			os.Exit(3) // doctor --strict found something (as linters do)
		}
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "oncehook:", cliError(err))
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// cliError says an operator action's refusal in the CLI's words, the same
// whether the store (--config) or the API (--api) refused it: the field at
// fault is named as the flag that sets it (key_prefix is --key-prefix,
// all is --all), and the API's reason code is left out.
func cliError(err error) error {
	said, field, err := refusal(err)
	msg, named := strings.CutPrefix(said, field+": ")
	if field == "" || !named {
		return err
	}
	flag := "--" + strings.ReplaceAll(field, "_", "-")
	msg = strings.Replace(msg, "set "+field, "pass "+flag, 1)
	if strings.Contains(msg, flag) {
		// It names the flag itself ("the filter is empty: pass --all ...").
		return errors.New(strings.Replace(err.Error(), said, msg, 1))
	}
	return errors.New(strings.Replace(err.Error(), said, flag+": "+msg, 1))
}

// refusal reads an operator action's refusal, whoever refused it: what
// the action said ("field: message", or a message naming no field), the
// field at fault, and err with the API's reason code left out ("" and
// err as it is when err is no refusal of the action).
func refusal(err error) (said, field string, _ error) {
	var invalid *admin.InvalidError
	var answer *api.Error
	switch {
	case errors.As(err, &invalid):
		return invalid.Error(), invalid.Field, err
	case errors.As(err, &answer) && answer.Body.Error != "" && isReasonCode(answer.Body.Reason):
		// The API's message is the store's own (field included); its
		// reason code (not_found) is for programs: --api reads as --config.
		return answer.Body.Error, answer.Body.Field, errors.New(strings.Replace(err.Error(), answer.Error(), answer.Body.Error, 1))
	}
	return "", "", err
}

// isReasonCode reports whether reason is one of the API's codes
// (not_found, invalid_request), not the status text put in for an answer
// that was not the API's JSON (a proxy's 502 page), which says something.
func isReasonCode(reason string) bool {
	return reason != "" && strings.Trim(reason, "abcdefghijklmnopqrstuvwxyz_") == ""
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "health":
		return health(ctx, args[1:], stdout, stderr)
	case "init":
		return initConfig(args[1:], stdout, stderr)
	case "send":
		return send(ctx, args[1:], stdout, stderr)
	case "migrate":
		return migrate(ctx, args[1:], stdout, stderr)
	case "replay":
		return replay(ctx, args[1:], stdout, stderr)
	case "events":
		return events(ctx, args[1:], stdout, stderr)
	case "dead":
		return dead(ctx, args[1:], stdout, stderr)
	case "sources":
		return sources(ctx, args[1:], stdout, stderr)
	case "destinations":
		return destinations(ctx, args[1:], stdout, stderr)
	case "tokens":
		return tokens(ctx, args[1:], stdout, stderr)
	case "export":
		return export(ctx, args[1:], stdout, stderr)
	case "apply":
		return apply(ctx, args[1:], stdout, stderr)
	case "alerts":
		return alerts(ctx, args[1:], stdout, stderr)
	case "order":
		return order(ctx, args[1:], stdout, stderr)
	case "listen":
		return listen(ctx, args[1:], stdout, stderr)
	case "stats":
		return stats(ctx, args[1:], stdout, stderr)
	case "reload":
		return reload(ctx, args[1:], stdout, stderr)
	case "doctor":
		return doctor(ctx, args[1:], stdout, stderr)
	case "outbox":
		return outboxCmd(args[1:], stdout, stderr)
	case "transform":
		return transformCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
	return errUsage
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
