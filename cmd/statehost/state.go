package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/broker"
	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/store"
)

// `statehost state export` and `statehost state import`: a store's state as JSON lines, out
// of an application and into one. This file has what both share: the command, the store of
// the configuration, and the connection to the application's brokers. The lines are
// testdriver's store entries (state_lines.go), so that what export writes is what statehost
// test prints and checks.

const stateSynopsis = "export --config FILE --store STORE [--partition N] [--from auto|local|changelog] | import --config FILE --store STORE [--force] [--repartition] FILE"

const (
	stateExportSynopsis = "--config FILE --store STORE [--partition N] [--from auto|local|changelog]"
	stateImportSynopsis = "--config FILE --store STORE [--force] [--repartition] FILE"
)

const stateExportUsage = `Writes the entries of a store of an application to standard output, one JSON object a
line, by partition, then key (then start and end):

  {"store":"counts","partition":0,"key":"the","value":"2"}
  {"store":"windows","partition":0,"key":"a","start":60000,"end":120000,"value":"3"}

the lines that statehost test prints. A key or value that is not valid UTF-8 comes as
key_base64 or value_base64 (standard base64) instead. A window or session store's entries
have start and end in Unix milliseconds: a window's end is exclusive (start + window_size),
a session's inclusive.

It reads the local state of the configuration's state directory, opened read-only, for the
partitions it holds whose checkpoint is at the end of their changelog (or that have no
changelog; when no broker answers, the checkpoints are not checked), and the changelog of
the others, restored as a run restores it (read_committed) into a temporary directory.
--from local reads only the local state, --from changelog only the changelogs. The local
state cannot be read while a statehost process holds the directory (it runs the
application there): stop it first, or read the changelogs.
` + stateBrokersUsage

const stateImportUsage = `Writes FILE, lines as statehost state export writes them (- reads standard input), into
a store of an application: into its changelog, and into the local state of the
configuration's state directory for the partitions that it holds, restored first to the end
of their changelog as a run would. The changelog topic is created as a run creates it when it
does not exist yet, with the partition count of the processor's inputs. A store with logging
disabled has no changelog: only the local state is written.

Each entry goes to the partition its line names: the partition of the task that wrote it.
--repartition puts each one in the partition of its key's murmur2 hash instead, as Kafka's
default partitioner does, for a store keyed as its input records are, moved to an application
whose inputs have another partition count. A window or session store's entry must name its
window or session (start and end); they are written as a run writes them, at the stream
time of their task's local state (none without one): a window or session that is closed or
expired at that time is not written, and import fails saying how many were not.

It refuses while the application runs: when a process holds the state directory, or when
its consumer group keeps members for longer than session_timeout (an instance that stopped
stays a member that long, so import waits for it). And it refuses when the store holds data
already (its changelog has records, or
the local state has entries) unless --force: then the file is written over what is there,
each entry replacing the entry of its key; the others stay. Every line is checked before
anything is written.
` + stateBrokersUsage

const stateBrokersUsage = `
Without kafka.brokers the application's embedded broker is used: the running one, or, when
nothing answers at embedded_broker.listen, one started on embedded_broker.data_dir for the
time the command runs.
`

// stateCmd is `statehost state export|import ...`.
func stateCmd(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "export":
			return stateExportCmd(ctx, env, args[1:])
		case "import":
			return stateImportCmd(ctx, env, args[1:])
		case "-h", "-help", "--help", "help":
			newStateExportFlags(env).fs.Usage()
			fmt.Fprintln(env.Stderr)
			newStateImportFlags(env).fs.Usage()
			return exitOK
		}
		fmt.Fprintf(env.Stderr, "statehost state: unknown subcommand %q: want export or import\n", args[0])
	} else {
		fmt.Fprintln(env.Stderr, "statehost state: want a subcommand: export or import")
	}
	fmt.Fprintf(env.Stderr, "Usage: statehost state %s\n", stateSynopsis)
	return exitUsage
}

// stateFlags are the flags of both subcommands.
type stateFlags struct {
	fs            *flag.FlagSet
	config, store *string
	timeout       *time.Duration
}

func newStateFlags(env *cliEnv, sub, synopsis, usage, storeHelp string) stateFlags {
	fs := newFlagSet(env, "state "+sub, synopsis, usage)
	return stateFlags{fs: fs,
		config:  fs.String("config", "config.hcl", "the application's configuration `FILE`"),
		store:   fs.String("store", "", storeHelp),
		timeout: fs.Duration("timeout", 10*time.Second, "how long to wait for the brokers to answer: a `DURATION` such as 10s"),
	}
}

// load parses args, which must leave args positional arguments, then loads the
// configuration and finds the store in it. Otherwise ok is false, and code is the exit code
// (the problem is printed).
func (f stateFlags) load(env *cliEnv, args []string, want int, what string) (pos []string, s stateStore, code int, ok bool) {
	pos, code, ok = parseFlags(f.fs, args)
	switch {
	case !ok:
		return nil, s, code, false
	case len(pos) != want:
		return nil, s, usageError(f.fs, "want %s, got %d arguments", what, len(pos)), false
	case *f.store == "":
		return nil, s, usageError(f.fs, "--store is required"), false
	}
	cfg, ok := loadConfig(env, *f.config, config.Options{})
	if !ok {
		return nil, s, exitFailure, false
	}
	s, err := findStore(cfg, *f.store)
	if err != nil {
		return nil, s, failed(env.Logger.Named("state"), "cannot "+strings.TrimPrefix(f.fs.Name(), "state "), err), false
	}
	return pos, s, exitOK, true
}

// stateStore is the store a state command works on, as the configuration declares it.
type stateStore struct {
	cfg  *config.Config
	proc *config.Processor
	spec changelog.StoreSpec
	// topic is the store's changelog topic; "" when its logging is disabled.
	topic string
}

// findStore finds the store name among the processors of cfg.
func findStore(cfg *config.Config, name string) (stateStore, error) {
	var names []string
	for i := range cfg.Processors {
		pc := &cfg.Processors[i]
		specs, err := runtime.StoreSpecs(pc)
		if err != nil {
			return stateStore{}, err
		}
		for _, spec := range specs {
			names = append(names, spec.Name)
			if spec.Name != name {
				continue
			}
			s := stateStore{cfg: cfg, proc: pc, spec: spec}
			if !spec.LoggingDisabled {
				s.topic = changelog.TopicName(cfg.ApplicationID, name)
			}
			return s, nil
		}
	}
	if len(names) == 0 {
		return stateStore{}, fmt.Errorf("no store %q: the processors of %s have no store", name, cfg.Path)
	}
	slices.Sort(names)
	return stateStore{}, fmt.Errorf("no store %q in %s: its stores are %s", name, cfg.Path, strings.Join(names, ", "))
}

// windowed reports whether the store keeps windows or sessions.
func (s stateStore) windowed() bool { return s.spec.Windowed() }

// stateKafka is a state command's connection to the application's brokers.
type stateKafka struct {
	brokers []string
	cl      *kgo.Client
	adm     *kadm.Client
	// embedded is the embedded broker this command started, nil when it uses one that runs.
	embedded *broker.Broker
}

// errNoBroker is returned by connectState when no broker answers.
var errNoBroker = errors.New("no broker answers")

// connectState connects to the brokers of cfg: kafka.brokers, or the embedded broker's listen
// address, or, when nothing answers there, an embedded broker it starts on its data
// directory. The client reads read_committed, as restores do, and produces to the partition
// each record names, with the kafka block's producer settings. It fails with errNoBroker
// when the brokers of kafka.brokers do not answer within timeout.
func connectState(ctx context.Context, log hclog.Logger, cfg *config.Config, timeout time.Duration) (*stateKafka, error) {
	k := &stateKafka{brokers: cfg.Kafka.Brokers}
	embedded := len(k.brokers) == 0
	if embedded {
		k.brokers = []string{cfg.EmbeddedBroker.Listen}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := kafkaclient.Check(cctx, cfg.Kafka, k.brokers)
	if _, unreachable := errors.AsType[*kafkaclient.UnreachableError](err); unreachable && embedded {
		b, serr := broker.Start(broker.Options{Listen: "127.0.0.1:0", DataDir: cfg.EmbeddedBroker.DataDir,
			SyncWrites: cfg.EmbeddedBroker.SyncWrites, Logger: log.Named("broker")})
		if serr != nil {
			return nil, fmt.Errorf("nothing answers at the embedded broker's address %s, and its data directory cannot be opened: %w", cfg.EmbeddedBroker.Listen, serr)
		}
		log.Debug("embedded broker started", "addr", b.Addr(), "data_dir", cfg.EmbeddedBroker.DataDir)
		k.embedded, k.brokers, err = b, []string{b.Addr()}, nil
	}
	if err != nil {
		k.close(log)
		if _, unreachable := errors.AsType[*kafkaclient.UnreachableError](err); unreachable {
			return nil, fmt.Errorf("%w at %s: %w", errNoBroker, strings.Join(k.brokers, ","), err)
		}
		return nil, err
	}
	opts := append(kafkaclient.Opts(cfg.Kafka, k.brokers, "state", log.Named("kafka")), kafkaclient.ProducerOpts(cfg.Kafka)...)
	opts = append(opts,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// What restore.New asks of a restore client.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(int32(min(4<<20, cfg.Kafka.FetchMaxBytes))),
		kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if k.cl, err = kgo.NewClient(opts...); err != nil {
		k.close(log)
		return nil, fmt.Errorf("client of %s: %w", strings.Join(k.brokers, ","), err)
	}
	k.adm = kadm.NewClient(k.cl)
	return k, nil
}

// close closes the client, and the embedded broker if it started one.
func (k *stateKafka) close(log hclog.Logger) {
	if k.cl != nil {
		k.cl.Close()
	}
	if k.embedded != nil {
		if err := k.embedded.Close(); err != nil {
			log.Warn("closing the embedded broker", "error", err)
		}
	}
}

// openLocal opens the application's local state, read-only or not. It returns nil without
// an error when the state directory holds no database; a running process's lock is an error
// that says so.
func openLocal(log hclog.Logger, cfg *config.Config, readOnly bool) (*store.Manager, error) {
	dir := runtime.StateDir(cfg)
	if _, err := os.Stat(filepath.Join(dir, "pebble")); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	m, err := store.Open(store.Settings{Dir: dir, MemoryBytes: store.MinMemoryBytes, Logger: log, ReadOnly: readOnly, SyncCommits: true})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("the state directory %s is locked: a statehost process runs the application on it; stop it first: %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open the state directory %s: %w", dir, err)
	}
	return m, nil
}

// openLocalTask opens partition p of the store s in the local state m, without its changelog
// nor its other stores.
func openLocalTask(m *store.Manager, s stateStore, p int32) (*store.Task, error) {
	st, err := m.OpenTask(s.proc.Name, p)
	if err != nil {
		return nil, err
	}
	o := s.spec.Options
	o.Changelog, o.Metrics, o.Coalesce = nil, nil, false
	switch o.Kind {
	case store.Window:
		_, err = st.OpenWindow(s.spec.Name, o)
	case store.Session:
		_, err = st.OpenSession(s.spec.Name, o)
	default:
		_, err = st.Open(s.spec.Name, o)
	}
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}
