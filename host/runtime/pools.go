package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/statehost/statehost/host/engine"
)

// Plugin instances: a processor's tasks borrow the instances of its module from one
// engine.Pool for each call (a job's batch, its punctuations), so that memory grows with the
// workers and the processors, not with the tasks. A pool keeps Options.Workers idle
// instances; a module that asks for an instance per task (engine.Module.InstancePerTask) gets
// a pool of size 1 for each task instead, which the task closes with itself. A deploy's
// module gets pools of its own, which the tasks take at the commit boundary where they switch
// (switchModules); a module's pool is closed with the module, once no task uses it.

// procPools are a processor's shared pools, by module. Its methods may be called without the
// table's lock: a module switch starts its tasks in parallel.
type procPools struct {
	mu    sync.Mutex
	pools map[*engine.Module]*engine.Pool
	// own counts the tasks with a pool of their own (an instance per task): one instance
	// each, idle or lent.
	own atomic.Int64
	// shared counts the tasks that borrow from pools: when the last of them goes (the
	// processor has no task here any more), the pools' idle instances are closed.
	shared atomic.Int64
}

// trimIdle closes the idle instances of every pool of the processor, which no task borrows
// from now.
func (p *processor) trimIdle(ctx context.Context) error {
	pp := &p.pools
	pp.mu.Lock()
	pools := slices.Collect(maps.Values(pp.pools))
	pp.mu.Unlock()
	var errs []error
	for _, pool := range pools {
		errs = append(errs, pool.Trim(ctx))
	}
	return errors.Join(errs...)
}

// poolFor returns the pool a task borrows mod's instances from: the processor's for mod, or
// a new one of the task's own when mod asks for an instance per task (own is then true).
func (p *processor) poolFor(mod *engine.Module, workers int) (pool *engine.Pool, own bool) {
	if mod.InstancePerTask() {
		return engine.NewPool(mod, 1), true
	}
	pp := &p.pools
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.pools == nil {
		pp.pools = map[*engine.Module]*engine.Pool{}
	}
	pool = pp.pools[mod]
	if pool == nil {
		pool = engine.NewPool(mod, workers)
		pp.pools[mod] = pool
	}
	return pool, false
}

// closePool closes the processor's pool for mod, if it has one, before mod is closed.
func (p *processor) closePool(ctx context.Context, mod *engine.Module) error {
	pp := &p.pools
	pp.mu.Lock()
	pool := pp.pools[mod]
	delete(pp.pools, mod)
	pp.mu.Unlock()
	if pool == nil {
		return nil
	}
	return pool.Close(ctx)
}

// instances returns how many instances the processor's pools hold now, idle and lent (the
// instances of tasks with a pool of their own are not counted).
func (p *processor) instances() int {
	pp := &p.pools
	pp.mu.Lock()
	defer pp.mu.Unlock()
	n := 0
	for _, pool := range pp.pools {
		s := pool.Stats()
		n += s.Idle + s.Lent
	}
	return n
}

// liveInstances returns how many instances the processor holds now: its pools' and one for
// each task with a pool of its own (statehost_plugin_instances).
func (p *processor) liveInstances() int {
	return p.instances() + int(p.pools.own.Load())
}

// taskPlugin is the task's side of its plugin: the pool it borrows instances from, the
// instance its running job borrowed, and what the engine keeps of the task between calls.
type taskPlugin struct {
	pool     *engine.Pool     // nil until the task started its plugin
	ownPool  bool             // pool is the task's alone (the module asks for an instance per task)
	inst     *engine.Instance // borrowed by the running job, nil between jobs (the job's goroutine only)
	et       engine.Task      // the task as the engine sees it (engineTask), made when the plugin starts
	engState engine.TaskState // its punctuation times, across the instances that serve it
}

// start makes pool the task's, borrowing an instance once for it: a new instance runs its
// init for the task, an idle one is bound to it (which checks that it fits the task and
// adopts its punctuation schedules). On failure the task keeps the pool it had.
func (t *task) start(ctx context.Context, pool *engine.Pool, own bool) error {
	in, err := pool.Get(ctx, t.et)
	if err != nil {
		if own {
			_ = pool.Close(ctx)
		}
		return fmt.Errorf("runtime: task %s: start the plugin: %w", t.id, err)
	}
	pool.Put(ctx, in)
	if own {
		t.proc.pools.own.Add(1)
	} else {
		t.proc.pools.shared.Add(1) // before the old pool is dropped: no trim in between
	}
	t.dropPool(ctx)
	t.pool, t.ownPool, t.mod = pool, own, pool.Module()
	t.rt.tasks.status.setModule(t.id, t.mod.Hash())
	return nil
}

// dropPool lets go of the task's pool, closing it if it is the task's own, or closing the
// idle instances of the processor's pools if it was the last task to borrow from them.
func (t *task) dropPool(ctx context.Context) {
	var err error
	switch {
	case t.pool == nil:
	case t.ownPool:
		t.proc.pools.own.Add(-1)
		err = t.pool.Close(ctx)
	case t.proc.pools.shared.Add(-1) == 0:
		err = t.proc.trimIdle(ctx)
	}
	if err != nil {
		t.rt.log.Warn("closing plugin instances", "processor", t.id.Processor, "partition", t.id.Partition, "error", err)
	}
	t.pool, t.ownPool = nil, false
}

// borrow takes an instance for the job's call from the task's pool: t.inst.
func (t *task) borrow(ctx context.Context) error {
	in, err := t.pool.Get(ctx, t.et)
	if err != nil {
		return fmt.Errorf("runtime: task %s: start the plugin: %w", t.id, err)
	}
	t.inst = in
	return nil
}

// giveBack returns the job's instance, if any, to the task's pool, which closes it if the
// call killed it.
func (t *task) giveBack(ctx context.Context) {
	if t.inst != nil {
		t.pool.Put(ctx, t.inst)
		t.inst = nil
	}
}
