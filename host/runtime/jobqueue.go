package runtime

import (
	"context"
	"slices"
	"sync"
)

// Jobs waiting for a worker. A job's goroutine starts once the job has a place among the
// Options.Workers (dispatcher.slots); until then the job waits in the dispatcher's queue.
// A goroutine per job that waited on the slots for its place was one per task with records
// at once: after a poll that brings records of 4,096 partitions, 4,096 goroutines, their
// stacks and contexts, for 2 running jobs. The queue holds a small struct per waiting job.
//
// The places are taken by a send on slots and given back by a receive, as before; the queue
// is locked around "try a place, else wait in line" and "give a place back, then let the
// first in line try", so that a job never waits in line while a place is free.

// queuedJob is a job waiting for a place: its context, task and job.
type queuedJob struct {
	ctx  context.Context
	t    *task
	j    *job
	stop func() bool // stops the watch of ctx (context.AfterFunc)
}

// jobQueue is the line of the jobs waiting for a place, first come first served.
type jobQueue struct {
	mu      sync.Mutex
	waiting []*queuedJob
}

// launch starts q's job in a place if one is free, or puts it in line: it starts when a
// running job gives its place up (release), or ends with its context's error if that
// context ends first (a closing task, a stopping runtime), as a job that never ran.
func (d *dispatcher) launch(q *queuedJob) {
	d.queue.mu.Lock()
	defer d.queue.mu.Unlock()
	select {
	case d.slots <- struct{}{}:
		go d.runJob(q.ctx, q.t, q.j)
		return
	default:
	}
	d.queue.waiting = append(d.queue.waiting, q)
	q.stop = context.AfterFunc(q.ctx, func() {
		if d.queue.remove(q) {
			q.j.err = q.ctx.Err()
			d.endJob(q.t, q.j)
		}
	})
}

// release gives a place back and starts the first job in line in it, if any.
func (d *dispatcher) release() {
	d.queue.mu.Lock()
	defer d.queue.mu.Unlock()
	<-d.slots
	for len(d.queue.waiting) > 0 {
		q := d.queue.waiting[0]
		d.queue.waiting[0] = nil
		d.queue.waiting = d.queue.waiting[1:]
		q.stop()
		if err := q.ctx.Err(); err != nil {
			// Its watch fired and waits for the lock: it will not find the job in line.
			go func() {
				q.j.err = err
				d.endJob(q.t, q.j)
			}()
			continue
		}
		d.slots <- struct{}{} // the place just given back: under the lock, no one took it
		go d.runJob(q.ctx, q.t, q.j)
		return
	}
}

// remove takes q out of the line, and reports whether it was in it.
func (jq *jobQueue) remove(q *queuedJob) bool {
	jq.mu.Lock()
	defer jq.mu.Unlock()
	i := slices.Index(jq.waiting, q)
	if i < 0 {
		return false
	}
	jq.waiting = slices.Delete(jq.waiting, i, i+1)
	return true
}
