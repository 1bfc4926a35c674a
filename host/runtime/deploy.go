package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statehost/statehost/host/engine"
)

// ModuleVersion describes a module a processor runs.
type ModuleVersion struct {
	Hash     string    `json:"hash"`      // SHA-256 of the module, hex
	Source   string    `json:"source"`    // where it came from: its file, or "deploy"
	LoadedAt time.Time `json:"loaded_at"` // when it was validated and became the processor's module
}

// ProcessorStatus is one processor in GET /v1/processors.
type ProcessorStatus struct {
	Name     string         `json:"name"`
	Current  ModuleVersion  `json:"current"`
	Previous *ModuleVersion `json:"previous,omitempty"`
	Tasks    int            `json:"tasks"`    // running tasks
	Switched int            `json:"switched"` // running tasks on the module they are to run (the current one, or the canary's)
	// Canary is the canary deploy of the processor, until it is promoted or rolled back.
	Canary *CanaryStatus `json:"canary,omitempty"`
	// TaskModules is which task runs which module, by partition (canary.go).
	TaskModules []TaskModule `json:"task_modules"`
	// InProgress is what is going on: "canary" (a canary runs), and while their tasks switch
	// "deploy", "promote" or "rollback", and "migration" while tasks migrate their stores.
	InProgress []string `json:"in_progress,omitempty"`
}

// DeployResult is what Deploy did.
type DeployResult struct {
	Processor string `json:"processor"`
	// Action is "deploy", "canary", "promote" or "rollback" (canary.go).
	Action     string        `json:"action"`
	Partitions []int32       `json:"partitions,omitempty"` // a canary's
	Version    ModuleVersion `json:"version"`
	Previous   ModuleVersion `json:"previous"`
	Unchanged  bool          `json:"unchanged"` // the module is the one running: nothing changed
	Tasks      int           `json:"tasks"`     // running tasks switched to it
}

// Errors of Deploy.
var (
	// ErrUnknownProcessor: no processor of that name.
	ErrUnknownProcessor = errors.New("runtime: unknown processor")
	// ErrInvalidModule: the module failed its checks or its trial; the processor runs on as it was.
	ErrInvalidModule = errors.New("runtime: invalid module")
	// ErrSwitchFailed: a task could not start the new module; every task goes back to the previous one.
	ErrSwitchFailed = errors.New("runtime: switch failed")
	// ErrSwitchPending: the previous deploy of the processor has not switched every task yet.
	ErrSwitchPending = errors.New("runtime: a switch is still pending")
	// ErrNotRunning: the application is not running (before Run, or stopping).
	ErrNotRunning = errors.New("runtime: not running")
)

// deploys is the deploy side of a Runtime: what Deploy and the loop's module switches share.
// Its methods are called with the task table's lock held, unless they say otherwise.
type deploys struct {
	rt *Runtime

	mu      sync.Mutex       // one Deploy at a time
	pauses  pauses           // the pauses of task switches
	mig     migrations       // the modules' store versions, and the scratch state of trials and migrations (migrate.go)
	retired []*engine.Module // modules replaced by deploys, closed once unused (guarded by the table's lock)
	running bool             // Run is processing: deploys are taken (guarded by the table's lock)

	// The canaries, rollbacks and operations in progress of the processors (canary.go),
	// guarded by the table's lock.
	canaries map[*processor]*canary     // a processor's canary: a module on some partitions only
	backs    map[*processor]*backModule // the module a processor's last rollback left, which migrates its stores back
	ops      map[*processor]string      // the deploy, canary, promote or rollback waiting for its tasks to switch

	versions   atomic.Pointer[[]ProcessorStatus] // Processors() as of the loop's last round, for Status without the table's lock
	versionsAt time.Time                         // when versions was stored (the loop's)
}

// switchWait bounds how long Deploy waits for the next running task to switch.
const switchWait = 2 * time.Minute

// Deploy makes wasm (from source: a file, or "deploy") the module of the processor name, while the application runs.
//
// The module is compiled and validated off the processing path: the ABI checks of
// engine.Compile, then a trial instantiation with its init over empty in-memory stores of the
// processor's stores, which also asks it the version of each store; when it declares a higher
// version than a running task's store holds, the migration of that store is tried over the
// task's committed entries (migrate.go). If anything fails the processor runs on as it was, no
// store changes, and Deploy returns an error matching ErrInvalidModule.
//
// Then each running task switches at its next commit boundary: the batch in flight finishes on
// the old instance, the task commits, and an instance of the new module takes over the same
// open stores: no store is reopened or restored, and no rebalance happens. A task whose stores
// need a migration migrates first, one task at a time, and switches at the commit boundary
// after its migration. Tasks that start later start the new module. Deploy returns once every
// running task switched (or ctx ends).
// If a task cannot start the new module, every task goes back to the previous one and Deploy
// returns an error matching ErrSwitchFailed.
func (r *Runtime) Deploy(ctx context.Context, name, source string, wasm []byte) (res DeployResult, err error) {
	defer func() { r.metrics.deployed(name, res, err) }()
	// One deploy at a time. r.procs and a processor's cfg are read under this lock: a reload
	// replaces them in the loop while it holds it (reload.go).
	r.deploy.mu.Lock()
	defer r.deploy.mu.Unlock()
	p := r.procByName(name)
	if p == nil {
		return DeployResult{}, fmt.Errorf("%w %q", ErrUnknownProcessor, name)
	}
	r.tasks.mu.Lock()
	res = DeployResult{Processor: name, Action: opDeploy, Previous: p.version}
	err = r.deploy.ready(p, false)
	r.tasks.mu.Unlock()
	if err != nil {
		return res, err
	}
	// The running module again (a watcher seeing the same bytes rewritten): nothing to
	// compile. The hash is the one engine.Compile gives a module.
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) == res.Previous.Hash {
		res.Version, res.Unchanged = res.Previous, true
		return res, nil
	}
	mod, err := r.eng.Compile(ctx, source, wasm)
	if err != nil {
		return res, fmt.Errorf("%w: processor %s: %w", ErrInvalidModule, name, err)
	}
	versions, err := r.deploy.probe(ctx, p, mod)
	if err == nil {
		// Its migrations, tried over every task here first: a store it fails on refuses it.
		err = r.deploy.tryMigrations(ctx, p, mod, versions)
	}
	if err != nil {
		r.deploy.forget(mod)
		_ = mod.Close(ctx)
		return res, fmt.Errorf("%w: processor %s: %w", ErrInvalidModule, name, err)
	}
	res.Version = ModuleVersion{Hash: mod.Hash(), Source: source, LoadedAt: time.Now()}

	r.tasks.mu.Lock()
	old := p.mod
	prev := p.version
	p.mod, p.version, p.previous, p.prevMod, p.switchErr = mod, res.Version, &prev, old, nil
	r.deploy.retired = append(r.deploy.retired, old)
	r.deploy.forgetBack(p)
	r.tasks.mu.Unlock()
	r.deploy.keep(p, wasm, prev)
	r.deploy.recordLineage(p, res.Version, &prev)
	r.log.Info("module validated, switching at the next commit", "processor", name, "hash", short(mod.Hash()), "previous", short(prev.Hash), "source", source)
	res.Tasks, err = r.deploy.awaitSwitch(ctx, p, mod, prev, opDeploy)
	return res, err
}

// awaitSwitch waits until the loop has switched every running task of p to mod, for up to
// switchWait since a task last switched, and returns how many there are; or until p went back
// to prev, its previous module, because a task could not start mod (ErrSwitchFailed), or the
// application stopped. op names the operation (opDeploy, ...) for /v1/processors while it
// waits. The caller holds no lock.
func (dp *deploys) awaitSwitch(ctx context.Context, p *processor, mod *engine.Module, prev ModuleVersion, op string) (int, error) {
	dp.rt.tasks.mu.Lock()
	dp.setOp(p, op)
	dp.rt.tasks.mu.Unlock()
	defer func() {
		dp.rt.tasks.mu.Lock()
		dp.setOp(p, "")
		dp.rt.tasks.mu.Unlock()
	}()
	name := p.cfg.Name
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// The wait is switchWait since the last task switched: tasks that migrate their stores
	// switch one after the other.
	deadline, switched := time.Now().Add(switchWait), 0
	for {
		dp.rt.tasks.mu.Lock()
		n, left, serr := dp.switchProgress(p, mod)
		running := dp.running
		dp.rt.tasks.mu.Unlock()
		switch {
		case serr != nil:
			return 0, fmt.Errorf("%w: processor %s: %w; its tasks go back to %s", ErrSwitchFailed, name, serr, short(prev.Hash))
		case !running:
			return 0, fmt.Errorf("%w: processor %s: the application stopped during the switch", ErrNotRunning, name)
		case left == 0:
			dp.rt.tasks.mu.Lock()
			if p.mod == mod {
				p.prevMod = nil // every task runs mod: the previous module can close
				dp.closeRetired()
			}
			dp.rt.tasks.mu.Unlock()
			dp.rt.log.Info("module switched", "processor", name, "hash", short(mod.Hash()), "tasks", n)
			return n, nil
		case n > switched:
			deadline, switched = time.Now().Add(switchWait), n
		case time.Now().After(deadline):
			return 0, fmt.Errorf("runtime: processor %s: %d tasks have not switched yet: %w", name, left, context.DeadlineExceeded)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("runtime: processor %s: %d tasks have not switched yet: %w", name, left, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// switchProgress returns how many running tasks of p that are to run mod (modFor) run it and
// how many do not; and the error that made p go back to its previous module (or drop its
// canary) when it no longer has mod. The caller holds the table's lock.
func (dp *deploys) switchProgress(p *processor, mod *engine.Module) (done, left int, err error) {
	if c := dp.canaries[p]; p.mod != mod && (c == nil || c.mod != mod) {
		return 0, 0, p.switchErr
	}
	for _, t := range dp.rt.tasks.active {
		if t.proc == p && t.state == stateRunning && t.mod != nil && dp.modFor(t) == mod {
			if t.mod == mod {
				done++
			} else {
				left++
			}
		}
	}
	return done, left, nil
}

// trial instantiates mod for p over empty in-memory stores of p's stores, in scratch state,
// running its init, and closes it again (probe, which also asks it its store versions).
func (dp *deploys) trial(ctx context.Context, p *processor, mod *engine.Module) error {
	_, err := dp.probe(ctx, p, mod)
	return err
}

// discardEmitter drops what a trial instance emits.
type discardEmitter struct{}

func (discardEmitter) Emit(context.Context, engine.OutputRecord) error { return nil }

// switchModules switches the running tasks whose processor has another module than theirs,
// at a commit boundary: nothing is in flight. Each task takes the pool of the new module
// (pools.go) and borrows an instance of it once, in parallel (at most Options.Workers at a
// time), over its open stores: the first ones instantiate the new module, running its init,
// the others bind the instances that are idle by then. A task that cannot start its
// processor's module keeps its pool; its processor goes back to the module it replaced
// (the tasks already switched follow at the next boundary), and the deploy reports the
// error. A busy task switches at a later boundary. A task whose stores the new module
// declares a higher version of migrates first (migrateFirst), and a task that migrated
// switches once its migration is committed (advanceMigrations). The caller holds the
// table's lock.
func (dp *deploys) switchModules(ctx context.Context) {
	defer dp.closeRetired()
	defer dp.startWaiting(ctx) // once the others switched
	dp.advanceMigrations(ctx)
	var due []*task
	for _, t := range dp.rt.tasks.active {
		switch {
		case t.state != stateRunning || t.busy() || len(t.held) > 0 || t.pool == nil || t.failed || t.mod == dp.modFor(t) || t.mig != nil:
		case t.uncommitted(): // its work is not committed yet
		default:
			due = append(due, t)
		}
	}
	if len(due) == 0 {
		return
	}
	type started struct {
		mod  *engine.Module
		pool *engine.Pool
		own  bool
		err  error
	}
	starts := make(map[*task]*started, len(due))
	var switching []*task
	for _, t := range due {
		s := &started{mod: dp.modFor(t)}
		starts[t] = s
		var migrates bool
		if migrates, s.err = dp.migrateFirst(ctx, t, s.mod); migrates || s.err != nil {
			continue
		}
		s.pool, s.own = t.proc.poolFor(s.mod, dp.rt.opts.Workers)
		switching = append(switching, t)
	}
	begin := time.Now()
	ctx = context.WithoutCancel(ctx)
	_ = dp.rt.jobs.forEachTask(switching, func(t *task) error {
		s := starts[t] // each goroutine writes only its own entry, and only its own task
		t.et = t.engineTask()
		s.err = t.start(ctx, s.pool, s.own)
		t.flush()  // what an init wrote
		return nil // a failure is handled below, without failing the task
	})
	for _, t := range due {
		s, p := starts[t], t.proc
		if s.pool == nil && s.err == nil {
			continue // it migrates first
		}
		if s.err != nil && dp.oneWay(p, s.mod) {
			// Tasks may have migrated their stores to it: there is no going back.
			t.failed = true
			dp.rt.signals.setFatal(fmt.Errorf("runtime: task %s cannot start module %s, to which the processor's stores migrate: %w", t.id, short(s.mod.Hash()), s.err))
			continue
		}
		if s.err != nil {
			dp.rt.log.Error("the new module cannot start: back to the previous one", "processor", p.cfg.Name, "partition", t.id.Partition, "error", s.err)
			if c := dp.canaries[p]; c != nil && c.mod == s.mod {
				delete(dp.canaries, p) // the canary's tasks go back to the processor's module
				p.switchErr = fmt.Errorf("task %s: %w", t.id, s.err)
				dp.retired = append(dp.retired, s.mod)
				continue
			}
			if p.previous != nil && p.prevMod != nil && p.mod == s.mod {
				p.mod, p.switchErr = p.prevMod, fmt.Errorf("task %s: %w", t.id, s.err)
				p.version, p.previous, p.prevMod = *p.previous, nil, nil
				dp.retired = append(dp.retired, s.mod)
			}
			continue
		}
		// Every task of the round paused for the whole round: the switch waits for all.
		dp.pauses.observe(time.Since(begin))
		dp.rt.log.Debug("task switched module", "processor", p.cfg.Name, "partition", t.id.Partition, "hash", short(s.mod.Hash()))
	}
}

// closeRetired closes the modules replaced by deploys that no processor and no task uses any
// more, with their processors' pools. The caller holds the table's lock.
func (dp *deploys) closeRetired() {
	dp.retired = slices.DeleteFunc(dp.retired, func(mod *engine.Module) bool {
		for _, p := range dp.rt.procs {
			if p.mod == mod || p.prevMod == mod || dp.canaries[p] != nil && dp.canaries[p].mod == mod || dp.backs[p] != nil && dp.backs[p].mod == mod {
				return false
			}
		}
		for _, t := range dp.rt.tasks.active {
			if t.mod == mod {
				return false
			}
		}
		for _, p := range dp.rt.procs {
			if err := p.closePool(context.Background(), mod); err != nil {
				dp.rt.log.Warn("closing the instances of a replaced module", "processor", p.cfg.Name, "hash", short(mod.Hash()), "error", err)
			}
		}
		dp.forget(mod)
		_ = mod.Close(context.Background())
		return true
	})
}

// Processors returns each processor's module versions, how many of its running tasks run the
// module they are to run (the current one, or its canary's), which task runs which module,
// and what is in progress.
func (r *Runtime) Processors() []ProcessorStatus {
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	return r.deploy.processorsLocked()
}

// processorsLocked is Processors with the table's lock held.
func (dp *deploys) processorsLocked() []ProcessorStatus {
	out := make([]ProcessorStatus, 0, len(dp.rt.procs))
	for _, p := range dp.rt.procs {
		ps := ProcessorStatus{Name: p.cfg.Name, Current: p.version}
		if p.previous != nil {
			prev := *p.previous
			ps.Previous = &prev
		}
		ps.Switched, ps.Tasks, _ = dp.switchProgress(p, p.mod)
		ps.Tasks += ps.Switched
		dp.describe(p, &ps)
		out = append(out, ps)
	}
	return out
}

// short is the first 12 hex digits of a hash, as logs show it.
func short(hash string) string { return hash[:min(12, len(hash))] }

// pauses records how long tasks stopped processing to switch modules.
type pauses struct {
	mu sync.Mutex
	d  []time.Duration
}

func (p *pauses) observe(d time.Duration) {
	p.mu.Lock()
	p.d = append(p.d, d)
	p.mu.Unlock()
}

// SwitchPauses returns how long each task switch took so far (the time the task did not
// process: the new instance's start and the old one's close).
func (r *Runtime) SwitchPauses() []time.Duration {
	r.deploy.pauses.mu.Lock()
	defer r.deploy.pauses.mu.Unlock()
	return slices.Clone(r.deploy.pauses.d)
}
