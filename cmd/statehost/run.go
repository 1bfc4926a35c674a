package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/broker"
)

const runUsage = `Runs the application of a configuration file: its processors as tasks on the consumer group
named by its application_id, their stores restored from their changelogs before they process
anything, committed every commit_interval. With kafka.brokers empty, an embedded broker runs
in the process. SIGINT or SIGTERM commits, checkpoints and exits 0; a configuration problem
prints every diagnostic and exits 1. SIGHUP, a change of the configuration file, or statehost
reload reloads it: what a running instance can apply applies, anything else is refused with
its diagnostics logged, and the running configuration stays.

While stores restore (at start, or after a rebalance), a progress bar per restoring store
partition shows on standard error when it is a terminal and the logs are text: processor/store
and partition, offsets read of the restore's total, percentage, rate and time left; the log
lines print above the bars. Otherwise (or with --progress log) a "restore progress" line is
logged every --progress-interval per restore that has run that long, with the keys processor,
store, partition, offset, restored, total, percent, rate (records/s), eta and topic. Past 8
restores at once, the others share one bar, or one "restores progress" line with the keys
restores (running), ended, restored, total, percent, rate and eta. The
"restore started" and "restore done" lines are logged in every mode.

With --events FILE, run appends its lifecycle events to FILE (created if needed), one JSON
object a line, for auditing and automation: the admin listener's address, running,
partitions assigned, revoked and lost, restores started and done, tasks running and closed,
transactional producers ready and transactions aborted (exactly-once), warmups, modules
deployed and refused, configuration reloads applied and refused, stopped, and last "exited"
with the error that ended the run, if any.
Each has "time" and "kind", and the fields of its kind (the README lists them). Unlike the
log lines, whose text may change, the kinds and fields are kept stable.
`

const runSynopsis = "[--config FILE] [--progress auto|log|off] [--progress-interval DURATION] [--events FILE]"

// runOptions are the flags of run.
type runOptions struct {
	config        string
	progress      string
	progressEvery time.Duration
}

// runCmd is `statehost run [--config FILE]`: it runs the application until SIGINT or
// SIGTERM, with an embedded broker when kafka.brokers is empty.
func runCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "run", runSynopsis, runUsage)
	var o runOptions
	fs.StringVar(&o.config, "config", "config.hcl", "the application's configuration `file`")
	fs.StringVar(&o.progress, "progress", progressAuto, "how restores show their progress: `MODE` auto (bars on a terminal, else log lines), log or off")
	fs.DurationVar(&o.progressEvery, "progress-interval", defaultProgressInterval, "how often a restore logs a progress line: a `DURATION` such as 5s")
	eventsPath := fs.String("events", "", "append the lifecycle events to `FILE`, one JSON object a line")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, "unexpected argument %q", pos[0])
	}
	switch o.progress {
	case progressAuto, progressLog, progressOff:
	default:
		return usageError(fs, "--progress %q: want auto, log or off", o.progress)
	}
	if o.progressEvery <= 0 {
		return usageError(fs, "--progress-interval %v: want a positive duration", o.progressEvery)
	}
	events, err := openEventFile(*eventsPath, env.Logger)
	if err != nil {
		return failed(env.Logger, "cannot open the events file", err)
	}
	code, err = runApp(ctx, env, o, events)
	events.exited(err)
	return code
}

// runApp runs the application of o.config until ctx ends, writing its events to events (nil:
// none). It returns the exit code and the error that ended the run (nil for a clean stop),
// which it has printed.
func runApp(ctx context.Context, env *cliEnv, o runOptions, events *eventFile) (int, error) {
	cfg, ok := loadConfig(env, o.config, config.Options{})
	if !ok {
		return exitFailure, fmt.Errorf("the configuration %s has errors", o.config)
	}
	log, progress := newRunProgress(env, o.progress, o.progressEvery)
	if progress != nil {
		defer progress.Close()
	}

	brokers := cfg.Kafka.Brokers
	if len(brokers) == 0 {
		b, err := broker.Start(broker.Options{
			Listen:     cfg.EmbeddedBroker.Listen,
			DataDir:    cfg.EmbeddedBroker.DataDir,
			SyncWrites: cfg.EmbeddedBroker.SyncWrites,
			Logger:     log.Named("broker"),
		})
		if err != nil {
			log.Error("cannot start the embedded broker", "error", err)
			return 1, fmt.Errorf("cannot start the embedded broker: %w", err)
		}
		defer func() {
			if err := b.Close(); err != nil {
				log.Warn("closing the embedded broker", "error", err)
			}
		}()
		brokers = []string{b.Addr()}
		log.Info("embedded broker listening", "addr", b.Addr(), "data_dir", cfg.EmbeddedBroker.DataDir)
	}

	opts := runtime.Options{Config: cfg, Brokers: brokers, Logger: log}
	if progress != nil {
		opts.RestoreListener = progress
	}
	if events != nil {
		opts.OnEvent = events.write
	}
	rt, err := runtime.New(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before the application started", "reason", context.Cause(ctx))
			return exitOK, nil
		}
		return reportRunError(env, cfg, err), err
	}
	defer rt.Close()
	if progress != nil {
		progress.setMigrations(func() []migrationView { return migrationsOf(rt.Status().Tasks) })
		progress.setAlive(func(processor string, partition int32) bool {
			for _, t := range rt.Status().Tasks {
				if t.Processor == processor && t.Partition == partition {
					return t.State == "restoring"
				}
			}
			return false
		})
	}
	defer reloadOnHangup(ctx, rt, log)() // SIGHUP reloads the configuration file (reload.go)
	err = rt.Run(ctx)
	if progress != nil {
		progress.Close() // the bars go before anything is printed below them
	}
	if err != nil {
		return reportRunError(env, cfg, err), err
	}
	return exitOK, nil
}

// newRunProgress returns the logger of the run and the progress of its restores for the
// --progress mode: with bars (auto, on a terminal, text logs), a logger that prints its lines
// above the bars; otherwise env.Logger, and progress lines logged every interval (or none
// for off: progress is nil).
func newRunProgress(env *cliEnv, mode string, interval time.Duration) (hclog.Logger, *restoreProgress) {
	if mode == progressOff {
		return env.Logger, nil
	}
	f, ok := env.Stderr.(*os.File)
	if mode == progressLog || !ok || !useBars(f, env.LogJSON) {
		return env.Logger, newRestoreProgress(env.Logger.Named("restore"), nil, interval)
	}
	ui, out := newBarUI(f)
	// The options of run's logger (main.go), on out.
	log := hclog.New(&hclog.LoggerOptions{Name: "statehost", Level: env.Logger.GetLevel(), Output: out, Color: hclog.AutoColor})
	return log, newRestoreProgress(log.Named("restore"), ui, interval)
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
