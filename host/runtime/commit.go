package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Commits. A committer commits the tasks that have uncommitted work (task.uncommitted, the
// one rule for both guarantees), then the input offsets up to what they processed
// (offsetFor). atLeastOnce commits each task on its own, then the offsets; exactlyOnce (txn.go)
// puts every task's records and the offsets in one transaction, then applies the stores.

// commitReason says why the loop commits. Logs name it; exactly-once lets the periodic
// reasons leave work without input offsets to a later commit (deferrable).
type commitReason uint8

const (
	// reasonInterval: commit_interval has passed since the last commit.
	reasonInterval commitReason = iota + 1
	// reasonSize: a task's uncommitted writes grew past their bound (changelog.Task.NeedsCommit).
	reasonSize
	// reasonOwed: a task that was busy at the last commit has ended its job.
	reasonOwed
	// reasonRebalance: exactly-once; a rebalance waits for the open work to commit, or
	// revoked partitions during a poll (the open transaction aborts).
	reasonRebalance
	// reasonRevocation: at-least-once; the group revokes partitions (onRevoked).
	reasonRevocation
	// reasonRestore: exactly-once; tasks are about to restore, which may outlast the
	// transaction's timeout.
	reasonRestore
	// reasonShutdown: Run's context ended.
	reasonShutdown
	// reasonReload: a configuration reload waits for every task to be committed (reload.go).
	reasonReload
)

var commitReasonNames = [...]string{
	reasonInterval:   "interval",
	reasonSize:       "size",
	reasonOwed:       "owed",
	reasonRebalance:  "rebalance",
	reasonRevocation: "revocation",
	reasonRestore:    "restore",
	reasonShutdown:   "shutdown",
	reasonReload:     "reload",
}

func (c commitReason) String() string {
	if int(c) < len(commitReasonNames) && commitReasonNames[c] != "" {
		return commitReasonNames[c]
	}
	return fmt.Sprintf("commitReason(%d)", c)
}

// deferrable reports whether a commit for c may leave work without input offsets (a
// plugin's init writes, punctuations of idle tasks) to a later commit: the periodic reasons
// may, the others must take everything now.
func (c commitReason) deferrable() bool {
	return c == reasonInterval || c == reasonSize || c == reasonOwed
}

// committer commits tasks under one processing guarantee. The caller of its methods holds the
// task table's lock.
type committer interface {
	// commit commits the tasks that have uncommitted work and may commit now (not busy),
	// restricted to those for which only returns true when only is not nil (a revocation's),
	// then their input offsets.
	commit(ctx context.Context, why commitReason, only func(*task) bool) error
	// stop ends the work of a stopping runtime: it commits what may commit, or after a
	// failure (cause) drops what may not. It returns the error that stops the runtime.
	stop(ctx context.Context, cause error) error
}

// uncommitted reports whether t has work since its last commit that a commit must take, or
// that no commit may take: records its ended jobs processed (last), a job that runs, a job
// that was stopped, a failure, and writes and records of its plugin calls that are not
// acknowledged and applied yet (its init's, its punctuations').
func (t *task) uncommitted() bool {
	return t.busy() || t.failed || t.abandoned || len(t.last) > 0 || t.cl != nil && t.cl.HasWork()
}

// commitTimeout bounds a commit: the acknowledgements it waits for, the store apply and the
// offset commit. A commit that cannot finish fails its task, which stops the runtime.
const commitTimeout = 30 * time.Second

// atLeastOnce is the committer under at-least-once: each task commits on its own (its records
// acknowledged, then its write batch and checkpoint applied), and then the input offsets of
// the tasks that committed. A crash between the two processes their records again.
type atLeastOnce struct {
	rt *Runtime
	// fenced is set while the group does not know this member in the generation of its
	// commits: an offset commit of generation fencedGen failed for it (the member was
	// removed, or its session expired). franz-go rejoins on such an error, keeping the
	// partitions until the new generation's assignment revokes some, which may have had
	// another owner in between that committed further. Meanwhile no offset commit goes out
	// (one that waited for the join would carry the new generation, which the group takes),
	// and a revocation's tasks close without a commit, as lost ones do. It is cleared when
	// the new generation's assignment is done (onAssigned: what this member still holds it
	// held throughout), or by a loss (onLost).
	fenced    atomic.Bool
	fencedGen atomic.Int32
}

// unfence clears the fencing once the group's generation is no longer the fenced one.
func (a *atLeastOnce) unfence(generation int32) {
	if a.fenced.Load() && generation != a.fencedGen.Load() {
		a.fenced.Store(false)
		a.rt.log.Info("this member is in the group again: its offsets commit", "generation", generation)
	}
}

// commit commits the tasks that are not busy: busy tasks commit later, once their jobs end;
// the partitions they read are committed up to their first uncommitted record.
func (a *atLeastOnce) commit(ctx context.Context, why commitReason, only func(*task) bool) error {
	r := a.rt
	if why == reasonRevocation && a.fenced.Load() {
		for _, t := range r.tasks.active {
			if only == nil || only(t) {
				t.last = nil // closed without a commit, as after a loss
			}
		}
		r.log.Warn("this member was fenced since its last commit: the revoked tasks close without a commit")
		return nil
	}
	var dirty []*task
	for _, t := range r.tasks.active {
		if t.state == stateRunning && !t.busy() && !t.failed && t.uncommitted() && (only == nil || only(t)) {
			dirty = append(dirty, t)
		}
	}
	if len(dirty) == 0 {
		return nil
	}
	start := time.Now()
	defer r.metrics.committed(start)
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	// 1-2. Each task: its records acknowledged, then its batch and checkpoint applied.
	err := r.jobs.forEachTask(dirty, func(t *task) error {
		if err := t.cl.Commit(ctx, nil); err != nil {
			return fmt.Errorf("runtime: commit task %s: %w", t.id, err)
		}
		return nil
	})
	// 3. The input offsets of the tasks that committed. While fenced, none: the tasks keep
	// them for a commit in the new generation, if they are still here then.
	offsets := r.tasks.commitOffsets(dirty)
	committed := !a.fenced.Load()
	if len(offsets) > 0 && committed {
		if r.opts.beforeOffsetCommit != nil {
			r.opts.beforeOffsetCommit(why)
		}
		if generation, cerr := a.commitGroupOffsets(ctx, offsets); cerr != nil {
			// The state is applied; the tasks keep their offsets for the next commit, and
			// the records after the last committed offsets are processed again if this
			// process stops first (at least once).
			committed = false
			r.log.Warn("offset commit failed; the next commit retries it", "reason", why.String(), "partitions", describeOffsets(offsets), "error", cerr)
			if isFenced(cerr) {
				a.fencedGen.Store(generation)
				if !a.fenced.Swap(true) {
					r.emit(Event{Kind: EventMemberFenced, Error: cerr.Error()})
				}
			}
		} else {
			r.purge(offsets)
		}
	}
	if committed {
		for _, t := range dirty {
			if !t.failed {
				t.committed()
			}
		}
	}
	r.log.Debug("committed", "reason", why.String(), "tasks", len(dirty), "partitions", len(offsets), "duration", time.Since(start))
	return err
}

// stop commits every task that may commit; a failure of that commit stops the runtime unless
// cause already does.
func (a *atLeastOnce) stop(ctx context.Context, cause error) error {
	if err := a.commit(ctx, reasonShutdown, nil); err != nil && cause == nil {
		return err
	}
	return cause
}

// commitGroupOffsets commits offsets to the group; it returns the generation the commit
// was made in.
func (a *atLeastOnce) commitGroupOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) (generation int32, err error) {
	a.rt.kafka.consumer.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, cerr error) {
		generation = req.Generation
		if cerr != nil {
			err = cerr
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil && err == nil {
					err = fmt.Errorf("%s partition %d: %w", t.Topic, p.Partition, perr)
				}
			}
		}
	})
	return generation, err
}

// commit commits the open transaction (commitTxnLocked). A transaction holds every task:
// exactly-once never commits some tasks alone (its revocations post events instead:
// onRevokedOrLostEOS), so only must be nil.
func (e *exactlyOnce) commit(ctx context.Context, why commitReason, only func(*task) bool) error {
	if only != nil {
		return errors.New("runtime: internal error: exactly-once commits the whole transaction, not some of its tasks")
	}
	return e.commitTxnLocked(ctx, why)
}

// stop commits the open transaction; after a failure in it (cause), nothing of it may commit:
// it aborts.
func (e *exactlyOnce) stop(ctx context.Context, cause error) error {
	if cause == nil {
		return e.commitTxnLocked(ctx, reasonShutdown)
	}
	if _, _, err := e.endTxnLocked(kgo.TryAbort, nil); err != nil {
		e.rt.log.Warn("aborting the transaction", "error", err)
	}
	return cause
}
