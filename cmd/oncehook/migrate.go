package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/kinds"
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
	cfg, _, err := resolveConfig(*path, false)
	if err != nil {
		return err
	}
	if cfg == nil {
		return fmt.Errorf("no config to migrate: pass --config, set %s, or write %s (oncehook init)", configEnv, defaultConfigPath)
	}
	st, err := openConfigStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(stdout, "%s store: schema is up to date\n", kinds.All().StoreName(cfg.Store))
	return nil
}

// openConfigStore opens cfg's store (applying pending migrations), as the
// gateway does.
func openConfigStore(ctx context.Context, cfg *config.Config) (store.Store, error) {
	return oncehook.OpenStore(ctx, cfg, kinds.All(), nil)
}
