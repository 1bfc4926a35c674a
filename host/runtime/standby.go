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
	"github.com/statehost/statehost/store"
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
// The loop owns the standby tasks (under r.tasks.mu): syncStandbys opens and closes them to match
// the assignment, and restarts the follower over the new set. The follower goroutine owns
// their stores while it runs.

// standbys is the standby side of a Runtime.
type standbys struct {
	want    map[taskID]bool // the latest assignment's standbys, warmups included
	warmups map[taskID]bool // the latest assignment's warmups
	active  map[taskID]bool // the latest assignment's active tasks

	cancel  context.CancelFunc // stops the follower; nil when none runs
	done    chan error         // the follower's result
	retryAt time.Time          // when to open or follow again after a failure; zero: now

	warmupsAt time.Time     // when the warmups were assigned
	askedAt   time.Time     // when this member last asked for a rebalance for its warmups
	askEvery  time.Duration // the least time until it asks again: doubles with each ask
}

// setStandbys records this member's standby assignment of a rebalance (from the group's
// goroutine, through the inbox), with the partitions the same assignment makes active here.
func (r *Runtime) setStandbys(sa standbyAssignment, assigned map[string][]int32) {
	want, warm, active := map[taskID]bool{}, map[taskID]bool{}, map[taskID]bool{}
	for topic, parts := range assigned {
		for _, p := range parts {
			for _, proc := range r.readers[topic] {
				active[taskID{proc.cfg.Name, p}] = true
			}
		}
	}
	for topic, parts := range sa.standby {
		for _, p := range parts {
			for _, proc := range r.readers[topic] {
				if hasLoggedStore(proc) {
					want[taskID{proc.cfg.Name, p}] = true
				}
			}
		}
	}
	for topic, parts := range sa.warmup {
		for _, p := range parts {
			for _, proc := range r.readers[topic] {
				if hasLoggedStore(proc) {
					want[taskID{proc.cfg.Name, p}] = true
					warm[taskID{proc.cfg.Name, p}] = true
				}
			}
		}
	}
	r.owners.set(sa.hosts)
	r.signals.post(groupEvent{standbys: &standbyEvent{want: want, warmups: warm, active: active}})
}

// standbyEvent is a standby assignment handed to the loop.
type standbyEvent struct{ want, warmups, active map[taskID]bool }

func hasLoggedStore(p *processor) bool {
	return slices.ContainsFunc(p.stores, func(s changelog.StoreSpec) bool { return !s.LoggingDisabled })
}

// applyStandbyEvent takes a standby assignment in the loop. The caller holds r.tasks.mu.
func (r *Runtime) applyStandbyEvent(ev *standbyEvent) {
	sb := &r.sb
	if !maps.Equal(sb.warmups, ev.warmups) {
		sb.warmupsAt, sb.askEvery = time.Now(), warmupAskInterval
		if len(ev.warmups) > 0 {
			r.log.Info("warmups assigned: these tasks restore here before they move here", "tasks", describeTasks(ev.warmups))
		}
	}
	sb.want, sb.warmups, sb.active = ev.want, ev.warmups, ev.active
}

// syncStandbys makes the open standby tasks match the assignment, minus the tasks that are
// active here, hands the standbys of tasks that became active here to them, and (re)starts
// the follower when the set changed or it stopped. The caller holds r.tasks.mu.
func (r *Runtime) syncStandbys(ctx context.Context) {
	sb := &r.sb
	want := make(map[taskID]bool, len(sb.want))
	for id := range sb.want {
		if r.tasks.active[id] == nil {
			want[id] = true
		}
	}
	handover := false
	for id := range r.tasks.standby {
		if t := r.tasks.active[id]; t != nil && t.cl == nil && t.state == stateAssigned {
			handover = true
		} else if sb.active[id] && t == nil {
			want[id] = true // its partitions are on their way (onAssigned): it stays open
		}
	}
	if sb.cancel != nil {
		select {
		case err := <-sb.done:
			r.followerStopped(err)
		default:
		}
	}
	same := len(want) == len(r.tasks.standby)
	for id := range want {
		same = same && r.tasks.standby[id] != nil
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
	r.stopFollower()
	for id, cl := range r.tasks.standby {
		if want[id] {
			continue
		}
		if t := r.tasks.active[id]; t != nil && t.cl == nil && t.state == stateAssigned {
			// Active here now: the task takes the standby's open stores over, memory stores
			// included, and its restore applies only what the standby had not.
			r.tasks.promote(id)
			r.log.Info("standby task promoted to active", "processor", id.proc, "partition", id.part)
			continue
		}
		r.closeStandby(id, cl)
	}
	for _, id := range slices.SortedFunc(maps.Keys(want), compareTaskID) {
		if r.tasks.standby[id] != nil || !sb.want[id] {
			continue // open, or kept open only until its active task arrives
		}
		cl, err := r.openStandby(id)
		if err != nil {
			if !errors.Is(err, changelog.ErrInFlight) {
				r.log.Warn("cannot open a standby task; retrying in a second", "processor", id.proc, "partition", id.part, "error", err)
			}
			sb.retryAt = time.Now().Add(time.Second)
			continue
		}
		r.tasks.openedStandby(id, cl)
	}
	if len(r.tasks.standby) == 0 {
		return
	}
	cls := make([]*changelog.Task, 0, len(r.tasks.standby))
	for _, id := range slices.SortedFunc(maps.Keys(r.tasks.standby), compareTaskID) {
		cls = append(cls, r.tasks.standby[id])
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	sb.cancel, sb.done = cancel, done
	go func() { done <- r.follower.Follow(fctx, cls...) }()
	r.log.Debug("standby tasks follow their changelogs", "tasks", len(cls))
}

// followerStopped handles the follower's end on its own (a fetch failed, a changelog was
// truncated): it restarts after a second. The caller holds r.tasks.mu.
func (r *Runtime) followerStopped(err error) {
	r.sb.cancel()
	r.sb.cancel, r.sb.done = nil, nil
	r.log.Warn("standby tasks stopped following their changelogs; restarting in a second", "error", err)
	r.sb.retryAt = time.Now().Add(time.Second)
	// The tasks stay open (memory stores keep what they applied) and the next sync restarts
	// the follower over them, from their checkpoints (a truncated changelog wipes its store
	// then); a task whose stores failed closes, and reopens clean.
	for id, cl := range r.tasks.standby {
		if cl.StoreTask().Err() != nil {
			r.closeStandby(id, cl)
		}
	}
}

// stopFollower stops the follower and waits for it. The caller holds r.tasks.mu.
func (r *Runtime) stopFollower() {
	if r.sb.cancel == nil {
		return
	}
	r.sb.cancel()
	<-r.sb.done
	r.sb.cancel, r.sb.done = nil, nil
}

// openStandby opens the stores of a standby task.
func (r *Runtime) openStandby(id taskID) (*changelog.Task, error) {
	proc := r.procByName(id.proc)
	if proc == nil {
		return nil, fmt.Errorf("runtime: standby task %s: unknown processor", id)
	}
	cl, err := changelog.OpenTask(r.stores, r.producer, changelog.TaskConfig{
		AppID:     r.cfg.ApplicationID,
		Processor: id.proc,
		Partition: id.part,
		Stores:    proc.stores,
		Logger:    r.opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	r.log.Info("standby task opened", "processor", id.proc, "partition", id.part)
	return cl, nil
}

// closeStandby closes a standby task (the follower is stopped) and records what it keeps.
func (r *Runtime) closeStandby(id taskID, cl *changelog.Task) {
	cps := checkpoints(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Close(ctx); err != nil {
		r.log.Warn("closing a standby task", "processor", id.proc, "partition", id.part, "error", err)
	}
	r.tasks.closedStandby(id, cps)
	r.log.Info("standby task closed", "processor", id.proc, "partition", id.part)
}

// closeStandbys stops the follower and closes every standby task (shutdown). The caller holds r.tasks.mu.
func (r *Runtime) closeStandbys() {
	r.stopFollower()
	for id, cl := range r.tasks.standby {
		r.closeStandby(id, cl)
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
// it has warmups (Kafka Streams' probing rebalances). The caller holds r.tasks.mu.
func (r *Runtime) probeWarmups() {
	sb := &r.sb
	caughtUp, pending := true, 0
	for id := range sb.warmups {
		if r.tasks.active[id] != nil {
			continue // active here already
		}
		pending++
		lag, known := r.local.lag(id)
		if !known || lag > r.cfg.AcceptableRecoveryLag {
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
	case time.Since(last) >= r.cfg.ProbingRebalanceInterval:
	default:
		return
	}
	sb.askedAt = time.Now()
	sb.askEvery = min(2*max(sb.askEvery, warmupAskInterval), r.cfg.ProbingRebalanceInterval)
	r.log.Info("asking for a rebalance to move the tasks of warmups", "caught_up", caughtUp, "tasks", describeTasks(sb.warmups))
	r.consumer.ForceRebalance()
}

// cleanupInterval is how often the loop looks for local state to delete.
const cleanupInterval = 30 * time.Second

// cleanupEvery is how often the loop looks for local state to delete: every cleanupInterval,
// or state_cleanup_delay when that is shorter.
func (r *Runtime) cleanupEvery() time.Duration { return min(cleanupInterval, r.cfg.StateCleanupDelay) }

// cleanupState deletes the local state of tasks that were neither active nor standby here for
// state_cleanup_delay. The caller holds r.tasks.mu.
func (r *Runtime) cleanupState() {
	for id, since := range r.local.idleSince() {
		if time.Since(since) < r.cfg.StateCleanupDelay || r.tasks.holds(id) {
			continue
		}
		if err := r.stores.DeleteTask(store.TaskID{Processor: id.proc, Partition: id.part}); err != nil {
			r.log.Warn("cannot delete the local state of a task this instance no longer owns", "processor", id.proc, "partition", id.part, "error", err)
			continue
		}
		r.local.forget(id)
		r.log.Info("deleted the local state of a task this instance no longer owns", "processor", id.proc, "partition", id.part,
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
func (r *Runtime) nextStandbyWork() (time.Time, bool) {
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	next := r.cleanedAt.Add(r.cleanupEvery())
	if !r.sb.retryAt.IsZero() && r.sb.retryAt.Before(next) {
		next = r.sb.retryAt
	}
	if len(r.sb.warmups) > 0 {
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
	b := newTaskBalancer(r.procs)
	b.appID = r.cfg.ApplicationID
	b.params = assignParams{standbys: r.cfg.StandbyReplicas, acceptableLag: r.cfg.AcceptableRecoveryLag,
		markers: r.cfg.Guarantee == config.ExactlyOnce}
	b.log = r.log.Named("balancer")
	b.state = r.local.report
	b.onSync = r.setStandbys
	b.endOffsets = func(topics []string) (map[topicPartition]int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A topic created a moment ago may not be listable yet on every broker: retry a little.
		var listed kadm.ListedOffsets
		var err error
		for try := 0; try < 3; try++ {
			if listed, err = r.adm.ListEndOffsets(ctx, topics...); err == nil {
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
