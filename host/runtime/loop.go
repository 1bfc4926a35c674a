package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
)

// Run joins the consumer group and processes records until ctx ends or a task fails. On
// ctx's end it commits every task, closes them and the group consumer, and returns nil; on
// a failure it does the same for the healthy tasks and returns the failure. The instance is
// a static member of the group (KIP-345, its group instance id <application_id>-<process
// id>): closing does not leave the group, so that an instance restarted within the session
// timeout takes its tasks back without a rebalance; one that does not come back loses them
// to the others after the session timeout.
func (r *Runtime) Run(ctx context.Context) error {
	id, err := r.instanceID()
	if err != nil {
		return err
	}
	r.peers.setInstance(id) // before the listener answers watches
	stopAdmin, err := r.serveAdmin()
	if err != nil {
		return err
	}
	defer stopAdmin()
	stopWatch := r.watchModules(ctx)
	defer stopWatch()
	r.stop = ctx.Done()
	if err := r.newConsumer(ctx); err != nil {
		return err
	}
	defer r.watchPeers(ctx, id)()
	r.tasks.mu.Lock()
	r.deploy.running = true // deploys are taken from now on
	r.tasks.mu.Unlock()
	r.log.Info("running", "application_id", r.cfg.ApplicationID, "brokers", r.opts.Brokers,
		"processors", len(r.procs), "state_dir", StateDir(r.cfg))
	r.emit(Event{Kind: EventRunning})
	r.joinGroup() // after running: the assignment may come before joinGroup returns
	nextCommit := time.Now().Add(r.cfg.CommitInterval)
	work := context.WithoutCancel(ctx)
	r.jobs.work = work
	r.jobs.slots = make(chan struct{}, r.opts.Workers)
	for err == nil && ctx.Err() == nil {
		if err = r.signals.takeFatal(); err != nil {
			break
		}
		if err = r.restorePending(ctx); err != nil {
			break
		}
		wait := time.Until(nextCommit)
		if !r.restoreRetryAt.IsZero() {
			wait = min(wait, time.Until(r.restoreRetryAt)) // tasks wait to be restored
		}
		if at, ok := r.jobs.nextWallPunctuation(); ok {
			wait = min(wait, time.Until(at))
		}
		if at, ok := r.sb.nextStandbyWork(); ok {
			wait = min(wait, time.Until(at))
		}
		fetches := r.poll(ctx, wait)
		if r.eos != nil && r.eos.txn.rebalanced.Swap(false) {
			// Partitions were revoked or lost during the poll: the session aborts the open
			// transaction, so abort it before processing anything; the consumer rewinds and
			// fetches these records again.
			err = r.eos.abortRebalanced()
			r.allowRebalance()
			continue
		}
		// A stop request does not interrupt a job or a commit that has begun: the job
		// finishes (the engine's time limit bounds it) and the shutdown commits it.
		err = r.handleFetches(fetches)
		if why, due := r.commitDue(err, nextCommit); due {
			err = r.commitAll(work, why)
			if err == nil {
				// A commit boundary: tasks whose processor has a new module switch now.
				r.tasks.mu.Lock()
				r.deploy.switchModules(work)
				r.reload.atBoundary() // and a reload waiting for one applies
				r.tasks.mu.Unlock()
			}
			nextCommit = time.Now().Add(r.cfg.CommitInterval)
		}
		if err == nil {
			r.jobs.punctuateAll() // and the held records of the tasks that just committed
		}
		r.allowRebalance()
	}
	if err == nil && ctx.Err() != nil {
		r.log.Info("stopping", "reason", context.Cause(ctx))
		// A requested stop (a restart, most often): the peers leave this instance's tasks
		// to it for the session timeout. A failure says nothing: they remove it.
		r.peers.goodbye()
	}
	r.tasks.mu.Lock()
	r.deploy.running = false // deploys are refused, and a deploy waiting for its switch gives up
	r.tasks.mu.Unlock()
	return r.shutdown(err)
}

// allowRebalance lets a waiting rebalance run. Under exactly-once only when no task has worked
// since the last commit: a rebalance must not meet an open transaction with work in it. Under
// at-least-once also while jobs run: a revocation cancels the jobs of the tasks it closes.
func (r *Runtime) allowRebalance() {
	if r.eos != nil {
		if r.eos.openWork() {
			return
		}
		r.eos.txn.blocked.Store(false)
	}
	r.kafka.consumer.AllowRebalance()
}

// rebalanceWaits reports whether, under exactly-once, a rebalance waits for the loop to commit.
func (r *Runtime) rebalanceWaits() bool { return r.eos != nil && r.eos.txn.blocked.Load() }

// poll waits at most wait for records. An assignment wakes it early, so that new tasks start
// restoring at once, and so does the end of a job (jobEnded). While jobs of normal length run
// it does not poll until one ends (or runs long: slowJob): franz-go fetches ahead meanwhile,
// and the next poll hands that fetch to every task at once, as a loop that waited for its
// batches did; polling in between would hand the busy tasks' records out one small fetch at a
// time.
func (r *Runtime) poll(ctx context.Context, wait time.Duration) kgo.Fetches {
	wait = max(wait, 10*time.Millisecond)
	if until, ok := r.jobs.youngJobsUntil(); ok {
		r.sleep(ctx, min(until, wait))
		wait = time.Millisecond // what franz-go fetched meanwhile
	}
	pctx, done, ok := r.signals.pollWait(ctx, wait)
	if !ok {
		return kgo.Fetches{} // an assignment arrived since the last round: restore first
	}
	defer done()
	return r.kafka.consumer.PollRecords(pctx, r.opts.MaxPollRecords)
}

// sleep waits for d, or until a job ends, a group event arrives, the runtime fails or ctx
// ends (the wakes of a poll).
func (r *Runtime) sleep(ctx context.Context, d time.Duration) {
	sctx, done := r.signals.sleepWait(ctx, d)
	defer done()
	<-sctx.Done()
}

// handleFetches takes in the jobs that ended, then hands a poll's records to their tasks:
// every task holds its records, and each one that may start a job starts one with all it holds
// (dispatchHeld); a busy one keeps them for its next job. It returns the first failure of an
// ended job.
func (r *Runtime) handleFetches(fetches kgo.Fetches) error {
	var fatal error
	fetches.EachError(func(topic string, part int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			fatal = fmt.Errorf("runtime: the group consumer closed: %w", err)
		case errors.As(err, new(*kgo.ErrDataLoss)):
			// The partition lost records below the position (truncated, recreated, or an
			// unclean leader election): the client moved on from where the broker now is.
			r.log.Error("input records lost on the broker", "topic", topic, "partition", part, "error", err)
		default:
			r.log.Warn("fetch error", "topic", topic, "partition", part, "error", err)
		}
	})
	if fatal != nil {
		return fatal
	}
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	if err := r.jobs.collectJobs(); err != nil {
		return err
	}
	if fetches.Empty() {
		r.jobs.dispatchHeld()
		return nil
	}
	var missing error
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		for p, t := range r.tasks.reading(topicPartition{fp.Topic, fp.Partition}) {
			if t == nil || t.state != stateRunning {
				// Partitions are paused until all their tasks run, and a poll never returns
				// records of a paused partition: this is a bug, and processing on would skip
				// the records.
				missing = fmt.Errorf("runtime: internal error: %d records of %s partition %d (offset %d) for task %s_%d, which is not running",
					len(fp.Records), fp.Topic, fp.Partition, fp.Records[0].Offset, p.cfg.Name, fp.Partition)
				continue
			}
			r.jobs.hold(t, fp.Topic, fp.Records)
		}
	})
	if missing != nil {
		return missing
	}
	r.jobs.dispatchHeld()
	return nil
}

// mergeByTimestamp merges the records of a task's input partitions into one batch: each
// partition's records stay in offset order, and across partitions the record with the
// smallest timestamp goes first, as Kafka Streams picks the next record of a task with
// several inputs.
func mergeByTimestamp(lists [][]*kgo.Record) []*kgo.Record {
	if len(lists) == 1 {
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]*kgo.Record, 0, n)
	for len(out) < n {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || l[0].Timestamp.Before(lists[best][0].Timestamp)) {
				best = i
			}
		}
		out = append(out, lists[best][0])
		lists[best] = lists[best][1:]
	}
	return out
}

// forEachTask runs fn on the tasks (none of them busy) with at most Options.Workers at a time
// and returns the first error, after all have finished: the commits, starts and closes of
// tasks. The failed tasks are remembered in failed.
func (d *dispatcher) forEachTask(tasks []*task, fn func(*task) error) error {
	if len(tasks) == 1 {
		err := fn(tasks[0])
		if err != nil {
			tasks[0].failed = true
		}
		return err
	}
	sem := make(chan struct{}, d.rt.opts.Workers)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, t := range tasks {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(t); err != nil {
				mu.Lock()
				t.failed = true
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// punctuateAll starts a job for the due punctuations of each running task that is not busy:
// wall-clock ones, and stream-time ones due without a batch (a new instance whose stream time
// was restored), or for a due step of its sweep of expired entries (ttl.go); and it reports
// the writes their window stores dropped.
func (d *dispatcher) punctuateAll() {
	d.rt.tasks.mu.Lock()
	defer d.rt.tasks.mu.Unlock()
	if d.quiescing() {
		return
	}
	d.dispatchHeld() // records held while a job ran, a commit was owed or a rebalance waited
	for _, t := range d.rt.tasks.active {
		if len(t.held) > 0 || !d.dispatchable(t) {
			continue
		}
		t.reportDropped()
		if t.engState.PunctuationDue() || t.sweepDue() {
			d.startJob(t, nil)
		}
	}
}

// nextWallPunctuation returns when the earliest wall-clock punctuation of a running task is due.
func (d *dispatcher) nextWallPunctuation() (time.Time, bool) {
	d.rt.tasks.mu.Lock()
	defer d.rt.tasks.mu.Unlock()
	var next time.Time
	found := false
	for _, t := range d.rt.tasks.active {
		if t.state != stateRunning || t.busy() || t.pool == nil || t.failed {
			continue
		}
		if at, ok := t.engState.NextWallPunctuation(); ok && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}

// needsCommit reports whether a task asks for an early commit.
func (r *Runtime) needsCommit() bool {
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	for _, t := range r.tasks.active {
		if t.cl != nil && t.state == stateRunning && !t.busy() && t.cl.NeedsCommit() {
			return true
		}
	}
	return false
}

// commitDue reports whether the loop commits now, after a round that ended with err, and why:
// a rebalance waits for it (it then commits even init writes alone), commit_interval has
// passed since next was set, a task's writes grew past their bound, or a task left out of the
// last commit has ended its job, or a reload waits for a commit boundary. A failed round does
// not commit: the shutdown does.
func (r *Runtime) commitDue(err error, next time.Time) (commitReason, bool) {
	switch {
	case err != nil:
		return 0, false
	case r.rebalanceWaits():
		return reasonRebalance, true
	case time.Now().After(next):
		return reasonInterval, true
	case r.needsCommit():
		return reasonSize, true
	case r.jobs.owedEnded():
		return reasonOwed, true
	case r.reload.due():
		return reasonReload, true
	}
	return 0, false
}

// commitAll commits every task that has uncommitted work, then the input offsets of those
// tasks, then purges repartition topics; under exactly-once it commits the open transaction.
// The caller holds no lock.
func (r *Runtime) commitAll(ctx context.Context, why commitReason) error {
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	if err := r.jobs.settleJobs(); err != nil {
		return err
	}
	err := r.committer.commit(ctx, why, nil)
	for _, t := range r.tasks.active {
		t.owed = t.busy() // left out: it commits as soon as its job ends
	}
	return err
}

// purge deletes the records of repartition topics below the offsets just committed, in the
// background: they will never be read again. It keeps the last committed record of each
// partition: a partition emptied by DeleteRecords comes back at offset 0 after a restart of
// the statehost broker (kfake keeps a partition's offsets only in its segment files), and the
// group's committed offset would then point past records written after the restart.
func (r *Runtime) purge(committed map[string]map[int32]kgo.EpochOffset) {
	offsets := make(kadm.Offsets)
	for topic, parts := range committed {
		if r.cfg.RepartitionByTopic(topic) == nil {
			continue
		}
		for p, o := range parts {
			if at := o.Offset - 1; at > 0 { // the last committed record stays
				offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: at})
			}
		}
	}
	if len(offsets) == 0 || !r.kafka.purging.TryLock() {
		return
	}
	go func() {
		defer r.kafka.purging.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := r.kafka.purgeAdm.DeleteRecords(ctx, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			r.log.Warn("purging repartition topics failed; the next commit purges them", "offsets", offsets, "error", err)
			return
		}
		resp.Each(func(d kadm.DeleteRecordsResponse) {
			r.log.Trace("purged", "topic", d.Topic, "partition", d.Partition, "low_watermark", d.LowWatermark)
		})
	}()
}

// restorePending opens the stores of the tasks assigned since the last round, restores them,
// and then starts their plugins (a plugin's statehost_init may read its stores: it must see
// them restored). A revocation or a loss cancels the restore: the tasks keep what they restored
// so far (their checkpoints follow each applied batch; memory stores start again) and the
// ones still assigned resume in the next round.
func (r *Runtime) restorePending(ctx context.Context) error {
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	r.takeGroupEvents(ctx)
	if time.Now().Before(r.restoreRetryAt) {
		return nil
	}
	r.restoreRetryAt = time.Time{}
	if r.eos != nil && r.tasks.restoring() {
		// Exactly-once: no restore with work in the open transaction. A restore may take
		// longer than the transaction timeout, and rebalances wait for the work to commit.
		if err := r.eos.commit(context.WithoutCancel(ctx), reasonRestore, nil); err != nil {
			return err
		}
		// The commit may have let a rebalance through, and an aborted transaction drains the
		// inbox: a task created meanwhile takes over its open standby now.
		r.sb.sync(ctx)
	}
	opened, err := r.openPending()
	if err != nil || len(opened) == 0 {
		return err
	}
	// A revocation that is waiting for the table's lock cancels nothing yet: restore nothing
	// then, and let it run.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !r.signals.restoring(cancel) {
		return nil
	}
	defer r.signals.restoring(nil)
	cls := make([]*changelog.Task, 0, len(opened))
	for _, t := range opened {
		cls = append(cls, t.cl)
	}
	if err := r.kafka.restorer.Restore(rctx, cls...); err != nil {
		switch {
		case ctx.Err() != nil:
			return nil
		case rctx.Err() != nil:
			r.log.Info("restore interrupted by a rebalance; it resumes from its checkpoints")
			return nil
		case r.retryRestoreLater(err):
			return nil
		}
		return fmt.Errorf("runtime: restore: %w", err)
	}
	r.restoreRetry = brokerRetry{}
	for _, t := range opened {
		if err := r.deploy.startTask(context.WithoutCancel(ctx), t); err != nil { // a stop request waits for the trial and the init
			return err
		}
	}
	r.syncPauses()
	return nil
}

// takeGroupEvents applies what the group handed over since the last round (drainInbox), makes
// the standbys follow the assignment, probes the warmups, and at their intervals publishes the
// module versions and deletes unused local state. The caller holds the table's lock.
func (r *Runtime) takeGroupEvents(ctx context.Context) {
	r.drainInbox()
	r.sb.sync(ctx)
	r.sb.probeWarmups()
	if time.Since(r.deploy.versionsAt) >= 500*time.Millisecond {
		versions := r.deploy.processorsLocked()
		r.deploy.versions.Store(&versions)
		r.deploy.versionsAt = time.Now()
	}
	if time.Since(r.sb.cleanedAt) >= r.sb.cleanupEvery() {
		r.sb.cleanupState()
		r.sb.cleanedAt = time.Now()
	}
}

// openPending opens the stores of the tasks that wait to be restored and returns those that
// opened. When none waits, it resumes the partitions whose tasks all run. A task that this
// instance closed a moment ago, whose last records are still in flight, waits for the next
// round (a restore now would miss them). The caller holds the table's lock.
func (r *Runtime) openPending() ([]*task, error) {
	var pending []*task
	for _, t := range r.tasks.active {
		if t.state == stateAssigned {
			pending = append(pending, t)
		}
	}
	if len(pending) == 0 {
		r.syncPauses()
		return nil, nil
	}
	opened := pending[:0]
	for _, t := range pending {
		if t.cl == nil {
			if err := t.openStores(); err != nil {
				if !errors.Is(err, changelog.ErrInFlight) {
					return nil, err
				}
				if !t.waitLogged {
					r.log.Info("task waits for the records of its previous run to land", "processor", t.id.Processor, "partition", t.id.Partition)
					t.waitLogged = true
				}
				r.restoreRetryAt = time.Now().Add(100 * time.Millisecond)
				continue
			}
		}
		opened = append(opened, t)
	}
	return opened, nil
}

// shutdown commits and closes every task, then the group consumer (which, a static member,
// does not leave the group: see Run). cause is the error that
// stops the runtime, nil for a requested stop.
func (r *Runtime) shutdown(cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r.tasks.mu.Lock()
	r.tasks.closing = true
	// A stop request lets the jobs finish, to commit them; a failure stops them.
	if err := r.jobs.waitAllJobs(cause != nil); err != nil && cause == nil {
		cause = err
	}
	cause = r.committer.stop(ctx, cause)
	r.closeTasks(slices.Collect(maps.Values(r.tasks.active)))
	r.sb.closeAll()
	r.tasks.mu.Unlock()
	// Close the consumer now that nothing is left to commit; the revocation callback finds no
	// task. Closing waits for the rebalance that the last poll blocks. A purge in the
	// background may use the consumer: it finishes first.
	r.kafka.purging.Lock()
	r.kafka.purging.Unlock() //nolint:staticcheck // a barrier: the loop, which starts purges, has ended
	r.kafka.consumer.AllowRebalance()
	r.kafka.consumer.Close()
	r.kafka.consumer = nil
	if cause != nil {
		r.log.Info("stopped after a failure") // the caller reports cause
		r.emit(Event{Kind: EventStopped, Error: cause.Error()})
		return cause
	}
	r.log.Info("stopped")
	r.emit(Event{Kind: EventStopped})
	return nil
}
