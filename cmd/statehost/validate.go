package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
)

// validateCmd is `statehost validate [--config FILE]`: it checks the configuration and
// compiles every processor's module, prints all diagnostics, and exits 1 on any error.
// Checks that need the broker (input topics exist, co-partitioning) are made by run.
func validateCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	path := fs.String("config", "config.hcl", "the application's configuration `file`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "statehost validate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	eng, err := engine.New(ctx, engine.Config{Logger: env.Logger})
	if err != nil {
		env.Logger.Error("cannot start the wasm engine", "error", err)
		return 1
	}
	defer eng.Close(context.Background())
	check := func(path string) error {
		mod, err := eng.CompileFile(ctx, path)
		if err != nil {
			return err
		}
		return mod.Close(ctx)
	}
	cfg, ok := loadConfig(env, *path, config.Options{CheckModule: check})
	if !ok {
		return 1
	}
	fmt.Fprintf(env.Stdout, "%s: configuration of %q is valid (%d processors)\n", cfg.Path, cfg.ApplicationID, len(cfg.Processors))
	return 0
}
