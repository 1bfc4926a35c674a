package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// cliEnv is what a command runs with: its standard streams and the logger that the global
// flags configured.
type cliEnv struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader

	// Logger writes to Stderr, named "statehost", at the level of --log-level.
	Logger hclog.Logger
	// LogJSON reports --log-json: Logger writes JSON lines.
	LogJSON bool
}

// Exit codes of every command.
const (
	exitOK      = 0 // done
	exitFailure = 1 // the command failed while running
	exitUsage   = 2 // the command line is wrong
)

// command is one statehost command.
type command struct {
	name     string
	synopsis string // flags and arguments, after "statehost <name>"
	summary  string
	run      func(ctx context.Context, env *cliEnv, args []string) int
	// ownFlags reports that run prints the command's own help for -h; the help of the other
	// commands is their synopsis and summary.
	ownFlags bool
}

// commands lists the commands in the order usage shows them.
var commands = []command{
	{name: "run", synopsis: runSynopsis, run: runCmd, ownFlags: true,
		summary: "Run the processors described by a configuration file until SIGINT or SIGTERM."},
	{name: "validate", synopsis: "[--config FILE]", run: validateCmd, ownFlags: true,
		summary: "Check a configuration file and its plugins without running anything."},
	{name: "deploy", synopsis: deploySynopsis, run: deployCmd, ownFlags: true,
		summary: "Deploy a new module to a processor of the running application, or to some of its partitions (a canary), through its admin API."},
	{name: "rollback", synopsis: rollbackSynopsis, run: rollbackCmd, ownFlags: true,
		summary: "Roll a processor of the running application back to its previous module, or end its canary, through its admin API."},
	{name: "reload", synopsis: reloadSynopsis, run: reloadCmd, ownFlags: true,
		summary: "Reload the configuration file of the running application, through its admin API."},
	{name: "query", synopsis: querySynopsis, run: queryCmd, ownFlags: true,
		summary: "Print the value of a key in a store of the running application (interactive query)."},
	{name: "status", synopsis: statusSynopsis, run: statusCmd, ownFlags: true,
		summary: "Print the tasks, restores and module versions of a running application instance."},
	{name: "inspect", synopsis: inspectSynopsis, run: inspectCmd, ownFlags: true,
		summary: "Print the stores, task directories, checkpoints and changelog lag of an application, without running it."},
	{name: "state", synopsis: stateSynopsis, run: stateCmd, ownFlags: true,
		summary: "Export a store's entries as JSON lines, or import such a file into an application's changelog and local state."},
	{name: "broker", synopsis: brokerSynopsis, run: brokerCmd, ownFlags: true,
		summary: "Run the embedded Kafka-protocol broker until SIGINT or SIGTERM."},
	{name: "produce", synopsis: produceSynopsis, run: produceCmd, ownFlags: true,
		summary: "Write each line of standard input to a topic, which must exist, as one record."},
	{name: "consume", synopsis: consumeSynopsis, run: consumeCmd, ownFlags: true,
		summary: "Print a topic's records as KEY<SEP>VALUE lines: a null key as nothing, a null value as <null>."},
	{name: "build", synopsis: buildSynopsis, run: buildCmd, ownFlags: true,
		summary: "Build a Go or C plugin directory to a .wasm module."},
	{name: "test", synopsis: testSynopsis, run: testCmd, ownFlags: true,
		summary: "Run processors on records from JSON lines without Kafka, and print or check their outputs and stores."},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one kills the process as usual.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, &cliEnv{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name) and returns the exit code. It
// sets env.Logger and env.LogJSON from the global flags.
func run(ctx context.Context, env *cliEnv, args []string) int {
	args, g, err := parseGlobalFlags(args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "statehost: %v\n", err)
		usage(env.Stderr)
		return exitUsage
	}
	env.LogJSON = g.json
	opts := &hclog.LoggerOptions{Name: "statehost", Level: g.level, Output: env.Stderr, JSONFormat: g.json}
	if !g.json {
		opts.Color = hclog.AutoColor // only where stderr is a terminal
	}
	env.Logger = hclog.New(opts)

	if len(args) == 0 {
		usage(env.Stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return helpCmd(ctx, env, rest)
	}
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(env.Stderr, "statehost: unknown flag %s before the command\n", name)
		usage(env.Stderr)
		return exitUsage
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, env, rest)
		}
	}
	fmt.Fprintf(env.Stderr, "statehost: unknown command %q\n", name)
	usage(env.Stderr)
	return exitUsage
}

// helpCmd prints the usage, or with a command name, that command's help, to stdout.
func helpCmd(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		usage(env.Stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		if c.ownFlags {
			helpEnv := *env
			helpEnv.Stderr = env.Stdout
			return c.run(ctx, &helpEnv, []string{"-h"})
		}
		fmt.Fprintf(env.Stdout, "Usage: statehost %s %s\n\n%s\n", c.name, c.synopsis, c.summary)
		return exitOK
	}
	fmt.Fprintf(env.Stderr, "statehost help: unknown command %q\n", args[0])
	usage(env.Stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: statehost [--log-level LEVEL] [--log-json] COMMAND [flags] [arguments]

statehost runs stateful stream processors compiled to WebAssembly over Kafka.

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  statehost %s %s\n      %s\n", c.name, c.synopsis, c.summary)
	}
	fmt.Fprint(w, `  statehost help [COMMAND]
      Print this help, or the flags of a command in detail.

Global flags, before or after the command:
  --log-level LEVEL
      trace, debug, info, warn or error (default info). Logs go to standard error.
  --log-json
      write logs as JSON lines instead of text.

Flags may follow arguments, and take one dash or two. Exit codes: 0 done, 1 failed,
2 wrong command line.
`)
}

// globalFlags are the flags that every command accepts.
type globalFlags struct {
	level hclog.Level
	json  bool
}

// parseGlobalFlags removes the global flags from args, wherever they are before a "--", and
// returns the rest. A command's flag value that reads like a global flag is taken for one.
func parseGlobalFlags(args []string) ([]string, globalFlags, error) {
	g := globalFlags{level: hclog.Info}
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") {
			name = ""
		}
		switch name {
		case "log-json":
			g.json = true
			if hasValue {
				b, err := strconv.ParseBool(value)
				if err != nil {
					return nil, g, fmt.Errorf("--log-json=%s: %w", value, errors.Unwrap(err))
				}
				g.json = b
			}
		case "log-level":
			if !hasValue {
				if i+1 == len(args) {
					return nil, g, errors.New("--log-level needs a value: trace, debug, info, warn or error")
				}
				i++
				value = args[i]
			}
			switch l := hclog.LevelFromString(value); l {
			case hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error:
				g.level = l
			default:
				return nil, g, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", value)
			}
		default:
			rest = append(rest, a)
		}
	}
	return rest, g, nil
}

// newFlagSet returns the flag set of the command name: errors and -h print its synopsis,
// usage and flags to env.Stderr.
func newFlagSet(env *cliEnv, name, synopsis, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: statehost %s %s\n\n%s\nFlags:\n", name, synopsis, usage)
		fs.VisitAll(func(f *flag.Flag) {
			arg, help := flag.UnquoteUsage(f)
			if arg != "" {
				arg = " " + arg
			}
			def := ""
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				if f.DefValue == "true" {
					def = " (default true)"
				}
			} else if f.DefValue != "" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(fs.Output(), "  --%s%s\n      %s%s\n", f.Name, arg, help, def)
		})
	}
	return fs
}

// parseFlags parses args with fs, letting flags follow positional arguments ("build DIR -o
// FILE"); everything after "--" is positional. It returns the positional arguments, or
// ok false and the exit code: 0 for -h, 2 for a bad flag (fs has printed why).
func parseFlags(fs *flag.FlagSet, args []string) (positional []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			// Parse stopped at "--" (or a flag took "--" as its value, which then ends
			// the flags too).
			return append(positional, rest...), exitOK, true
		}
		if len(rest) == 0 {
			return positional, exitOK, true
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// usageError prints msg and the command's usage, and returns the usage exit code.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "statehost %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

// failed logs msg with err as the reason the command failed, and returns the failure exit
// code.
func failed(log hclog.Logger, msg string, err error) int {
	log.Error(msg, "error", err)
	return exitFailure
}
