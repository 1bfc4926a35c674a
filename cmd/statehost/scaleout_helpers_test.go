package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/host/runtime"
)

// Several instances of the word count, each a statehost process with its own state directory
// and admin listener, share its tasks through the consumer group named by the application id.
// TestScaleOutAndIn scales the application from one instance to three and back while input
// arrives; TestStandbyFailoverKill kills an instance whose tasks have standby copies on the
// other; BenchmarkFailover measures what the standbys save on such a failover.
//
// Who runs what is read from each instance's GET /v1/status, and from its events: a task is
// owned by an instance from the partitions_assigned event that gives it its input partition to
// its task_closed (or the instance's death), and two instances never own a task at once.

const (
	// scaleRecoveryLag is the acceptable_recovery_lag of TestScaleOutAndIn: below the changelog
	// partitions when the instances join, so that the count tasks move only after warmups, and
	// far above what a warmup lags behind the input meanwhile (the busiest changelog partition
	// gets under 150 records a second), so that the leader finds a warmup that asked to move
	// caught up: otherwise the warmup would ask again only after probing_rebalance_interval.
	scaleRecoveryLag = 500
	// The steady input: scaleBatch sentences every scaleEvery, round robin over the 4
	// partitions of sentences (60 sentences, about 300 words, a second).
	scaleBatch = 3
	scaleEvery = 50 * time.Millisecond
	// failoverSession is the session timeout of TestStandbyFailoverKill and BenchmarkFailover:
	// how long the group waits before it gives a killed instance's tasks to the survivor.
	failoverSession = 6 * time.Second
)

// taskName names a task as the logs and these tests do: "count_2".
func taskName(proc string, part int32) string { return fmt.Sprintf("%s_%d", proc, part) }

// allTasks are the tasks of the word count.
func allTasks() []string {
	var out []string
	for p := range int32(4) {
		out = append(out, taskName("tokenize", p))
	}
	for p := range int32(crashPartition) {
		out = append(out, taskName("count", p))
	}
	return out
}

// placement is where the tasks are, from the instances' statuses: per task, the instances that
// run it, restore it (active, not running yet) and keep it as a standby.
type placement struct {
	running, restoring, standby map[string][]string
	statuses                    map[string]runtime.Status // by instance name
}

// placeTasks reads the status of every instance.
func placeTasks(t testing.TB, ins ...*instance) placement {
	t.Helper()
	pl := placement{running: map[string][]string{}, restoring: map[string][]string{}, standby: map[string][]string{},
		statuses: map[string]runtime.Status{}}
	for _, in := range ins {
		st := in.status(t)
		pl.statuses[in.name] = st
		for _, ts := range st.Tasks {
			id := taskName(ts.Processor, ts.Partition)
			switch ts.State {
			case "running":
				pl.running[id] = append(pl.running[id], in.name)
			case "restoring":
				pl.restoring[id] = append(pl.restoring[id], in.name)
			case "standby":
				pl.standby[id] = append(pl.standby[id], in.name)
			default:
				t.Errorf("%s: task %s in state %q", in.name, id, ts.State)
			}
		}
	}
	return pl
}

// settled reports whether every task runs on exactly one instance and none restores.
func (pl placement) settled() bool {
	if len(pl.restoring) > 0 {
		return false
	}
	for _, id := range allTasks() {
		if len(pl.running[id]) != 1 {
			return false
		}
	}
	return true
}

// load returns how many tasks each instance runs.
func (pl placement) load() map[string]int {
	out := map[string]int{}
	for name := range pl.statuses {
		out[name] = 0
	}
	for _, ins := range pl.running {
		for _, name := range ins {
			out[name]++
		}
	}
	return out
}

// balanced reports whether the instances run numbers of tasks that differ by one at most.
func (pl placement) balanced() bool {
	l := slices.Collect(maps.Values(pl.load()))
	return len(l) > 0 && slices.Max(l)-slices.Min(l) <= 1
}

func (pl placement) String() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(pl.statuses)) {
		var run, other []string
		for _, ts := range pl.statuses[name].Tasks {
			id := taskName(ts.Processor, ts.Partition)
			if ts.State == "running" {
				run = append(run, id)
			} else {
				other = append(other, id+" "+ts.State)
			}
		}
		fmt.Fprintf(&b, "%s runs %v", name, run)
		if len(other) > 0 {
			fmt.Fprintf(&b, " and has %v", other)
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// waitPlacement polls the statuses of the instances until cond holds, and returns the last
// placement; it fails the test after timeout, or when an instance exits.
func waitPlacement(t testing.TB, timeout time.Duration, what string, cond func(placement) bool, ins ...*instance) placement {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, in := range ins {
			if in.exited() {
				t.Fatalf("%s exited %d while waiting for %s", in.name, in.code, what)
			}
		}
		pl := placeTasks(t, ins...)
		if cond(pl) {
			return pl
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, pl)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// storeStatus returns the status of the store counts of a task of st, if it has one.
func storeStatus(st runtime.Status, proc string, part int32) (runtime.TaskStatus, runtime.StoreStatus, bool) {
	for _, ts := range st.Tasks {
		if ts.Processor != proc || ts.Partition != part {
			continue
		}
		for _, s := range ts.Restores {
			if s.Store == "counts" {
				return ts, s, true
			}
		}
		return ts, runtime.StoreStatus{}, false
	}
	return runtime.TaskStatus{}, runtime.StoreStatus{}, false
}

// groupTasks returns the tasks that the group's assignment gives each of its members, as
// sorted lists joined with spaces, sorted; ok is false while the group is not stable.
func groupTasks(t testing.TB, addr string) (members []string, ok bool) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	described, err := kadm.NewClient(cl).DescribeGroups(ctx, e2eApp)
	if err != nil {
		t.Fatalf("describing the group %s: %v", e2eApp, err)
	}
	g := described[e2eApp]
	if g.Err != nil || g.State != "Stable" {
		return nil, false
	}
	for _, m := range g.Members {
		ca, isConsumer := m.Assigned.AsConsumer()
		if !isConsumer {
			t.Fatalf("group %s: member %s has no consumer assignment", e2eApp, m.MemberID)
		}
		var tasks []string
		for _, at := range ca.Topics {
			for _, p := range at.Partitions {
				switch at.Topic {
				case "sentences":
					tasks = append(tasks, taskName("tokenize", p))
				case e2eRepart:
					tasks = append(tasks, taskName("count", p))
				default:
					t.Errorf("group %s: member %s is assigned %s/%d, which no processor reads", e2eApp, m.MemberID, at.Topic, p)
				}
			}
		}
		slices.Sort(tasks)
		members = append(members, strings.Join(tasks, " "))
	}
	slices.Sort(members)
	return members, true
}

// checkGroupAssignment checks that the group's assignment, as the broker has it, matches what
// the instances run: one member per instance, assigned the input partitions of exactly the
// tasks that the instance runs (all the inputs of a task go to one member, and no partition to
// two), according to pl.
func checkGroupAssignment(t testing.TB, addr string, pl placement) {
	t.Helper()
	var want []string
	for _, st := range pl.statuses {
		var run []string
		for _, ts := range st.Tasks {
			if ts.State == "running" {
				run = append(run, taskName(ts.Processor, ts.Partition))
			}
		}
		slices.Sort(run)
		want = append(want, strings.Join(run, " "))
	}
	slices.Sort(want)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, stable := groupTasks(t, addr)
		if stable && slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("group %s (stable: %v) assigns its members the tasks %q; the instances run %q", e2eApp, stable, got, want)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inputTasks returns the tasks that read the partitions of a partitions_... event.
func inputTasks(e runtime.Event) []string {
	var out []string
	for topic, ps := range e.Partitions {
		for _, p := range ps {
			switch topic {
			case "sentences":
				out = append(out, taskName("tokenize", p))
			case e2eRepart:
				out = append(out, taskName("count", p))
			}
		}
	}
	return out
}

// ownership is a time an instance owned a task.
type ownership struct {
	instance   string
	from, till time.Time // till: zero while it owns the task
}

// ownerships returns, per task, the times that the instances owned it according to their
// events: from the partitions_assigned with the task's input partition (or its task_running,
// if the task was closed and opened again without a new assignment) to its task_closed, or the
// instance's death.
func ownerships(ins ...*instance) map[string][]ownership {
	out := map[string][]ownership{}
	for _, in := range ins {
		open := map[string]time.Time{}
		begin := func(id string, at time.Time) {
			if _, ok := open[id]; !ok {
				open[id] = at
			}
		}
		for _, e := range in.events() {
			switch e.Kind {
			case runtime.EventPartitionsAssigned:
				for _, id := range inputTasks(e) {
					begin(id, e.Time)
				}
			case runtime.EventTaskRunning:
				begin(taskName(e.Processor, e.Partition), e.Time)
			case runtime.EventTaskClosed:
				id := taskName(e.Processor, e.Partition)
				if from, ok := open[id]; ok {
					out[id] = append(out[id], ownership{in.name, from, e.Time})
					delete(open, id)
				}
			}
		}
		for id, from := range open {
			out[id] = append(out[id], ownership{in.name, from, in.killedAt})
		}
	}
	return out
}

// checkExclusive checks from the instances' logs that no task was owned by two instances at once:
// an instance is assigned a task's partitions only after its previous owner closed it (or died).
func checkExclusive(t testing.TB, ins ...*instance) {
	t.Helper()
	moves := 0
	for id, owns := range ownerships(ins...) {
		slices.SortFunc(owns, func(a, b ownership) int { return a.from.Compare(b.from) })
		for i := 1; i < len(owns); i++ {
			prev, cur := owns[i-1], owns[i]
			if prev.instance != cur.instance {
				moves++
			}
			if prev.till.IsZero() || cur.from.Before(prev.till) {
				t.Errorf("task %s: %s owned it from %s while %s owned it (from %s till %s)", id, cur.instance,
					cur.from.Format(time.StampMicro), prev.instance, prev.from.Format(time.StampMicro), fmtTill(prev.till))
			}
		}
	}
	t.Logf("the logs show %d task moves between instances, none onto an instance before its previous owner closed the task or died", moves)
}

func fmtTill(t time.Time) string {
	if t.IsZero() {
		return "now"
	}
	return t.Format(time.StampMicro)
}

// countWords returns the reference counts of the words of lines.
func countWords(lines ...[]string) map[string]int {
	ref := map[string]int{}
	for _, ls := range lines {
		for _, l := range ls {
			for _, w := range strings.Fields(l) {
				ref[w]++
			}
		}
	}
	return ref
}

// wordCount sums the counts of ref.
func wordCount(ref map[string]int) int {
	n := 0
	for _, c := range ref {
		n += c
	}
	return n
}
