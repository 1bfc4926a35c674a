package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/abi"
)

// Binding: an Instance serves one task at a time, the task it is bound to (Instance.Bind,
// Pool.Get). The guest's memory, its globals and the names it resolved (store handles,
// output indices) are the instance's; everything else a host function reaches is the bound
// task's: its stores, outputs, emitter, clock, limits, log, rate limit and punctuation
// times. Binding resolves the store handles the guest opened against the task's stores and
// resets what belongs to a call (the current record, buffer_needed, set_error, the emit
// budget; iterators never outlive a call), so that nothing of one task reaches another's.

// ErrNotBound is returned by the calls of an Instance that serves no task: one that a Pool
// took back.
var ErrNotBound = errors.New("engine: instance is bound to no task")

// TaskState is what the engine keeps of one task between its guest calls, whichever instance
// serves them: the task's punctuation schedules (when each fires next) and its guest logger.
// The schedules are those the instance's statehost_init made; a task keeps the time of each
// schedule that the next instance also makes (same id, kind and interval), so that a new
// instance after a failure or a deploy neither fires a punctuation again at once nor pushes
// a wall-clock one back.
//
// The zero value is ready to use. Give every binding of a task the same one (Task.State). A
// TaskState serves one task, whose calls run one at a time; PunctuationDue and
// NextWallPunctuation may be called between them, by whatever orders them with the calls.
type TaskState struct {
	schedules []schedule       // the task's schedules and when each fires next
	clock     Clock            // the task's clock, as of its last binding
	now       func() time.Time // the engine's clock (Config.Now)
	log       hclog.Logger     // the task's guest logger, made at its first binding
}

// PunctuationDue reports whether a punctuation of the task is due: a stream-time one at the
// task's stream time, or a wall-clock one at the engine's clock. It is false before the task
// was first bound.
func (s *TaskState) PunctuationDue() bool {
	for _, sc := range s.schedules {
		if sc.kind == abi.ScheduleStreamTime {
			if now := s.clock.StreamTime(); now != abi.NoTime && (sc.next == abi.NoTime || now >= sc.next) {
				return true
			}
		} else if s.now().UnixMilli() >= sc.next {
			return true
		}
	}
	return false
}

// NextWallPunctuation returns when the task's next wall-clock punctuation is due, and false
// when it has none.
func (s *TaskState) NextWallPunctuation() (time.Time, bool) {
	var next int64
	found := false
	for _, sc := range s.schedules {
		if sc.kind == abi.ScheduleWallClock && (!found || sc.next < next) {
			next, found = sc.next, true
		}
	}
	return time.UnixMilli(next), found
}

// adopt makes defs, the schedules of the instance serving the task, the task's: a schedule
// the task had already (same id, kind and interval) keeps its time; a new stream-time one
// fires when the stream time is first known, a new wall-clock one an interval from now.
func (s *TaskState) adopt(defs []schedule) {
	same := len(s.schedules) == len(defs)
	for i := 0; same && i < len(defs); i++ {
		same = s.schedules[i].kind == defs[i].kind && s.schedules[i].interval == defs[i].interval
	}
	if same {
		return
	}
	old := s.schedules
	s.schedules = make([]schedule, len(defs))
	for i, d := range defs {
		sc := schedule{kind: d.kind, interval: d.interval, next: abi.NoTime}
		switch {
		case i < len(old) && old[i].kind == d.kind && old[i].interval == d.interval:
			sc.next = old[i].next
		case d.kind == abi.ScheduleWallClock:
			sc.next = addTime(s.now().UnixMilli(), d.interval)
		}
		s.schedules[i] = sc
	}
}

// check reports what is missing from task; op starts the error.
func (task *Task) check(op string) error {
	switch {
	case task.Processor == "":
		return fmt.Errorf("engine: %s: Task.Processor is empty", op)
	case len(task.Outputs) > 0 && task.Emitter == nil:
		return fmt.Errorf("engine: %s %q: Task.Emitter is nil but the task has outputs", op, task.Processor)
	case task.Clock == nil && len(task.Windows)+len(task.Sessions) > 0:
		// The stores read their task's stream time: record_next must raise that one.
		return fmt.Errorf("engine: %s %q: Task.Clock is nil but the task has window or session stores", op, task.Processor)
	}
	return nil
}

// Bind makes in serve task from its next call on: ProcessBatch, Punctuate and the host
// functions they run reach task's stores, outputs, emitter, clock, limits and log, and the
// punctuation times of task.State. The store handles the guest opened (in statehost_init,
// or later) name the stores of task with the same names: task must have every store the
// guest opened, and the same outputs in the same order (the guest keeps the indices). A
// Pool binds the instances it lends; Instantiate binds the new instance to its task.
//
// Bind must not be called during a call (ErrInstanceBusy), nor on a closed or dead
// instance, and task must be of the processor the instance was made for. On error the
// instance is bound to no task.
func (in *Instance) Bind(task Task) error {
	if !in.busy.CompareAndSwap(false, true) {
		return ErrInstanceBusy
	}
	defer in.busy.Store(false)
	switch {
	case in.closed:
		return ErrClosed
	case in.dead != nil:
		return fmt.Errorf("engine: bind %q: %w; it failed earlier: %v", task.Processor, ErrInstanceDead, in.dead)
	}
	if err := in.bind(task, "bind"); err != nil {
		return err
	}
	in.st.adopt(in.defs)
	return nil
}

// bind is Bind without its guards; op starts its errors.
func (in *Instance) bind(task Task, op string) error {
	in.unbind()
	if err := task.check(op); err != nil {
		return err
	}
	if task.Processor != in.proc {
		// The guest resolved its stores and outputs for that processor's tasks.
		return fmt.Errorf("engine: %s: an instance of processor %q cannot serve a task of %q", op, in.proc, task.Processor)
	}
	eng := in.mod.eng
	st := task.State
	if st == nil {
		st = &TaskState{}
	}
	if task.Clock == nil {
		task.Clock = &ownClock{t: abi.NoTime}
	}
	if task.LogLimiter == nil {
		task.LogLimiter = &LogLimiter{}
	}
	for i := range in.stores {
		s := &in.stores[i]
		if !s.resolve(&task) {
			in.unbind()
			return fmt.Errorf("engine: %s %q partition %d: the instance opened store %q, which the task lacks", op, task.Processor, task.Partition, s.name)
		}
	}
	if st.log == nil {
		base := task.Logger
		if base == nil {
			base = eng.cfg.Logger
		}
		st.log = base.Named("guest").With("processor", task.Processor, "partition", task.Partition)
	}
	// The engine's clock, not the instance's: the task's state must not keep the instance
	// (and its linear memory) reachable once the instance is closed.
	st.clock, st.now = task.Clock, eng.now
	in.task, in.st, in.log, in.logs = task, st, st.log, task.LogLimiter
	in.logs.attach(eng.cfg, in.log)
	in.stdout.log, in.stdout.limit = in.log, in.logs
	in.stderr.log, in.stderr.limit = in.log, in.logs
	// The schedules become the task's in Bind, or in Instantiate once statehost_init made
	// them: adopting the new instance's (none yet) here would wipe the task's times.
	return nil
}

// unbind forgets the task in serves, and every trace of its last call: the records, the
// current record, the stores resolved for it.
func (in *Instance) unbind() {
	in.task, in.st = Task{}, nil
	in.batch, in.cursor, in.last, in.blame = nil, -1, -1, 0
	in.needed, in.message, in.hostErr, in.hostKind, in.hostAt = 0, "", nil, nil, 0
	in.refused, in.emitted, in.emittedAt, in.punct = nil, 0, -1, nil
	for i := range in.stores {
		s := &in.stores[i]
		s.limit, s.store, s.win, s.sess = 0, nil, nil, nil
	}
}

// resolve finds the store s names among task's stores, of the kind the guest opened; it
// reports whether task has it.
func (s *openStore) resolve(task *Task) bool {
	s.limit = task.StoreLimits[s.name]
	switch s.kind {
	case abi.StoreKeyValue:
		s.store = task.Stores[s.name]
		return s.store != nil
	case abi.StoreWindow:
		s.win = task.Windows[s.name]
		return s.win != nil
	default:
		s.sess = task.Sessions[s.name]
		return s.sess != nil
	}
}
