package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/store"
)

// Store migrations (abi "Store versions and migration"; docs/decisions/20261205_store_migration.md).
//
// A module declares the version of each store's entries. When a task is to run a module that
// declares a higher version than its store partition holds (a deploy, or a start with such a
// module), the task migrates first, eagerly, as a job of its own (task.migrate): it stops
// processing (its records are held), hands every old entry of the store, from its committed
// state, to the module's statehost_migrate on an instance bound to scratch stores, which
// collect the new contents; then it writes the difference between the old entries and the new
// ones through its logged store (deletes, and puts of what changed), and the new version
// (store.Partition.SetVersion: after them in the changelog). The next commit takes all of it
// at once, as any job's writes: one transaction under exactly-once. At the boundary of that
// commit the task starts the new module (advanceMigrations) and processes its held records. One task migrates at a time
// on an instance; the others run on meanwhile (a deploy's on their old module).
//
// A deploy first tries the migration of every task of the instance over its committed state
// (tryMigrations): an entry the module fails on refuses the module, which never runs, and no
// store changes. A migration that fails for real (an entry written since the trial, or a start
// with the module) fails its task like a failed batch: the application stops, and the task's
// state is its last commit, in the old version.

// migrateChunk and migrateChunkBytes bound the entries of one statehost_migrate call: a call
// is bounded in time by the engine's batch time limit.
const (
	migrateChunk      = 1000
	migrateChunkBytes = 1 << 20
)

// taskMigration is a task's migration of its stores to the versions of mod.
type taskMigration struct {
	mod    *engine.Module
	stores []storeMigration
	// startup: the task had no plugin yet (it migrates before its first start).
	startup bool
	// started: the job runs or ran (guarded by the table's lock); ran: the job ended well,
	// and its writes wait for the commit (the job's goroutine writes it before its end).
	started, ran bool
}

// storeMigration is the migration of one key-value store from a version to another.
type storeMigration struct {
	name     string
	from, to uint32
	// back: a reverse migration (to < from), made by the module that migrated the store to
	// from (statehost_migrate_reverse; canary.go); nil for a migration of the task's new module.
	back *engine.Module
}

// via returns the module that migrates the store: back, or mod, the one the task migrates for.
func (sm storeMigration) via(mod *engine.Module) *engine.Module {
	if sm.back != nil {
		return sm.back
	}
	return mod
}

// call hands entries to in's migration of the store: statehost_migrate, or for a reverse
// migration statehost_migrate_reverse.
func (sm storeMigration) call(ctx context.Context, in *engine.Instance, entries []engine.Entry) error {
	if sm.back != nil {
		return in.MigrateReverse(ctx, sm.name, sm.to, entries)
	}
	return in.Migrate(ctx, sm.name, sm.from, entries)
}

// migrations is the deploys' side of store migrations: the store versions each module
// declares, and the scratch state the trials and migrations run their instances over. Its lock
// guards both; what tasks migrate is in the tasks (task.mig, under the table's lock).
type migrations struct {
	mu         sync.Mutex
	versions   map[procModule]map[string]uint32 // by processor too: processors that share a module have other stores
	scratch    *store.Manager
	scratchDir string
	scratchN   int32 // scratch tasks opened, which names the next
	// migratedTo are the modules that tasks began to migrate their stores to: a processor
	// cannot go back from them (oneWay).
	migratedTo map[*engine.Module]bool
}

// procModule is a module of a processor.
type procModule struct {
	p   *processor
	mod *engine.Module
}

// versionsOf returns the version mod declares for each store of p, asking it once (probe).
func (dp *deploys) versionsOf(ctx context.Context, p *processor, mod *engine.Module) (map[string]uint32, error) {
	dp.mig.mu.Lock()
	v, ok := dp.mig.versions[procModule{p, mod}]
	dp.mig.mu.Unlock()
	if ok {
		return v, nil
	}
	return dp.probe(ctx, p, mod)
}

// probe asks mod, in a trial instance for p, the version of each store. It remembers the
// versions for versionsOf.
func (dp *deploys) probe(ctx context.Context, p *processor, mod *engine.Module) (map[string]uint32, error) {
	var versions map[string]uint32
	if err := dp.withTrialInstance(ctx, p, mod, func(in *engine.Instance) (err error) {
		versions, err = in.StoreVersions(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	dp.mig.mu.Lock()
	if dp.mig.versions == nil {
		dp.mig.versions = map[procModule]map[string]uint32{}
	}
	dp.mig.versions[procModule{p, mod}] = versions
	dp.mig.mu.Unlock()
	return versions, nil
}

// withTrialInstance instantiates mod for p over empty in-memory stores shaped as p's, in
// scratch state, running its init, calls ask with the instance, and closes it again.
func (dp *deploys) withTrialInstance(ctx context.Context, p *processor, mod *engine.Module, ask func(*engine.Instance) error) error {
	st, et, err := dp.scratchTask(p)
	if err != nil {
		return fmt.Errorf("trial: %w", err)
	}
	defer st.Close()
	in, err := mod.Instantiate(ctx, et)
	if err != nil {
		return fmt.Errorf("trial instantiation: %w", err)
	}
	defer in.Close(ctx)
	if err := ask(in); err != nil {
		return fmt.Errorf("trial: %w", err)
	}
	return nil
}

// scratchTask opens a task in the runtime's scratch state (opened on first use, in a
// temporary directory, closed by closeScratch) with empty memory stores shaped as p's (the
// same names and types), and the engine.Task of an instance over them that emits nothing.
// Close the store task when done: its stores' memory goes with it.
func (dp *deploys) scratchTask(p *processor) (*store.Task, engine.Task, error) {
	m := &dp.mig
	m.mu.Lock()
	if m.scratch == nil {
		dir, err := os.MkdirTemp("", "statehost-scratch-")
		if err != nil {
			m.mu.Unlock()
			return nil, engine.Task{}, err
		}
		if m.scratch, err = store.Open(store.Settings{Dir: dir, MemoryBytes: store.MinMemoryBytes}); err != nil {
			m.mu.Unlock()
			_ = os.RemoveAll(dir)
			return nil, engine.Task{}, err
		}
		m.scratchDir = dir
	}
	m.scratchN++
	mgr, n := m.scratch, m.scratchN
	m.mu.Unlock()
	st, err := mgr.OpenTask(p.cfg.Name, n)
	if err != nil {
		return nil, engine.Task{}, err
	}
	et := engine.Task{
		Processor:   p.cfg.Name,
		Stores:      map[string]store.Store{},
		Windows:     map[string]store.WindowStore{},
		Sessions:    map[string]store.SessionStore{},
		Clock:       st,
		Outputs:     p.cfg.Outputs,
		Emitter:     discardEmitter{},
		Logger:      dp.rt.opts.Logger,
		StoreLimits: p.storeLimits,
	}
	for _, s := range p.stores {
		o := store.Options{Backend: store.Memory, Kind: s.Kind, Window: s.Window}
		switch s.Kind {
		case store.Window:
			et.Windows[s.Name], err = st.OpenWindow(s.Name, o)
		case store.Session:
			et.Sessions[s.Name], err = st.OpenSession(s.Name, o)
		default:
			et.Stores[s.Name], err = st.Open(s.Name, o)
		}
		if err != nil {
			_ = st.Close()
			return nil, engine.Task{}, err
		}
	}
	return st, et, nil
}

// forget forgets what it knows of mod, which is closed.
func (dp *deploys) forget(mod *engine.Module) {
	dp.mig.mu.Lock()
	defer dp.mig.mu.Unlock()
	for k := range dp.mig.versions {
		if k.mod == mod {
			delete(dp.mig.versions, k)
		}
	}
	delete(dp.mig.migratedTo, mod)
}

// forgetStores forgets the store versions asked of p's modules: p's stores changed (a reload),
// and the next start of its tasks asks them again.
func (dp *deploys) forgetStores(p *processor) {
	dp.mig.mu.Lock()
	defer dp.mig.mu.Unlock()
	for k := range dp.mig.versions {
		if k.p == p {
			delete(dp.mig.versions, k)
		}
	}
}

// closeScratch closes the scratch state, if it was opened, and deletes it.
func (dp *deploys) closeScratch() {
	m := &dp.mig
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scratch != nil {
		_ = m.scratch.Close()
		_ = os.RemoveAll(m.scratchDir)
		m.scratch = nil
	}
}

// plan returns the migration that t's stores need before t runs mod, nil when none; an error
// when a store holds a higher version than mod declares (mod does not know its entries'
// form), unless back, the module a rollback left (canary.go), declares that store's migration
// reversible down to mod's version: the store then migrates back through it. versions are
// mod's.
func plan(t *task, mod *engine.Module, versions map[string]uint32, back *backModule) (*taskMigration, error) {
	var mg *taskMigration
	add := func(sm storeMigration) {
		if mg == nil {
			mg = &taskMigration{mod: mod}
		}
		mg.stores = append(mg.stores, sm)
	}
	for _, s := range t.proc.stores {
		part := t.cl.StoreTask().Partition(s.Name)
		if part == nil || s.Kind != store.KeyValue {
			continue
		}
		have, want := part.Version(), versions[s.Name]
		switch {
		case want < have && back.reverses(s.Name, have, want):
			add(storeMigration{name: s.Name, from: have, to: want, back: back.mod})
		case want < have && back != nil:
			return nil, &storeAheadError{fmt.Sprintf("runtime: task %s: store %q holds entries of version %d, and module %s declares version %d: "+
				"module %s, which migrated them, does not declare that migration reversible (%s): it cannot go back",
				t.id, s.Name, have, short(mod.Hash()), want, short(back.mod.Hash()), abi.ExportStoreReversible)}
		case want < have:
			return nil, &storeAheadError{fmt.Sprintf("runtime: task %s: store %q holds entries of version %d, and module %s declares version %d: "+
				"it cannot read them (deploy a module of version %d or later)", t.id, s.Name, have, short(mod.Hash()), want, have)}
		case want > have:
			add(storeMigration{name: s.Name, from: have, to: want})
		}
	}
	return mg, nil
}

// ErrStoreAhead: a store holds entries of a higher version than the module that is to run
// over it declares, and no module at hand migrates them back: that module cannot read them.
var ErrStoreAhead = errors.New("runtime: a store holds entries of a version the module does not read")

// storeAheadError is plan's ErrStoreAhead, naming the task, the store, the versions and what
// to do.
type storeAheadError struct{ msg string }

func (e *storeAheadError) Error() string        { return e.msg }
func (e *storeAheadError) Is(target error) bool { return target == ErrStoreAhead }

// planStart plans the migration that t, just restored, needs before it starts its
// processor's module. A task that needs one gets it (t.mig), and its plugin starts once it
// has migrated (advanceMigrations). The caller holds the table's lock.
func (dp *deploys) planStart(ctx context.Context, t *task) (bool, error) {
	dp.rt.tasks.status.setVersions(t.id, t.storeVersions())
	mod := dp.modFor(t)
	versions, err := dp.versionsOf(ctx, t.proc, mod)
	if err != nil {
		return false, fmt.Errorf("runtime: task %s: module %s: %w", t.id, short(mod.Hash()), err)
	}
	mg, err := plan(t, mod, versions, dp.backs[t.proc])
	if mg == nil || err != nil {
		return false, err
	}
	mg.startup = true
	t.mig = mg
	return true, nil
}

// waitForModule makes t, just restored, wait for a module that reads its stores: the one it
// is to run cannot (err, ErrStoreAhead), as when another instance's deploy migrated them and
// this one was started with the configuration's older module. The instance runs on; t
// starts once its processor gets another module here (a deploy, a rollback, a changed module
// file: startWaiting). Under exactly-once the tasks that share its input partitions wait
// with it (dispatchable). The caller holds the table's lock.
func (dp *deploys) waitForModule(t *task, err error) {
	t.unread = dp.modFor(t)
	dp.rt.tasks.started(t)
	dp.rt.tasks.status.setState(t.id, "waiting")
	dp.rt.tasks.status.setWaiting(t.id, err.Error())
	dp.rt.log.Error("task waits for a module that reads its stores", "processor", t.id.Processor, "partition", t.id.Partition, "error", err)
	dp.rt.emit(Event{Kind: EventTaskWaitsForModule, Processor: t.id.Processor, Partition: t.id.Partition, Error: err.Error()})
}

// startWaiting starts, at a commit boundary, the waiting tasks (waitForModule) whose module
// to run has changed since, once the processor's other tasks have switched to it (a switch
// that fails sends them back to the module before, which cannot read a waiting task's
// stores): planned as at their start, they migrate first, start, or wait again. A task that
// cannot start its module stops the runtime, as at its start. The caller holds the table's
// lock.
func (dp *deploys) startWaiting(ctx context.Context) {
	for _, t := range dp.rt.tasks.active {
		if t.unread == nil || t.unread == dp.modFor(t) || t.state != stateRunning || dp.switching(t.proc) {
			continue
		}
		t.unread = nil
		dp.rt.tasks.status.setWaiting(t.id, "")
		if err := dp.startTask(ctx, t); err != nil {
			t.failed = true
			dp.rt.signals.setFatal(err)
			return
		}
	}
}

// startTask starts t, restored (or waiting for a module): a task whose stores hold an older
// version than its module declares migrates first, and starts its plugin after
// (advanceMigrations); one whose stores hold a newer version waits for a module that reads
// them (waitForModule); any other starts its plugin now. An error stops the runtime. The
// caller holds the table's lock.
func (dp *deploys) startTask(ctx context.Context, t *task) error {
	migrates, err := dp.planStart(ctx, t)
	switch {
	case errors.Is(err, ErrStoreAhead):
		dp.waitForModule(t, err)
		return nil
	case err != nil:
		return err
	case migrates:
		dp.rt.tasks.started(t)
		dp.rt.tasks.status.setState(t.id, "migrating")
		dp.rt.log.Info("task waits to migrate its stores", "processor", t.id.Processor, "partition", t.id.Partition)
		return nil
	}
	if err := t.startPlugin(ctx); err != nil {
		return err
	}
	dp.rt.tasks.started(t)
	dp.rt.log.Info("task running", "processor", t.id.Processor, "partition", t.id.Partition)
	dp.rt.emit(Event{Kind: EventTaskRunning, Processor: t.id.Processor, Partition: t.id.Partition})
	return nil
}

// switching reports whether a running task of p has yet to switch to the module it is to run.
// The caller holds the table's lock.
func (dp *deploys) switching(p *processor) bool {
	for _, t := range dp.rt.tasks.active {
		if t.proc == p && t.state == stateRunning && t.mod != nil && t.mod != dp.modFor(t) {
			return true
		}
	}
	return false
}

// migrateFirst plans the migration of t's stores to mod when t is to switch to mod (a
// deploy's): it reports whether t must migrate first, in which case it starts its migration
// when no other task migrates, and otherwise stays on its module and tries again at a later
// commit boundary; or the error that keeps t from running mod. The caller holds the table's
// lock.
func (dp *deploys) migrateFirst(ctx context.Context, t *task, mod *engine.Module) (bool, error) {
	versions, err := dp.versionsOf(ctx, t.proc, mod)
	if err != nil {
		return false, err
	}
	mg, err := plan(t, mod, versions, dp.backs[t.proc])
	if mg == nil || err != nil {
		return false, err
	}
	if !dp.migrating() {
		dp.startMigration(t, mg)
	}
	return true, nil
}

// oneWay reports whether tasks of p began to migrate their stores to mod, p's module: p
// cannot go back to the module before it, which does not read their entries.
func (dp *deploys) oneWay(p *processor, mod *engine.Module) bool {
	dp.mig.mu.Lock()
	defer dp.mig.mu.Unlock()
	return (p.mod == mod || dp.canaries[p] != nil && dp.canaries[p].mod == mod) && dp.mig.migratedTo[mod]
}

// migrating reports whether a task migrates now: its job runs, or its writes wait for their
// commit. The caller holds the table's lock.
func (dp *deploys) migrating() bool {
	for _, t := range dp.rt.tasks.active {
		if t.mig != nil && t.mig.started {
			return true
		}
	}
	return false
}

// advanceMigrations moves the tasks' migrations on at a commit boundary: a task whose
// migration was committed starts the module it migrated for and runs on; then, when no task
// migrates, the next task that waits to migrate (a task that started over an older version)
// starts its migration job. The caller holds the table's lock.
func (dp *deploys) advanceMigrations(ctx context.Context) {
	for _, t := range dp.rt.tasks.active {
		if mg := t.mig; mg != nil && mg.ran && !t.busy() && !t.uncommitted() && !t.failed {
			dp.finishMigration(ctx, t)
		}
	}
	if dp.migrating() {
		return
	}
	for _, t := range dp.rt.tasks.active {
		if t.mig != nil && t.state == stateRunning && !t.busy() && !t.failed && !t.uncommitted() {
			dp.startMigration(t, t.mig)
			return
		}
	}
}

// startMigration starts t's migration mg as its job. The caller holds the table's lock; t is
// not busy and has nothing uncommitted.
func (dp *deploys) startMigration(t *task, mg *taskMigration) {
	t.mig, mg.started = mg, true
	dp.mig.mu.Lock()
	if dp.mig.migratedTo == nil {
		dp.mig.migratedTo = map[*engine.Module]bool{}
	}
	dp.mig.migratedTo[mg.mod] = true
	dp.mig.mu.Unlock()
	dp.rt.tasks.status.setState(t.id, "migrating")
	dp.rt.log.Info("task migrates its stores", "processor", t.id.Processor, "partition", t.id.Partition,
		"module", short(mg.mod.Hash()), "stores", len(mg.stores))
	dp.rt.jobs.startMigration(t)
}

// finishMigration starts the module t migrated for, now that its migration is committed. A
// task that cannot start it fails, as a task whose plugin does not start. The caller holds
// the table's lock.
func (dp *deploys) finishMigration(ctx context.Context, t *task) {
	mg := t.mig
	t.mig = nil
	t.et = t.engineTask()
	pool, own := t.proc.poolFor(mg.mod, dp.rt.opts.Workers)
	err := t.start(context.WithoutCancel(ctx), pool, own)
	t.flush() // what an init wrote
	if err != nil {
		t.failed = true
		dp.rt.signals.setFatal(fmt.Errorf("runtime: task %s: start module %s after its migration: %w", t.id, short(mg.mod.Hash()), err))
		return
	}
	dp.rt.tasks.status.setState(t.id, "running")
	dp.rt.tasks.status.migrated(t.id)
	dp.rt.tasks.status.setVersions(t.id, t.storeVersions())
	dp.rt.log.Info("task running", "processor", t.id.Processor, "partition", t.id.Partition, "module", short(mg.mod.Hash()))
	if mg.startup {
		dp.rt.emit(Event{Kind: EventTaskRunning, Processor: t.id.Processor, Partition: t.id.Partition})
	}
}

// migrate is a migration job: it migrates each store of t.mig in turn, then hands what it
// wrote to the producer. It runs on a worker, as the task's job (dispatch.go).
func (t *task) migrate(ctx context.Context) error {
	mg := t.mig
	for _, sm := range mg.stores {
		if err := t.migrateStore(ctx, mg.mod, sm); err != nil {
			return err
		}
	}
	t.flush()
	mg.ran = true
	return nil
}

// migrateStore migrates the store sm of t to mod's version: the old entries to a new instance
// of mod over scratch stores, then the difference to the task's store, then the version.
func (t *task) migrateStore(ctx context.Context, mod *engine.Module, sm storeMigration) error {
	rt := t.rt
	fail := func(err error) error {
		return fmt.Errorf("runtime: task %s: migrate store %q from version %d to %d: %w", t.id, sm.name, sm.from, sm.to, err)
	}
	live := t.cl.Store(sm.name)
	total, err := countEntries(live)
	if err != nil {
		return fail(err)
	}
	began := time.Now()
	rt.tasks.status.migrationStarted(t.id, MigrationStatus{Module: mod.Hash(), Store: sm.name, FromVersion: sm.from,
		ToVersion: sm.to, Total: total}, began)
	rt.log.Info("migration started", "processor", t.id.Processor, "partition", t.id.Partition, "store", sm.name,
		"from_version", sm.from, "to_version", sm.to, "entries", total)
	rt.emit(Event{Kind: EventMigrationStarted, Processor: t.id.Processor, Partition: t.id.Partition, Store: sm.name,
		FromVersion: sm.from, ToVersion: sm.to, Records: total})
	scratch, et, err := rt.deploy.scratchTask(t.proc)
	if err != nil {
		return fail(err)
	}
	defer scratch.Close()
	et.Partition = t.id.Partition
	in, err := sm.via(mod).Instantiate(ctx, et)
	if err != nil {
		return fail(err)
	}
	defer in.Close(context.WithoutCancel(ctx))
	it, err := live.Range(nil, nil) // the committed entries: the task wrote nothing since its commit
	if err != nil {
		return fail(err)
	}
	var c entryChunk
	err = feedChunks(c.reset(), it, func(entries []engine.Entry) error {
		if err := sm.call(ctx, in, entries); err != nil {
			return fmt.Errorf("entries %q to %q: %w", entries[0].Key, entries[len(entries)-1].Key, err)
		}
		rt.tasks.status.migrationProgress(t.id, int64(len(entries)))
		return nil
	})
	if err != nil {
		return fail(err)
	}
	puts, deletes, err := replaceEntries(live, et.Stores[sm.name])
	if err != nil {
		return fail(err)
	}
	if err := t.cl.StoreTask().Partition(sm.name).SetVersion(sm.to); err != nil {
		return fail(err)
	}
	took := time.Since(began)
	rt.log.Info("migration done; it commits with the next commit", "processor", t.id.Processor, "partition", t.id.Partition,
		"store", sm.name, "to_version", sm.to, "entries", total, "puts", puts, "deletes", deletes, "duration", took)
	rt.emit(Event{Kind: EventMigrationDone, Processor: t.id.Processor, Partition: t.id.Partition, Store: sm.name,
		FromVersion: sm.from, ToVersion: sm.to, Records: total})
	return nil
}

// countEntries returns how many entries s holds.
func countEntries(s store.Store) (int64, error) {
	it, err := s.Range(nil, nil)
	if err != nil {
		return 0, err
	}
	var n int64
	for it.Next() {
		n++
	}
	return n, errors.Join(it.Err(), it.Close())
}

// entryChunk collects entries for one statehost_migrate call, copied into one buffer.
type entryChunk struct {
	data    []byte
	offsets [][3]int // key start, key end (= value start), value end
	entries []engine.Entry
}

func (c *entryChunk) reset() *entryChunk {
	c.data, c.offsets = c.data[:0], c.offsets[:0]
	return c
}

// add copies an entry in, and reports whether the chunk is full.
func (c *entryChunk) add(key, value []byte) bool {
	at := len(c.data)
	c.data = append(append(c.data, key...), value...)
	c.offsets = append(c.offsets, [3]int{at, at + len(key), len(c.data)})
	return len(c.offsets) >= migrateChunk || len(c.data) >= migrateChunkBytes
}

// take returns the chunk's entries, valid until the next reset.
func (c *entryChunk) take() []engine.Entry {
	c.entries = c.entries[:0]
	for _, o := range c.offsets {
		c.entries = append(c.entries, engine.Entry{Key: c.data[o[0]:o[1]:o[1]], Value: c.data[o[1]:o[2]:o[2]]})
	}
	return c.entries
}

// feedChunks hands the entries of it to call, chunk by chunk, and closes it.
func feedChunks(c *entryChunk, it store.Iterator, call func([]engine.Entry) error) error {
	defer it.Close()
	for it.Next() {
		if c.add(it.Key(), it.Value()) {
			if err := call(c.take()); err != nil {
				return err
			}
			c.reset()
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if len(c.offsets) > 0 {
		return call(c.take())
	}
	return nil
}

// replaceEntries makes the entries of live those of newer: it deletes the keys newer lacks,
// and puts the entries newer has that live lacks or holds with another value. Both are read in
// key order, live as it was before (its iterator does not see its writes).
func replaceEntries(live, newer store.Store) (puts, deletes int64, err error) {
	oi, err := live.Range(nil, nil)
	if err != nil {
		return 0, 0, err
	}
	defer oi.Close()
	ni, err := newer.Range(nil, nil)
	if err != nil {
		return 0, 0, err
	}
	defer ni.Close()
	oOK, nOK := oi.Next(), ni.Next()
	for (oOK || nOK) && err == nil {
		c := 0
		switch {
		case !nOK:
			c = -1
		case !oOK:
			c = 1
		default:
			c = bytes.Compare(oi.Key(), ni.Key())
		}
		switch {
		case c < 0:
			err = live.Delete(oi.Key())
			deletes++
			oOK = oi.Next()
		case c > 0:
			err = live.Put(ni.Key(), ni.Value())
			puts++
			nOK = ni.Next()
		default:
			if !bytes.Equal(oi.Value(), ni.Value()) {
				err = live.Put(ni.Key(), ni.Value())
				puts++
			}
			oOK, nOK = oi.Next(), ni.Next()
		}
	}
	return puts, deletes, errors.Join(err, oi.Err(), ni.Err())
}

// tryMigrations tries, before a deploy, the migrations that the running tasks of p here need
// to run mod (whose store versions are versions): each over a copy of the task's committed
// entries, on an instance of its own over scratch stores, writing nothing. The first failure
// is returned (an entry mod fails on, a store of a higher version than mod declares): the
// deploy is refused. Memory stores are not tried (their committed entries are the running
// task's). At most Options.Workers tasks are tried at once. The caller holds no lock.
func (dp *deploys) tryMigrations(ctx context.Context, p *processor, mod *engine.Module, versions map[string]uint32) error {
	return dp.tryMigrationsOf(ctx, p, mod, versions, nil, func(*task) bool { return true })
}

// tryMigrationsOf is tryMigrations for the tasks of p that in selects, with back the module
// that migrates stores back (plan).
func (dp *deploys) tryMigrationsOf(ctx context.Context, p *processor, mod *engine.Module, versions map[string]uint32,
	back *backModule, in func(*task) bool) error {
	type try struct {
		id taskID
		sm storeMigration
	}
	var tries []try
	dp.rt.tasks.mu.Lock()
	for _, t := range dp.rt.tasks.active {
		if t.proc != p || t.cl == nil || !in(t) {
			continue
		}
		mg, err := plan(t, mod, versions, back)
		if err != nil {
			dp.rt.tasks.mu.Unlock()
			return err
		}
		for _, sm := range storesOf(mg) {
			if storeBackend(p, sm.name) == store.Pebble {
				tries = append(tries, try{t.id, sm})
			}
		}
	}
	dp.rt.tasks.mu.Unlock()
	slices.SortFunc(tries, func(a, b try) int { return int(a.id.Partition - b.id.Partition) })
	errs := make([]error, len(tries))
	sem := make(chan struct{}, dp.rt.opts.Workers)
	var wg sync.WaitGroup
	for i, tr := range tries {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := dp.tryMigration(ctx, p, mod, tr.id, tr.sm); err != nil {
				errs[i] = fmt.Errorf("task %s: the migration of store %q from version %d to %d fails: %w", tr.id, tr.sm.name, tr.sm.from, tr.sm.to, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tryMigration runs the migration of the store sm of task id over its committed entries, and
// drops what it wrote.
func (dp *deploys) tryMigration(ctx context.Context, p *processor, mod *engine.Module, id taskID, sm storeMigration) error {
	scratch, et, err := dp.scratchTask(p)
	if err != nil {
		return err
	}
	defer scratch.Close()
	et.Partition = id.Partition
	in, err := sm.via(mod).Instantiate(ctx, et)
	if err != nil {
		return err
	}
	defer in.Close(ctx)
	var c entryChunk
	var callErr error
	call := func() bool {
		entries := c.take()
		if err := sm.call(ctx, in, entries); err != nil {
			callErr = fmt.Errorf("entries %q to %q: %w", entries[0].Key, entries[len(entries)-1].Key, err)
			return false
		}
		c.reset()
		return true
	}
	err = dp.rt.stores.ScanCommitted(id, sm.name, nil, nil, func(key, value []byte) bool {
		return !c.add(key, value) || call()
	})
	if err == nil && callErr == nil && len(c.offsets) > 0 {
		call()
	}
	return errors.Join(err, callErr)
}

// storesOf returns mg's stores, none for nil.
func storesOf(mg *taskMigration) []storeMigration {
	if mg == nil {
		return nil
	}
	return mg.stores
}

// storeBackend returns the backend of p's store name.
func storeBackend(p *processor, name string) store.Backend {
	for _, s := range p.stores {
		if s.Name == name {
			return s.Backend
		}
	}
	return store.Pebble
}
