package store

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
)

// Task holds the store partitions of one task and buffers their writes between commits.
//
// Writes to the task's Pebble stores go to one indexed Pebble batch (reads see
// them); writes to its memory stores go to per-store overlays. Apply makes
// them durable, together with the stores' checkpoints, in one atomic Pebble
// batch. A Task is used by one goroutine at a time.
//
// The commit order of statehost (changelog acks, then Apply, then input
// offsets) is enforced by changelog.Task.Commit; call Apply directly only in
// code that does not log its stores.
type Task struct {
	m   *Manager
	id  TaskID
	dir string
	log hclog.Logger

	batch  *pebble.Batch // nil between commits (writes); indexed only once a read needs it (indexedBatch)
	gen    int64         // commits applied since the task opened: the uncommitted writes' generation
	parts  map[string]*Partition
	order  []*Partition
	caches []*coalescing
	iters  map[invalidator]struct{}

	closed  bool
	failErr error

	// time is the task's stream time: the largest record timestamp it has observed, loaded
	// from its Pebble stores and raised by restores; NoTime when unknown.
	time int64

	// unloggedWrites is set when the batch holds writes to a Pebble store
	// without a changelog: nothing could restore them, so Apply syncs.
	unloggedWrites bool
}

// indexedBatch returns the task's batch of uncommitted writes indexed for reads, indexing it
// first. The batch is not indexed while nothing reads through it: a task whose reads the
// partitions' read caches answer (point reads of keys they know) never pays for the index
// on every write. Iterators and reads the caches cannot answer index it until the commit.
func (t *Task) indexedBatch() *pebble.Batch {
	if t.batch == nil {
		t.batch = t.m.db.NewIndexedBatch()
	}
	if !t.batch.Indexed() {
		ib := t.m.db.NewIndexedBatch()
		if !t.batch.Empty() {
			if err := ib.Apply(t.batch, nil); err != nil {
				// Both batches are the task's, in memory: this is a bug. The writes stay in
				// the old batch, and the failed task will never apply them.
				_ = ib.Close()
				t.Fail(fmt.Errorf("store: task %s: index the uncommitted writes: %w", t.id, err))
				return t.batch
			}
		}
		_ = t.batch.Close()
		t.batch = ib
	}
	return t.batch
}

// writes returns the task's batch of uncommitted writes, taking one from Pebble when it has
// none: a task holds no batch between its commits (Apply closes it). Pebble keeps a closed
// batch's buffer, up to 1 MiB, in its pool, and the batch a task took back at once after its
// commit was that one: every idle task held a buffer the size of its last commit's writes.
func (t *Task) writes() *pebble.Batch {
	if t.batch == nil {
		t.batch = t.m.db.NewBatch()
	}
	return t.batch
}

// invalidator is an open iterator that a commit or close must stop.
type invalidator interface{ invalidate(err error) }

func newTask(m *Manager, id TaskID, dir string) *Task {
	return &Task{
		m:     m,
		id:    id,
		dir:   dir,
		log:   m.log.With("processor", id.Processor, "partition", id.Partition),
		parts: make(map[string]*Partition),
		iters: make(map[invalidator]struct{}),
		time:  NoTime,
	}
}

// StreamTime returns the task's stream time: the largest record timestamp observed
// (ObserveTime), persisted with every commit in the task's Pebble stores and recovered by
// restores of window and session stores; NoTime when unknown.
func (t *Task) StreamTime() int64 { return t.time }

// ObserveTime raises the stream time to ts if ts is larger. Negative timestamps (Kafka's
// "no timestamp") are ignored.
func (t *Task) ObserveTime(ts int64) {
	if ts > t.time {
		t.time = ts
	}
}

// DroppedWrites returns how many writes the task's window and session stores dropped since
// they were opened: late (the window or session was closed) and expired, and how many
// changelog records restores skipped because they were expired.
func (t *Task) DroppedWrites() (late, expired, skipped int64) {
	for _, p := range t.order {
		if p.win != nil {
			late, expired, skipped = late+p.win.late, expired+p.win.expired, skipped+p.win.skipped
		}
	}
	return late, expired, skipped
}

// ID returns the task's processor and partition.
func (t *Task) ID() TaskID { return t.id }

// Dir returns the task's directory, <Dir>/tasks/<processor>_<partition>.
func (t *Task) Dir() string { return t.dir }

// check returns the error every operation of a closed or failed task returns.
func (t *Task) check() error {
	switch {
	case t.closed:
		return ErrClosed
	case t.failErr != nil:
		return fmt.Errorf("%w: %w", ErrTaskFailed, t.failErr)
	case t.m.failure() != nil: // a write of another task failed the database (disk.go)
		return fmt.Errorf("%w: %w", ErrTaskFailed, t.m.failure())
	}
	return nil
}

// Open opens the key-value store called name with its options and returns it as a
// layered Store: metered (when o.Metrics is set) -> ttl (when o.TTL is enabled) ->
// coalescing (when o.Coalesce) -> logging (when o.Changelog is set) -> pebble | memory.
// A store can be opened once per task.
func (t *Task) Open(name string, o Options) (Store, error) {
	if o.Kind != KeyValue {
		return nil, fmt.Errorf("store: task %s store %q: Open opens key-value stores, not %s stores", t.id, name, o.Kind)
	}
	plan, err := planLayers(KeyValue, o)
	if err != nil {
		return nil, fmt.Errorf("store: task %s store %q: %w", t.id, name, err)
	}
	p, err := t.open(name, o)
	if err != nil {
		return nil, err
	}
	p.top = t.buildKeyValue(p, plan)
	return p.top, nil
}

// OpenWindow opens the window store called name (o.Kind Window, o.Window its spec), with
// the layers of every store: metered (when o.Metrics is set) -> logging (when o.Changelog is
// set) -> the windows over pebble | memory. It cannot coalesce.
func (t *Task) OpenWindow(name string, o Options) (WindowStore, error) {
	s, err := t.openWindowed(name, o, Window)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenSession opens the session store called name (o.Kind Session, o.Window its spec), as
// OpenWindow.
func (t *Task) OpenSession(name string, o Options) (SessionStore, error) {
	s, err := t.openWindowed(name, o, Session)
	if err != nil {
		return nil, err
	}
	return &sessionStore{s}, nil
}

func (t *Task) openWindowed(name string, o Options, k Kind) (*windowStore, error) {
	if o.Kind != k {
		return nil, fmt.Errorf("store: task %s store %q: opening a %s store with Options.Kind %s", t.id, name, k, o.Kind)
	}
	plan, err := planLayers(k, o)
	if err != nil {
		return nil, fmt.Errorf("store: task %s store %q: %w", t.id, name, err)
	}
	spec := o.Window
	if err := spec.validate(k); err != nil {
		return nil, fmt.Errorf("store: task %s store %q: %w", t.id, name, err)
	}
	o.Window = spec
	p, err := t.open(name, o)
	if err != nil {
		return nil, err
	}
	p.windows = t.buildWindowed(p, plan)
	return p.windows, nil
}

// open opens the partition of the store called name, without its layers.
func (t *Task) open(name string, o Options) (*Partition, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("store: task %s: empty store name", t.id)
	}
	if _, ok := t.parts[name]; ok {
		return nil, fmt.Errorf("store: task %s: store %q is already open", t.id, name)
	}
	p := &Partition{t: t, name: name, backend: o.Backend, logged: o.Changelog != nil, clog: o.Changelog, savedTime: NoTime,
		ttl: newTTLState(o)}
	if o.Kind != KeyValue {
		p.win = &windowed{kind: o.Kind, spec: o.Window, dropBelow: math.MinInt64}
	}
	switch o.Backend {
	case Pebble:
		id, err := t.m.partitionID(t.id, name)
		if err != nil {
			return nil, err
		}
		p.id = id
		p.prefix = dataPrefix(id)
		p.upper = dataPrefix(id + 1)
		if err := p.checkLayout(); err != nil {
			return nil, err
		}
		if err := p.loadCheckpoint(); err != nil {
			return nil, err
		}
		if err := p.loadVersion(); err != nil {
			return nil, err
		}
		t.m.noteWiped(t.id, name)
		if err := p.loadTime(); err != nil {
			return nil, err
		}
		t.ObserveTime(p.savedTime)
		p.cache = t.m.caches.newCache()
		if !t.m.set.ReadOnly {
			p.initFilter()
		}
		p.base = &pebbleStore{p: p}
	case Memory:
		p.mem = newMemData()
		p.base = &memStore{p: p}
	default:
		return nil, fmt.Errorf("store: task %s store %q: unknown backend %v", t.id, name, o.Backend)
	}
	t.parts[name] = p
	t.order = append(t.order, p)
	return p, nil
}

// Store returns the layered key-value Store opened under name, or nil.
func (t *Task) Store(name string) Store {
	if p := t.parts[name]; p != nil && p.top != nil {
		return p.top
	}
	return nil
}

// WindowStore returns the window store opened under name, or nil.
func (t *Task) WindowStore(name string) WindowStore {
	if p := t.parts[name]; p != nil && p.win != nil && p.win.kind == Window {
		return p.windows
	}
	return nil
}

// SessionStore returns the session store opened under name, or nil.
func (t *Task) SessionStore(name string) SessionStore {
	if p := t.parts[name]; p != nil && p.win != nil && p.win.kind == Session {
		return &sessionStore{p.windows}
	}
	return nil
}

// Partition returns the restore-facing handle of the store opened under name, or nil.
func (t *Task) Partition(name string) *Partition { return t.parts[name] }

// Partitions returns the task's store partitions in the order they were opened.
func (t *Task) Partitions() []*Partition { return append([]*Partition(nil), t.order...) }

// Flush passes the writes held by coalescing layers down to the layers below
// them (and so to the changelog). changelog.Task.Commit calls it before it
// waits for the changelog acks.
func (t *Task) Flush() error {
	if err := t.check(); err != nil {
		return err
	}
	for _, c := range t.caches {
		if err := c.flush(); err != nil {
			return fmt.Errorf("store: task %s: flush store %q: %w", t.id, c.name(), err)
		}
	}
	return nil
}

// UncommittedBytes returns the size of the task's uncommitted writes: the Pebble batch, the memory-store overlays and the coalescing caches.
func (t *Task) UncommittedBytes() int64 {
	if t.closed {
		return 0
	}
	n := int64(0)
	if t.batch != nil && !t.batch.Empty() {
		n += int64(t.batch.Len())
	}
	for _, p := range t.order {
		if p.mem != nil {
			n += p.mem.pendingBytes
		}
		if p.pendingVersion != 0 {
			n += versionRecordBytes // the version SetVersion staged: the commit must take it
		}
	}
	for _, c := range t.caches {
		n += c.bytes
	}
	return n
}

// NeedsCommit reports whether the uncommitted writes exceed Settings.MaxUncommittedBytes: the task asks for an early commit.
func (t *Task) NeedsCommit() bool { return t.UncommittedBytes() > t.m.set.MaxUncommittedBytes }

// Apply makes the task's uncommitted writes durable together with the
// checkpoints given (store name -> offset of the last changelog record
// acknowledged for that store), in one atomic Pebble batch (each key's last
// write only, in key order, when that is cheaper: see sortedBatch); then the
// memory stores take their writes. Open iterators are invalidated.
//
// Writes held by coalescing layers must have been flushed (Flush) first,
// else Apply fails. If Apply fails nothing is applied and the task is
// failed: it must be closed and reopened.
func (t *Task) Apply(checkpoints map[string]int64) error {
	if err := t.check(); err != nil {
		return err
	}
	for _, c := range t.caches {
		if len(c.dirty) > 0 {
			return fmt.Errorf("store: task %s: store %q has unflushed coalesced writes", t.id, c.name())
		}
	}
	names := make([]string, 0, len(checkpoints))
	for name := range checkpoints {
		if t.parts[name] == nil {
			return fmt.Errorf("store: task %s: checkpoint for unknown store %q", t.id, name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	t.invalidateIters(ErrIteratorInvalidated)
	for _, name := range names {
		p := t.parts[name]
		if p.backend == Pebble {
			_ = t.writes().Set(checkpointKey(p.id), encodeCheckpoint(Checkpoint{checkpoints[name], p.logID}), nil)
		}
	}
	for _, p := range t.order {
		if p.backend == Pebble && t.time > p.savedTime {
			_ = t.writes().Set(timeKey(p.id), encodeTime(t.time), nil)
		}
	}
	if t.batch != nil && !t.batch.Empty() {
		wo := t.m.wo
		if t.unloggedWrites {
			wo = pebble.Sync
		}
		cb := t.batch
		if sb := t.sortedBatch(t.batch); sb != nil {
			defer sb.Close()
			cb = sb
		}
		if err := t.m.commit(cb, wo); err != nil {
			err = fmt.Errorf("store: task %s: apply the commit of %s to %s: %w", t.id, t.describeCommit(checkpoints), t.m.dbDir(), err)
			t.Fail(err)
			return err
		}
		t.unloggedWrites = false
	}
	if t.batch != nil {
		_ = t.batch.Close()
		t.batch = nil
	}
	t.gen++ // the writes of the last interval are committed
	for _, p := range t.order {
		if p.mem != nil {
			p.mem.commit()
		}
		p.committedVersion()
	}
	for _, name := range names {
		p := t.parts[name]
		p.ckpt, p.hasCkpt = checkpoints[name], true
	}
	for _, p := range t.order {
		if p.backend == Pebble {
			p.savedTime = max(p.savedTime, t.time)
		}
	}
	return nil
}

// Sync makes the restore batches applied so far (Partition.ApplyRestore, which never
// fsyncs) durable, when Settings.SyncCommits is set: call it before the checkpoints they
// carry are exported, so that the exported file never claims more than the disk holds. It
// syncs Pebble's write-ahead log, which holds the batches of every task of the instance.
// Without SyncCommits it does nothing: the exported file may then be ahead of the store.
func (t *Task) Sync() error {
	if err := t.check(); err != nil {
		return err
	}
	if t.m.wo != pebble.Sync {
		return nil
	}
	if err := t.m.write(func() error { return t.m.db.LogData(nil, pebble.Sync) }); err != nil {
		return fmt.Errorf("store: task %s: sync the write-ahead log of %s: %w", t.id, t.m.dbDir(), err)
	}
	return nil
}

// Fail marks the task failed with err: its uncommitted writes will never be
// applied and every store operation returns ErrTaskFailed. The task must be
// closed and reopened; its committed state and checkpoints are intact.
func (t *Task) Fail(err error) {
	if t.failErr == nil && !t.closed {
		if err == nil {
			err = errors.New("unknown error")
		}
		t.failErr = err
		t.invalidateIters(ErrTaskFailed)
	}
}

// Err returns the error that failed the task, or nil.
func (t *Task) Err() error { return t.failErr }

// Close drops the task's uncommitted writes and closes its stores; memory stores lose their data.
func (t *Task) Close() error {
	if t.closed {
		return ErrClosed
	}
	t.close()
	return nil
}

func (t *Task) close() {
	if t.closed {
		return
	}
	t.invalidateIters(ErrClosed)
	t.closed = true
	if t.batch != nil {
		_ = t.batch.Close()
		t.batch = nil
	}
	for _, p := range t.order {
		p.mem = nil
		if p.cache != nil {
			p.cache.release()
		}
		p.releaseFilter()
	}
	t.m.forget(t.id)
}

func (t *Task) addIter(it invalidator)    { t.iters[it] = struct{}{} }
func (t *Task) removeIter(it invalidator) { delete(t.iters, it) }

func (t *Task) invalidateIters(err error) {
	for it := range t.iters {
		it.invalidate(err)
	}
	clear(t.iters)
}

// hasPending reports whether the task has uncommitted writes.
func (t *Task) hasPending() bool { return t.UncommittedBytes() > 0 }
