package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
)

const defaultConfigPath = "oncehook.yaml"

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: ./oncehook.yaml if present, else demo mode)")
	listen := fs.String("listen", "", "override the config's listen address")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}

	var cfg *config.Config
	demo := false
	switch {
	case *path != "":
		cfg, err = config.Load(*path)
	default:
		if _, statErr := os.Stat(defaultConfigPath); statErr == nil {
			*path = defaultConfigPath
			cfg, err = config.Load(defaultConfigPath)
		} else if errors.Is(statErr, os.ErrNotExist) {
			demo = true
			cfg = config.Demo(*listen)
		} else {
			err = statErr
		}
	}
	if err != nil {
		return err
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
	}
	gw, err := oncehook.New(ctx, cfg, oncehook.Options{Logger: log, DemoSink: demo})
	if err != nil {
		ln.Close()
		return err
	}
	addr := ln.Addr().String()
	if demo {
		fmt.Fprintf(stdout, `oncehook is listening on http://%s in demo mode (no %s here).
  store:  %s (synchronous=FULL)
  source: "demo" (preset stripe, secret %s) delivers to the built-in demo sink

Send it a test event; send the same one again and the answer says "duplicate":
  oncehook send --url http://%s/in/demo --preset stripe --secret %s \
    --body '{"id":"evt_demo_1","object":"event","type":"demo.created"}'
  (from a checkout: go run ./cmd/oncehook send ...)

Write a real config with: oncehook init
`, addr, defaultConfigPath, cfg.Store, config.DemoSecret, addr, config.DemoSecret)
	} else {
		fmt.Fprintf(stdout, "oncehook is listening on http://%s (config %s, store %s, %d sources)\n", addr, *path, cfg.Store, len(cfg.Sources))
	}
	log.Info("serving", "addr", addr, "store", cfg.Store)
	err = gw.Serve(ctx, ln)
	log.Info("stopped")
	return err
}

func initConfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	force := fs.Bool("force", false, "overwrite an existing file")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	path := defaultConfigPath
	if fs.NArg() > 0 {
		path = fs.Arg(0)
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
	fmt.Fprintf(stdout, "wrote %s. Set the secrets it names (e.g. STRIPE_WEBHOOK_SECRET), then: oncehook serve --config %s\n", path, path)
	return nil
}
