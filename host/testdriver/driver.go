package testdriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/store"
)

// Options configure a Driver.
type Options struct {
	// Config is the application whose processors run. Required. Its modules are read from
	// their files; its stores are all memory stores here, whatever their backend, and no
	// changelog is written.
	Config *config.Config
	// Processors names the processors of Config to run. Default: every one. A record a
	// processor emits to a topic that another processor runs on is processed by it.
	Processors []string
	// Partitions is the partition count of each topic a processor reads that Config does not
	// declare (no topic or repartition block): in a real run, the count of the topic on the
	// broker. A topic that is only written has the partition count of the processor that
	// writes it, as the runtime creates it. Default 1.
	Partitions int32
	// WallClock is the time of the wall clock when the driver starts, which only the input
	// moves (Input.AdvanceWallClock). Default: the Unix epoch, 1970-01-01T00:00:00Z, so that a
	// run does not depend on when it runs.
	WallClock time.Time
	// Logger receives the guests' logs and the driver's warnings (poison records). Default:
	// a logger that discards everything.
	Logger hclog.Logger
}

// Driver runs processors on records piped into it (Pipe), keeping what they produce
// (Outputs) and their stores (Stores). A Driver is used by one goroutine at a time.
type Driver struct {
	cfg *config.Config
	log hclog.Logger
	dir string         // the store manager's temporary directory
	mgr *store.Manager // the tasks' stores, all memory stores
	eng *engine.Engine

	procs   []*processor
	readers map[string][]*processor // topic -> the processors that read it, in Config's order
	parts   map[string]int32        // topic -> its partition count
	sources []string                // the topics read and not written by the processors
	offsets map[string]int64        // "topic\x00partition" -> the next offset

	now      time.Time // the wall clock
	queue    []delivery
	outputs  []Output
	poisoned []Poisoned
}

// processor is a processor of the run, with its module and its tasks, one per partition.
type processor struct {
	cfg        *config.Processor
	mod        *engine.Module
	pool       *engine.Pool // the instances its tasks borrow; nil when each task has its own
	partitions int32
	stores     []storeDef
	// The size limits of its logged stores' changelog records and of its outputs' records,
	// and its dead-letter topic ("" when its on_error is not dead_letter).
	storeLimits  map[string]int
	outputLimits []int
	dlq          string
	tasks        []*task
}

// storeDef is a store of a processor, as the store package opens it.
type storeDef struct {
	name string
	opts store.Options
}

// New starts a driver: it compiles the processors' modules, opens the stores of a task for
// each processor and partition, and starts the plugin of each task (statehost_init), as the
// runtime does when its tasks are assigned. What the inits emit is in Outputs. Close it.
func New(ctx context.Context, opts Options) (_ *Driver, err error) {
	if opts.Config == nil {
		return nil, errors.New("testdriver: Options.Config is required")
	}
	if opts.Partitions == 0 {
		opts.Partitions = 1
	}
	if opts.Partitions < 0 {
		return nil, fmt.Errorf("testdriver: Options.Partitions %d is negative", opts.Partitions)
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.WallClock.IsZero() {
		opts.WallClock = time.UnixMilli(0).UTC()
	}
	d := &Driver{cfg: opts.Config, log: opts.Logger, readers: map[string][]*processor{}, parts: map[string]int32{},
		offsets: map[string]int64{}, now: opts.WallClock}
	defer func() {
		if err != nil {
			_ = d.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := d.plan(opts); err != nil {
		return nil, err
	}
	if d.dir, err = os.MkdirTemp("", "statehost-test-"); err != nil {
		return nil, fmt.Errorf("testdriver: %w", err)
	}
	d.mgr, err = store.Open(store.Settings{Dir: d.dir, MemoryBytes: store.MinMemoryBytes, Logger: d.log,
		WallClock: func() time.Time { return d.now }}) // a ttl_clock = "wall_clock" counts in the input's wall clock
	if err != nil {
		return nil, fmt.Errorf("testdriver: open the stores: %w", err)
	}
	d.eng, err = engine.New(ctx, engine.Config{Logger: d.log, Now: func() time.Time { return d.now }})
	if err != nil {
		return nil, fmt.Errorf("testdriver: start the wasm engine: %w", err)
	}
	if err := d.compile(ctx); err != nil {
		return nil, err
	}
	for _, p := range d.procs {
		for part := range p.partitions {
			t, err := d.openTask(p, part)
			if err != nil {
				return nil, err
			}
			if err := d.start(ctx, t); err != nil {
				return nil, err
			}
		}
	}
	if err := d.drain(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// plan picks the processors to run and works out the partition count of every topic they
// read or write.
func (d *Driver) plan(opts Options) error {
	cfg := d.cfg
	for _, name := range opts.Processors {
		if !slices.ContainsFunc(cfg.Processors, func(p config.Processor) bool { return p.Name == name }) {
			names := make([]string, len(cfg.Processors))
			for i, p := range cfg.Processors {
				names[i] = p.Name
			}
			return fmt.Errorf("testdriver: no processor %q in %s (it has %s)", name, cfg.Path, strings.Join(names, ", "))
		}
	}
	written := map[string]bool{}
	for i := range cfg.Processors {
		pc := &cfg.Processors[i]
		if len(opts.Processors) > 0 && !slices.Contains(opts.Processors, pc.Name) {
			continue
		}
		p := &processor{cfg: pc}
		d.procs = append(d.procs, p)
		for _, in := range pc.Inputs {
			d.readers[in] = append(d.readers[in], p)
		}
		for _, out := range pc.Outputs {
			written[out] = true
		}
	}
	if len(d.procs) == 0 {
		return fmt.Errorf("testdriver: %s has no processor", cfg.Path)
	}
	declared := func(topic string) (int32, bool) {
		if t := cfg.TopicByName(topic); t != nil {
			return t.Partitions, true
		}
		if rp := cfg.RepartitionByTopic(topic); rp != nil {
			return rp.Partitions, true
		}
		return 0, false
	}
	for _, p := range d.procs {
		for i, in := range p.cfg.Inputs {
			n, ok := declared(in)
			if !ok {
				n = opts.Partitions
			}
			if i > 0 && n != p.partitions {
				return fmt.Errorf("testdriver: processor %q: its inputs are not co-partitioned: %s has %d partitions, %s has %d",
					p.cfg.Name, p.cfg.Inputs[0], p.partitions, in, n)
			}
			p.partitions, d.parts[in] = n, n
			if !written[in] && !slices.Contains(d.sources, in) {
				d.sources = append(d.sources, in)
			}
		}
	}
	for _, p := range d.procs {
		outs := slices.Clone(p.cfg.Outputs)
		if p.cfg.OnError == config.OnErrorDeadLetter {
			p.dlq = cfg.DeadLetterTopic(p.cfg.Name)
			outs = append(outs, p.dlq)
		}
		for _, out := range outs {
			if _, ok := d.parts[out]; ok {
				continue
			}
			n, ok := declared(out)
			if !ok {
				n = p.partitions
			}
			d.parts[out] = n
		}
		p.planLimits(cfg)
	}
	return nil
}

// Size limits of records, as the runtime learns them from a broker with Kafka's defaults
// (host/runtime/limits.go): the smaller of the topic's max.message.bytes (Kafka's default
// 1,048,588, or the topic's config in Config) and the producer's 1 MiB batch, less the 4
// bytes of its length prefix.
const (
	kafkaMaxMessageBytes = 1048588
	producerBatchLimit   = 1<<20 - 4
)

// recordLimit returns the limit of the records of a topic with configs.
func recordLimit(configs map[string]string) int {
	limit := kafkaMaxMessageBytes
	if v, err := strconv.Atoi(configs["max.message.bytes"]); err == nil && v > 0 {
		limit = v
	}
	return min(limit, producerBatchLimit)
}

// planLimits sets the limits of p's logged stores and outputs.
func (p *processor) planLimits(cfg *config.Config) {
	p.storeLimits = map[string]int{}
	for _, sc := range p.cfg.Stores {
		if sc.Logging {
			p.storeLimits[sc.Name] = recordLimit(sc.TopicConfigs)
		}
	}
	p.outputLimits = make([]int, len(p.cfg.Outputs))
	for i, out := range p.cfg.Outputs {
		var configs map[string]string
		if t := cfg.TopicByName(out); t != nil {
			configs = t.Configs
		}
		p.outputLimits[i] = recordLimit(configs)
	}
}

// compile compiles each processor's module (each file once) and describes its stores. A
// module is named by its file's base name, which the engine's errors (and dead letters'
// statehost.error headers) show, so that they do not depend on where the files are.
func (d *Driver) compile(ctx context.Context) error {
	mods := map[string]*engine.Module{}
	for _, p := range d.procs {
		mod := mods[p.cfg.Module]
		if mod == nil {
			wasm, err := os.ReadFile(p.cfg.Module)
			if err != nil {
				return fmt.Errorf("testdriver: processor %q: %w", p.cfg.Name, err)
			}
			if mod, err = d.eng.Compile(ctx, filepath.Base(p.cfg.Module), wasm); err != nil {
				return fmt.Errorf("testdriver: processor %q: module %s: %w", p.cfg.Name, p.cfg.Module, err)
			}
			mods[p.cfg.Module] = mod
		}
		p.mod = mod
		if !mod.InstancePerTask() {
			p.pool = engine.NewPool(mod, 1) // as the runtime's pools with one worker
		}
		for _, sc := range p.cfg.Stores {
			p.stores = append(p.stores, storeDef{name: sc.Name, opts: storeOptions(sc)})
		}
	}
	return nil
}

// storeOptions returns the options of the in-memory store of the store block sc: the
// runtime's (kind, window or session settings, TTL), without coalescing, which only delays
// what a store holds until a commit, and the driver commits nothing.
func storeOptions(sc config.Store) store.Options {
	opts := runtime.StoreOptions(sc, store.Memory)
	opts.Coalesce = false
	return opts
}

// Close releases the plugins, the stores and the temporary directory.
func (d *Driver) Close(ctx context.Context) error {
	var errs []error
	for _, p := range d.procs {
		for _, t := range p.tasks {
			if t.pool != p.pool {
				errs = append(errs, t.pool.Close(ctx))
			}
			errs = append(errs, t.st.Close())
		}
		if p.pool != nil {
			errs = append(errs, p.pool.Close(ctx))
		}
		p.tasks = nil
	}
	if d.eng != nil {
		errs = append(errs, d.eng.Close(ctx))
	}
	if d.mgr != nil {
		errs = append(errs, d.mgr.Close())
	}
	if d.dir != "" {
		errs = append(errs, os.RemoveAll(d.dir))
	}
	d.procs, d.eng, d.mgr, d.dir = nil, nil, nil, ""
	return errors.Join(errs...)
}
