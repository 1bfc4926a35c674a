package testdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/store"
)

// task is a processor on one partition: its stores, what the engine keeps of it between
// calls, and the records its call in progress emitted.
type task struct {
	proc  *processor
	part  int32
	st    *store.Task
	et    engine.Task
	pool  *engine.Pool // its processor's, or its own for a module with an instance per task
	state engine.TaskState
	logs  engine.LogLimiter
	undo  *undo // nil unless its processor's on_error is skip or dead_letter

	emitted []Output // the records of the call in progress, partitioned when it ends
}

// openTask opens the stores of p's task on partition part and describes it to the engine
// as the runtime does (host/runtime/task.go engineTask): the same limits and emit budget.
func (d *Driver) openTask(p *processor, part int32) (*task, error) {
	st, err := d.mgr.OpenTask(p.cfg.Name, part)
	if err != nil {
		return nil, fmt.Errorf("testdriver: %w", err)
	}
	t := &task{proc: p, part: part, st: st, pool: p.pool}
	p.tasks = append(p.tasks, t)
	if t.pool == nil {
		t.pool = engine.NewPool(p.mod, 1)
	}
	if p.cfg.OnError == config.OnErrorSkip || p.cfg.OnError == config.OnErrorDeadLetter {
		t.undo = &undo{}
	}
	t.et = engine.Task{
		Processor:    p.cfg.Name,
		Partition:    part,
		Stores:       map[string]store.Store{},
		Windows:      map[string]store.WindowStore{},
		Sessions:     map[string]store.SessionStore{},
		Clock:        st,
		Outputs:      p.cfg.Outputs,
		Emitter:      t,
		Logger:       d.log,
		LogLimiter:   &t.logs,
		State:        &t.state,
		StoreLimits:  p.storeLimits,
		OutputLimits: p.outputLimits,
		EmitBudget:   p.cfg.EmitBudget,
	}
	for _, sd := range p.stores {
		if err := t.openStore(sd); err != nil {
			return nil, fmt.Errorf("testdriver: %w", err)
		}
	}
	return t, nil
}

// openStore opens the store sd of the task, under its undo when it has one.
func (t *task) openStore(sd storeDef) error {
	switch sd.opts.Kind {
	case store.Window:
		s, err := t.st.OpenWindow(sd.name, sd.opts)
		if err != nil {
			return err
		}
		t.et.Windows[sd.name] = s
		if t.undo != nil {
			t.et.Windows[sd.name] = undoWindows{s, t.undo, sd.name}
		}
	case store.Session:
		s, err := t.st.OpenSession(sd.name, sd.opts)
		if err != nil {
			return err
		}
		t.et.Sessions[sd.name] = s
		if t.undo != nil {
			t.et.Sessions[sd.name] = undoSessions{s, t.undo, sd.name}
		}
	default:
		s, err := t.st.Open(sd.name, sd.opts)
		if err != nil {
			return err
		}
		t.et.Stores[sd.name] = s
		if t.undo != nil {
			t.et.Stores[sd.name] = undoStore{s, t.undo, sd.name}
		}
	}
	return nil
}

// Emit implements engine.Emitter: it keeps a copy of rec until the call ends.
func (t *task) Emit(_ context.Context, rec engine.OutputRecord) error {
	o := Output{Topic: rec.Topic, Key: cloneOrNil(rec.Key), Value: cloneOrNil(rec.Value), Timestamp: rec.Timestamp.UnixMilli()}
	if len(rec.Headers) > 0 {
		o.Headers = rec.Headers // copies the Emitter owns
	}
	t.emitted = append(t.emitted, o)
	return nil
}

func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// start starts the task's plugin, as the runtime does when the task runs: it borrows an
// instance once, which runs statehost_init bound to the task when it is new, and makes the
// punctuation schedules the task's. What the init emitted is produced.
func (d *Driver) start(ctx context.Context, t *task) error {
	in, err := t.pool.Get(ctx, t.et)
	if err != nil {
		return fmt.Errorf("testdriver: start processor %q partition %d: %w", t.proc.cfg.Name, t.part, err)
	}
	t.pool.Put(ctx, in)
	d.release(t, "start")
	return nil
}

// punctuate runs the task's due punctuations, and produces what they emitted. A failure
// stops the run, whatever the processor's on_error says (as in the runtime).
func (d *Driver) punctuate(ctx context.Context, t *task, pos string) error {
	in, err := t.pool.Get(ctx, t.et)
	if err != nil {
		return fmt.Errorf("%s: %w", pos, err)
	}
	_, err = in.Punctuate(ctx)
	t.pool.Put(ctx, in)
	if err != nil {
		t.emitted = nil
		return fmt.Errorf("%s: %w", pos, err)
	}
	d.release(t, pos)
	return nil
}

// process hands the record of dl to the task's plugin alone, in one call, then runs the
// punctuations it made due. A failure of the plugin on the record stops the run, unless the
// processor's on_error withdraws it (poison).
func (d *Driver) process(ctx context.Context, t *task, dl delivery) error {
	fresh := false
	for {
		get := t.pool.Get
		if fresh {
			get = t.pool.GetFresh
		}
		in, err := get(ctx, t.et)
		if err != nil {
			return fmt.Errorf("%s: %w", dl.pos, err)
		}
		if t.undo != nil {
			t.undo.begin()
		}
		err = in.ProcessBatch(ctx, []engine.Record{dl.rec})
		if t.undo != nil {
			t.undo.active = false
		}
		t.pool.Put(ctx, in)
		if err == nil {
			d.release(t, dl.pos)
			break
		}
		t.emitted = nil // a failed record's emits are never produced
		retry, err := d.poison(t, dl, err, fresh)
		if err != nil {
			return err
		}
		if !retry {
			break
		}
		fresh = true
	}
	if t.state.PunctuationDue() {
		return d.punctuate(ctx, t, dl.pos)
	}
	return nil
}

// Poisoned is an input record that a processor whose on_error is "skip" or "dead_letter"
// dropped, because its plugin failed on it.
type Poisoned struct {
	Pos          string // the input line it came of, "file:line" (or of the record it was emitted for)
	Processor    string
	Topic        string
	Partition    int32
	Offset       int64
	Reason       string // as the label of statehost_records_skipped_total: error, trap, panic, exit, out_of_memory, emit_budget, timeout
	DeadLettered bool   // it went to the dead-letter topic
	Err          *engine.GuestError
}

// poison handles the failure err of t's plugin on the record of dl, as the runtime's
// poison guard does (host/runtime/poison.go): with on_error "fail", or a failure that is
// not the record's, the run stops; otherwise the record's writes are undone and it is
// skipped or dead-lettered, or, when it ran out of time or memory and was not yet tried
// alone on a new instance (fresh), tried again that way (retry).
func (d *Driver) poison(t *task, dl delivery, err error, fresh bool) (retry bool, _ error) {
	ge, reason, ok := runtime.PoisonReason(err)
	if !ok || t.undo == nil || ge.Offset != dl.rec.Offset || ge.Topic != dl.rec.Topic {
		return false, fmt.Errorf("%s: %w", dl.pos, err)
	}
	if uerr := t.undo.rollback(); uerr != nil {
		return false, fmt.Errorf("%s: withdrawing the poison record: %w (after: %w)", dl.pos, uerr, err)
	}
	if !fresh && (errors.Is(ge.Kind, engine.ErrTimeout) || errors.Is(ge.Kind, engine.ErrOutOfMemory)) {
		d.log.Warn("record failed: trying it again alone on a new instance", "processor", t.proc.cfg.Name,
			"topic", dl.rec.Topic, "partition", dl.rec.Partition, "offset", dl.rec.Offset, "input", dl.pos, "error", ge.Error())
		return true, nil
	}
	p := Poisoned{Pos: dl.pos, Processor: t.proc.cfg.Name, Topic: dl.rec.Topic, Partition: dl.rec.Partition,
		Offset: dl.rec.Offset, Reason: reason, DeadLettered: t.proc.dlq != "", Err: ge}
	d.poisoned = append(d.poisoned, p)
	kv := []any{"processor", p.Processor, "topic", p.Topic, "partition", p.Partition, "offset", p.Offset,
		"input", dl.pos, "reason", reason, "error", ge.Error()}
	if !p.DeadLettered {
		d.log.Warn("poison record skipped", kv...)
		return false, nil
	}
	d.log.Warn("poison record sent to the dead-letter topic", append(kv, "dead_letter_topic", t.proc.dlq)...)
	d.produce(deadLetter(t, dl.rec, ge, d.parts[t.proc.dlq]), dl.pos)
	return false, nil
}

// deadLetter returns the dead letter of rec, which t's plugin failed on with ge: the record
// with its headers and the runtime's, to the partition of its source among the n of the
// dead-letter topic.
func deadLetter(t *task, rec engine.Record, ge *engine.GuestError, n int32) Output {
	o := Output{Topic: t.proc.dlq, Partition: rec.Partition % n, Key: rec.Key, Value: rec.Value,
		Timestamp: rec.Timestamp.UnixMilli(), Headers: slices.Clone(rec.Headers)}
	o.Headers = append(o.Headers,
		engine.Header{Key: runtime.HeaderError, Value: []byte(ge.Error())},
		engine.Header{Key: runtime.HeaderProcessor, Value: []byte(t.proc.cfg.Name)},
		engine.Header{Key: runtime.HeaderTopic, Value: []byte(rec.Topic)},
		engine.Header{Key: runtime.HeaderPartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		engine.Header{Key: runtime.HeaderOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
	)
	return o
}
