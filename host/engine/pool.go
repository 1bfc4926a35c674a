package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Pool lends the instances of one Module to the tasks of one processor, one call (a batch or
// a punctuation) at a time: memory then grows with the calls that run at once, not with the
// tasks.
//
// Get binds an idle instance to the task, or instantiates a new one for it when none is
// idle; Put takes it back. Get never waits: when every instance is lent it makes another,
// and Put closes an instance that would pass Size idle ones, so a pool keeps at most Size
// instances between calls, and holds as many as run at once during them (a caller that
// bounds its calls, as the runtime's workers do, bounds the instances). A dead instance
// (after a *GuestError) is closed at Put and never lent again: the next Get makes a new
// one.
//
// A module that asks for an instance per task (Module.InstancePerTask) gets a pool per task
// of Size 1: the task then keeps its instance from call to call, as long as it lives. A
// module whose statehost_init does per-task work (Module.InitUsesState) has its idle
// instances lent only to the task their init ran for: the others get new instances.
//
// A Pool is safe for concurrent use.
type Pool struct {
	mod  *Module
	size int

	mu     sync.Mutex
	idle   []*Instance
	lent   int
	closed bool
	stats  PoolStats
}

// PoolStats counts what a Pool did.
type PoolStats struct {
	Idle      int   // instances idle now
	Lent      int   // instances lent now
	Created   int64 // instances instantiated
	Discarded int64 // dead instances closed at Put (a failed call killed them)
}

// NewPool returns a pool of mod's instances that keeps up to size idle (at least 1; exactly
// 1 for a module that asks for an instance per task, whose pool serves one task).
func NewPool(mod *Module, size int) *Pool {
	if mod.InstancePerTask() {
		size = 1
	}
	return &Pool{mod: mod, size: max(size, 1)}
}

// Module returns the module whose instances the pool lends.
func (p *Pool) Module() *Module { return p.mod }

// Get returns an instance bound to task (Instance.Bind) for the caller's calls until Put: an
// idle one, or a new one instantiated for task, whose _initialize and statehost_init then run
// bound to task (Module.Instantiate: a failure there is a *GuestError). The caller must Put
// it back, dead or alive.
func (p *Pool) Get(ctx context.Context, task Task) (*Instance, error) {
	return p.get(ctx, task, false)
}

// GetFresh is Get with a new instance, never an idle one: for a call that must not inherit
// what other calls left in an instance, such as a record tried again alone after it ran out
// of memory (linear memory never shrinks, so an idle instance's may have been grown by the
// other tasks' calls).
func (p *Pool) GetFresh(ctx context.Context, task Task) (*Instance, error) {
	return p.get(ctx, task, true)
}

func (p *Pool) get(ctx context.Context, task Task, fresh bool) (*Instance, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	var in *Instance
	if !fresh {
		in = p.takeIdle(task)
	}
	p.lent++
	p.mu.Unlock()
	if in != nil {
		if err := in.Bind(task); err != nil {
			p.Put(ctx, in)
			return nil, fmt.Errorf("engine: pool of %s: %w", p.mod.name, err)
		}
		return in, nil
	}
	in, err := p.mod.Instantiate(ctx, task)
	p.mu.Lock()
	if err == nil {
		p.stats.Created++
	} else {
		p.lent--
	}
	p.mu.Unlock()
	return in, err
}

// takeIdle removes and returns the idle instance to lend to task, or nil: the last one put
// back, or when the module's init uses state, the last one whose init ran for task. The
// caller holds mu.
func (p *Pool) takeIdle(task Task) *Instance {
	own := p.mod.InitUsesState()
	for i := len(p.idle) - 1; i >= 0; i-- {
		in := p.idle[i]
		if own && in.initFor != task.Partition {
			continue
		}
		p.idle = slices.Delete(p.idle, i, i+1)
		return in
	}
	return nil
}

// Put takes back an instance that Get lent, once the caller's call has returned: it becomes
// idle, bound to no task, or is closed when it is dead, the pool keeps as many idle
// instances as its size (NewPool) already, or the pool is closed.
func (p *Pool) Put(ctx context.Context, in *Instance) {
	dead := in.Err() != nil
	in.unbind() // nothing of the task stays reachable from the idle instance
	p.mu.Lock()
	p.lent--
	keep := !dead && !p.closed && len(p.idle) < p.size
	if keep {
		p.idle = append(p.idle, in)
	} else if dead {
		p.stats.Discarded++
	}
	p.mu.Unlock()
	if !keep {
		if err := in.Close(context.WithoutCancel(ctx)); err != nil {
			p.mod.eng.log.Warn("closing a plugin instance", "module", p.mod.name, "error", err)
		}
	}
}

// Stats returns what the pool holds and did so far.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Idle, s.Lent = len(p.idle), p.lent
	return s
}

// Trim closes the idle instances, and the pool goes on: for a pool that no task may borrow
// from for a while (its processor has no task here), whose instances would hold their memory
// for nothing. The next Get instantiates anew.
func (p *Pool) Trim(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	return closeAll(ctx, idle)
}

// Close closes the idle instances; those lent are closed when they are Put back, and Get
// fails with ErrClosed from now on. It does not close the Module.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	return closeAll(ctx, idle)
}

func closeAll(ctx context.Context, ins []*Instance) error {
	var errs []error
	for _, in := range ins {
		errs = append(errs, in.Close(ctx))
	}
	return errors.Join(errs...)
}
