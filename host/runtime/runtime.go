package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/restore"
	"github.com/statehost/statehost/store"
)

// Options configure a Runtime.
type Options struct {
	// Config is the loaded application configuration, free of error diagnostics. Required.
	Config *config.Config

	// Brokers are the seed brokers. Default: Config.Kafka.Brokers. The command passes the
	// embedded broker's address when that list is empty.
	Brokers []string

	// Logger is the parent logger; the runtime logs under "runtime". Default: discard.
	Logger hclog.Logger

	// Workers is the number of plugin calls (jobs: a task's batch, or its punctuations) that
	// run in parallel; a call that has run for about a commit interval (100ms to 1s) gives its
	// place up to the next one (dispatch.go). It also sizes each processor's pool of plugin
	// instances, which its tasks borrow for each call: up to Workers idle instances per
	// processor (pools.go). Default: GOMAXPROCS.
	Workers int

	// MaxPollRecords bounds the records one poll hands to the tasks. Default 50000: enough
	// for a poll to hold a fetch of every partition (see fetchMaxPartitionBytes).
	MaxPollRecords int

	// RestoreListener also receives the restore events of every store. Default none (the
	// events are logged either way).
	RestoreListener restore.Listener

	// OnEvent receives the runtime's lifecycle events (events.go): running, partitions
	// assigned, restores, tasks running and closed, aborted transactions, deploys, stopped.
	// Each is emitted next to the log line it corresponds to, synchronously, from the
	// runtime's goroutines (several at once): it must not block, and must be safe for
	// concurrent calls. Default none.
	OnEvent func(Event)

	// NoSyncCommits leaves commits in Pebble's write-ahead log without fsync, as
	// store.Settings.SyncCommits=false describes: a killed process may then lose its last
	// commits (data and checkpoint together) and replay them from the changelogs, possibly all
	// of them, and the exported .checkpoint files may be ahead of the store. Default false:
	// every commit is synced, as Kafka Streams flushes its stores before it writes its
	// checkpoint file.
	NoSyncCommits bool

	// SessionTimeout is the group session timeout: how long the group waits for a member that
	// stopped heartbeating (a killed process) before it moves its tasks. Default:
	// Config.SessionTimeout, or 10s when that is zero.
	SessionTimeout time.Duration

	// NoWatch turns off the watch of the module files and of the configuration file. Default
	// false: while Run runs, a module file that changes on disk is deployed to the processors
	// that run it (Deploy), and a configuration file that changes is reloaded (ReloadFile),
	// 500ms after its last change.
	NoWatch bool

	// PartitionSeries bounds the store partitions that have series of their own in
	// statehost_restore_records_total and statehost_restore_remaining_records (metrics.go):
	// beyond it, the partitions first restored later count in one series per store, labelled
	// partition="other", and a scrape reports the lags of the PartitionSeries partitions
	// furthest behind, the others summed under "other". Sums per store stay exact. Default
	// 256; negative: no bound (a series per store partition, 2 x 4,096 at 4,096 tasks).
	PartitionSeries int

	// For the tests of the package:
	// batchTimeout is the engine's Config.BatchTimeout (default: the engine's, 10s);
	batchTimeout time.Duration
	// producerOpts are added to the options of the client that produces the tasks' records
	// (e.g. a small kgo.MaxBufferedRecords);
	producerOpts []kgo.Opt
	// producerWaitLimit bounds a record's wait for room in the producer (default
	// brokerRetryLimit; changelog.WithWaitLimit).
	producerWaitLimit time.Duration
	// wallClock is the clock of the stores whose TTL counts in wall-clock time
	// (store.Settings.WallClock; default time.Now);
	wallClock func() time.Time
	// sweepEvery is the least time between two steps of a task's sweep of expired entries
	// (default sweepInterval; negative: no sweep).
	sweepEvery time.Duration
	// beforeOffsetCommit, when set, is called by an at-least-once commit before it commits
	// input offsets to the group (tests see the offset commits an instance makes).
	beforeOffsetCommit func(why commitReason)
}

func (o *Options) defaults() error {
	if o.Config == nil {
		return errors.New("runtime: Options.Config is required")
	}
	switch o.Config.Guarantee {
	case config.AtLeastOnce, config.ExactlyOnce:
	default:

		return fmt.Errorf("runtime: processing guarantee %q is not supported", o.Config.Guarantee)
	}
	if len(o.Brokers) == 0 {
		o.Brokers = o.Config.Kafka.Brokers
	}
	if len(o.Brokers) == 0 {
		return errors.New("runtime: no brokers: set kafka.brokers or start the embedded broker")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Workers <= 0 {
		o.Workers = goruntime.GOMAXPROCS(0)
	}
	if o.MaxPollRecords <= 0 {
		o.MaxPollRecords = 50000
	}
	if o.PartitionSeries == 0 {
		o.PartitionSeries = defaultPartitionSeries
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = o.Config.SessionTimeout
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 10 * time.Second
	}
	return nil
}

// DiagnosticsError reports configuration problems found against the broker or the modules:
// input topics that do not exist, inputs that are not co-partitioned, modules that are not
// statehost modules. Print it with config.WriteDiagnostics(w, Files, Diags).
type DiagnosticsError struct {
	Diags hcl.Diagnostics
	Files map[string]*hcl.File
}

func (e *DiagnosticsError) Error() string {
	if len(e.Diags) == 1 {
		return e.Diags[0].Error()
	}
	return fmt.Sprintf("%s (and %d more problems)", e.Diags[0].Error(), len(e.Diags)-1)
}

// processor is a configured processor with its compiled module and its topology.
type processor struct {
	cfg        *config.Processor
	mod        *engine.Module // the module its tasks run, or switch to at their next commit
	partitions int32
	stores     []changelog.StoreSpec

	storeLimits  map[string]int // logged store -> the limit of its changelog records (limits.go)
	outputLimits []int          // the limit of the records of each output, as cfg.Outputs

	version   ModuleVersion  // mod's
	previous  *ModuleVersion // the module before the last deploy, nil before any
	prevMod   *engine.Module // previous's module, while a switch may go back to it
	pools     procPools      // the pools of its modules' instances (pools.go)
	switchErr error          // why the last deploy went back to the previous module

	// pending: added by a reload, it has no tasks until the group enables it (reload.go).
	pending atomic.Bool
}

// clients are the Kafka clients of a Runtime.
type clients struct {
	prodCl    *kgo.Client         // produces under at-least-once; admin requests under both
	adm       *kadm.Client        // admin requests, on prodCl
	producer  *changelog.Producer // the tasks' changelog and output records
	restoreCl *kgo.Client
	restorer  *restore.Restorer // restores the active tasks' stores
	followCl  *kgo.Client
	follower  *restore.Restorer // follows the standby tasks' changelogs (standby.go)
	consumer  *kgo.Client       // the group consumer; under exactly-once the producer too (txn.go)

	purging  sync.Mutex   // one purge of repartition topics at a time
	purgeAdm *kadm.Client // the client that purges: one whose metadata follows the repartition topics
}

// Runtime runs one instance of an application. New prepares it, Run runs it until its
// context ends, and Close releases what New opened.
type Runtime struct {
	opts Options
	cfg  *config.Config
	log  hclog.Logger

	stores  *store.Manager
	eng     *engine.Engine
	procs   []*processor
	readers map[string][]*processor // input topic -> the processors that read it
	// procsView is procs and readers for the goroutines that cannot take the table's lock
	// (view.go); procs, readers and a processor's cfg and stores are the loop's.
	procsView atomic.Pointer[procsView]
	outParts  map[string]int32 // output topic -> its partition count
	limits    map[string]int   // produced topic -> the largest record batch of a record (limits.go)

	kafka clients     // the Kafka clients
	local *localState // the state this instance holds, for the balancer and the cleanup

	committer committer    // atLeastOnce, or eos
	eos       *exactlyOnce // the committer under exactly-once; nil under at-least-once

	tasks *taskTable // the tasks, their input partitions, and the lock of both (tasks.go)

	jobs *dispatcher // the tasks' plugin calls (dispatch.go)

	restoreRetryAt time.Time       // when tasks wait to be restored again (after a retriable error); zero: none
	restoreRetry   brokerRetry     // the restores failing on an unreachable broker, in a row
	stop           <-chan struct{} // closed when Run's context ends: retries of broker calls give up
	sb             standbys        // standby tasks (standby.go)

	signals signals // what the group's callbacks and the jobs hand to the loop (signals.go)

	status  *statusBoard
	metrics *metrics      // GET /metrics (metrics.go)
	deploy  deploys       // the modules' deploys and switches (deploy.go)
	history deployHistory // the deploys since start, for GET /v1/deploys (deploys_history.go)
	iq      queries       // interactive queries (iq.go)

	reload reloads // configuration reloads (reload.go)

	peers   *peerWatches                // the watches of the other instances on this one (peers.go)
	watcher atomic.Pointer[peerWatcher] // this instance's watches of the others; nil: remove_dead_members = false
}

// New prepares an instance of the application in opts.Config: it locks and opens the state
// directory <state_dir>/<application_id>, compiles the processors' modules, connects to the
// brokers, and creates the topics the configuration declares (topic and repartition blocks,
// changelogs, missing output topics). Problems of the configuration against the broker and
// the modules come back together as a *DiagnosticsError.
func New(ctx context.Context, opts Options) (_ *Runtime, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	cfg := opts.Config
	r := &Runtime{
		opts:     opts,
		cfg:      cfg,
		log:      opts.Logger.Named("runtime"),
		readers:  make(map[string][]*processor),
		outParts: make(map[string]int32),
		status:   newStatusBoard(),
		peers:    newPeerWatches(),
	}
	r.tasks = newTaskTable(r.readers, r.status)
	r.jobs = &dispatcher{rt: r}
	r.sb.rt = r
	r.deploy.rt = r
	r.iq.rt = r
	r.reload.init(r)
	r.metrics = newMetrics(r.status)
	r.metrics.partitionSeries = r.opts.PartitionSeries
	r.status.markers = endMarkers(cfg.Guarantee)
	if cfg.Guarantee == config.ExactlyOnce {
		r.eos = &exactlyOnce{rt: r}
		r.committer = r.eos
	} else {
		r.committer = &atLeastOnce{rt: r}
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()

	if cfg.MemoryLimit > 0 {
		// Process-wide, as GOMEMLIMIT: one runtime runs in a statehost process.
		debug.SetMemoryLimit(cfg.MemoryLimit)
		r.log.Debug("memory limit set", "memory_limit", cfg.MemoryLimit)
	}
	dir := StateDir(cfg)
	r.stores, err = store.Open(store.Settings{Dir: dir, MemoryBytes: cfg.StateMemory, SyncCommits: !opts.NoSyncCommits, Logger: opts.Logger,
		WallClock: opts.wallClock})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return nil, fmt.Errorf("runtime: state directory %s is used by another statehost process: %w", dir, err)
		}
		return nil, fmt.Errorf("runtime: open state directory %s: %w", dir, err)
	}
	r.eng, err = engine.New(ctx, engine.Config{CacheDir: filepath.Join(dir, "wasm-cache"), Logger: opts.Logger,
		BatchTimeout: opts.batchTimeout, OnGuestLogsDropped: r.metrics.guestLogsDropped})
	if err != nil {
		return nil, fmt.Errorf("runtime: start the wasm engine: %w", err)
	}
	if err := r.compile(ctx); err != nil {
		return nil, err
	}
	r.local = newLocalState(r.procs)
	r.local.markers = endMarkers(cfg.Guarantee)
	r.tasks.local = r.local
	held, err := r.stores.LocalTasks()
	if err != nil {
		return nil, fmt.Errorf("runtime: list the local state in %s: %w", dir, err)
	}
	r.local.load(held)
	r.reload.publish()
	r.sb.cleanedAt = time.Now()
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	topics := topicSetup{r}
	if err := topics.setupTopics(ctx); err != nil {
		return nil, err
	}
	r.publishView() // once setupTopics has given the processors their partitions
	topics.learnLimits(ctx)
	return r, nil
}

// StateDir returns the instance's state directory, <state_dir>/<application_id>.
func StateDir(cfg *config.Config) string {
	return filepath.Join(cfg.StateDir, cfg.ApplicationID)
}

// compile compiles the processors' modules, each file once and in parallel (compiling is
// the slow part of a start without a warm cache); each failure is a diagnostic on the module
// attribute of every processor that uses the file.
func (r *Runtime) compile(ctx context.Context) error {
	type result struct {
		mod *engine.Module
		err error
	}
	results := make(map[string]*result)
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, r.opts.Workers)
	)
	for _, pc := range r.cfg.Processors {
		if results[pc.Module] != nil {
			continue
		}
		res := &result{}
		results[pc.Module] = res
		wg.Add(1)
		go func(path string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res.mod, res.err = r.eng.CompileFile(ctx, path)
		}(pc.Module)
	}
	wg.Wait()

	var diags hcl.Diagnostics
	for i := range r.cfg.Processors {
		pc := &r.cfg.Processors[i]
		res := results[pc.Module]
		if res.err != nil {
			rng := pc.ModuleRange
			d := &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid module",
				Detail:   fmt.Sprintf("Processor %q: module %s is not a valid statehost module: %v", pc.Name, pc.Module, res.err),
				Subject:  &rng,
			}
			// CompileFile's error wraps the one of reading the file, if that failed.
			if pe := (*fs.PathError)(nil); errors.As(res.err, &pe) && pe.Path == pc.Module {
				d.Summary = "Module file not readable"
				d.Detail = fmt.Sprintf("Processor %q: the module file %s cannot be read: %v.", pc.Name, pc.Module, pe)
			}
			diags = append(diags, d)
			continue
		}
		p := &processor{cfg: pc, mod: res.mod, version: ModuleVersion{Hash: res.mod.Hash(), Source: pc.Module, LoadedAt: time.Now()}}
		r.deploy.restoreLineage(p) // what a rollback goes back to, when it last ran this module here
		for _, sc := range pc.Stores {
			backend, err := store.ParseBackend(sc.Backend)
			if err != nil {
				return fmt.Errorf("runtime: processor %s store %s: %w", pc.Name, sc.Name, err)
			}
			spec := storeSpec(sc, backend)
			spec.Metrics = r.metrics.storeHook(sc.Name)
			if spec.TTL.Enabled() {
				r.metrics.storeExpired(pc.Name, sc.Name, 0) // at zero from the start
			}
			if !spec.LoggingDisabled {
				r.metrics.addChangelog(changelog.TopicName(r.cfg.ApplicationID, sc.Name), sc.Name)
			}
			p.stores = append(p.stores, spec)
		}
		r.metrics.addProcessor(pc.Name)
		r.metrics.addInstances(pc.Name, p.liveInstances)
		r.procs = append(r.procs, p)
		for _, in := range pc.Inputs {
			r.readers[in] = append(r.readers[in], p)
		}
		r.log.Info("module loaded", "processor", pc.Name, "module", pc.Module, "hash", res.mod.Hash())
	}
	if diags.HasErrors() {
		return &DiagnosticsError{Diags: diags, Files: r.cfg.Files}
	}
	return nil
}

// StoreOptions returns the store options of a store block with backend: its kind, window or
// session settings, TTL and coalescing, as the runtime opens it (statehost test's driver
// opens its in-memory stores with them too).
func StoreOptions(sc config.Store, backend store.Backend) store.Options {
	return storeSpec(sc, backend).Options
}

// storeSpec is the changelog.StoreSpec of a store block.
func storeSpec(sc config.Store, backend store.Backend) changelog.StoreSpec {
	spec := changelog.StoreSpec{
		Name:            sc.Name,
		Options:         store.Options{Backend: backend, Coalesce: sc.Coalesce},
		LoggingDisabled: !sc.Logging,
		TopicConfigs:    sc.TopicConfigs,
	}
	spec.TTL = storeTTL(sc)
	switch sc.Type {
	case config.StoreWindow:
		spec.Kind = store.Window
	case config.StoreSession:
		spec.Kind = store.Session
	default:
		return spec
	}
	spec.Window = store.WindowSpec{
		Size:      sc.WindowSize.Milliseconds(),
		Advance:   sc.Advance.Milliseconds(),
		Gap:       sc.InactivityGap.Milliseconds(),
		Grace:     sc.Grace.Milliseconds(),
		Retention: sc.Retention.Milliseconds(),
	}
	spec.AdditionalRetention = sc.AdditionalRetention
	return spec
}

// connect creates the Kafka clients: one for admin requests and (at-least-once) produces, a
// restore consumer for active tasks and one for standby tasks, and the group consumer (created last, in Run, so that nothing is assigned
// before the runtime can take it; under exactly-once it is the producer too).
func (r *Runtime) connect(ctx context.Context) error {
	if err := kafkaclient.Check(ctx, r.cfg.Kafka, r.opts.Brokers); err != nil {
		if _, ok := errors.AsType[*kafkaclient.UnreachableError](err); !ok {
			return fmt.Errorf("runtime: connect to Kafka: %w", err)
		}
		// The brokers may still be starting: the clients retry, and the topic setup
		// bounds the wait.
		r.log.Warn("no broker answers yet", "error", err)
	}
	var err error
	r.kafka.prodCl, err = kgo.NewClient(append(append(r.clientOpts("producer"), producerOpts(r.cfg.Kafka)...),
		append([]kgo.Opt{r.metrics.producerHook()}, r.opts.producerOpts...)...)...)
	if err != nil {
		return fmt.Errorf("runtime: create the producer client: %w", err)
	}
	r.kafka.adm = kadm.NewClient(r.kafka.prodCl)
	eos := r.cfg.Guarantee == config.ExactlyOnce
	if !eos { // under exactly-once the group consumer is the producer (newConsumer)
		if r.kafka.producer, err = changelog.NewProducer(r.kafka.prodCl, changelog.WithWaitLimit(r.producerWaitLimit())); err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
	}
	listener := multiListener{r.status, r.local, restoreListener{m: r.metrics}, eventListener{r: r}}
	if r.opts.RestoreListener != nil {
		listener = append(listener, r.opts.RestoreListener)
	}
	if r.kafka.restoreCl, r.kafka.restorer, err = r.newRestorer("restore", listener, r.opts.Logger); err != nil {
		return err
	}
	// The standby tasks follow their changelogs on a client of their own: a restore of active
	// tasks never waits for them, nor they for it.
	r.kafka.followCl, r.kafka.follower, err = r.newRestorer("standby", multiListener{r.status, r.local, restoreListener{m: r.metrics, follow: true}, eventListener{r: r, standby: true}}, r.opts.Logger.Named("standby"))
	return err
}

// producerWaitLimit bounds a record's wait for room among the producer's records in flight:
// brokerRetryLimit, as for the other broker calls the runtime cannot go on without. Under
// exactly-once, whose producer txn.go creates with changelog's default, that is the same
// 5 minutes (changelog.DefaultWaitLimit).
func (r *Runtime) producerWaitLimit() time.Duration {
	if r.opts.producerWaitLimit > 0 {
		return r.opts.producerWaitLimit
	}
	return brokerRetryLimit
}

// newRestorer creates a restore client (the client id <application_id>-<name>) and its
// Restorer. Changelogs are read read_committed under both guarantees: at-least-once writes no
// transactions, but a changelog may hold aborted records of an earlier exactly-once run,
// which must never reach a store.
func (r *Runtime) newRestorer(name string, lis restore.Listener, logger hclog.Logger) (*kgo.Client, *restore.Restorer, error) {
	cl, err := kgo.NewClient(append(r.clientOpts(name),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(int32(min(restoreFetchMaxBytes, r.cfg.Kafka.FetchMaxBytes))),
		kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime: create the %s client: %w", name, err)
	}
	rs, err := restore.New(cl, kadm.NewClient(cl), restore.Settings{ReadCommitted: true, Listener: lis, Logger: logger})
	if err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("runtime: %w", err)
	}
	return cl, rs, nil
}

// restoreFetchMaxBytes bounds what one fetch of a restore brings (Kafka's fetch.max.bytes,
// 50 MiB by default). The consumer decodes a fetch into records of about 200 bytes each
// however small the changelog's records are, and the restore holds up to four fetches at once
// (the one being read and the ones its appliers queue): 50 MiB of word counts took 500 MiB.
// With 4 MiB, a restore of 20 million records stays within the store's memory and a fixed
// margin, at the same speed: the appliers work on one fetch while the next is read. The
// fetches of a cold restore (restore.Restorer's own) are bounded by it too. A smaller
// kafka.fetch_max_bytes wins.
const restoreFetchMaxBytes = 4 << 20

// clientOpts are the options every client of the runtime takes: the kafka block's
// (brokers, TLS, SASL, client id <client_id>-<role>, rack, request timeout) and the backoff.
func (r *Runtime) clientOpts(role string) []kgo.Opt {
	return append(kafkaclient.Opts(r.cfg.Kafka, r.opts.Brokers, role, r.opts.Logger.Named("kafka")),
		kgo.RetryBackoffFn(clientBackoff))
}

// producerOpts are the options of the client that produces the tasks' changelog and output
// records (changelog.Producer): the admin client under at-least-once, the transactional group
// consumer under exactly-once. The kafka block sets compression, linger (default 5ms) and
// the batch size (default 1 MiB).
//
// No kgo.RecordDeliveryTimeout: franz-go measures it from each record's timestamp, and our
// records carry event time (an output record has its input's timestamp, a window changelog
// record the stream time), so records of data older than the timeout would fail at once. A
// commit bounds its wait for acknowledgements itself (commitTimeout).
func producerOpts(k config.Kafka) []kgo.Opt {
	return append(kafkaclient.ProducerOpts(k), kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// fetchMaxPartitionBytes bounds what one fetch brings of each input partition (Kafka's
// max.partition.fetch.bytes, 1 MiB by default). A poll takes the fetched partitions in turn:
// with 1 MiB per partition, a poll of small records held one partition, so one task (1.14
// tasks per poll measured on the bench's count), and the workers that process a poll's tasks
// in parallel had nothing to share. With 64 KiB, and polls of up to 50000 records
// (Options.MaxPollRecords), a poll holds what one fetch brought of every partition (5.1
// tasks per poll on the same run).
const fetchMaxPartitionBytes = 64 << 10

// newConsumer creates the group consumer; under exactly-once it is also the transactional
// producer of the tasks. It consumes nothing, so it joins no group, until joinGroup.
func (r *Runtime) newConsumer(ctx context.Context) error {
	// Static membership (KIP-345): the instance id is stable across restarts, so that an
	// instance restarted within the session timeout takes its partitions back without a
	// rebalance (and so without moving its tasks away and back); closing does not leave the
	// group. The state directory's process id makes it, as it makes the transactional id.
	id, err := r.instanceID()
	if err != nil {
		return err
	}
	opts := append(r.clientOpts("consumer"),
		kgo.ConsumerGroup(r.cfg.ApplicationID),
		kgo.InstanceID(id),
		kgo.Balancers(r.newBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(r.opts.SessionTimeout),
		kgo.RebalanceTimeout(rebalanceTimeout),
		kgo.HeartbeatInterval(r.heartbeatInterval()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(int32(r.cfg.Kafka.FetchMaxBytes)),
		kgo.FetchMaxPartitionBytes(int32(min(fetchMaxPartitionBytes, r.cfg.Kafka.FetchMaxBytes))),
		// Inputs too: records of aborted transactions (an upstream exactly-once processor's,
		// or this application's repartition records) are never processed.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
	)
	if r.eos != nil {
		opts = append(append(opts, producerOpts(r.cfg.Kafka)...), r.opts.producerOpts...) // the group consumer is the producer
		if err := r.eos.newTransactSession(ctx, opts); err != nil {
			return err
		}
		// The admin client produces nothing under exactly-once, so its metadata of the
		// repartition topics would go stale; the consumer reads them.
		r.kafka.purgeAdm = kadm.NewClient(r.kafka.consumer)
		return nil
	}
	if r.kafka.consumer, err = kgo.NewClient(opts...); err != nil {
		return fmt.Errorf("runtime: create the group consumer: %w", err)
	}
	r.kafka.purgeAdm = r.kafka.adm
	return nil
}

// joinGroup makes the group consumer consume every input topic: franz-go joins the group as
// soon as it has the metadata of a consumed topic, not at the first poll, so the group may
// assign partitions (onAssigned) before joinGroup returns. Under exactly-once it is called
// only once the transactional producer is ready: a member that joined before would take
// partitions it cannot process yet, or leave the group again when the producer fails to
// initialize.
func (r *Runtime) joinGroup() {
	r.kafka.consumer.AddConsumeTopics(slices.Collect(maps.Keys(r.readers))...)
}

// instanceID is the group.instance.id of this instance: <application_id>-<process id>.
func (r *Runtime) instanceID() (string, error) {
	pid, err := processID(StateDir(r.cfg))
	if err != nil {
		return "", err
	}
	return r.cfg.ApplicationID + "-" + pid, nil
}

// heartbeatInterval is a tenth of the session timeout; with remove_dead_members at most
// 250ms: when a peer removes a dead member, the others learn of the rebalance at their next
// heartbeat, and the failover waits for the last of them.
func (r *Runtime) heartbeatInterval() time.Duration {
	hb := r.opts.SessionTimeout / 10
	if r.cfg.RemoveDeadMembers {
		hb = min(hb, 250*time.Millisecond)
	}
	return hb
}

// Close releases everything New and Run opened. Run closes the tasks itself; Close is for
// a Runtime that New returned but that did not run, and after Run.
func (r *Runtime) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r.kafka.consumer != nil {
		r.kafka.consumer.Close()
	}
	r.kafka.purging.Lock() // a purge in the background finishes before its client closes
	defer r.kafka.purging.Unlock()
	if r.kafka.restoreCl != nil {
		r.kafka.restoreCl.Close()
	}
	if r.kafka.followCl != nil {
		r.kafka.followCl.Close()
	}
	if r.kafka.prodCl != nil {
		r.kafka.prodCl.Close()
	}
	if r.eng != nil {
		if err := r.eng.Close(ctx); err != nil {
			r.log.Warn("closing the wasm engine", "error", err)
		}
	}
	if r.stores != nil {
		if err := r.stores.Close(); err != nil {
			r.log.Warn("closing the state directory", "error", err)
		}
	}
	r.deploy.closeScratch()
}

// multiListener sends restore events to several listeners.
type multiListener []restore.Listener

func (m multiListener) OnRestoreStart(e restore.StartEvent) {
	for _, l := range m {
		l.OnRestoreStart(e)
	}
}

func (m multiListener) OnBatchRestored(e restore.BatchEvent) {
	for _, l := range m {
		l.OnBatchRestored(e)
	}
}

func (m multiListener) OnRestoreEnd(e restore.EndEvent) {
	for _, l := range m {
		l.OnRestoreEnd(e)
	}
}

// Broker outages. franz-go retries produces and fetches for as long as it takes, and the group
// consumer rejoins on its own once the broker answers again (the tasks it lost are assigned
// again, and restore what they had not committed). The calls the runtime cannot go on without
// fail fast instead when the broker refuses connections (franz-go does not retry a refused
// dial of a single seed broker): a restore's offset listings and fetches, and under
// exactly-once the new transactional session after a reset. The runtime retries those with
// brokerRetry, and gives up after brokerRetryLimit.

// brokerRetryLimit bounds how long the runtime retries a broker call it cannot go on without
// while the broker stays out of reach, as Kafka Streams' task.timeout.ms (5 min) does; then Run
// fails with the last error.
const brokerRetryLimit = 5 * time.Minute

// brokerRetry follows the retries of one broker call that failed in a row. The zero value is
// a call that has not failed.
type brokerRetry struct {
	since    time.Time // the first failure in a row
	attempts int       // failures in a row
}

// next records the failure err and reports whether the call may be tried again and after how
// long: only when err says that the broker is out of reach or busy (unavailable), and the call
// has failed for less than brokerRetryLimit. The waits double from 250ms to 2s.
func (b *brokerRetry) next(err error) (time.Duration, bool) {
	if !unavailable(err) {
		return 0, false
	}
	if b.attempts == 0 {
		b.since = time.Now()
	}
	b.attempts++
	if time.Since(b.since) >= brokerRetryLimit {
		return 0, false
	}
	return min(250*time.Millisecond<<min(b.attempts-1, 4), 2*time.Second), true
}

// clientBackoff is the retry backoff of the runtime's Kafka clients (kgo.RetryBackoffFn): the
// wait before the tries-th retry of a request, a reconnection, a produce or a group join. It
// doubles from 100ms to 1s, with a jitter of 20%, as Kafka's clients do (retry.backoff.ms,
// retry.backoff.max.ms, reconnect.backoff.max.ms): a client finds a broker that is back within
// a second. franz-go's default grows to 5s, which added seconds to every recovery from an
// outage.
func clientBackoff(tries int) time.Duration {
	d := min(100*time.Millisecond<<min(max(tries-1, 0), 4), time.Second)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// unavailable reports whether err says that the broker could not be reached (a refused or
// timed-out connection, one cut in the middle of a request) or answered with a retriable
// error (no leader or coordinator yet, a coordinator loading): the same call may succeed
// later, unchanged. A context's end is not: it is the caller's.
func unavailable(err error) bool {
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, kgo.ErrClientClosed):
		return false
	case kerr.IsRetriable(err), kgo.IsRetryableBrokerErr(err):
		return true
	case errors.As(err, &opErr):
		return true // a dial (refused, unreachable) or a read or write on a broken connection
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) && netErr.Timeout()
}

// retryRestoreLater decides about a restore that failed with err: when the broker is out of
// reach or busy, and has been for less than brokerRetryLimit, the tasks wait for their next
// restore (after a backoff) and it returns true; otherwise the restore's error stops the
// runtime. The caller holds the table's lock.
func (r *Runtime) retryRestoreLater(err error) bool {
	wait, ok := r.restoreRetry.next(err)
	if !ok {
		if r.restoreRetry.attempts > 1 {
			r.log.Error("restore failed; giving up on the broker", "attempts", r.restoreRetry.attempts,
				"failing_for", time.Since(r.restoreRetry.since).Round(time.Millisecond), "error", err)
		}
		return false
	}
	r.log.Warn("restore failed: the broker is out of reach or busy; the tasks restore again later", "attempt", r.restoreRetry.attempts,
		"retry_in", wait, "failing_for", time.Since(r.restoreRetry.since).Round(time.Millisecond), "error", err)
	r.restoreRetryAt = time.Now().Add(wait)
	return true
}

// stopped reports whether Run's context has ended.
func (r *Runtime) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}
