package runtime

import (
	"cmp"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/store"
)

// The TTL of key-value stores (config: ttl, ttl_clock; store/ttl.go).
//
// The store hides expired entries from the plugin and from queries by itself; the runtime runs
// the sweep that deletes them, in the task's own jobs so that it never runs beside the plugin
// on the same stores, and never holds processing up for long: a step at most every
// sweepInterval, at the end of a batch or, for a task without records (the wall clock expires
// entries all the same), in a job of its own that borrows no plugin instance (punctuateAll).
// A step examines at most store.DefaultSweepBudget entries of each store with a TTL. Its
// deletes go through the stores' logging layers like the plugin's: their tombstones are in the
// task's next commit, in its transaction under exactly-once. statehost_store_expired_total
// counts them.

// sweepInterval is the least time between two sweep steps of a task.
const sweepInterval = time.Second

// storeTTL is the store.TTL of a store block.
func storeTTL(sc config.Store) store.TTL {
	if sc.TTL <= 0 {
		return store.TTL{}
	}
	ttl := store.TTL{Millis: sc.TTL.Milliseconds()}
	if sc.TTLClock == config.TTLWallClock {
		ttl.Clock = store.TTLWallClock
	}
	return ttl
}

// hasTTL reports whether one of the processor's stores has a TTL.
func (p *processor) hasTTL() bool {
	for _, s := range p.stores {
		if s.TTL.Enabled() {
			return true
		}
	}
	return false
}

// sweepDue reports whether the task's sweep has a step to make now. Called by the task's job,
// or by the loop while the task is not busy.
func (t *task) sweepDue() bool {
	every := cmp.Or(t.rt.opts.sweepEvery, sweepInterval)
	return every > 0 && t.proc.hasTTL() && time.Since(t.sweptAt) >= every && t.cl != nil && t.cl.StoreTask().SweepDue()
}

// sweepExpired makes a step of the task's sweep when one is due, and counts what it deleted.
// Called by the task's job, after the plugin's work and before its records are flushed.
func (t *task) sweepExpired() error {
	if !t.sweepDue() {
		return nil
	}
	t.sweptAt = time.Now()
	return t.cl.StoreTask().SweepExpired(0, func(name string, n int) {
		t.rt.metrics.storeExpired(t.id.Processor, name, n)
	})
}
