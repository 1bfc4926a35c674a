package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
)

// Standby tasks keep copies of other instances' tasks: their stores are open here and follow
// their changelogs (restore.Restorer.Follow on a client of their own), without a plugin. The
// group's leader assigns them in each member's sync assignment (standbyAssignment): the
// standby_replicas copies of each task, and warmups, standbys placed where the balancer wants
// a task to move once it has caught up. When a task becomes active here, the active task takes
// its standby's open stores over (memory stores included) and restores only what the standby
// had not applied yet. The standby assignment arrives (ParseSyncAssignment) before the
// partitions (onAssigned): a standby whose task the same assignment makes active here stays
// open until its task arrives.
//
// The loop owns the standby tasks (under the table's lock): sync opens and closes them to match
// the assignment, and restarts the follower over the new set. The follower goroutine owns
// their stores while it runs.

// standbys is the standby side of a Runtime: the assignment's standbys and warmups, the
// follower of their changelogs, and the cleanup of local state no task uses. Its tasks are in
// the task table (taskTable.standby). Its methods are called with the table's lock held,
// unless they say otherwise.
type standbys struct {
	rt *Runtime

	want    map[taskID]bool // the latest assignment's standbys, warmups included
	warmups map[taskID]bool // the latest assignment's warmups
	active  map[taskID]bool // the latest assignment's active tasks

	cancel  context.CancelFunc // stops the follower; nil when none runs
	done    chan error         // the follower's result
	retryAt time.Time          // when to open or follow again after a failure; zero: now

	warmupsAt time.Time     // when the warmups were assigned
	askedAt   time.Time     // when this member last asked for a rebalance for its warmups
	askEvery  time.Duration // the least time until it asks again: doubles with each ask

	cleanedAt time.Time // the last look for local state to delete
}

// onAssignment records this member's standby assignment of a rebalance (from the group's
// goroutine, through the inbox), with the partitions the same assignment makes active here.
func (sb *standbys) onAssignment(sa standbyAssignment, assigned map[string][]int32) {
	want, warm, active := map[taskID]bool{}, map[taskID]bool{}, map[taskID]bool{}
	readers := sb.rt.view().readers // not sb.rt.readers: a reload replaces them in the loop (view.go)
	for topic, parts := range assigned {
		for _, p := range parts {
			for _, proc := range readers[topic] {
				active[taskID{Processor: proc.cfg.Name, Partition: p}] = true
			}
		}
	}
	for topic, parts := range sa.standby {
		for _, p := range parts {
			for _, proc := range readers[topic] {
				if hasLoggedStore(proc) && !proc.proc.pending.Load() {
					want[taskID{Processor: proc.cfg.Name, Partition: p}] = true
				}
			}
		}
	}
	for topic, parts := range sa.warmup {
		for _, p := range parts {
			for _, proc := range readers[topic] {
				if hasLoggedStore(proc) && !proc.proc.pending.Load() {
					want[taskID{Processor: proc.cfg.Name, Partition: p}] = true
					warm[taskID{Processor: proc.cfg.Name, Partition: p}] = true
				}
			}
		}
	}
	sb.rt.iq.owners.set(sa.hosts)
	sb.rt.signals.post(groupEvent{standbys: &standbyEvent{want: want, warmups: warm, active: active}})
}

// standbyEvent is a standby assignment handed to the loop.
type standbyEvent struct{ want, warmups, active map[taskID]bool }

func hasLoggedStore(p *procView) bool {
	return slices.ContainsFunc(p.stores, func(s changelog.StoreSpec) bool { return !s.LoggingDisabled })
}

// apply takes a standby assignment in the loop. The caller holds the table's lock.
func (sb *standbys) apply(ev *standbyEvent) {
	if !maps.Equal(sb.warmups, ev.warmups) {
		sb.warmupsAt, sb.askEvery = time.Now(), warmupAskInterval
		if len(ev.warmups) > 0 {
			sb.rt.log.Info("warmups assigned: these tasks restore here before they move here", "tasks", describeTasks(ev.warmups))
			sb.rt.emit(Event{Kind: EventWarmupsAssigned, Tasks: describeTasks(ev.warmups)})
		}
	}
	sb.want, sb.warmups, sb.active = ev.want, ev.warmups, ev.active
}

// sync makes the open standby tasks match the assignment, minus the tasks that are
// active here, hands the standbys of tasks that became active here to them, and (re)starts
// the follower when the set changed or it stopped. The caller holds the table's lock.
func (sb *standbys) sync(ctx context.Context) {
	want := make(map[taskID]bool, len(sb.want))
	for id := range sb.want {
		if sb.rt.tasks.active[id] == nil {
			want[id] = true
		}
	}
	handover := false
	for id := range sb.rt.tasks.standby {
		if t := sb.rt.tasks.active[id]; t != nil && t.cl == nil && t.state == stateAssigned {
			handover = true
		} else if sb.active[id] && t == nil {
			want[id] = true // its partitions are on their way (onAssigned): it stays open
		}
	}
	if sb.cancel != nil {
		select {
		case err := <-sb.done:
			sb.followerStopped(err)
		default:
		}
	}
	if sb.rt.tasks.restoring() {
		sb.hold(want)
		return
	}
	same := len(want) == len(sb.rt.tasks.standby)
	for id := range want {
		same = same && sb.rt.tasks.standby[id] != nil
	}
	if same && sb.cancel == nil && len(want) > 0 && time.Now().Before(sb.retryAt) {
		return // the follower restarts after its retry time
	}
	if !handover && same && (sb.cancel != nil || len(want) == 0) {
		sb.retryAt = time.Time{} // nothing waits for a retry
		return
	}
	if !handover && time.Now().Before(sb.retryAt) {
		return
	}
	sb.retryAt = time.Time{}
	sb.stopFollower()
	sb.promoteOrClose(want)
	for _, id := range slices.SortedFunc(maps.Keys(want), compareTaskID) {
		if sb.rt.tasks.standby[id] != nil || !sb.want[id] {
			continue // open, or kept open only until its active task arrives
		}
		cl, err := sb.open(id)
		if err != nil {
			if !errors.Is(err, changelog.ErrInFlight) {
				sb.rt.log.Warn("cannot open a standby task; retrying in a second", "processor", id.Processor, "partition", id.Partition, "error", err)
			}
			sb.retryAt = time.Now().Add(time.Second)
			continue
		}
		sb.rt.tasks.openedStandby(id, cl)
	}
	if len(sb.rt.tasks.standby) == 0 {
		return
	}
	cls := make([]*changelog.Task, 0, len(sb.rt.tasks.standby))
	for _, id := range slices.SortedFunc(maps.Keys(sb.rt.tasks.standby), compareTaskID) {
		cls = append(cls, sb.rt.tasks.standby[id])
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	sb.cancel, sb.done = cancel, done
	go func() { done <- sb.rt.kafka.follower.Follow(fctx, cls...) }()
	sb.rt.log.Debug("standby tasks follow their changelogs", "tasks", len(cls))
}

// hold keeps the standbys still while active tasks here wait for their restores: the
// follower stops, and no standby opens, so that the restores have the machine's CPU, disk
// and fetches to themselves, as Kafka Streams' changelog reader updates standbys only once no
// active task restores. The standbys whose tasks became active here are handed over, and
// those no longer wanted close; the next sync after the restores opens the new standbys and
// restarts the follower, from their checkpoints. The caller holds the table's lock.
func (sb *standbys) hold(want map[taskID]bool) {
	if sb.cancel != nil {
		sb.stopFollower()
		sb.rt.log.Debug("standby tasks hold while active tasks restore")
	}
	sb.promoteOrClose(want)
}

// promoteOrClose hands the standbys whose tasks became active here to them, and closes the
// others that want does not hold. The follower is stopped; the caller holds the table's lock.
func (sb *standbys) promoteOrClose(want map[taskID]bool) {
	for id, cl := range sb.rt.tasks.standby {
		if want[id] {
			continue
		}
		if t := sb.rt.tasks.active[id]; t != nil && t.cl == nil && t.state == stateAssigned {
			// Active here now: the task takes the standby's open stores over, memory stores
			// included, and its restore applies only what the standby had not.
			sb.rt.tasks.promote(id)
			sb.rt.log.Info("standby task promoted to active", "processor", id.Processor, "partition", id.Partition)
			continue
		}
		sb.close(id, cl)
	}
}

// followerStopped handles the follower's end on its own (a fetch failed, a changelog was
// truncated): it restarts after a second. The caller holds the table's lock.
func (sb *standbys) followerStopped(err error) {
	sb.cancel()
	sb.cancel, sb.done = nil, nil
	sb.rt.log.Warn("standby tasks stopped following their changelogs; restarting in a second", "error", err)
	sb.retryAt = time.Now().Add(time.Second)
	// The tasks stay open (memory stores keep what they applied) and the next sync restarts
	// the follower over them, from their checkpoints (a truncated changelog wipes its store
	// then); a task whose stores failed closes, and reopens clean.
	for id, cl := range sb.rt.tasks.standby {
		if cl.StoreTask().Err() != nil {
			sb.close(id, cl)
		}
	}
}

// stopFollower stops the follower and waits for it. The caller holds the table's lock.
func (sb *standbys) stopFollower() {
	if sb.cancel == nil {
		return
	}
	sb.cancel()
	<-sb.done
	sb.cancel, sb.done = nil, nil
}

// open opens the stores of a standby task.
func (sb *standbys) open(id taskID) (*changelog.Task, error) {
	proc := sb.rt.procByName(id.Processor)
	if proc == nil {
		return nil, fmt.Errorf("runtime: standby task %s: unknown processor", id)
	}
	cl, err := changelog.OpenTask(sb.rt.stores, sb.rt.kafka.producer, changelog.TaskConfig{
		AppID:     sb.rt.cfg.ApplicationID,
		Processor: id.Processor,
		Partition: id.Partition,
		Stores:    proc.stores,
		Logger:    sb.rt.opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	sb.rt.log.Info("standby task opened", "processor", id.Processor, "partition", id.Partition)
	return cl, nil
}

// close closes a standby task (the follower is stopped) and records what it keeps.
func (sb *standbys) close(id taskID, cl *changelog.Task) {
	cps := checkpoints(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Close(ctx); err != nil {
		sb.rt.log.Warn("closing a standby task", "processor", id.Processor, "partition", id.Partition, "error", err)
	}
	sb.rt.tasks.closedStandby(id, cps)
	sb.rt.log.Info("standby task closed", "processor", id.Processor, "partition", id.Partition)
}

// closeAll stops the follower and closes every standby task (shutdown). The caller holds the table's lock.
func (sb *standbys) closeAll() {
	sb.stopFollower()
	for id, cl := range sb.rt.tasks.standby {
		sb.close(id, cl)
	}
}

// checkpoints returns the checkpoints of a task's persistent logged stores, store -> offset.
func checkpoints(cl *changelog.Task) map[string]int64 {
	out := map[string]int64{}
	for _, ls := range cl.LoggedStores() {
		if !ls.Part.Persistent() {
			continue
		}
		if cp, ok, err := ls.Part.Checkpoint(); err == nil && ok {
			out[ls.Store] = cp.Offset
		}
	}
	return out
}

// procByName returns the processor called name, or nil.
func (r *Runtime) procByName(name string) *processor {
	for _, p := range r.procs {
		if p.cfg.Name == name {
			return p
		}
	}
	return nil
}

// warmupProbeInterval is how often the loop checks whether its warmups have caught up.
const warmupProbeInterval = time.Second

// warmupAskInterval is the least time between the first two rebalances a member asks for
// because its warmups caught up (it doubles with each ask, up to probing_rebalance_interval):
// the leader, which lists the end offsets later and sums the lags of a unit's tasks, may find
// them behind, and then the member asks again.
const warmupAskInterval = 10 * time.Second

// probeWarmups asks for a rebalance when every warmup of this member has caught up (lag <=
// acceptable_recovery_lag, against the high watermarks its standby fetches saw), so that the
// leader moves their tasks here; and, caught up or not, every probing_rebalance_interval while
// it has warmups (Kafka Streams' probing rebalances). The caller holds the table's lock.
func (sb *standbys) probeWarmups() {
	caughtUp, pending := true, 0
	for id := range sb.warmups {
		if sb.rt.tasks.active[id] != nil {
			continue // active here already
		}
		pending++
		lag, known := sb.rt.local.lag(id)
		if !known || lag > sb.rt.cfg.AcceptableRecoveryLag {
			caughtUp = false
		}
	}
	if pending == 0 {
		return
	}
	last := sb.warmupsAt
	if sb.askedAt.After(last) {
		last = sb.askedAt
	}
	switch {
	case caughtUp && time.Since(sb.askedAt) >= sb.askEvery:
	case time.Since(last) >= sb.rt.cfg.ProbingRebalanceInterval:
	default:
		return
	}
	sb.askedAt = time.Now()
	sb.askEvery = min(2*max(sb.askEvery, warmupAskInterval), sb.rt.cfg.ProbingRebalanceInterval)
	sb.rt.log.Info("asking for a rebalance to move the tasks of warmups", "caught_up", caughtUp, "tasks", describeTasks(sb.warmups))
	sb.rt.kafka.consumer.ForceRebalance()
}

// cleanupInterval is how often the loop looks for local state to delete.
const cleanupInterval = 30 * time.Second

// cleanupEvery is how often the loop looks for local state to delete: every cleanupInterval,
// or state_cleanup_delay when that is shorter.
func (sb *standbys) cleanupEvery() time.Duration {
	return min(cleanupInterval, sb.rt.cfg.StateCleanupDelay)
}

// cleanupState deletes the local state of tasks that were neither active nor standby here for
// state_cleanup_delay. The caller holds the table's lock.
func (sb *standbys) cleanupState() {
	for id, since := range sb.rt.local.idleSince() {
		if time.Since(since) < sb.rt.cfg.StateCleanupDelay || sb.rt.tasks.holds(id) {
			continue
		}
		if err := sb.rt.stores.DeleteTask(id); err != nil {
			sb.rt.log.Warn("cannot delete the local state of a task this instance no longer owns", "processor", id.Processor, "partition", id.Partition, "error", err)
			continue
		}
		sb.rt.local.forget(id)
		sb.rt.log.Info("deleted the local state of a task this instance no longer owns", "processor", id.Processor, "partition", id.Partition,
			"idle_for", time.Since(since).Round(time.Second))
	}
}

// describeTasks lists task ids, sorted, for logs.
func describeTasks(ids map[taskID]bool) []string {
	out := make([]string, 0, len(ids))
	for _, id := range slices.SortedFunc(maps.Keys(ids), compareTaskID) {
		out = append(out, id.String())
	}
	return out
}

// nextStandbyWork returns when the loop next has standby work without records: a retry of the
// standbys, a probe of the warmups, a look for state to delete.
func (sb *standbys) nextStandbyWork() (time.Time, bool) {
	sb.rt.tasks.mu.Lock()
	defer sb.rt.tasks.mu.Unlock()
	next := sb.cleanedAt.Add(sb.cleanupEvery())
	if !sb.retryAt.IsZero() && sb.retryAt.Before(next) {
		next = sb.retryAt
	}
	if len(sb.warmups) > 0 {
		next = minTime(next, time.Now().Add(warmupProbeInterval))
	}
	return next, true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// newBalancer returns the group balancer of this instance, with its state and its standby
// assignments wired to the runtime.
func (r *Runtime) newBalancer() *taskBalancer {
	b := newTaskBalancer(r.view().procs)
	b.appID = r.cfg.ApplicationID
	b.params = assignParams{standbys: r.cfg.StandbyReplicas, acceptableLag: r.cfg.AcceptableRecoveryLag,
		markers: r.cfg.Guarantee == config.ExactlyOnce}
	b.log = r.log.Named("balancer")
	b.state = r.local.report
	b.onSync = r.sb.onAssignment
	r.reload.wire(b) // the processors it advertises, and those the group enables
	b.endOffsets = func(topics []string) (map[topicPartition]int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A topic created a moment ago may not be listable yet on every broker: retry a little.
		var listed kadm.ListedOffsets
		var err error
		for try := 0; try < 3; try++ {
			if listed, err = r.kafka.adm.ListEndOffsets(ctx, topics...); err == nil {
				err = listed.Error()
			}
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			return nil, err
		}
		out := map[topicPartition]int64{}
		listed.Each(func(o kadm.ListedOffset) { out[topicPartition{o.Topic, o.Partition}] = o.Offset })
		return out, nil
	}
	return b
}
