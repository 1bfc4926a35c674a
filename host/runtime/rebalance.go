package runtime

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The group calls these callbacks from its own goroutine. Rebalances are blocked while the
// loop processes a poll (kgo.BlockRebalanceOnPoll), so a revocation never meets a half
// processed batch; it can meet a restore, which it cancels before taking the task table.

// onAssigned pauses the new partitions (their tasks must restore first) and leaves them in
// the inbox for the loop, which opens and restores the tasks. It must stay quick and never
// wait for the loop: the group does not heartbeat while it runs.
func (r *Runtime) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if len(assigned) == 0 {
		return
	}
	cl.PauseFetchPartitions(assigned)
	r.wakeMu.Lock()
	r.inbox = append(r.inbox, assigned)
	if r.pollCancel != nil {
		r.pollCancel()
	}
	r.wakeMu.Unlock()
	r.log.Info("partitions assigned", "partitions", assigned)
}

// onRevoked commits every task, then closes the tasks that lost all their input partitions.
// It must finish within the rebalance timeout: it commits only what was processed.
func (r *Runtime) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	r.cancelRestore()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return
	}
	r.drainInbox()
	if err := r.commitLocked(ctx, "revocation"); err != nil {
		r.setFatal(err)
	}
	r.unassign(cl, revoked)
	if len(revoked) > 0 {
		r.log.Info("partitions revoked", "partitions", revoked)
	}
}

// onLost closes the tasks of partitions that the group took away without a revocation (a
// session timeout, a fencing): committing is not possible any more. Their uncommitted writes
// are dropped; what they logged is restored by the next owner.
func (r *Runtime) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	r.cancelRestore()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return
	}
	r.drainInbox()
	for topic, parts := range lost {
		for _, p := range parts {
			for _, proc := range r.readers[topic] {
				if t := r.tasks[taskID{proc.cfg.Name, p}]; t != nil {
					t.last = nil // nothing of it may be committed now
				}
			}
		}
	}
	r.unassign(cl, lost)
	r.log.Warn("partitions lost", "partitions", lost)
}

// unassign forgets partitions, closes the tasks that have none of their inputs assigned any
// more, and clears the partitions' pauses (a pause outlives an assignment in franz-go).
func (r *Runtime) unassign(cl *kgo.Client, tps map[string][]int32) {
	for topic, parts := range tps {
		for _, p := range parts {
			tp := topicPartition{topic, p}
			delete(r.assigned, tp)
			delete(r.paused, tp)
		}
	}
	if len(tps) > 0 {
		cl.ResumeFetchPartitions(tps)
	}
	for id, t := range r.tasks {
		if r.owned(t) {
			continue
		}
		if err := t.close(); err != nil {
			r.log.Warn("closing task", "processor", id.proc, "partition", id.part, "error", err)
		}
		delete(r.tasks, id)
		r.status.remove(id)
		r.log.Info("task closed", "processor", id.proc, "partition", id.part)
	}
}

// owned reports whether at least one input partition of t is assigned.
func (r *Runtime) owned(t *task) bool {
	for _, in := range t.proc.cfg.Inputs {
		if r.assigned[topicPartition{in, t.id.part}] {
			return true
		}
	}
	return false
}

// drainInbox turns the assignments the group handed over into tasks waiting for restore.
// The caller holds r.mu.
func (r *Runtime) drainInbox() {
	r.wakeMu.Lock()
	inbox := r.inbox
	r.inbox = nil
	r.wakeMu.Unlock()
	for _, assigned := range inbox {
		for topic, parts := range assigned {
			for _, p := range parts {
				tp := topicPartition{topic, p}
				r.assigned[tp] = true
				r.paused[tp] = true
				for _, proc := range r.readers[topic] {
					id := taskID{proc.cfg.Name, p}
					if r.tasks[id] == nil {
						r.tasks[id] = &task{id: id, proc: proc, rt: r}
						r.status.setState(id, "restoring")
					}
				}
			}
		}
	}
}

// syncPauses resumes the assigned partitions whose tasks all run. The caller holds r.mu.
func (r *Runtime) syncPauses() {
	resume := make(map[string][]int32)
	for tp := range r.paused {
		ready := true
		for _, proc := range r.readers[tp.topic] {
			if t := r.tasks[taskID{proc.cfg.Name, tp.part}]; t == nil || t.state != stateRunning {
				ready = false
			}
		}
		if ready {
			resume[tp.topic] = append(resume[tp.topic], tp.part)
			delete(r.paused, tp)
		}
	}
	if len(resume) > 0 {
		r.consumer.ResumeFetchPartitions(resume)
	}
}

// cancelRestore stops a restore in progress, if any.
func (r *Runtime) cancelRestore() {
	r.wakeMu.Lock()
	if r.restoreCancel != nil {
		r.restoreCancel()
	}
	r.wakeMu.Unlock()
}

// setFatal records the first error that must stop the runtime; the loop returns it.
func (r *Runtime) setFatal(err error) {
	r.wakeMu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	if r.pollCancel != nil {
		r.pollCancel()
	}
	r.wakeMu.Unlock()
}

// takeFatal returns the error recorded by setFatal.
func (r *Runtime) takeFatal() error {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	return r.fatal
}
