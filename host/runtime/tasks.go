package runtime

import (
	"iter"
	"sync"

	"github.com/statehost/statehost/changelog"
)

// taskTable holds the tasks of this instance and the input partitions they stand on, and
// makes their transitions, each with what it shows (/v1/status: statusBoard) and what it
// reports to the group's balancer (localState):
//
//	assign -> (restoring) -> started -> (running) -> closed
//	openedStandby -> (standby or warmup) -> promote -> (restoring the tail) -> started -> ...
//	                                     -> closedStandby
//
// An aborted transaction revives a task: a fresh one in its place restores again. A standby
// or warmup (the balancer's word for a standby placed where its task is to move) is a
// changelog.Task without a plugin; the follower (standby.go) owns its stores while it runs.
type taskTable struct {
	// mu guards the table, and the loop's side of every task in it (dispatch.go). The loop
	// holds it while it restores, processes and commits; the rebalance callbacks hold it
	// while they commit and close; deploys and interactive queries take it to look at tasks.
	// The group's callbacks never wait for it when they must not (rebalance.go).
	mu sync.Mutex

	active  map[taskID]*task           // assigned here: restoring (stateAssigned) or running
	standby map[taskID]*changelog.Task // standbys and warmups open here

	assigned   map[topicPartition]bool // the input partitions assigned to this instance
	paused     map[topicPartition]bool // assigned partitions paused until all their tasks run
	heldPaused map[topicPartition]bool // partitions paused while a busy task holds maxHeld of their records
	closing    bool                    // the runtime shuts down: the callbacks leave the tasks to it

	readers map[string][]*processor // input topic -> the processors that read it
	status  *statusBoard
	local   *localState
}

func newTaskTable(readers map[string][]*processor, status *statusBoard) *taskTable {
	return &taskTable{
		active:     make(map[taskID]*task),
		standby:    make(map[taskID]*changelog.Task),
		assigned:   make(map[topicPartition]bool),
		paused:     make(map[topicPartition]bool),
		heldPaused: make(map[topicPartition]bool),
		readers:    readers,
		status:     status,
	}
}

// assign adds the task id of proc, new here: it waits to be restored.
func (tt *taskTable) assign(id taskID, proc *processor, rt *Runtime) *task {
	t := &task{id: id, proc: proc, rt: rt}
	tt.active[id] = t
	tt.status.setState(id, "restoring")
	tt.local.opened(id)
	return t
}

// revive puts a fresh task in the place of t, closed without a commit after an aborted
// transaction: it restores its last commit again.
func (tt *taskTable) revive(t *task) *task {
	fresh := &task{id: t.id, proc: t.proc, rt: t.rt}
	tt.active[t.id] = fresh
	tt.status.setState(t.id, "restoring")
	return fresh
}

// started records that t, restored, runs its plugin.
func (tt *taskTable) started(t *task) {
	t.state = stateRunning
	tt.status.setState(t.id, "running")
	tt.local.setRunning(t.id, true)
}

// closed forgets t, closed. A standby of it that stays open (t never took it over) goes on.
func (tt *taskTable) closed(t *task) {
	delete(tt.active, t.id)
	if tt.standby[t.id] != nil {
		tt.status.setState(t.id, "standby")
	} else {
		tt.status.remove(t.id)
	}
}

// openedStandby adds cl, the open stores of the standby task id.
func (tt *taskTable) openedStandby(id taskID, cl *changelog.Task) {
	tt.standby[id] = cl
	tt.local.opened(id)
	tt.status.setState(id, "standby")
}

// promote hands the standby id's open stores over to its task, assigned here.
func (tt *taskTable) promote(id taskID) *changelog.Task {
	cl := tt.standby[id]
	delete(tt.standby, id)
	if t := tt.active[id]; t != nil {
		t.cl = cl
	}
	return cl
}

// closedStandby forgets the standby id, closed with the checkpoints cps.
func (tt *taskTable) closedStandby(id taskID, cps map[string]int64) {
	delete(tt.standby, id)
	tt.local.closed(id, cps)
	if tt.active[id] == nil {
		tt.status.remove(id)
	}
}

// holds reports whether the task id is active or standby here.
func (tt *taskTable) holds(id taskID) bool { return tt.active[id] != nil || tt.standby[id] != nil }

// reading yields each processor that reads the input partition tp, in the order of its
// readers, with its active task of tp: nil when that task is not here. A processor that a
// reload added and the group has not enabled yet (processor.pending) reads nothing.
func (tt *taskTable) reading(tp topicPartition) iter.Seq2[*processor, *task] {
	return func(yield func(*processor, *task) bool) {
		for _, p := range tt.readers[tp.topic] {
			if p.pending.Load() {
				continue
			}
			if !yield(p, tt.active[taskID{Processor: p.cfg.Name, Partition: tp.part}]) {
				return
			}
		}
	}
}

// owned reports whether at least one input partition of t is assigned.
func (tt *taskTable) owned(t *task) bool {
	for _, in := range t.proc.cfg.Inputs {
		if tt.assigned[topicPartition{in, t.id.Partition}] {
			return true
		}
	}
	return false
}

// restoring reports whether a task waits to be restored.
func (tt *taskTable) restoring() bool {
	for _, t := range tt.active {
		if t.state == stateAssigned {
			return true
		}
	}
	return false
}

// anyBusy reports whether a job runs.
func (tt *taskTable) anyBusy() bool {
	for _, t := range tt.active {
		if t.busy() {
			return true
		}
	}
	return false
}

// holdsAny reports whether a task holds records of tp for its next job.
func (tt *taskTable) holdsAny(tp topicPartition) bool {
	for _, t := range tt.reading(tp) {
		if t != nil && len(t.held[tp.topic]) > 0 {
			return true
		}
	}
	return false
}

// forgetPartitions forgets every assigned partition and its pauses: the group consumer that
// held them is gone (an exactly-once reset).
func (tt *taskTable) forgetPartitions() {
	clear(tt.assigned)
	clear(tt.paused)
	clear(tt.heldPaused)
}
