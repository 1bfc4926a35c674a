package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/changelog"
)

// Exactly-once processing (processing_guarantee = "exactly_once").
//
// The group consumer is also the transactional producer (a kgo.GroupTransactSession): every
// changelog record, output record and input offset of a commit goes in one Kafka transaction,
// and the tasks' stores and checkpoints are applied only once it has committed. The instance
// is always in a transaction: one begins as the previous one ends.
//
// Rebalances: the group's revocation and loss callbacks never wait for the loop (they post
// events, applied at the loop's safe points), because the session's End may itself wait for
// them. The loop lets a rebalance run (BlockRebalanceOnPoll) just before every End, and
// otherwise only when no task has worked since the last commit; it commits at once when the
// group signals that a rebalance waits. A revocation or a loss makes the session abort the
// transaction open at that moment (franz-go's rule): usually the one being committed, else
// the loop aborts it after its poll, before it processes anything more.
//
// An aborted transaction discards the work of every task that took part in it: those tasks are
// closed without a commit and revived (opened again, restored from their changelogs, which
// now end with the abort marker, and started), and the session rewinds the consumer to the
// committed offsets.
//
// Fencing: the transactional id is <application_id>-<process id>, the process id being kept
// in the state directory, so a restarted instance fences its previous incarnation and aborts
// its open transaction at once. An instance that lost its partitions (a paused zombie) cannot
// commit for them: its offset commit carries a stale group generation and the session aborts;
// a transaction without offsets is checked with a heartbeat first (checkMembership). A
// producer that the broker fenced (its transaction timed out) is replaced (resetLocked).
// A task restored from a changelog on which a previous owner's transaction is still open waits
// for that transaction to end (restore.Settings.ReadCommitted).

// processIDFile is the file of the state directory that holds the instance's process id.
const processIDFile = "process-id"

// maxAbortsInARow is how many transactions in a row may abort on an error before the runtime
// gives up. Aborts caused by rebalances do not count.
const maxAbortsInARow = 5

// transactionTimeout is the transaction timeout for a commit interval: how long the broker
// lets a transaction stay open before it aborts it, which bounds how long a new owner waits
// for the open transaction of a dead or paused previous owner. Kafka Streams uses 10 s under
// exactly-once.
func transactionTimeout(commitInterval time.Duration) time.Duration {
	return max(10*time.Second, 3*commitInterval)
}

// txnState is the runtime's exactly-once state; nil under at-least-once.
type txnState struct {
	sess *kgo.GroupTransactSession
	id   string // transactional id

	rebalanced atomic.Bool    // a revocation or loss since the last End: the session aborts the next End
	blocked    atomic.Bool    // a rebalance waits for the loop to allow it
	begun      time.Time      // when the open transaction began (guarded by the table's lock)
	handed     int64          // the producer's HandedOver when it began (guarded by the table's lock)
	aborts     int            // transactions aborted on an error in a row (guarded by the table's lock)
	stuck      map[taskID]int // transactions aborted in a row for a task's job (waitInTxn), until it commits (guarded by the table's lock)
}

// exactlyOnce is the committer under exactly-once: every commit is a transaction of the
// current session (txn).
type exactlyOnce struct {
	rt    *Runtime
	txn   *txnState   // the current session: a reset replaces it
	retry brokerRetry // resets on an unreachable broker since the last commit
}

// processID returns the process id kept in the state directory dir, creating it on the first
// start. The state directory's lock makes it unique among the running instances.
func processID(dir string) (string, error) {
	path := filepath.Join(dir, processIDFile)
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("runtime: read the process id: %w", err)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	// Synced before it is used: a new id after a power loss would leave the previous
	// incarnation's open transaction to its timeout instead of fencing it at once.
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(id + "\n")
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = errors.Join(d.Sync(), d.Close())
		}
	}
	if err != nil {
		return "", fmt.Errorf("runtime: write the process id %s: %w", path, err)
	}
	return id, nil
}

// newTransactSession creates the group consumer as a transactional session, with the
// producer options of the changelog producer, and begins the first transaction. Initializing
// the producer id fences the previous incarnation of this instance and aborts its open
// transaction. The session joins the group only at joinGroup.
func (e *exactlyOnce) newTransactSession(ctx context.Context, opts []kgo.Opt) error {
	pid, err := processID(StateDir(e.rt.cfg))
	if err != nil {
		return err
	}
	id := e.rt.cfg.ApplicationID + "-" + pid
	// The callbacks of this session's client use st, not e.txn: a reset replaces e.txn while
	// the old client may still signal.
	st := &txnState{id: id, stuck: map[taskID]int{}}
	opts = append(opts, // the producer's options are in opts already (newConsumer)
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(transactionTimeout(e.rt.cfg.CommitInterval)),
		e.rt.metrics.producerHook(),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { e.onRebalanceBlocked(st) }),
		// These override the at-least-once callbacks of opts (the last option wins).
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			e.rt.onRevokedOrLostEOS(st, "revoked", m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			e.rt.onRevokedOrLostEOS(st, "lost", m)
		}),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("runtime: create the transactional group consumer: %w", err)
	}
	st.sess = sess
	e.txn = st
	e.rt.kafka.consumer = sess.Client()
	if e.rt.kafka.producer, err = changelog.NewProducer(e.rt.kafka.consumer); err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if _, _, err := e.rt.kafka.consumer.ProducerID(ictx); err != nil {
		e.rt.kafka.consumer.Close() // it joined nothing yet: it consumes no topic
		return fmt.Errorf("runtime: initialize the transactional producer %s: %w", id, err)
	}
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("runtime: begin a transaction: %w", err)
	}
	st.begun = time.Now()
	e.rt.log.Info("exactly-once: transactional producer ready", "transactional_id", id)
	e.rt.emit(Event{Kind: EventProducerReady, TransactionalID: id})
	return nil
}

// onRebalanceBlocked is called when a rebalance waits for the loop (BlockRebalanceOnPoll): the
// loop commits at once, so that the rebalance meets no open work, and a restore in progress
// stops (it resumes from its checkpoints).
func (e *exactlyOnce) onRebalanceBlocked(st *txnState) {
	st.blocked.Store(true)
	e.rt.signals.rebalanceBlocked()
}

// openWork reports whether a task worked since the last transaction ended. The caller holds
// no lock.
func (e *exactlyOnce) openWork() bool {
	e.rt.tasks.mu.Lock()
	defer e.rt.tasks.mu.Unlock()
	for _, t := range e.rt.tasks.active {
		if t.uncommitted() {
			return true
		}
	}
	return false
}

// commitTxnLocked commits the open transaction: every task that worked in it has its records
// acknowledged (changelog.Task.Prepare), the session commits the input offsets and the
// transaction, then the tasks apply their stores and checkpoints. An aborted transaction
// revives its tasks. The caller holds the table's lock.
//
// A busy task does not hold the commit back (decision note 20261201_task_jobs.md): what its
// running job writes and emits is still queued in it, so the transaction holds only the
// records of its jobs that ended, handed over at their ends (task.flush). The commit
// includes those, with the input offsets up to its last ended job, and leaves its Prepare and
// Apply to a later commit (its store then applies with that commit's checkpoints; a crash
// before replays the committed changelog tail). A task with a coalescing store hands nothing
// over before its Prepare (its cache holds writes the changelog lacks), so when busy it is
// left out whole; so is a task that shares an input partition with another processor's task
// while they are not at the same record (settled). Only a running job that handed records
// over itself (a write or emit that found no room flushes the queue:
// changelog.Task.HandOvers) puts unfinished work in the transaction: the commit then waits
// for that job (waitInTxn). Hand-overs are held while the
// transaction ends, so that none slips in after these checks.
func (e *exactlyOnce) commitTxnLocked(ctx context.Context, why commitReason) error {
	touched, due := e.txnWork(why)
	if !due {
		return nil
	}
	start := time.Now()
	defer e.rt.metrics.committed(start)
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	rd, err := e.prepare(ctx, why, touched)
	if rd == nil {
		return err // nil (nothing to commit yet), or the transaction aborted
	}
	// The hold lasts until the next transaction begins; a path that stops jobs lets go first
	// (a job may wait for the hold to hand its records over).
	defer rd.unhold()
	if err := e.checkMembership(ctx); err != nil {
		// Fenced: the group will tell the consumer, which rejoins; not an error to count.
		// Anything else (a coordinator out of reach) counts.
		rd.unhold()
		return e.abortLocked(why, err, !isFenced(err))
	}
	committing := append(slices.Clip(rd.commit), rd.partial...)
	offsets := e.rt.tasks.commitOffsets(committing)
	committed, rebalanced, err := e.endTxnLocked(kgo.TryCommit, e.offsetsFn(committing))
	if err != nil || !committed {
		rd.unhold()
	}
	if err != nil {
		return e.resetLocked(why, fmt.Errorf("end the transaction: %w", err))
	}
	if !committed {
		// The session aborted: partitions were revoked or lost since the transaction began,
		// or the group or the transaction coordinator refused the commit with an abortable
		// error (franz-go does not say which).
		if rebalanced || e.rt.signals.revocationPending() {
			return e.abortedLocked(why, nil, false)
		}
		return e.abortedLocked(why, errors.New("the commit was refused with an abortable error (the group generation changed, or the coordinator was busy)"), true)
	}
	if err := e.apply(rd); err != nil {
		rd.unhold()
		return err
	}
	e.rt.purge(offsets)
	e.rt.log.Debug("committed", "reason", why.String(), "tasks", len(rd.commit), "busy_tasks", len(rd.partial), "partitions", len(offsets), "duration", time.Since(start))
	if err := e.txn.sess.Begin(); err != nil {
		rd.unhold() // the reset stops the jobs, which may wait for the hold
		return e.resetLocked(why, fmt.Errorf("begin a transaction: %w", err))
	}
	e.txn.begun = time.Now()
	e.txn.handed = e.rt.kafka.producer.HandedOver()
	return nil
}

// txnWork returns the tasks that worked in the open transaction, and whether a commit for why
// takes them now. A periodic commit (why.deferrable) leaves work without input (plugins' init
// writes, punctuations of idle tasks) to the next commit with offsets, unless the transaction
// nears its timeout: a commit without offsets holds the session for 500ms (franz-go waits for
// the markers when the offset commit does not show KIP-447). A commit before a restore, which
// may outlast the transaction, takes it.
func (e *exactlyOnce) txnWork(why commitReason) ([]*task, bool) {
	var touched []*task
	for _, t := range e.rt.tasks.active {
		if t.uncommitted() {
			touched = append(touched, t)
		}
	}
	if len(touched) == 0 {
		return nil, false
	}
	if why.deferrable() {
		// A task's migration waits for its commit to run the new module: it commits now.
		consumed := slices.ContainsFunc(touched, func(t *task) bool { return len(t.last) > 0 || t.mig != nil && t.mig.ran })
		if !consumed && time.Since(e.txn.begun) < transactionTimeout(e.rt.cfg.CommitInterval)/2 {
			return nil, false
		}
	}
	return touched, true
}

// txnRound is what one commit of the open transaction takes: the tasks it prepared, which
// apply their stores once it commits (commit); the busy tasks whose ended jobs it commits,
// whose stores apply with a later commit (partial); and the hold on hand-overs (release).
type txnRound struct {
	prepared map[*task]changelog.Prepared
	commit   []*task
	partial  []*task
	release  func()
}

// unhold lets hand-overs go on, once.
func (rd *txnRound) unhold() {
	if rd.release != nil {
		rd.release()
		rd.release = nil
	}
}

// prepare prepares the touched tasks that may commit (changelog.Task.Prepare: their records
// handed over and acknowledged), waits for the busy ones whose running job handed records of
// its own over (waitInTxn), and holds the hand-overs once every task is settled. It returns
// the round; or nil and nil when only busy tasks worked (nothing of theirs is in the
// transaction yet), or nil and the result of aborting the transaction.
//
// Tasks that are not busy are prepared first: their records may take places in the producer
// that a busy task waiting for room needs.
func (e *exactlyOnce) prepare(ctx context.Context, why commitReason, touched []*task) (*txnRound, error) {
	rd := &txnRound{prepared: make(map[*task]changelog.Prepared, len(touched))}
	for rd.release == nil {
		var ready, inTxn []*task
		for _, t := range touched {
			switch _, done := rd.prepared[t]; {
			case done:
			case !t.busy() && (t.failed || e.rt.jobs.settled(t)):
				ready = append(ready, t)
			case t.busy() && t.job.handedOver():
				inTxn = append(inTxn, t)
			}
		}
		ready = e.rt.jobs.committable(ready, func(t *task) bool { _, done := rd.prepared[t]; return done })
		if err := e.prepareTasks(ctx, rd, ready); err != nil {
			return nil, e.abortLocked(why, err, true)
		}
		rd.commit = append(rd.commit, ready...)
		if len(inTxn) > 0 {
			if err := e.waitInTxn(inTxn); err != nil {
				return nil, e.stuckInTxn(why, err)
			}
			continue
		}
		rd.release = e.rt.kafka.producer.HoldHandOvers()
		rd.partial = rd.partial[:0]
		for _, t := range touched {
			if _, done := rd.prepared[t]; done {
				continue
			}
			if t.busy() && t.job.handedOver() {
				rd.unhold() // its job handed records over before the hold: wait for it
				break
			}
			if t.busy() && !t.queuedUntilCommit() && t.last != nil {
				rd.partial = append(rd.partial, t)
			}
		}
	}
	if len(rd.commit)+len(rd.partial) == 0 {
		rd.unhold()
		return nil, nil
	}
	return rd, nil
}

// prepareTasks prepares tasks in parallel, into rd.prepared. A task that failed in the
// transaction fails the commit.
func (e *exactlyOnce) prepareTasks(ctx context.Context, rd *txnRound, tasks []*task) error {
	var mu sync.Mutex
	return e.rt.jobs.forEachTask(tasks, func(t *task) error {
		if t.failed || t.cl == nil {
			if t.cl != nil && t.cl.Err() != nil {
				return fmt.Errorf("runtime: task %s failed in this transaction: %w", t.id, t.cl.Err())
			}
			return fmt.Errorf("runtime: task %s failed in this transaction", t.id)
		}
		p, err := t.cl.Prepare(ctx)
		if err != nil {
			return fmt.Errorf("runtime: commit task %s: %w", t.id, err)
		}
		mu.Lock()
		rd.prepared[t] = p
		mu.Unlock()
		return nil
	})
}

// stuckInTxn handles the failure of waitInTxn: a plugin that failed stops the runtime (its
// transaction aborts at the shutdown); a task stuck in the transaction aborts it, and gives up
// after maxAbortsInARow of them for the same task: its revival meets the same record again,
// and other commits do not end the run of aborts it causes.
func (e *exactlyOnce) stuckInTxn(why commitReason, err error) error {
	var stuck *stuckInTxnError
	if !errors.As(err, &stuck) {
		return err
	}
	if e.txn.stuck[stuck.task]++; e.txn.stuck[stuck.task] >= maxAbortsInARow {
		return fmt.Errorf("runtime: %d transactions in a row aborted for task %s (%s): %w", e.txn.stuck[stuck.task], stuck.task, why, err)
	}
	return e.abortLocked(why, err, true)
}

// apply applies the stores and checkpoints of the round's prepared tasks, after the
// transaction committed: the changelogs hold every record of it, so a failure to apply a store
// leaves it behind its changelog, which its next restore replays. The round's tasks forget
// what they committed.
func (e *exactlyOnce) apply(rd *txnRound) error {
	e.txn.aborts = 0
	e.retry = brokerRetry{}
	err := e.rt.jobs.forEachTask(rd.commit, func(t *task) error {
		if err := t.cl.Apply(rd.prepared[t]); err != nil {
			return fmt.Errorf("runtime: apply the commit of task %s: %w", t.id, err)
		}
		return nil
	})
	for _, t := range rd.commit {
		t.committed()
		delete(e.txn.stuck, t.id)
	}
	for _, t := range rd.partial {
		t.committedEnded() // still busy: its Prepare and Apply come with a later commit
	}
	return err
}

// awaitPreviousTxn waits, for up to txnCompleteWait, until the transaction coordinator has
// completed the previous transaction (written its markers), before a transaction that
// produced nothing commits its offsets. Under Kafka's transactions v2 (KIP-890, the default
// from Kafka 4.0) a TxnOffsetCommit that comes first in a transaction, while the previous one
// still completes, is refused with CONCURRENT_TRANSACTIONS, which franz-go takes as abortable:
// the transaction would abort and its tasks revive, for nothing. A produce first waits out
// the same state on its own (franz-go retries it), so only offsets-only transactions wait
// here. A broker that cannot describe the transaction (kfake, an ACL) is not waited for.
func (e *exactlyOnce) awaitPreviousTxn(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, txnCompleteWait)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		described, err := e.rt.kafka.adm.DescribeTransactions(ctx, e.txn.id)
		if err != nil {
			e.rt.log.Debug("cannot describe the transaction; committing without waiting for the previous one", "error", err)
			return
		}
		d, ok := described[e.txn.id]
		if !ok || d.Err != nil || !strings.HasPrefix(d.State, "Prepare") {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// txnCompleteWait bounds awaitPreviousTxn: markers take milliseconds on a healthy cluster.
const txnCompleteWait = 5 * time.Second

// waitInTxn waits for the jobs of busy tasks that handed records of their own to the open
// transaction, and takes their results in. The broker aborts a transaction that stays open
// past its timeout: a job that has not ended two thirds of the timeout after the transaction
// began makes waitInTxn return a *stuckInTxnError (its job goes on; the caller aborts the
// transaction, which stops it). The caller holds the table's lock.
func (e *exactlyOnce) waitInTxn(tasks []*task) error {
	limit := transactionTimeout(e.rt.cfg.CommitInterval) * 2 / 3
	for _, t := range tasks {
		timer := time.NewTimer(time.Until(e.txn.begun.Add(limit)))
		select {
		case <-t.job.done:
			timer.Stop()
		case <-timer.C:
			return &stuckInTxnError{task: t.id, since: e.txn.begun, limit: limit}
		}
		if err := e.rt.jobs.finishJob(t); err != nil {
			return err
		}
	}
	return nil
}

// stuckInTxnError: a task's running plugin call handed records to the open transaction, then
// ran on until the transaction neared the broker's timeout.
type stuckInTxnError struct {
	task  taskID
	since time.Time
	limit time.Duration
}

func (e *stuckInTxnError) Error() string {
	return fmt.Sprintf("task %s handed records of its running plugin call to the transaction (its producer had no room), and the call has not ended %v after the transaction began (%v ago): the transaction is aborted before the broker's timeout",
		e.task, e.limit, time.Since(e.since).Round(time.Millisecond))
}

// offsetsFn returns the function that sets the offsets of the transaction's offset commit
// (kgo.PreTxnCommitFnContext) when the tasks in commit commit: franz-go commits every polled
// record, but records of busy tasks and held records are not committed yet (offsetFor). A
// partition of the request without anything handed keeps its committed offset. It runs while
// the caller holds the table's lock.
func (e *exactlyOnce) offsetsFn(commit []*task) func(*kmsg.TxnOffsetCommitRequest) error {
	in := make(map[*task]bool, len(commit))
	for _, t := range commit {
		in[t] = true
	}
	committed := e.rt.kafka.consumer.CommittedOffsets()
	return func(req *kmsg.TxnOffsetCommitRequest) error {
		topics := req.Topics[:0]
		for _, rt := range req.Topics {
			parts := rt.Partitions[:0]
			for _, p := range rt.Partitions {
				o, ok := e.rt.tasks.offsetFor(topicPartition{rt.Topic, p.Partition}, in)
				if !ok {
					o, ok = committed[rt.Topic][p.Partition]
				}
				if !ok {
					continue // nothing to commit
				}
				p.Offset, p.LeaderEpoch = o.Offset, o.Epoch
				parts = append(parts, p)
			}
			if rt.Partitions = parts; len(parts) > 0 {
				topics = append(topics, rt)
			}
		}
		req.Topics = topics
		return nil
	}
}

// endTimeout bounds the end of a transaction. The offset commit in it waits for a join or a
// sync of the group in progress, which lasts up to the rebalance timeout.
const endTimeout = rebalanceTimeout + 10*time.Second

// txnContext returns a context for ending or replacing a transaction: its own deadline, never
// cancelled by a stop request (a transaction is ended, not abandoned).
func txnContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), endTimeout)
}

// checkMembership makes sure, before a transaction without input offsets commits, that this
// instance is still a member of the group's current generation. End checks the generation
// only through the offsets it commits (TxnOffsetCommit): a transaction without any (a plugin's
// statehost_init wrote; nothing was consumed) would otherwise commit even from a zombie that
// lost its tasks. A heartbeat with the current generation does the check.
func (e *exactlyOnce) checkMembership(ctx context.Context) error {
	if len(e.rt.kafka.consumer.UncommittedOffsets()) > 0 {
		return nil
	}
	member, generation := e.rt.kafka.consumer.GroupMetadata()
	if member == "" || generation < 0 {
		return errNotMember
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = e.rt.cfg.ApplicationID
	req.MemberID = member
	req.Generation = generation
	resp, err := req.RequestWith(ctx, e.rt.kafka.consumer)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	// A rebalance in progress does not move partitions away before this member revokes
	// them (cooperative rebalancing): it may still commit.
	if err != nil && !errors.Is(err, kerr.RebalanceInProgress) {
		return fmt.Errorf("group membership check (generation %d): %w", generation, err)
	}
	return nil
}

// isFenced reports whether err says that this instance is no longer a member of the group's
// current generation.
func isFenced(err error) bool {
	return errors.Is(err, errNotMember) || errors.Is(err, kerr.UnknownMemberID) ||
		errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.FencedInstanceID)
}

var errNotMember = errors.New("this instance is not a member of the group")

// endTxnLocked ends the open transaction. It first lets a waiting rebalance run: the session
// may wait for the group (a forced heartbeat, or the loss of the partitions when this
// instance was fenced), and the group's callbacks wait for AllowRebalance; under exactly-once
// they never wait for the loop. The caller holds the table's lock.
//
// It also returns whether partitions were revoked or lost since the last End (and clears that
// flag): what made the session abort, when it did. A revocation reported after End returns
// sets the flag again; its event waits in the inbox either way.
func (e *exactlyOnce) endTxnLocked(try kgo.TransactionEndTry, offsets func(*kmsg.TxnOffsetCommitRequest) error) (committed, rebalanced bool, err error) {
	e.txn.blocked.Store(false)
	e.rt.kafka.consumer.AllowRebalance()
	ctx, cancel := txnContext()
	defer cancel()
	if offsets != nil {
		ctx = kgo.PreTxnCommitFnContext(ctx, offsets)
		if try == kgo.TryCommit && e.rt.kafka.producer.HandedOver() == e.txn.handed {
			e.awaitPreviousTxn(ctx)
		}
	}
	committed, err = e.txn.sess.End(ctx, try)
	rebalanced = e.txn.rebalanced.Swap(false)
	return committed, rebalanced, err
}

// beginLocked begins the next transaction; when the producer cannot (it was fenced), the
// session is replaced. The caller holds the table's lock.
func (e *exactlyOnce) beginLocked(why commitReason) error {
	if err := e.txn.sess.Begin(); err != nil {
		return e.resetLocked(why, fmt.Errorf("begin a transaction: %w", err))
	}
	e.txn.begun = time.Now()
	return nil
}

// abortLocked aborts the open transaction because of cause, and revives its tasks. The caller
// holds the table's lock.
func (e *exactlyOnce) abortLocked(why commitReason, cause error, count bool) error {
	e.stopJobs()
	if _, _, err := e.endTxnLocked(kgo.TryAbort, nil); err != nil {
		return e.resetLocked(why, fmt.Errorf("abort the transaction (after: %w): %w", cause, err))
	}
	return e.abortedLocked(why, cause, count)
}

// abortedLocked revives the tasks of a transaction that was aborted (the session rewound the
// consumer to the committed offsets) and begins the next one. cause is nil when a rebalance
// aborted it; count says whether cause is an error that must not repeat maxAbortsInARow times
// (a fenced member is not: it rejoins). The caller holds the table's lock.
func (e *exactlyOnce) abortedLocked(why commitReason, cause error, count bool) error {
	if cause == nil {
		e.rt.metrics.txnAborts.WithLabelValues("rebalance").Inc()
	} else {
		e.rt.metrics.txnAborts.WithLabelValues("error").Inc()
	}
	switch {
	case cause == nil:
		e.rt.log.Warn("transaction aborted", "reason", why.String(), "cause", "partitions revoked or lost since it began (a rebalance, or this instance was fenced)")
	case count:
		e.txn.aborts++
		e.rt.log.Warn("transaction aborted", "reason", why.String(), "error", cause, "in_a_row", e.txn.aborts)
	default:
		e.rt.log.Warn("transaction aborted", "reason", why.String(), "error", cause)
	}
	e.rt.emit(Event{Kind: EventTransactionAborted, Reason: why.String(), Error: errorText(cause)})
	e.rt.drainInbox() // the revoked and lost tasks close; the others revive
	if e.rt.tasks.closing {
		return nil // the shutdown closes every task
	}
	e.reviveLocked()
	e.forgetHanded()
	if count && e.txn.aborts >= maxAbortsInARow {
		return fmt.Errorf("runtime: %d transactions in a row aborted, the last one (%s): %w", e.txn.aborts, why, cause)
	}
	return e.beginLocked(why)
}

// resetLocked replaces the transactional session after an error that leaves its producer
// unusable (fenced: its transaction timed out, or the group dropped this instance while it
// committed): every task closes without a commit, the consumer closes, and a new session
// joins the group again with the same transactional id, which fences the old producer, and
// the same group instance id, which takes the old member's place. The
// tasks come back through the new assignment and restore the tails of their changelogs, as
// Kafka Streams does after a TaskMigratedException. The caller holds the table's lock.
//
// A reset because the broker was out of reach (unavailable) does not count among the aborts in
// a row: the new session is created again until the broker answers (rejoinLocked), and such
// resets stop the runtime only once the broker has failed them for brokerRetryLimit since the
// last commit.
func (e *exactlyOnce) resetLocked(why commitReason, cause error) error {
	outage := unavailable(cause)
	if outage {
		if _, ok := e.retry.next(cause); !ok {
			return fmt.Errorf("runtime: the broker has been out of reach for %v since the last commit; the last transaction aborted (%s): %w",
				time.Since(e.retry.since).Round(time.Second), why, cause)
		}
	} else {
		e.txn.aborts++
	}
	e.rt.metrics.txnAborts.WithLabelValues("reset").Inc()
	e.rt.log.Warn("transaction aborted", "reason", why.String(), "error", cause, "in_a_row", e.txn.aborts, "broker_unavailable", outage,
		"action", "closing every task and rejoining the group with a new transactional producer")
	e.rt.emit(Event{Kind: EventTransactionAborted, Reason: why.String(), Error: errorText(cause), ProducerReset: true})
	switch {
	case e.rt.tasks.closing:
		return fmt.Errorf("runtime: the last transaction aborted (%s): %w", why, cause)
	case e.txn.aborts >= maxAbortsInARow:
		return fmt.Errorf("runtime: %d transactions in a row aborted, the last one (%s): %w", e.txn.aborts, why, cause)
	}
	aborts := e.txn.aborts
	e.rt.closeTasks(slices.Collect(maps.Values(e.rt.tasks.active)))
	e.rt.sb.closeAll() // they were opened with the session's producer, which goes
	e.rt.kafka.purging.Lock()
	e.rt.kafka.purging.Unlock() //nolint:staticcheck // a barrier: a purge in the background uses the consumer
	e.rt.kafka.consumer.AllowRebalance()
	e.rt.kafka.consumer.Close() // the callbacks only post events, which are dropped below
	e.rt.signals.dropInbox()
	e.rt.tasks.forgetPartitions()
	if err := e.rejoinLocked(); err != nil {
		return fmt.Errorf("runtime: rejoin after %s failed (%w): %w", why, cause, err)
	}
	e.txn.aborts = aborts
	return nil
}

// rejoinLocked creates the new transactional session of a reset. While the broker is out of
// reach it tries again, with brokerRetry's backoff, for at most brokerRetryLimit, and until
// Run's context ends. The caller holds the table's lock.
func (e *exactlyOnce) rejoinLocked() error {
	var retry brokerRetry
	for {
		ctx, cancel := txnContext()
		err := e.rt.newConsumer(ctx)
		cancel()
		if err == nil {
			e.rt.joinGroup()
			if retry.attempts > 0 {
				e.rt.log.Info("rejoined the group with a new transactional producer", "attempts", retry.attempts+1,
					"waited", time.Since(retry.since).Round(time.Millisecond))
			}
			return nil
		}
		wait, ok := retry.next(err)
		if !ok || e.rt.stopped() {
			return err
		}
		e.rt.log.Warn("cannot rejoin the group: the broker is out of reach or busy; retrying", "attempt", retry.attempts,
			"retry_in", wait, "failing_for", time.Since(retry.since).Round(time.Millisecond), "error", err)
		select {
		case <-time.After(wait):
		case <-e.rt.stop:
			return err
		}
		e.rt.signals.dropInbox() // events of the failed session's client
	}
}

// abortRebalanced aborts the (empty) transaction after a rebalance revoked or lost partitions,
// before anything more is processed: the session would abort the next commit anyway. The
// caller holds no lock.
func (e *exactlyOnce) abortRebalanced() error {
	e.rt.tasks.mu.Lock()
	defer e.rt.tasks.mu.Unlock()
	e.stopJobs()
	if _, _, err := e.endTxnLocked(kgo.TryAbort, nil); err != nil {
		return e.resetLocked(reasonRebalance, fmt.Errorf("abort the transaction: %w", err))
	}
	for _, t := range e.rt.tasks.active {
		if t.uncommitted() {
			return e.abortedLocked(reasonRebalance, nil, false)
		}
	}
	e.rt.drainInbox()
	e.forgetHanded()
	return e.beginLocked(reasonRebalance)
}

// stopJobs stops every job (each worked in the open transaction) before the transaction
// aborts: no record may reach the client while it ends, and those tasks are revived. The
// caller holds the table's lock.
func (e *exactlyOnce) stopJobs() {
	for _, t := range e.rt.tasks.active {
		if t.busy() {
			e.rt.jobs.stopJob(t)
		}
	}
}

// forgetHanded forgets the records of the tasks' jobs since their last commit, and the records
// held for them, after an aborted transaction: the session rewound the consumer to the
// committed offsets, and those records come again. The caller holds the table's lock.
func (e *exactlyOnce) forgetHanded() {
	for _, t := range e.rt.tasks.active {
		t.first, t.held = nil, nil
	}
	resume := make(map[string][]int32)
	for tp := range e.rt.tasks.heldPaused {
		if !e.rt.tasks.paused[tp] && e.rt.tasks.assigned[tp] {
			resume[tp.topic] = append(resume[tp.topic], tp.part)
		}
	}
	clear(e.rt.tasks.heldPaused)
	if len(resume) > 0 {
		e.rt.kafka.consumer.ResumeFetchPartitions(resume)
	}
}

// reviveLocked closes, without a commit, every task that worked in the aborted transaction
// and puts a fresh one in its place, to be restored and started again by the loop; their
// input partitions stay paused until then. The caller holds the table's lock.
func (e *exactlyOnce) reviveLocked() {
	var dead []*task
	for _, t := range e.rt.tasks.active {
		if t.uncommitted() {
			dead = append(dead, t)
		}
	}
	e.rt.closeTasks(dead)
	pause := make(map[string][]int32)
	for _, t := range dead {
		if !e.rt.tasks.owned(t) {
			continue
		}
		e.rt.tasks.revive(t)
		for _, in := range t.proc.cfg.Inputs {
			tp := topicPartition{in, t.id.Partition}
			if e.rt.tasks.assigned[tp] && !e.rt.tasks.paused[tp] {
				e.rt.tasks.paused[tp] = true
				pause[in] = append(pause[in], t.id.Partition)
			}
		}
		e.rt.log.Info("task revived: it restores its last commit and processes again from there", "processor", t.id.Processor, "partition", t.id.Partition)
	}
	if len(pause) > 0 {
		e.rt.kafka.consumer.PauseFetchPartitions(pause)
	}
}
