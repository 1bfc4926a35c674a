package runtime

import (
	"sync"

	"github.com/statehost/statehost/host/engine"
)

// recordBatches lends the engine records of a job's batch (task.process). A task kept its own
// slice before, at the largest batch it ever had, with the keys and values of its last batch
// in it: the fetch buffers those point into stayed alive while the task was idle, for every
// task. Lent per job, the slices are about as many as the jobs that run at once (a sync.Pool
// keeps one per P, and lets the GC take idle ones), and each is cleared when it comes back.
var recordBatches batchPool

// maxPooledBatch is the capacity above which a batch slice is not kept: a rare huge batch does
// not pin its slice in the pool.
const maxPooledBatch = 1 << 14

type batchPool struct{ p sync.Pool }

// get returns an empty slice with room for n records.
func (b *batchPool) get(n int) *[]engine.Record {
	if v, ok := b.p.Get().(*[]engine.Record); ok && cap(*v) >= n {
		return v
	}
	s := make([]engine.Record, 0, n)
	return &s
}

// put takes back a slice that get returned: its records are cleared, so that nothing keeps
// their keys and values.
func (b *batchPool) put(v *[]engine.Record) {
	clear((*v)[:cap(*v)])
	*v = (*v)[:0]
	if cap(*v) <= maxPooledBatch {
		b.p.Put(v)
	}
}
