package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/host/engine"
)

// Jobs: the plugin calls of the tasks run on workers, apart from the loop.
//
// The loop hands each task's batch (or its due punctuations) to a job and goes on: it polls,
// hands records to the other tasks, and commits every commit_interval, whether or not a job
// has ended. A task that is slow or stuck (a record that loops until the batch time limit,
// then again alone) holds back only itself, and the tasks that read the same input partitions
// only in what can be committed of that partition (the committed offset cannot pass the
// stuck task's records), never their processing or their commits.
//
// A task with a job is busy: until the job ends, only the job's goroutine touches the task's
// plugin instance, stores, poison guard and batch. The loop (and whatever holds the table's lock) reads
// only what the table's lock guards (state, job, held, first, last, failed, abandoned), and leaves a busy
// task out of module switches, punctuations and queries of its memory stores; a commit waits
// for the jobs that started less than slowJob ago (settleJobs), and one left out commits as
// soon as its job ends (owed). Records that arrive for a busy task are held (its input
// partitions paused past maxHeld of them) and handed to its next job when this one ends
// (dispatchHeld). While jobs of normal length run, the loop does not poll (poll): franz-go
// fetches ahead meanwhile, for every task at once.
//
// At most Options.Workers jobs run at once; a job that has run for slowJob gives its place up
// to the next one (it keeps running): stuck tasks cannot take every worker.
//
// Committed offsets follow the slowest reader of each partition (offsetFor): a partition
// that several processors read is committed up to the first record one of them has not
// committed yet. Under exactly-once such tasks move together (dispatchable, settled).
//
// Closing a busy task (revocation, loss, an aborted transaction, a failure elsewhere) cancels
// its job and waits for it: the guest is stopped at its next loop check, and the task closes
// without a commit.

// dispatcher starts the tasks' jobs and takes their results in. Its methods are called with
// the task table's lock held, unless they say otherwise.
type dispatcher struct {
	rt    *Runtime
	work  context.Context // the context of every job: Run's, never canceled by a stop request
	slots chan struct{}   // a place per running job, Options.Workers at most
	queue jobQueue        // the jobs waiting for a place (jobqueue.go)
}

// job is a plugin call that a worker runs for a task: a batch with the punctuations it makes
// due, or the task's due punctuations alone (recs nil), or the migration of its stores
// (migrate, migrate.go).
type job struct {
	recs    []*kgo.Record
	migrate bool
	err     error // the call's failure; written by the job's goroutine before done closes
	cancel  context.CancelFunc
	done    chan struct{}
	started time.Time // when the loop started it
	closed  bool      // the task is closing: its result is dropped (guarded by the table's lock)
	// cl and handOvers: the task's changelog task and its HandOvers when the job started
	// (handedOver).
	cl        *changelog.Task
	handOvers uint64
}

// handedOver reports whether the running job has handed records of its own to the producer
// client (a write or emit that found no room flushes its task's queue), or is handing its
// records over as it ends: under exactly-once they are then in the open transaction.
func (j *job) handedOver() bool { return j.cl.HandOvers() != j.handOvers }

// slowJob is how long a job may run before it gives up its place among the workers: about a
// commit interval, between 100ms and 1s.
func (d *dispatcher) slowJob() time.Duration {
	return min(max(d.rt.cfg.CommitInterval, 100*time.Millisecond), time.Second)
}

// busy reports whether a job runs for t. The caller holds the table's lock.
func (t *task) busy() bool { return t.job != nil }

// startJob starts a job for t: the batch recs, or its due punctuations when recs is nil. The
// caller holds the table's lock; t is not busy.
func (d *dispatcher) startJob(t *task, recs []*kgo.Record) {
	ctx, cancel := context.WithCancel(d.work)
	j := &job{recs: recs, cancel: cancel, done: make(chan struct{}), started: time.Now(),
		cl: t.cl, handOvers: t.cl.HandOvers()}
	t.job = j
	t.noteFirst(recs)
	d.launch(&queuedJob{ctx: ctx, t: t, j: j})
}

// startMigration starts the job that migrates t's stores (t.mig). The caller holds the
// table's lock; t is not busy.
func (d *dispatcher) startMigration(t *task) {
	ctx, cancel := context.WithCancel(d.work)
	j := &job{migrate: true, cancel: cancel, done: make(chan struct{}), started: time.Now(),
		cl: t.cl, handOvers: t.cl.HandOvers()}
	t.job = j
	d.launch(&queuedJob{ctx: ctx, t: t, j: j})
}

// endJob hands t, whose job j ended (or never ran: err), to the loop (jobEnded).
func (d *dispatcher) endJob(t *task, j *job) {
	j.cancel()
	close(j.done)
	d.rt.signals.jobEnded(t)
}

// runJob runs j for t on a worker, in a place it holds, then gives the place to the next job
// waiting (release) and hands t to the loop (endJob).
func (d *dispatcher) runJob(ctx context.Context, t *task, j *job) {
	defer d.endJob(t, j)
	var once sync.Once
	free := func() { once.Do(d.release) }
	slow := time.AfterFunc(d.slowJob(), free)
	defer func() {
		slow.Stop()
		free()
	}()
	switch {
	case j.migrate:
		j.err = t.migrate(ctx)
	case j.recs != nil:
		j.err = t.process(ctx, j.recs)
	default:
		j.err = t.punctuate(ctx)
	}
}

// collectJobs takes in the ended jobs of the tasks (dispatchHeld starts their next ones). It
// returns the first failure of a job. The caller holds the table's lock.
func (d *dispatcher) collectJobs() error {
	var first error
	for _, t := range d.rt.signals.takeEnded() {
		if err := d.finishJob(t); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// dispatchHeld starts a job for each task that holds records and may start one
// (dispatchable). The tasks that read a partition with others are judged before any starts,
// so that under exactly-once they start together, on the same records. The caller holds the
// table's lock.
func (d *dispatcher) dispatchHeld() {
	if d.quiescing() {
		return
	}
	var start []*task
	for _, t := range d.rt.tasks.active {
		if len(t.held) > 0 && d.dispatchable(t) {
			start = append(start, t)
		}
	}
	for _, t := range start {
		d.startHeld(t)
	}
}

// dispatchable reports whether t may start a job (with the records it holds, or its due
// punctuations): it may run (canRun) and is neither busy nor owed a commit; and under
// exactly-once, so is every task linked to it (eachLinked). Each of those holds the same
// records of the partitions that link them, and dispatchHeld starts them all: the tasks
// that read one partition take its records together, so that they are at the same record
// whenever none is busy, which a commit of theirs needs (settled, committable): the partition
// has one committed offset for them all. The caller holds the table's lock.
func (d *dispatcher) dispatchable(t *task) bool {
	if !t.canRun() || t.busy() || t.owed {
		return false
	}
	if d.rt.eos == nil || !t.shared() {
		return true // nothing links it to another task
	}
	ok := true
	d.eachLinked(t, func(u *task) bool {
		ok = !u.busy() && !u.owed && u.canRun()
		return ok
	})
	return ok
}

// eachLinked calls fn on each task linked to t, t excluded, until fn returns false: the
// other tasks that read an input partition t holds records of, and in turn those linked to
// them. A task of processor P2 that reads the topics X and Z thus links P1's task, which
// reads X, to P3's, which reads Z: none of the three may start alone, or P3's would move on
// in Z while P2's waits for P1's, and P2's could never catch up with both. The caller holds
// the table's lock.
func (d *dispatcher) eachLinked(t *task, fn func(*task) bool) {
	seen := map[*task]bool{t: true}
	for queue := []*task{t}; len(queue) > 0; queue = queue[1:] {
		u := queue[0]
		if u != t && !fn(u) {
			return
		}
		for topic := range u.held {
			for _, v := range d.rt.tasks.reading(topicPartition{topic, u.id.Partition}) {
				if v != nil && !seen[v] {
					seen[v] = true
					queue = append(queue, v)
				}
			}
		}
	}
}

// canRun reports whether t may run a job of records or punctuations, busy or not: it runs, has
// a plugin, has not failed, and does not migrate (a migrating task runs the new module once
// its migration commits: migrate.go). The caller holds the table's lock.
func (t *task) canRun() bool {
	return t.state == stateRunning && !t.failed && t.pool != nil && t.mig == nil
}

// settled reports whether, under exactly-once, t may commit as far as the tasks that read its
// input partitions with it go: none of them is busy, and since their last commit all have
// processed the partition's records up to the same one, so that the partition's committed
// offset is that of each of them. Records they hold beyond it stay for their next jobs. The
// caller holds the table's lock.
func (d *dispatcher) settled(t *task) bool {
	for _, topic := range t.proc.cfg.Inputs {
		if !t.shares(topic) {
			continue
		}
		at := t.processed(topic)
		for _, u := range d.rt.tasks.reading(topicPartition{topic, t.id.Partition}) {
			if u != nil && u != t && (u.busy() || u.processed(topic) != at) {
				return false
			}
		}
	}
	return true
}

// committable keeps of ready, the tasks a commit may take (not busy; failed or settled), those
// whose every sibling on a partition they processed records of since their last commit is in
// ready too: such siblings commit in one transaction or not at all. A task that committed
// alone would commit its state and outputs of records that the partition's committed offset
// does not pass (its sibling's first uncommitted record bounds it), and process them again
// after an abort or a crash; a sibling's own sibling on another partition can hold it back
// in turn. Tasks for which taken is true are already in the commit, as good as ready. The
// caller holds the table's lock.
func (d *dispatcher) committable(ready []*task, taken func(*task) bool) []*task {
	in := make(map[*task]bool, len(ready))
	for _, t := range ready {
		in[t] = true
	}
	for _, t := range d.rt.tasks.active {
		if taken(t) {
			in[t] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, t := range ready {
			if in[t] && !t.failed && !d.siblingsIn(t, in) {
				in[t], changed = false, true
			}
		}
	}
	return slices.DeleteFunc(ready, func(t *task) bool { return !in[t] })
}

// siblingsIn reports whether every other task that reads a shared partition t processed
// records of since its last commit is in in. The caller holds the table's lock.
func (d *dispatcher) siblingsIn(t *task, in map[*task]bool) bool {
	for _, topic := range t.proc.cfg.Inputs {
		if !t.shares(topic) || t.processed(topic) < 0 {
			continue
		}
		for _, u := range d.rt.tasks.reading(topicPartition{topic, t.id.Partition}) {
			if u != nil && u != t && !in[u] {
				return false
			}
		}
	}
	return true
}

// processed is the offset of the last record of t's input topic (of t's partition) that t
// processed since its last commit, -1 when none: the records after it are those t holds
// (dispatch hands each task every record of its partitions). The caller holds the table's
// lock.
func (t *task) processed(topic string) int64 {
	if l := t.last[topic]; l != nil {
		return l.Offset
	}
	return -1
}

// settleJobs, before a commit, takes in the jobs that have ended and waits for those that
// started less than slowJob ago (a batch of normal length): the commit then leaves out only
// the tasks that are really slow. It returns the first failure of a job. The caller holds
// the table's lock.
func (d *dispatcher) settleJobs() error {
	return d.settle(nil)
}

// settle is settleJobs over the tasks for which only returns true (all when only is nil).
func (d *dispatcher) settle(only func(*task) bool) error {
	limit := d.slowJob()
	for _, t := range d.rt.tasks.active {
		j := t.job
		if j == nil || only != nil && !only(t) {
			continue
		}
		if left := limit - time.Since(j.started); left > 0 {
			timer := time.NewTimer(left)
			select {
			case <-j.done:
			case <-timer.C:
			}
			timer.Stop()
		}
		if err := d.finishJob(t); err != nil {
			return err
		}
	}
	return nil
}

// youngJobsUntil reports whether jobs run that started less than slowJob ago, and how long
// until the youngest of them has run that long. The caller holds no lock.
func (d *dispatcher) youngJobsUntil() (time.Duration, bool) {
	d.rt.tasks.mu.Lock()
	defer d.rt.tasks.mu.Unlock()
	limit := d.slowJob()
	var until time.Duration
	found := false
	for _, t := range d.rt.tasks.active {
		if t.job == nil {
			continue
		}
		if left := limit - time.Since(t.job.started); left > 0 && (!found || left > until) {
			until, found = left, true
		}
	}
	return until, found
}

// owedEnded reports whether a task left out of the last commit (it was busy) has ended its
// job: it commits before it starts the next. The caller holds no lock.
func (d *dispatcher) owedEnded() bool {
	d.rt.tasks.mu.Lock()
	defer d.rt.tasks.mu.Unlock()
	for _, t := range d.rt.tasks.active {
		if !t.owed {
			continue
		}
		if t.job == nil {
			return true
		}
		select {
		case <-t.job.done:
			return true
		default:
		}
	}
	return false
}

// finishJob takes in the result of t's ended job, once (it does nothing when t has no ended
// job). A failed job fails the task and returns its error, unless the task was closing. The
// caller holds the table's lock.
func (d *dispatcher) finishJob(t *task) error {
	j := t.job
	if j == nil {
		return nil
	}
	select {
	case <-j.done:
	default:
		return nil // a job started since the one that ended
	}
	t.job = nil
	if j.closed {
		return nil
	}
	if j.err != nil {
		t.failed = true
		return j.err
	}
	if t.last == nil && len(j.recs) > 0 {
		t.last = make(map[string]*kgo.Record)
	}
	for _, kr := range j.recs {
		if prev := t.last[kr.Topic]; prev == nil || kr.Offset > prev.Offset {
			t.last[kr.Topic] = kr
		}
	}
	return nil
}

// startHeld starts the next job of t with the records held for it, and resumes its input
// partitions. The caller holds the table's lock.
func (d *dispatcher) startHeld(t *task) {
	lists := make([][]*kgo.Record, 0, len(t.held))
	for _, in := range t.proc.cfg.Inputs { // in the order of the inputs: deterministic
		if l := t.held[in]; len(l) > 0 {
			lists = append(lists, l)
		}
	}
	t.held = nil
	d.startJob(t, mergeByTimestamp(lists))
	d.resumeHeld(t)
}

// maxHeld is how many records of an input partition a task may hold before the partition is
// paused: enough for the next batch to be ready when the job ends (a poll brings at most
// fetchMaxPartitionBytes of a partition), few enough to bound what a stuck task holds.
const maxHeld = 10000

// hold keeps recs (records of the input partition topic of t) for t's next job, while a job
// runs (or the task waits for its commit), and pauses that partition when it holds maxHeld
// records, until they are handed on. The caller holds the table's lock.
func (d *dispatcher) hold(t *task, topic string, recs []*kgo.Record) {
	if t.held == nil {
		t.held = make(map[string][]*kgo.Record)
	}
	t.held[topic] = append(t.held[topic], recs...)
	tp := topicPartition{topic, t.id.Partition}
	if len(t.held[topic]) >= maxHeld && !d.rt.tasks.heldPaused[tp] {
		d.rt.tasks.heldPaused[tp] = true
		d.rt.kafka.consumer.PauseFetchPartitions(map[string][]int32{topic: {tp.part}})
	}
}

// resumeHeld resumes the input partitions of t paused by hold that no task holds records of
// any more, unless they are paused for a restore. The caller holds the table's lock.
func (d *dispatcher) resumeHeld(t *task) {
	resume := make(map[string][]int32)
	for _, in := range t.proc.cfg.Inputs {
		tp := topicPartition{in, t.id.Partition}
		if !d.rt.tasks.heldPaused[tp] || d.rt.tasks.holdsAny(tp) {
			continue
		}
		delete(d.rt.tasks.heldPaused, tp)
		if !d.rt.tasks.paused[tp] && d.rt.tasks.assigned[tp] {
			resume[in] = append(resume[in], tp.part)
		}
	}
	if len(resume) > 0 {
		d.rt.kafka.consumer.ResumeFetchPartitions(resume)
	}
}

// quiescing reports whether the loop starts no job now: under exactly-once while a rebalance
// waits for the open work to commit.
func (d *dispatcher) quiescing() bool { return d.rt.rebalanceWaits() }

// waitJobs waits for the jobs of tasks to end and takes their results in, canceling them
// first when cancel is set; it returns the first failure of those not canceled. The caller
// holds the table's lock (the jobs never take it).
func (d *dispatcher) waitJobs(tasks []*task, cancel bool) error {
	var first error
	for _, t := range tasks {
		j := t.job
		if j == nil {
			continue
		}
		if cancel {
			j.cancel()
		}
		<-j.done
		if err := d.finishJob(t); err != nil && first == nil && !isCanceled(err) {
			first = err
		}
	}
	return first
}

// waitAllJobs is waitJobs over every busy task.
func (d *dispatcher) waitAllJobs(cancel bool) error {
	var busy []*task
	for _, t := range d.rt.tasks.active {
		if t.busy() {
			busy = append(busy, t)
		}
	}
	return d.waitJobs(busy, cancel)
}

// stopJob cancels the job of t, which is closing, waits for it and drops its result. The
// caller holds the table's lock.
func (d *dispatcher) stopJob(t *task) {
	j := t.job
	if j == nil {
		return
	}
	j.closed = true
	j.cancel()
	<-j.done
	t.job = nil
	t.abandoned = true
}

// isCanceled reports whether err is a job's stop by cancellation.
func isCanceled(err error) bool {
	return errors.Is(err, engine.ErrCanceled) || errors.Is(err, context.Canceled)
}

// committed forgets what t has committed: everything its jobs processed. The caller holds
// the table's lock.
func (t *task) committed() {
	t.first, t.last = nil, nil
}

// committedEnded forgets what the ended jobs of t, which is busy, processed: a commit took
// them (commitTxnLocked); the first records of t are now those of its running job. The caller
// holds the table's lock.
func (t *task) committedEnded() {
	t.last, t.first = nil, nil
	t.noteFirst(t.job.recs)
}

// noteFirst records, for each input of recs that t has no uncommitted record of yet, the
// first of them (each input's records are in offset order). The caller holds the table's lock.
func (t *task) noteFirst(recs []*kgo.Record) {
	for _, kr := range recs {
		if t.first == nil {
			t.first = make(map[string]*kgo.Record)
		}
		if t.first[kr.Topic] == nil {
			t.first[kr.Topic] = kr
		}
	}
}

// commitOffsets returns the offsets to commit for the input partitions that the tasks in
// committing processed records of, once they have committed (offsetFor). The caller holds the table's lock.
func (tt *taskTable) commitOffsets(committing []*task) map[string]map[int32]kgo.EpochOffset {
	in := make(map[*task]bool, len(committing))
	parts := make(map[topicPartition]bool)
	for _, t := range committing {
		in[t] = true
		for topic := range t.last {
			parts[topicPartition{topic, t.id.Partition}] = true
		}
	}
	out := make(map[string]map[int32]kgo.EpochOffset)
	for tp := range parts {
		if o, ok := tt.offsetFor(tp, in); ok {
			if out[tp.topic] == nil {
				out[tp.topic] = make(map[int32]kgo.EpochOffset)
			}
			out[tp.topic][tp.part] = o
		}
	}
	return out
}

// offsetFor is the offset to commit for the input partition tp when the tasks in committing
// commit: the least of, over the tasks that read tp, the record after the last one a
// committing task processed, the first record a task is processing or processed without
// committing it (a busy task, a failed one, one that commits later), and the first record held
// for a task. Every task that reads tp is handed the same records, in the same order. It
// reports false when no task constrains tp. The caller holds the table's lock.
func (tt *taskTable) offsetFor(tp topicPartition, committing map[*task]bool) (kgo.EpochOffset, bool) {
	var (
		best  kgo.EpochOffset
		found bool
	)
	take := func(epoch int32, offset int64) {
		if !found || offset < best.Offset {
			best, found = kgo.EpochOffset{Epoch: epoch, Offset: offset}, true
		}
	}
	for _, t := range tt.reading(tp) {
		if t == nil {
			continue
		}
		if held := t.held[tp.topic]; len(held) > 0 {
			take(held[0].LeaderEpoch, held[0].Offset)
		}
		switch f, l := t.first[tp.topic], t.last[tp.topic]; {
		case committing[t] && !t.failed:
			if l != nil {
				take(l.LeaderEpoch, l.Offset+1)
			}
		case f != nil:
			take(f.LeaderEpoch, f.Offset)
		}
	}
	return best, found
}

// describeOffsets names partitions and offsets, for logs.
func describeOffsets(offsets map[string]map[int32]kgo.EpochOffset) string {
	s := ""
	for topic, parts := range offsets {
		for p, o := range parts {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s/%d@%d", topic, p, o.Offset)
		}
	}
	return s
}
