package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/store"
)

// migrate applies the store's pending migrations and exits. serve does the
// same at start (under an advisory lock on PostgreSQL, so replicas starting
// together do not race); this is for running them as a deploy step.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: $"+configEnv+", else ./oncehook.yaml)")
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	// The same lookup as every other command: a container or a compose file
	// names its config only through $ONCEHOOK_CONFIG.
	if *path == "" {
		*path = os.Getenv(configEnv)
	}
	if *path == "" {
		*path = defaultConfigPath
	}
	cfg, st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(stdout, "%s store: schema is up to date\n", cfg.StoreKind())
	return nil
}

// openStore loads the config at path and opens its store (which applies
// pending migrations), for the commands that work on the store directly.
// Redis is left out: these commands claim nothing.
func openStore(ctx context.Context, path string) (*config.Config, store.Store, error) {
	cfg, err := oncehook.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := openConfigStore(ctx, cfg)
	return cfg, st, err
}

// openConfigStore opens cfg's store (applying pending migrations), as the
// gateway does.
func openConfigStore(ctx context.Context, cfg *config.Config) (store.Store, error) {
	return oncehook.OpenStore(ctx, cfg, nil)
}
