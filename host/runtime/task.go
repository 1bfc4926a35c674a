package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/store"
)

// taskID names a task: a processor and a partition of its inputs. It is the store's task id,
// so that the runtime's tasks and their state directories have one name.
type taskID = store.TaskID

// topicPartition is an input partition.
type topicPartition struct {
	topic string
	part  int32
}

// taskState is where a task is in its life.
type taskState int

const (
	// stateAssigned: the task's partitions are assigned; its stores are not restored yet.
	stateAssigned taskState = iota
	// stateRunning: the task's stores are restored; it processes records.
	stateRunning
)

func (s taskState) String() string {
	if s == stateRunning {
		return "running"
	}
	return "restoring"
}

// task is one processor's work on one partition: its stores (through changelog.Task), the
// pool of plugin instances it borrows from, and the input records it processed since its
// last commit.
type task struct {
	id         taskID
	proc       *processor
	state      taskState
	failed     bool // processing or committing failed: the task only closes, without a commit
	abandoned  bool // a job of it was stopped: what it did may not be committed (the task closes or revives)
	waitLogged bool // the wait for its previous run's records was logged

	cl  *changelog.Task // nil until opened
	mod *engine.Module  // the module it runs, its pool's
	rt  *Runtime

	taskPlugin // its pool, the instance its job borrowed, its engine.TaskState (pools.go)

	// waits takes the task's waits for room in the producer off the time limit of the guest
	// call in progress, whichever instance serves the task (the changelog task's hook, and
	// engine.Task.Waits).
	waits *engine.HostWaits
	logs  engine.LogLimiter // the rate limit of its guest log, kept across the instances serving it

	// last is the last record processed per input topic since the last commit; nil entries
	// are not kept. The loop fills it when a job ends, commits read and clear it.
	last map[string]*kgo.Record
	// first is the first record of the task's jobs per input topic since its last commit
	// (processed, or in its running job): the committed offset of its partition cannot pass
	// it until the task commits (offsetFor).
	first map[string]*kgo.Record
	// job is the plugin call a worker runs for the task, nil when none (dispatch.go); held
	// are the records handed to the task meanwhile, per input topic, for its next job.
	job  *job
	held map[string][]*kgo.Record
	// owed: the task was busy at the last commit; it commits as soon as its job ends, before
	// its next job starts.
	owed bool
	// mig is the migration of its stores to the versions of a module that it must make before
	// it runs that module, from when it is planned until that module runs; nil when none
	// (migrate.go). A task with one starts no batch or punctuation.
	mig *taskMigration
	// unread is the module that cannot read the task's stores (ErrStoreAhead) while the task
	// waits for another (waitForModule, migrate.go); nil when it does not wait. A waiting task
	// has no plugin: it starts no job, and holds the records of its partitions.
	unread *engine.Module

	dropped   [3]int64  // late, expired and restore-skipped window writes reported so far
	droppedAt time.Time // when they were last reported
	sweptAt   time.Time // when its sweep of expired entries last made a step (ttl.go)

	// guard withdraws the effects of poison records; nil when the processor's on_error is
	// "fail" (poison.go).
	guard *poisonGuard
}

// openStores opens the task's stores, not restored yet.
func (t *task) openStores() error {
	cl, err := changelog.OpenTask(t.rt.stores, t.rt.kafka.producer, changelog.TaskConfig{
		AppID:     t.rt.cfg.ApplicationID,
		Processor: t.id.Processor,
		Partition: t.id.Partition,
		Stores:    t.proc.stores,
		Logger:    t.rt.opts.Logger,
	})
	if err != nil {
		return fmt.Errorf("runtime: task %s: open stores: %w", t.id, err)
	}
	t.cl = cl
	return nil
}

// startPlugin starts the task's plugin, its processor's current module, over its restored
// stores: it takes the module's pool and borrows an instance once (start). The task is not
// busy.
func (t *task) startPlugin(ctx context.Context) error {
	t.et = t.engineTask()
	pool, own := t.proc.poolFor(t.rt.deploy.modFor(t), t.rt.opts.Workers)
	err := t.start(ctx, pool, own)
	t.flush() // what an init wrote
	if err != nil {
		t.failed = true // an init may have written: nothing of it may be committed
		return err
	}
	return nil
}

// flush hands what the task's last plugin call wrote and emitted to the producer client.
// Records are queued during a plugin call (changelog.Task.Flush), so a call that runs on has
// nothing in the open transaction (commitTxnLocked). Under exactly-once two kinds of tasks
// keep their records queued until their commit (changelog.Task.Prepare hands them over),
// because their ended jobs cannot be committed while they (or others) are busy: a task with a
// coalescing store (its cache holds writes its changelog lacks until then), and a task that
// shares an input partition with another processor's task (the partition's committed offset
// cannot pass either's position: they commit only together, settled).
func (t *task) flush() {
	if !t.queuedUntilCommit() {
		t.cl.Flush()
	}
}

// queuedUntilCommit reports whether the task keeps what its jobs write and emit queued until
// its commit (flush): under exactly-once, when it coalesces or shares an input partition.
func (t *task) queuedUntilCommit() bool { return t.rt.eos != nil && (t.coalesces() || t.shared()) }

// shares reports whether another processor reads the input topic too: its partition has one
// committed offset for both tasks.
func (t *task) shares(topic string) bool { return len(t.rt.readers[topic]) > 1 }

// shared reports whether the task shares one of its inputs (shares).
func (t *task) shared() bool { return slices.ContainsFunc(t.proc.cfg.Inputs, t.shares) }

// coalesces reports whether one of the task's logged stores coalesces its writes.
func (t *task) coalesces() bool {
	return slices.ContainsFunc(t.proc.stores, func(s changelog.StoreSpec) bool { return s.Coalesce && !s.LoggingDisabled })
}

// engineTask describes the task to the engine: its stores, outputs and stream time, and the
// HostWaits its changelog task tells of its waits for room in the producer (set here, where
// every instance of the task starts, whether the task opened its stores or took a promoted
// standby's).
func (t *task) engineTask() engine.Task {
	if t.waits == nil {
		t.waits = &engine.HostWaits{}
	}
	t.cl.SetWaitHook(t.waits)
	t.cl.SetSource(taskSource{t.waits}) // a refused record's error names its input (source.go)
	et := engine.Task{
		Processor: t.id.Processor,
		Partition: t.id.Partition,
		Stores:    map[string]store.Store{},
		Windows:   map[string]store.WindowStore{},
		Sessions:  map[string]store.SessionStore{},
		Clock:     t.cl.StoreTask(),
		Outputs:   t.proc.cfg.Outputs,
		Emitter:   emitter{t},
		Logger:    t.rt.opts.Logger,
		Waits:     t.waits,
		// Size limits (limits.go) and the emit budget.
		StoreLimits:  t.proc.storeLimits,
		OutputLimits: t.proc.outputLimits,
		EmitBudget:   t.proc.cfg.EmitBudget,
	}
	et.LogLimiter, et.State = &t.logs, &t.engState
	if t.proc.cfg.OnError == config.OnErrorSkip || t.proc.cfg.OnError == config.OnErrorDeadLetter {
		if t.guard == nil {
			t.guard = newPoisonGuard(t)
		}
	}
	for _, s := range t.proc.stores {
		switch {
		case s.Kind == store.Window && t.guard != nil:
			et.Windows[s.Name] = guardedWindows{t.cl.WindowStore(s.Name), t.guard, s.Name}
		case s.Kind == store.Window:
			et.Windows[s.Name] = t.cl.WindowStore(s.Name)
		case s.Kind == store.Session && t.guard != nil:
			et.Sessions[s.Name] = guardedSessions{t.cl.SessionStore(s.Name), t.guard, s.Name}
		case s.Kind == store.Session:
			et.Sessions[s.Name] = t.cl.SessionStore(s.Name)
		case t.guard != nil:
			et.Stores[s.Name] = guardedStore{t.cl.Store(s.Name), t.guard, s.Name}
		default:
			et.Stores[s.Name] = t.cl.Store(s.Name)
		}
	}
	return et
}

// process hands records (of the task's input partitions, each in offset order) to the
// plugin, then runs the punctuations they made due. It runs as the task's job (dispatch.go);
// the job's end records the last record of each input for the commit.
func (t *task) process(ctx context.Context, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	bp := recordBatches.get(len(recs))
	defer recordBatches.put(bp)
	batch := *bp
	for _, kr := range recs {
		er := engine.Record{
			Topic:     kr.Topic,
			Partition: kr.Partition,
			Offset:    kr.Offset,
			Timestamp: kr.Timestamp,
			Key:       kr.Key,
			Value:     kr.Value,
		}
		if len(kr.Headers) > 0 {
			er.Headers = make([]engine.Header, len(kr.Headers))
			for i, h := range kr.Headers {
				er.Headers[i] = engine.Header{Key: h.Key, Value: h.Value}
			}
		}
		batch = append(batch, er)
	}
	*bp = batch
	if err := t.borrow(ctx); err != nil {
		return err
	}
	defer t.giveBack(ctx)
	if t.guard != nil {
		defer t.guard.idle()
	}
	began := time.Now()
	processed := len(recs)
	if t.guard != nil {
		var err error
		if processed, err = t.processGuarded(ctx, batch); err != nil {
			return err
		}
	} else if err := t.inst.ProcessBatch(ctx, batch); err != nil {
		return err // an *engine.GuestError: it names the processor, partition, offset and module
	}
	t.rt.metrics.processedBatch(t.id.Processor, processed, time.Since(began))
	n, err := t.inst.Punctuate(ctx)
	if err == nil {
		err = t.sweepExpired()
	}
	t.flush() // what the batch, the punctuations and the sweep wrote and emitted
	t.rt.metrics.punctuated(t.id.Processor, n)
	return err // nil, or an *engine.GuestError naming the punctuation
}

// punctuate runs the task's due punctuations outside a batch (wall-clock schedules while no
// records arrive), and a step of its sweep of expired entries when one is due, as the task's
// job. A job for the sweep alone borrows no plugin instance.
func (t *task) punctuate(ctx context.Context) error {
	if !t.engState.PunctuationDue() {
		err := t.sweepExpired()
		t.flush()
		return err
	}
	if err := t.borrow(ctx); err != nil {
		return err
	}
	defer t.giveBack(ctx)
	n, err := t.inst.Punctuate(ctx)
	if err == nil {
		err = t.sweepExpired()
	}
	t.flush()
	t.rt.metrics.punctuated(t.id.Processor, n)
	return err
}

// reportDropped logs, at most every droppedLogInterval, the writes the task's window and
// session stores dropped since the last report: late and expired writes as a warning, the
// expired changelog records a restore skipped (the effect of the changelog's additional
// retention) at info level.
func (t *task) reportDropped() {
	if time.Since(t.droppedAt) < droppedLogInterval {
		return
	}
	late, expired, skipped := t.cl.StoreTask().DroppedWrites()
	d := t.dropped
	switch {
	case late != d[0] || expired != d[1]:
		t.rt.log.Warn("dropped writes to closed or expired windows", "processor", t.id.Processor, "partition", t.id.Partition,
			"late", late-d[0], "expired", expired-d[1], "restore_skipped", skipped-d[2])
	case skipped != d[2]:
		t.rt.log.Info("restore skipped expired window records", "processor", t.id.Processor, "partition", t.id.Partition,
			"records", skipped-d[2])
	default:
		return
	}
	t.rt.metrics.droppedWrites(t.id.Processor, late-d[0], expired-d[1], skipped-d[2])
	t.dropped, t.droppedAt = [3]int64{late, expired, skipped}, time.Now()
}

// droppedLogInterval is the least time between two reports of a task's dropped writes.
const droppedLogInterval = 10 * time.Second

// close lets go of the plugin's pool (closing it if it is the task's own) and closes the
// stores, dropping uncommitted writes. The task is not busy (Runtime.stopJob).
func (t *task) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first error
	t.dropPool(ctx)
	if t.cl != nil {
		if err := t.cl.Close(ctx); err != nil && first == nil {
			first = fmt.Errorf("task %s: close stores: %w", t.id, err)
		}
		t.cl = nil
	}
	t.last = nil
	return first
}

// emitter produces a task's emitted records to their output topics, partitioned by key.
type emitter struct{ t *task }

// Emit waits while the producer is full (through the task's HostWaits: the wait is not
// charged to the plugin call's time limit), until there is room, ctx (the plugin call's)
// ends, or the producer's wait limit passes.
func (e emitter) Emit(ctx context.Context, rec engine.OutputRecord) error {
	if g := e.t.guard; g != nil && g.active {
		return g.emit(ctx, rec) // held back until the record is done (poison.go)
	}
	return e.t.output(ctx, rec, changelog.Input{})
}

// output produces an emitted record to its output topic, partitioned by key; in names its
// input record, zero: the one the guest works on. It waits while the producer is full, until
// there is room, ctx ends, or the producer's wait limit passes.
func (t *task) output(ctx context.Context, rec engine.OutputRecord, in changelog.Input) error {
	n, ok := t.rt.outParts[rec.Topic]
	if !ok {
		return fmt.Errorf("output topic %s is unknown", rec.Topic)
	}
	out := changelog.OutputRecord{
		Topic:     rec.Topic,
		Partition: KeyPartition(rec.Key, n, t.id.Partition),
		Key:       rec.Key,
		Value:     rec.Value,
		Timestamp: rec.Timestamp,
		Input:     in,
	}
	if len(rec.Headers) > 0 {
		out.Headers = make([]changelog.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			out.Headers[i] = changelog.Header{Key: h.Key, Value: h.Value}
		}
	}
	return t.cl.Output(ctx, out)
}
