package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/store"
)

// Task describes what an instance serves during a call: a processor on one partition. An
// instance is bound to one task at a time (Instance.Bind); the instances of a Pool serve
// the tasks of one processor in turn.
type Task struct {
	// Processor is the processor's name, used in logs and errors. Required.
	Processor string
	// Partition is the task's partition, used in logs and errors.
	Partition int32
	// Stores are the processor's key-value stores by name; the guest opens them (and the
	// window and session stores) with store_open.
	Stores map[string]Store
	// Windows are the processor's window stores by name.
	Windows map[string]store.WindowStore
	// Sessions are the processor's session stores by name.
	Sessions map[string]store.SessionStore
	// Clock keeps the task's stream time: record_next raises it to each record's timestamp,
	// and the window and session stores read it. Default: a clock of the binding's own,
	// starting unknown (as a store.Task does); a task served by several instances, or bound
	// more than once, needs one of its own.
	Clock Clock
	// Outputs are the processor's output topics; the guest emits by index (0 = the first).
	Outputs []string
	// Emitter takes the emitted records. Required when Outputs is not empty.
	Emitter Emitter
	// Logger is the base logger of the instance. Default: the engine's Config.Logger; the
	// instance logs under the sub-logger "guest" with processor and partition set.
	Logger hclog.Logger
	// Waits, when set, lets the task's stores and Emitter take the time they wait for room in
	// a producer off the time limit of the guest calls for the task (see HostWaits). Give
	// every binding of a task the same one. Default nil: every moment of a call counts.
	Waits *HostWaits
	// LogLimiter, when set, is the rate limit of the task's guest log (Config.GuestLogRate).
	// Give every binding of a task the same one, so that the limit holds whichever instance
	// serves the task. Default nil: each binding has one of its own.
	LogLimiter *LogLimiter
	// State keeps the task's punctuation times and guest logger between its calls, whichever
	// instance serves them (TaskState). Give every binding of a task the same one. Default
	// nil: each binding has one of its own, so the schedules start again at each Bind.
	State *TaskState
	// StoreLimits bound the changelog records of the logged stores, by store name: the
	// largest Kafka record batch (bytes) that a write's changelog record may take alone. A
	// state_put, state_delete, window_put or session_put whose record would not fit answers
	// CodeLimit and changes nothing (limits.go). A store not named, or with 0, has no bound
	// (an unlogged store). Default none.
	StoreLimits map[string]int
	// OutputLimits bound the emitted records, by output index as in Outputs: the largest
	// record batch an emitted record may take alone; a larger emit answers CodeLimit and
	// emits nothing. A missing or 0 entry: no bound but abi.MaxEmitBytes. Default none.
	OutputLimits []int
	// EmitBudget bounds the bytes (keys, values, header keys and values) that the guest emits
	// for one input record: the emit that passes it answers CodeLimit and fails the call with
	// ErrEmitBudget (a poison record). A punctuation's emits are not counted. Default 0: no
	// budget.
	EmitBudget int64
}

// Instance is one instantiation of a Module, serving the task it is bound to (Bind): one task
// at a time, and over its life possibly many (Pool).
//
// An Instance is not safe for concurrent use: one goroutine at a time calls ProcessBatch,
// and Close must not run while ProcessBatch does (it returns ErrInstanceBusy then, leaving the
// instance open). To stop a running batch, for example when the task is revoked, cancel the
// context passed to ProcessBatch: the guest is stopped, ProcessBatch returns ErrCanceled,
// and Close can follow. After ProcessBatch returns a *GuestError the instance is dead:
// further calls return an error wrapping ErrInstanceDead, and the caller must Close it and,
// if it wants to go on, instantiate a new one and replay from its last commit.
// (ErrInstanceBusy and ErrClosed leave it as it was.)
type Instance struct {
	mod     *Module
	task    Task         // the task it is bound to (bind.go); zero when none
	proc    string       // the processor whose tasks it serves: the first task's
	initFor int32        // the partition of the task statehost_init ran for (Module.InitUsesState)
	st      *TaskState   // task's state; nil when bound to no task
	log     hclog.Logger // task's guest logger
	guest   api.Module
	mem     api.Memory
	batchF  api.Function
	stack   [1]uint64

	// stores are the stores the guest opened, by handle: the name and kind are the
	// instance's, the store itself the bound task's (openStore.resolve).
	stores       []openStore
	storeIndex   map[string]int32
	defs         []schedule   // the schedules statehost_init made (their times are the task's: TaskState)
	initializing bool         // statehost_init runs: schedule is allowed
	punct        *punctuation // the punctuation being run, nil outside statehost_punctuate
	iters        [abi.MaxOpenIterators]*openIterator
	iterGen      [abi.MaxOpenIterators]int32 // generation of each slot's latest handle

	// The batch being processed: batch[cursor] is the current record when 0 <= cursor <
	// len(batch); last is the index of the last record handed to the guest, -1 before any.
	// blame is the index of the record a failure is attributed to: the current record, or
	// the one record_next is fetching after it answered CodeBufferTooSmall (the guest may
	// die growing its buffer), batch[0] before the first record_next.
	batch  []Record
	cursor int
	last   int
	blame  int

	needed   int32  // buffer_needed
	message  string // set_error
	hostErr  error  // the first store or emitter failure of the call
	hostKind error  // ErrStore, ErrEmit or ErrEmitBudget, for hostErr
	hostAt   int    // blame when hostErr happened
	refused  error  // the call's last *LimitError, for its failure (limits.go)
	// valueResult: the call's result is a value, not a status code (statehost_store_version).
	valueResult bool

	emitted   int64 // bytes emitted for the record at emittedAt, counted in Task.EmitBudget
	emittedAt int   // the cursor of the record emitted counts, -1 for none

	intr           interrupter // stops a running call at its deadline or cancellation
	logs           *LogLimiter // the bound task's, or the binding's own
	stdout, stderr guestOutput
	busy           atomic.Bool
	dead           error
	closed         bool
}

// openStore is a store opened by the guest: store for a key-value store, win for a window
// store, sess for a session store, each of the bound task (name and kind are the instance's).
type openStore struct {
	name  string
	kind  int32 // abi.StoreKeyValue, abi.StoreWindow or abi.StoreSession
	limit int   // the bound task's Task.StoreLimits bound of the store's changelog records, 0 for none
	store Store
	win   store.WindowStore
	sess  store.SessionStore
}

// openIterator is an iterator opened by the guest: it over a key-value store, or wit over a
// window or session store. When pending is set, the iterator is positioned on an entry that
// has not been written to the guest yet.
type openIterator struct {
	store   int32
	it      Iterator
	wit     store.WindowIterator
	pending bool
	done    bool
}

// Clock keeps a task's stream time; *store.Task is one.
type Clock interface {
	StreamTime() int64
	ObserveTime(ts int64)
}

// ownClock is the Clock of a binding whose Task has none.
type ownClock struct{ t int64 }

func (c *ownClock) StreamTime() int64 { return c.t }
func (c *ownClock) ObserveTime(ts int64) {
	if ts > c.t {
		c.t = ts
	}
}

// callCtx is the context of a guest call: it carries the instance to the host functions
// without a context lookup. A new one is made per call and never changed.
type callCtx struct {
	context.Context
	in *Instance
}

type instanceKey struct{}

// Value implements context.Context.
func (c *callCtx) Value(key any) any {
	if key == (instanceKey{}) {
		return c.in
	}
	return c.Context.Value(key)
}

// instanceFrom returns the instance a host function is called for, or nil.
func instanceFrom(ctx context.Context) *Instance {
	if c, ok := ctx.(*callCtx); ok {
		return c.in
	}
	in, _ := ctx.Value(instanceKey{}).(*Instance)
	return in
}

// Instantiate creates an instance of m bound to task (Bind): it instantiates the module
// sandboxed (no filesystem, network, environment or arguments; stdout and stderr go to the
// log), runs _initialize and statehost_init if exported, within Config.BatchTimeout, bound
// to task. A failure of guest code is a *GuestError with Offset -1; a guest that exits while
// starting, even with code 0, fails with ErrExit.
//
// The instance may then serve other tasks of the same processor (Bind, Pool), unless the
// module asks for an instance per task (Module.InstancePerTask).
func (m *Module) Instantiate(ctx context.Context, task Task) (*Instance, error) {
	if m.eng.isClosed() {
		return nil, ErrClosed
	}
	in := &Instance{
		mod:        m,
		proc:       task.Processor,
		initFor:    task.Partition,
		storeIndex: map[string]int32{},
		stdout:     guestOutput{level: hclog.Debug, stream: "stdout"},
		stderr:     guestOutput{level: hclog.Warn, stream: "stderr", keep: true},
	}
	if err := in.bind(task, "instantiate"); err != nil {
		return nil, err
	}

	// No start functions: _initialize runs below, as every guest call, under the
	// interrupter, which needs the instantiated module's global.
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(&in.stdout).
		WithStderr(&in.stderr)
	guest, err := m.eng.rt.InstantiateModule(&callCtx{Context: ctx, in: in}, m.compiled, cfg)
	if err != nil {
		return nil, in.failure(ctx, nil, nil, err, 0, false)
	}
	global, ok := guest.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		_ = guest.Close(ctx)
		return nil, fmt.Errorf("engine: instantiate %q: the module lacks its interrupt global %s", task.Processor, interruptExport)
	}
	in.intr.global = global
	in.guest = guest
	in.mem = guest.Memory()
	in.batchF = guest.ExportedFunction(abi.ExportProcessBatch)
	if m.hasInitialize {
		if err := in.call(ctx, guest.ExportedFunction(abi.ExportInitialize), nil); err != nil {
			return nil, err // call closed the module
		}
	}
	if m.hasInit {
		in.initializing = true
		err := in.call(ctx, guest.ExportedFunction(abi.ExportInit), nil)
		in.initializing = false
		if err != nil {
			_ = guest.Close(ctx)
			return nil, err
		}
	}
	in.st.adopt(in.defs)
	return in, nil
}

// ready returns why in cannot make a guest call now: closed, dead or bound to no task. The
// caller holds busy.
func (in *Instance) ready() error {
	switch {
	case in.closed:
		return ErrClosed
	case in.dead != nil:
		return fmt.Errorf("engine: processor %q partition %d: %w; it failed earlier: %v",
			in.task.Processor, in.task.Partition, ErrInstanceDead, in.dead)
	case in.st == nil:
		return ErrNotBound
	}
	return nil
}

// ProcessBatch hands records to the guest in one call of statehost_process_batch. The
// records are only read, and only during the call. Every state write and emit the guest
// makes happens during the call, in order; on failure, those made before it are not undone
// (the runtime discards the task's uncommitted work).
//
// A failure is a *GuestError carrying the offset of the record it is attributed to (see
// GuestError); the instance is dead after it. To stop a running call, cancel ctx.
func (in *Instance) ProcessBatch(ctx context.Context, records []Record) error {
	// A best-effort guard against misuse: it turns two concurrent calls into ErrInstanceBusy
	// instead of a corrupted instance.
	if !in.busy.CompareAndSwap(false, true) {
		return ErrInstanceBusy
	}
	defer in.busy.Store(false)
	if err := in.ready(); err != nil {
		return err
	}
	if len(records) == 0 {
		return nil
	}
	in.batch, in.cursor, in.last, in.blame = records, -1, -1, 0
	defer func() { in.batch = nil }()
	in.stack[0] = api.EncodeI32(int32(len(records)))
	return in.call(ctx, in.batchF, in.stack[:])
}

// call runs one guest call (statehost_init or statehost_process_batch) within the time
// limit and turns any failure into a *GuestError, marking the instance dead.
func (in *Instance) call(ctx context.Context, fn api.Function, stack []uint64) error {
	in.message, in.hostErr, in.hostKind, in.needed = "", nil, nil, 0
	in.refused, in.emitted, in.emittedAt = nil, 0, -1
	in.stderr.reset()
	var buf [1]uint64
	if stack == nil {
		stack = buf[:]
	}
	cctx, cancel := in.intr.arm(ctx, in.mod.eng.cfg.BatchTimeout)
	c := &callCtx{Context: cctx, in: in}
	waits := in.task.Waits
	if waits != nil {
		waits.running.Store(c)
	}
	err := fn.CallWithStack(c, stack)
	if waits != nil {
		waits.running.Store(nil)
	}
	interrupted := in.intr.disarm()
	// done is the call context's end, cause why: context.DeadlineExceeded for the time limit.
	var done, cause error
	if done = cctx.Err(); done != nil {
		cause = context.Cause(cctx)
	}
	if cancel != nil {
		cancel(context.Canceled)
	}
	in.closeIterators()
	in.stdout.endCall(false)
	in.stderr.flush() // the markers of a Go crash, for failure
	switch {
	case err != nil:
		err = in.failure(ctx, done, cause, err, 0, interrupted)
	case in.guest.IsClosed():
		// The guest called proc_exit(0), which wazero may report as success. It may have
		// exited because a host function gave up at the deadline (an emit that timed out):
		// failure tells, as when wazero reports the exit.
		err = in.failure(ctx, done, cause, sys.NewExitError(0), 0, false)
	case !in.valueResult && api.DecodeI32(stack[0]) != abi.CodeOK || in.hostErr != nil:
		err = in.failure(ctx, done, cause, nil, api.DecodeI32(stack[0]), false)
	case in.batch != nil && in.last != len(in.batch)-1:
		// Success needs every record taken; the final record_next that returns 0 is optional.
		err = in.newError(ErrProtocol, 0, fmt.Errorf("guest returned success after taking %d of %d records", in.last+1, len(in.batch)))
	}
	in.stderr.endCall(err != nil)
	if n := in.logs.takeUnmetered(); n > 0 && in.mod.eng.cfg.OnGuestLogsDropped != nil {
		in.mod.eng.cfg.OnGuestLogsDropped(in.task.Processor, in.task.Partition, n)
	}
	if err != nil {
		in.dead = err
		if in.guest != nil {
			_ = in.guest.Close(context.WithoutCancel(ctx))
		}
	}
	return err
}

// failure classifies a failed guest call: callErr is the error of the call, or nil when the
// guest returned code; done is the error of the call's context when the call ended, and
// cause its context.Cause (context.DeadlineExceeded when the time limit ran out);
// interrupted reports that the interrupter stopped the guest (the trap is its check's).
func (in *Instance) failure(ctx context.Context, done, cause, callErr error, code int32, interrupted bool) *GuestError {
	if in.hostErr != nil && done != nil && (errors.Is(in.hostErr, done) || errors.Is(in.hostErr, cause)) {
		// A host function (an Emitter under backpressure) gave up because the call's
		// time limit ran out or its context was canceled: that is where the call was stuck,
		// whether the guest then returned or wazero stopped it.
		kind := ErrTimeout
		if !errors.Is(cause, context.DeadlineExceeded) {
			kind = ErrCanceled
		}
		// in.hostKind (ErrEmit, ErrStore) stays in the chain: the caller can tell a host
		// function's wait (a producer under backpressure) from a guest that ran too long.
		host := fmt.Errorf("%w: %w", in.hostKind, in.hostErr)
		if interrupted && callErr != nil {
			// The guest went on and met the host's stop: the trap is the host's, not news.
			return in.newErrorAt(in.hostAt, kind, 0, &stopError{text: host.Error(), errs: []error{host, callErr}})
		}
		return in.newErrorAt(in.hostAt, kind, 0, errors.Join(callErr, host))
	}
	if in.hostKind == ErrEmitBudget {
		// The record passed its emit budget: that is the failure, whatever the guest did then
		// (a Go guest may panic on the error, a C guest trap).
		return in.newErrorAt(in.hostAt, ErrEmitBudget, 0, errors.Join(in.hostErr, callErr))
	}
	if callErr == nil {
		if in.hostErr != nil {
			return in.newErrorAt(in.hostAt, in.hostKind, 0, in.hostErr)
		}
		return in.newError(ErrGuestFailed, code, nil)
	}
	var exit *sys.ExitError
	errors.As(callErr, &exit)
	if in.hostErr != nil {
		// The guest died after a host function failed (maybe of it: a Go guest that panics
		// on a failed write). The kind is the guest's; the host's failure stays in the chain,
		// so that the caller can tell, e.g., a producer that had no room.
		callErr = errors.Join(callErr, fmt.Errorf("%w: %w", in.hostKind, in.hostErr))
	}
	switch {
	case interrupted && errors.Is(cause, context.DeadlineExceeded):
		reason := fmt.Sprintf("stopped after running past the batch time limit of %v", in.mod.eng.cfg.BatchTimeout)
		if ctx.Err() != nil {
			reason = fmt.Sprintf("stopped at the deadline of the caller's context (%v)", cause) // not the limit's
		}
		return in.newError(ErrTimeout, 0, in.stopped(reason, cause, callErr))
	case interrupted:
		// The cause the caller gave, if any, and context.Canceled, both in the chain.
		ctxCause := context.Cause(ctx)
		return in.newError(ErrCanceled, 0, in.stopped(fmt.Sprintf("stopped when the call was canceled (%v)", ctxCause), errors.Join(ctx.Err(), ctxCause), callErr))
	// What the Go runtime printed decides first: a panic near the memory limit is a panic.
	case in.stderr.panicked:
		return in.newError(ErrPanic, 0, callErr)
	case in.stderr.oom:
		return in.newError(ErrOutOfMemory, 0, callErr)
	case exit != nil:
		return in.newError(ErrExit, 0, callErr)
	// A trap without a Go marker near the memory limit most likely follows a failed
	// allocation (C's malloc returned NULL and the guest trapped on it).
	case in.nearMemoryLimit():
		return in.newError(ErrOutOfMemory, 0, callErr)
	default:
		return in.newError(ErrTrap, 0, callErr)
	}
}

// stopped returns the error of a guest call that the interrupter stopped: its text is the
// reason and, if a host function had failed, that failure, but not the trap (wasm's
// "unreachable"), which is the host's own stop; the chain keeps cause and callErr.
func (in *Instance) stopped(reason string, cause, callErr error) error {
	// callErr joins the host function's failure, if any (see failure): its text follows.
	if in.hostErr != nil {
		reason = fmt.Sprintf("%s; %v: %v", reason, in.hostKind, in.hostErr)
	}
	errs := []error{callErr}
	if cause != nil {
		errs = append(errs, cause)
	}
	return &stopError{text: reason, errs: errs}
}

// nearMemoryLimit reports whether the guest's memory is within 4 MiB (the growth step of
// Go's heap) of the memory limit: a trap then most likely follows a failed allocation.
func (in *Instance) nearMemoryLimit() bool {
	if in.mem == nil {
		return false
	}
	limit := uint64(in.mod.eng.cfg.memoryLimitPages()) * wasmPageSize
	if max, ok := in.mem.Definition().Max(); ok && uint64(max)*wasmPageSize < limit {
		limit = uint64(max) * wasmPageSize
	}
	return uint64(in.mem.Size())+min(4<<20, limit/8) >= limit
}

// newError builds a *GuestError attributed to the record to blame (see Instance.blame).
func (in *Instance) newError(kind error, code int32, err error) *GuestError {
	return in.newErrorAt(in.blame, kind, code, err)
}

// newErrorAt builds a *GuestError attributed to batch[at], when a batch is running.
func (in *Instance) newErrorAt(at int, kind error, code int32, err error) *GuestError {
	ge := &GuestError{
		Module:      in.mod.name,
		Processor:   in.task.Processor,
		Partition:   in.task.Partition,
		Offset:      -1,
		FirstOffset: -1,
		LastOffset:  -1,
		Kind:        kind,
		Code:        code,
		Detail:      in.message,
		Err:         err,
	}
	if len(in.batch) > 0 {
		at = min(max(at, 0), len(in.batch)-1)
		r := &in.batch[at]
		ge.Topic, ge.Offset = r.Topic, r.Offset
		ge.FirstOffset, ge.LastOffset = in.batch[0].Offset, in.batch[len(in.batch)-1].Offset
	}
	if ge.Detail == "" {
		ge.Detail = in.stderr.detail()
	}
	if in.refused != nil && in.hostErr == nil {
		// The host answered CodeLimit earlier in the call: the guest's failure most likely
		// follows it, and the limit is what to change.
		if err == nil {
			ge.Err = in.refused
		} else {
			ge.Err = fmt.Errorf("%w (after %w)", err, in.refused)
		}
	}
	return ge
}

// current returns the current record, or nil.
func (in *Instance) current() *Record {
	if in.cursor >= 0 && in.cursor < len(in.batch) {
		return &in.batch[in.cursor]
	}
	return nil
}

// closeIterators closes every iterator the guest left open.
func (in *Instance) closeIterators() {
	for i, it := range in.iters {
		if it != nil {
			if err := it.close(); err != nil {
				in.log.Warn("closing store iterator", "store", in.stores[it.store].name, "error", err)
			}
			in.iters[i] = nil
		}
	}
}

// Err returns the failure that killed the instance, or nil while it is alive.
func (in *Instance) Err() error { return in.dead }

// Close closes the instance. It is idempotent. It must not be called while ProcessBatch
// runs: it then returns ErrInstanceBusy and leaves the instance open (cancel the batch's
// context, wait for ProcessBatch to return, then Close).
func (in *Instance) Close(ctx context.Context) error {
	if !in.busy.CompareAndSwap(false, true) {
		return ErrInstanceBusy
	}
	defer in.busy.Store(false)
	if in.closed {
		return nil
	}
	in.closed = true
	in.closeIterators()
	if err := in.guest.Close(ctx); err != nil {
		return fmt.Errorf("engine: close instance of %s: %w", in.mod.name, err)
	}
	return nil
}
