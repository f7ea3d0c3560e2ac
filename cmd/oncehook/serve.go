package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/kinds"
)

const defaultConfigPath = "oncehook.yaml"

// configEnv names a config file to use, as --config does. A deployment
// that sets it can never start the demo by accident: a missing file is an
// error.
const configEnv = "ONCEHOOK_CONFIG"

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// SIGHUP reloads the config, and never stops the gateway: it is caught
	// from the first moment, not once the store is open, since until then
	// its default action ended the process (a `systemctl reload` right
	// after a start, with PostgreSQL slow to answer), and systemd counts
	// that death as clean, so Restart=on-failure left the gateway down.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: $"+configEnv+", else ./oncehook.yaml if present, else the demo)")
	listen := fs.String("listen", "", "override the config's listen address")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	demoFlag := fs.Bool("demo", false, "run the demo (a public secret) even where a config exists, or on a non-loopback address")
	apiListen := fs.String("api-listen", "", "override the config's api.listen (the effects ledger, admin API and dashboard)")
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}

	cfg, source, err := resolveConfig(*path, *demoFlag)
	if err != nil {
		return err
	}
	demo := cfg == nil
	if demo {
		if *listen != "" && !*demoFlag && !isLoopback(*listen) {
			return fmt.Errorf("no config (%s unset, no %s here): the demo, whose secret %s is public, listens only on loopback; "+
				"pass --demo to run it on %s anyway, or write a config with oncehook init", configEnv, defaultConfigPath, config.DemoSecret, *listen)
		}
		cfg = config.Demo(*listen)
	}
	if *listen != "" {
		cfg.Listen = *listen
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if demo {
		// The sink's URL must follow the port actually bound (":0" picks one).
		cfg = config.Demo(ln.Addr().String())
		// The demo's API gets a token of its own, printed below.
		var b [16]byte
		rand.Read(b[:])
		cfg.API.Tokens = []config.APIToken{{Name: "demo", Token: hex.EncodeToString(b[:])}}
		if *listen != "" {
			cfg.API.Listen = demoAPIListen(*listen)
		}
	}
	// The command line's overrides, kept on every reload's config (the
	// demo's intake address is the one bound, above).
	override := func(c *config.Config) {
		if *listen != "" && !demo {
			c.Listen = *listen
		}
		if *apiListen != "" {
			c.API.Listen = *apiListen
		}
	}
	override(cfg)
	var apiLns []net.Listener
	if len(cfg.API.Tokens) > 0 {
		apiLn, err := net.Listen("tcp", cfg.API.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("api listen: %w", err)
		}
		apiLns = append(apiLns, apiLn)
	}
	configFile := source
	if demo {
		configFile = "" // nothing to reload
	}
	gw, err := oncehook.New(ctx, cfg, oncehook.Options{Kinds: kinds.All(), Logger: log, DemoSink: demo, ConfigFile: configFile, Override: override})
	if err != nil {
		closeAll(ln, apiLns)
		return err
	}
	printBanner(stdout, gw, cfg, source, demo, ln, apiLns, log)
	if err := serveMetrics(ctx, gw, cfg, stdout, log); err != nil {
		closeAll(ln, apiLns)
		gw.Close()
		return err
	}
	// SIGHUP reloads the config file (as POST /v1/reload does); one that
	// came while starting is kept (hup, above) and reloads now.
	go gw.ReloadOnSignal(ctx, hup)
	log.Info("serving", "addr", ln.Addr().String(), "store", config.Redact(cfg.Store), "demo", demo)
	err = gw.Serve(ctx, ln, apiLns...)
	log.Info("stopped")
	return err
}

// closeAll closes intake's listener and the API's, when serve stops
// before it serves.
func closeAll(ln net.Listener, apiLns []net.Listener) {
	ln.Close()
	for _, l := range apiLns {
		l.Close()
	}
}

// printBanner says where the gateway listens and what it serves: for the
// demo, how to try it (its secret, a test event, a one-time dashboard
// link); otherwise the config's warnings.
func printBanner(stdout io.Writer, gw *oncehook.Gateway, cfg *config.Config, source string, demo bool, ln net.Listener, apiLns []net.Listener, log *slog.Logger) {
	addr := ln.Addr().String()
	apiLine := "  api:    off (no api.tokens in the config)\n"
	if len(apiLns) > 0 {
		apiLine = fmt.Sprintf("  api:    %[1]s://%[2]s (admin API /v1, effects ledger /v1/effects; tokens from api.tokens)\n"+
			"  dashboard: %[1]s://%[2]s/ui/ (sign in with a token from api.tokens)\n", gw.Scheme(), apiLns[0].Addr())
		if demo {
			// A one-time link, so that a newcomer sees the demo's events in
			// the browser at once, without pasting a token.
			link := gw.DashboardLoginLink(cfg.API.Tokens[0].Token, 15*time.Minute)
			api := reachable(apiLns[0].Addr())
			apiLine = fmt.Sprintf("  api:    http://%s (admin API /v1, effects ledger /v1/effects), token %s\n"+
				"  dashboard: http://%s%s (a one-time login link, valid 15 minutes)\n"+
				"  operate it from another terminal, in this folder or anywhere:\n"+
				"    oncehook events ls --api http://%s --token %s\n", api, cfg.API.Tokens[0].Token, api, link,
				api, cfg.API.Tokens[0].Token)
			if api != apiLns[0].Addr().String() {
				apiLine += fmt.Sprintf("  (the API listens on %s, like intake: from elsewhere, use this machine's address)\n", apiLns[0].Addr())
			}
		}
	}
	store := config.Redact(cfg.Store)
	if demo {
		fmt.Fprintf(stdout, `oncehook is listening on http://%s in DEMO mode (no config: %s unset, no %s here).
  This is the demo: its source's secret %s is public. Do not expose it; run a real config with --config.
  store:  %s (synchronous=FULL)
  source: "demo" (preset stripe, secret %s) delivers to the built-in demo sink
%s
Send it a test event; send the same one again and the answer says "duplicate":
  oncehook send --url http://%s/in/demo --preset stripe --secret %s \
    --body '{"id":"evt_demo_1","object":"event","type":"demo.created"}'
  (from a checkout: go run ./cmd/oncehook send ...)

Write a real config with: oncehook init
`, addr, configEnv, defaultConfigPath, config.DemoSecret, store, config.DemoSecret, apiLine, reachable(ln.Addr()), config.DemoSecret)
		log.Warn("running the DEMO: no config was found, and the demo source's secret is public", "config_env", configEnv)
	} else {
		fmt.Fprintf(stdout, "oncehook is listening on %s://%s (config %s, store %s, %s)\n", gw.Scheme(), addr, source, store, plural(len(cfg.Sources), "source", "sources"))
		fmt.Fprint(stdout, apiLine)
		for _, w := range cfg.Warnings() {
			fmt.Fprintln(stdout, "  warning:", w)
		}
	}
}

// serveMetrics serves GET /metrics on metrics.listen when it is set (else
// it is on intake), until ctx ends.
func serveMetrics(ctx context.Context, gw *oncehook.Gateway, cfg *config.Config, stdout io.Writer, log *slog.Logger) error {
	if cfg.Metrics.Listen == "" {
		return nil
	}
	mln, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	fmt.Fprintf(stdout, "  metrics: %s://%s/metrics (metrics.listen; not on intake)\n", gw.Scheme(), mln.Addr())
	go func() {
		if err := gw.ServeMetrics(ctx, mln); err != nil {
			log.Error("metrics listener", "err", err)
		}
	}()
	return nil
}

// resolveConfig finds the config serve and validate use: --config, else
// $ONCEHOOK_CONFIG, else ./oncehook.yaml when present. It returns a nil
// config (and no error) when none is given and none is here: the demo. A
// config that is named and missing is an error, never the demo.
func resolveConfig(path string, demo bool) (*config.Config, string, error) {
	if demo {
		if path != "" {
			return nil, "", errors.New("--demo and --config: choose one")
		}
		return nil, "", nil
	}
	if path == "" {
		path = os.Getenv(configEnv)
	}
	if path != "" {
		cfg, err := oncehook.LoadConfig(path, kinds.All())
		return cfg, path, err
	}
	if _, err := os.Stat(defaultConfigPath); err == nil {
		cfg, err := oncehook.LoadConfig(defaultConfigPath, kinds.All())
		return cfg, defaultConfigPath, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	return nil, "", nil
}

// demoAPIListen places the demo's API beside intake: on intake's host, so
// that `serve --demo --listen 0.0.0.0:8080` in a container can be reached
// at its banner's token and one-time link (on loopback, the container's
// own, it could not); on port 8081, or on a port the system picks when
// intake's was.
func demoAPIListen(intake string) string {
	host, port, err := net.SplitHostPort(intake)
	if err != nil {
		return config.DefaultAPIListen
	}
	if port != "0" {
		_, port, _ = net.SplitHostPort(config.DefaultAPIListen)
	}
	return net.JoinHostPort(host, port)
}

// reachable writes a listener's address as a browser on this machine can
// open it: a wildcard bind (0.0.0.0, which Go reports as [::], dual-stack)
// is reached on loopback.
func reachable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// plural writes n with the noun that fits it: "1 source", "2 sources".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// validate checks a config without serving: field names and types,
// settings that must fit together, and warnings.
func validate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: $"+configEnv+", else ./oncehook.yaml)")
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	cfg, source, err := resolveConfig(*path, false)
	if err != nil {
		return err
	}
	if cfg == nil {
		return fmt.Errorf("no config to validate: pass --config, set %s, or write %s (oncehook init)", configEnv, defaultConfigPath)
	}
	fmt.Fprintf(stdout, "%s is valid: %s store, %s, %s\n", source, kinds.All().StoreName(cfg.Store),
		plural(len(cfg.Sources), "source", "sources"), plural(len(cfg.Destinations), "destination", "destinations"))
	for _, d := range cfg.Destinations {
		if t := d.Transform; t != nil {
			// Compiled by the check (resolveConfig), which set its digest.
			fmt.Fprintf(stdout, "  destination %s: transform %s compiled (%s)\n", d.Name, t.Name(d.Name), t.Digest)
		}
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "  warning:", w)
	}
	return nil
}

func initConfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	force := fs.Bool("force", false, "overwrite an existing file")
	// Flags before or after the path: "init x.yaml --force", as the
	// refusal below suggests, must not be read as a path and no --force.
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 1 {
		return fmt.Errorf("init takes one path (got %q)", rest)
	}
	path := defaultConfigPath
	if len(rest) == 1 {
		path = rest[0]
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if *force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; use --force to overwrite it", path)
	}
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, config.Sample); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s. Set the secrets it names (STRIPE_WEBHOOK_SECRET, GITHUB_WEBHOOK_SECRET, ONCEHOOK_API_TOKEN), then: oncehook serve --config %s\n", path, path)
	return nil
}
