package runtime

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The group calls these callbacks from its own goroutine, and only while the loop is not
// between a poll and its AllowRebalance (kgo.BlockRebalanceOnPoll): a revocation never meets a
// half-processed batch. It can meet a restore, which it cancels before it takes the task
// table (the table's lock).

// onAssigned pauses the new partitions (their tasks must restore first) and leaves them in
// the inbox for the loop, which opens and restores the tasks. It stays quick and never takes
// the table's lock, which a restore holds.
func (r *Runtime) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if w := r.watcher.Load(); w != nil {
		w.refresh() // the members may have changed
	}
	if a, ok := r.committer.(*atLeastOnce); ok {
		// franz-go calls this at the end of every assignment, after the revocations.
		_, generation := cl.GroupMetadata()
		a.unfence(generation)
	}
	if len(assigned) == 0 {
		return
	}
	cl.PauseFetchPartitions(assigned)
	r.signals.post(groupEvent{partitions: assigned})
	r.log.Info("partitions assigned", "partitions", assigned)
	r.emit(Event{Kind: EventPartitionsAssigned, Partitions: assigned})
}

// groupEvent is an assignment, or under exactly-once a revocation or a loss, handed from the
// group's callbacks to the loop (drainInbox).
type groupEvent struct {
	partitions map[string][]int32
	revoked    bool          // revoked or lost: the tasks close without a commit
	standbys   *standbyEvent // a standby assignment instead of partitions
	enabled    *enabledEvent // the processors the group runs, instead of partitions (reload.go)
}

// onRevokedOrLostEOS is onRevoked and onLost under exactly-once. It never waits for the loop:
// the loop may be ending a transaction, which itself waits for these callbacks (the session
// aborts when partitions are revoked or lost). The loop closes the tasks without a commit at
// its next safe point; whatever they did since the last commit is in the open transaction,
// which the session aborts.
//
// st is the state of the session whose client calls: a reset replaces r.eos.txn. franz-go's session
// marks the open transaction for an abort even on a loss of nothing (a failed join), so an
// empty loss sets the flag too.
func (r *Runtime) onRevokedOrLostEOS(st *txnState, what string, tps map[string][]int32) {
	if len(tps) == 0 {
		if what == "lost" {
			st.rebalanced.Store(true)
		}
		return
	}
	st.rebalanced.Store(true)
	r.signals.stopRestore() // it may be restoring these tasks; the others resume from their checkpoints
	r.signals.post(groupEvent{partitions: tps, revoked: true})
	r.log.Info("partitions "+what, "partitions", tps)
	r.emit(partitionsEvent(what, tps))
}

// onRevoked commits the tasks that read the revoked partitions and closes them. franz-go
// calls it at the end of every cooperative session, with nothing revoked most of the time:
// then it does nothing, and a restore in progress goes on. It must finish within the
// rebalance timeout; the commit is bounded by revocationTimeout.
func (r *Runtime) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	r.signals.beginRevocation()
	defer r.signals.endRevocation()
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	if r.tasks.closing {
		return
	}
	r.drainInbox()
	ctx, cancel := context.WithTimeout(ctx, revocationTimeout)
	defer cancel()
	// The revoked tasks' jobs of normal length end and commit with them (a job that ended is
	// taken in: its records are flushed, and a close without its commit would process them
	// twice); a slow one is stopped when its task closes, its records still queued.
	revokedTask := func(t *task) bool { return readsAny(t, revoked) }
	if err := r.jobs.settle(revokedTask); err != nil {
		r.signals.setFatal(err)
	}
	if err := r.committer.commit(ctx, reasonRevocation, revokedTask); err != nil {
		r.signals.setFatal(err)
	}
	r.unassign(cl, revoked)
	r.log.Info("partitions revoked", "partitions", revoked)
	r.emit(Event{Kind: EventPartitionsRevoked, Partitions: revoked})
}

// revocationTimeout bounds the commit of a revocation. With BlockRebalanceOnPoll a revocation
// may first wait for the loop's own commit (commitTimeout): the two stay within the group's
// rebalance timeout (rebalanceTimeout).
const revocationTimeout = 25 * time.Second

// rebalanceTimeout is how long the group waits for its members to rejoin in a rebalance.
const rebalanceTimeout = commitTimeout + revocationTimeout + 5*time.Second

// onLost closes the tasks of partitions that the group took away without a revocation (a
// session timeout, a fencing): committing is not possible any more. Their uncommitted writes
// are dropped; what they logged is restored by the next owner.
func (r *Runtime) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	if len(lost) == 0 {
		return
	}
	r.signals.beginRevocation()
	defer r.signals.endRevocation()
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	if r.tasks.closing {
		return
	}
	r.drainInbox()
	for topic, parts := range lost {
		for _, p := range parts {
			for _, t := range r.tasks.reading(topicPartition{topic, p}) {
				if t != nil {
					t.last = nil // nothing of it may be committed now
				}
			}
		}
	}
	if a, ok := r.committer.(*atLeastOnce); ok {
		a.fenced.Store(false) // nothing of the fenced generation is left to commit
	}
	r.unassign(cl, lost)
	r.log.Warn("partitions lost", "partitions", lost)
	r.emit(Event{Kind: EventPartitionsLost, Partitions: lost})
}

// readsAny reports whether t reads one of the partitions tps.
func readsAny(t *task, tps map[string][]int32) bool {
	for _, in := range t.proc.cfg.Inputs {
		if slices.Contains(tps[in], t.id.Partition) {
			return true
		}
	}
	return false
}

// unassign forgets partitions, closes the tasks that have none of their inputs assigned any
// more, and clears the partitions' pauses (a pause outlives an assignment in franz-go).
func (r *Runtime) unassign(cl *kgo.Client, tps map[string][]int32) {
	for topic, parts := range tps {
		for _, p := range parts {
			tp := topicPartition{topic, p}
			delete(r.tasks.assigned, tp)
			delete(r.tasks.paused, tp)
			delete(r.tasks.heldPaused, tp)
		}
	}
	if len(tps) > 0 {
		cl.ResumeFetchPartitions(tps)
	}
	var gone []*task
	for _, t := range r.tasks.active {
		if !r.tasks.owned(t) {
			gone = append(gone, t)
		}
	}
	r.closeTasks(gone)
}

// closeTasks closes tasks in parallel, dropping their uncommitted writes, and forgets them. A
// busy task's job is stopped first (its records are not committed), and the records held for
// it are dropped. The caller holds the table's lock.
func (r *Runtime) closeTasks(tasks []*task) {
	for _, t := range tasks {
		r.jobs.stopJob(t)
		if len(t.held) > 0 {
			t.held = nil
			r.jobs.resumeHeld(t)
		}
	}
	_ = r.jobs.forEachTask(tasks, func(t *task) error {
		if t.failed {
			r.log.Error("closing the failed task without committing its last records", "processor", t.id.Processor, "partition", t.id.Partition)
		}
		if t.cl != nil || r.tasks.standby[t.id] == nil { // else its standby holds the state
			var cps map[string]int64
			if t.cl != nil {
				cps = checkpoints(t.cl)
			}
			defer r.local.closed(t.id, cps)
		}
		if err := t.close(); err != nil {
			r.log.Warn("closing task", "processor", t.id.Processor, "partition", t.id.Partition, "error", err)
		}
		return nil
	})
	for _, t := range tasks {
		r.tasks.closed(t)
		r.log.Info("task closed", "processor", t.id.Processor, "partition", t.id.Partition)
		r.emit(Event{Kind: EventTaskClosed, Processor: t.id.Processor, Partition: t.id.Partition})
	}
}

// drainInbox applies the group events that the callbacks handed over, in order: assigned
// partitions become tasks waiting for restore; revoked or lost ones (exactly-once) close the
// tasks that no longer own an input, without a commit. The caller holds the table's lock.
func (r *Runtime) drainInbox() {
	for _, ev := range r.signals.takeInbox() {
		if ev.standbys != nil {
			r.sb.apply(ev.standbys)
			continue
		}
		if ev.enabled != nil {
			r.reload.enable(ev.enabled)
			continue
		}
		if ev.revoked {
			r.unassign(r.kafka.consumer, ev.partitions)
			continue
		}
		r.dropStale(ev.partitions)
		for topic, parts := range ev.partitions {
			for _, p := range parts {
				tp := topicPartition{topic, p}
				r.tasks.assigned[tp] = true
				r.tasks.paused[tp] = true
				for proc := range r.tasks.reading(tp) {
					if id := (taskID{Processor: proc.cfg.Name, Partition: p}); r.tasks.active[id] == nil {
						r.tasks.assign(id, proc, r)
					}
				}
			}
		}
	}
}

// dropStale closes, without a commit, the tasks of partitions that are assigned again while
// this instance still holds them: their revocation or loss was never reported (franz-go's
// transactional session drops a second revocation before the transaction ends). Such a task
// may be behind what another owner committed meanwhile: it must restore before it processes
// again. If it worked in the open transaction, that transaction must abort. The caller holds
// the table's lock.
func (r *Runtime) dropStale(assigned map[string][]int32) {
	var stale []*task
	for topic, parts := range assigned {
		for _, p := range parts {
			if !r.tasks.assigned[topicPartition{topic, p}] {
				continue
			}
			for _, t := range r.tasks.reading(topicPartition{topic, p}) {
				if t != nil && !slices.Contains(stale, t) {
					stale = append(stale, t)
				}
			}
		}
	}
	if len(stale) == 0 {
		return
	}
	for _, t := range stale {
		r.log.Warn("partition assigned again without its revocation: the task closes and restores", "processor", t.id.Processor, "partition", t.id.Partition)
		if r.eos != nil && t.uncommitted() {
			r.eos.txn.rebalanced.Store(true)
		}
	}
	r.closeTasks(stale)
}

// syncPauses resumes the assigned partitions whose tasks all run. A partition that no
// processor reads yet (its readers are pending: reload.go) stays paused. The caller holds the
// table's lock.
func (r *Runtime) syncPauses() {
	resume := make(map[string][]int32)
	for tp := range r.tasks.paused {
		ready, read := true, false
		for _, t := range r.tasks.reading(tp) {
			read = true
			if t == nil || t.state != stateRunning {
				ready = false
			}
		}
		ready = ready && read
		if ready {
			delete(r.tasks.paused, tp)
			if !r.tasks.heldPaused[tp] { // else it resumes when its held records are handed on
				resume[tp.topic] = append(resume[tp.topic], tp.part)
			}
		}
	}
	if len(resume) > 0 {
		r.kafka.consumer.ResumeFetchPartitions(resume)
	}
}
