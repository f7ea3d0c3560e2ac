package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// migrate applies the store's pending migrations and exits. serve does the
// same at start (under an advisory lock on PostgreSQL, so replicas starting
// together do not race); this is for running them as a deploy step.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfigPath, "config file")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	switch cfg.StoreKind() {
	case "postgres":
		s, err := postgres.Open(ctx, cfg.Store, postgres.Options{})
		if err != nil {
			return err
		}
		defer s.Close()
	default:
		s, err := sqlite.Open(ctx, cfg.SQLitePath(), sqlite.Options{Synchronous: cfg.SQLite.Synchronous})
		if err != nil {
			return err
		}
		defer s.Close()
	}
	fmt.Fprintf(stdout, "%s store: schema is up to date\n", cfg.StoreKind())
	return nil
}
