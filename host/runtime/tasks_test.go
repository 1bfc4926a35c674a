package runtime

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/store"
)

// newTestTable returns a task table over one processor, count, that reads the topics in and
// side, with the status board and local state the runtime gives it.
func newTestTable(t *testing.T) (*taskTable, *processor) {
	t.Helper()
	p := &processor{cfg: &config.Processor{Name: "count", Inputs: []string{"in", "side"}}}
	tt := newTaskTable(map[string][]*processor{"in": {p}, "side": {p}}, newStatusBoard())
	tt.local = newLocalState([]*processor{p})
	return tt, p
}

// openChangelogTask opens a changelog task without stores over a state directory of its own.
func openChangelogTask(t *testing.T, id taskID) *changelog.Task {
	t.Helper()
	mgr, err := store.Open(store.Settings{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	// A client that never connects: a task without stores produces nothing.
	kcl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kcl.Close)
	prod, err := changelog.NewProducer(kcl)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := changelog.OpenTask(mgr, prod, changelog.TaskConfig{AppID: "app", Processor: id.Processor, Partition: id.Partition})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	return cl
}

// collectReading returns what tt.reading(tp) yields.
func collectReading(tt *taskTable, tp topicPartition) (procs []*processor, tasks []*task) {
	for p, t := range tt.reading(tp) {
		procs, tasks = append(procs, p), append(tasks, t)
	}
	return procs, tasks
}

func TestTaskTableActiveLifecycle(t *testing.T) {
	tt, p := newTestTable(t)
	id := taskID{Processor: "count", Partition: 3}
	tt.assigned[topicPartition{"in", 3}] = true

	a := tt.assign(id, p, nil)
	if a.state != stateAssigned || tt.active[id] != a || !tt.restoring() || tt.status.state(id) != "restoring" {
		t.Fatalf("after assign: state %v, restoring %v, status %q", a.state, tt.restoring(), tt.status.state(id))
	}
	if !tt.owned(a) || tt.owned(&task{id: taskID{Processor: "count", Partition: 4}, proc: p}) {
		t.Fatal("owned: want the task of an assigned partition only")
	}
	if procs, got := collectReading(tt, topicPartition{"side", 3}); len(got) != 1 || got[0] != a || procs[0] != p {
		t.Fatalf("reading(side/3) = %v, want the task", got)
	}
	if procs, got := collectReading(tt, topicPartition{"side", 4}); len(got) != 1 || got[0] != nil || procs[0] != p {
		t.Fatalf("reading(side/4) = %v, want one nil: no task", got)
	}

	tt.started(a)
	if a.state != stateRunning || tt.restoring() || tt.status.state(id) != "running" || !tt.local.running[id] {
		t.Fatalf("after started: state %v, restoring %v, status %q, running %v", a.state, tt.restoring(), tt.status.state(id), tt.local.running[id])
	}

	a.held = map[string][]*kgo.Record{"side": {{}}}
	if !tt.holdsAny(topicPartition{"side", 3}) || tt.holdsAny(topicPartition{"in", 3}) {
		t.Fatal("holdsAny: want side/3 only")
	}
	a.job = &job{}
	if !tt.anyBusy() {
		t.Fatal("anyBusy: a job runs")
	}
	a.job, a.held = nil, nil

	fresh := tt.revive(a)
	if fresh == a || tt.active[id] != fresh || fresh.state != stateAssigned || tt.status.state(id) != "restoring" {
		t.Fatalf("after revive: a fresh task restoring, got status %q", tt.status.state(id))
	}

	tt.closed(fresh)
	if tt.active[id] != nil || tt.holds(id) || tt.status.state(id) != "" {
		t.Fatalf("after closed: still held, or status %q", tt.status.state(id))
	}

	tt.paused[topicPartition{"in", 3}] = true
	tt.forgetPartitions()
	if len(tt.assigned)+len(tt.paused)+len(tt.heldPaused) != 0 {
		t.Fatal("forgetPartitions left partitions")
	}
}

func TestTaskTableStandbyLifecycle(t *testing.T) {
	tt, p := newTestTable(t)
	id := taskID{Processor: "count", Partition: 1}
	cl := openChangelogTask(t, id)

	tt.openedStandby(id, cl)
	if !tt.holds(id) || tt.status.state(id) != "standby" {
		t.Fatalf("after openedStandby: holds %v, status %q", tt.holds(id), tt.status.state(id))
	}

	// Its task is assigned here while the standby is open, then closes before it took the
	// standby over: the standby goes on.
	a := tt.assign(id, p, nil)
	tt.closed(a)
	if tt.status.state(id) != "standby" || tt.standby[id] != cl {
		t.Fatalf("a task closed before its promotion: status %q, want standby", tt.status.state(id))
	}

	a = tt.assign(id, p, nil)
	if got := tt.promote(id); got != cl || a.cl != cl || tt.standby[id] != nil {
		t.Fatal("promote: the task takes the standby's stores")
	}

	tt.openedStandby(taskID{Processor: "count", Partition: 2}, openChangelogTask(t, taskID{Processor: "count", Partition: 2}))
	tt.closedStandby(taskID{Processor: "count", Partition: 2}, map[string]int64{"counts": 7})
	if tt.holds(taskID{Processor: "count", Partition: 2}) || tt.status.state(taskID{Processor: "count", Partition: 2}) != "" {
		t.Fatal("closedStandby: still held")
	}
	if _, idle := tt.local.idleSince()[taskID{Processor: "count", Partition: 2}]; !idle {
		t.Fatal("closedStandby: its checkpointed state is idle here, for the balancer and the cleanup")
	}
}
