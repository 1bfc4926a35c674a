package main

import (
	"context"
	"fmt"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
)

const validateUsage = `Checks a configuration file: every attribute and block, names, durations, duplicates,
partition counts declared in the file, cycles among the processors (through topics,
repartition and dead-letter topics), that the state and data directories are directories (or
can be made), that the listeners do not want the same address, and that each module can be
read and is a statehost module. Prints every diagnostic; exits 1 on any error. Checks that
need the broker (input topics exist, co-partitioning of existing topics, the partition counts
of existing changelogs, session_timeout within the broker's range, topic configs the broker
refuses) are made by run, all at once, before it creates anything.
`

// validateCmd is `statehost validate [--config FILE]`: it checks the configuration and
// compiles every processor's module, prints all diagnostics, and exits 1 on any error.
// Checks that need the broker are made by run (validateUsage says which).
func validateCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "validate", "[--config FILE]", validateUsage)
	path := fs.String("config", "config.hcl", "the application's configuration `file`")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, "unexpected argument %q", pos[0])
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
