package main

import (
	"context"
	"errors"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/broker"
)

const runUsage = `Runs the application of a configuration file: its processors as tasks on the consumer group
named by its application_id, their stores restored from their changelogs before they process
anything, committed every commit_interval. With kafka.brokers empty, an embedded broker runs
in the process. SIGINT or SIGTERM commits, checkpoints and exits 0; a configuration problem
prints every diagnostic and exits 1.
`

// runCmd is `statehost run [--config FILE]`: it runs the application until SIGINT or
// SIGTERM, with an embedded broker when kafka.brokers is empty.
func runCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "run", "[--config FILE]", runUsage)
	path := fs.String("config", "config.hcl", "the application's configuration `file`")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, "unexpected argument %q", pos[0])
	}
	cfg, ok := loadConfig(env, *path, config.Options{})
	if !ok {
		return exitFailure
	}
	log := env.Logger

	brokers := cfg.Kafka.Brokers
	if len(brokers) == 0 {
		b, err := broker.Start(broker.Options{
			Listen:  cfg.EmbeddedBroker.Listen,
			DataDir: cfg.EmbeddedBroker.DataDir,
			Logger:  log.Named("broker"),
		})
		if err != nil {
			log.Error("cannot start the embedded broker", "error", err)
			return 1
		}
		defer func() {
			if err := b.Close(); err != nil {
				log.Warn("closing the embedded broker", "error", err)
			}
		}()
		brokers = []string{b.Addr()}
		log.Info("embedded broker listening", "addr", b.Addr(), "data_dir", cfg.EmbeddedBroker.DataDir)
	}

	rt, err := runtime.New(ctx, runtime.Options{Config: cfg, Brokers: brokers, Logger: log})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before the application started", "reason", context.Cause(ctx))
			return exitOK
		}
		return reportRunError(env, cfg, err)
	}
	defer rt.Close()
	if err := rt.Run(ctx); err != nil {
		return reportRunError(env, cfg, err)
	}
	return exitOK
}

// reportRunError prints a configuration problem as diagnostics and anything else as a log
// line, and returns the exit code 1.
func reportRunError(env *cliEnv, cfg *config.Config, err error) int {
	var de *runtime.DiagnosticsError
	if errors.As(err, &de) {
		_ = config.WriteDiagnostics(env.Stderr, cfg.Files, de.Diags)
		return 1
	}
	env.Logger.Error("statehost stopped", "error", err)
	return 1
}

// loadConfig loads the configuration at path and prints every diagnostic. ok is false when
// there is an error among them.
func loadConfig(env *cliEnv, path string, opts config.Options) (cfg *config.Config, ok bool) {
	cfg, diags := config.Load(path, opts)
	if len(diags) > 0 {
		var files map[string]*hcl.File
		if cfg != nil {
			files = cfg.Files
		}
		_ = config.WriteDiagnostics(env.Stderr, files, diags)
	}
	return cfg, cfg != nil && !diags.HasErrors()
}
