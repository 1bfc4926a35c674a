package changelog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/store"
)

// StoreSpec describes one store of a task.
type StoreSpec struct {
	// Name of the store; its changelog topic is TopicName(appID, Name).
	Name string
	// Options describe the store itself: its backend, kind, window, coalescing and metrics.
	// OpenTask sets their Changelog (the logging layer) unless LoggingDisabled. Coalesce is for
	// key-value stores only: OpenTask fails for a window or session store that asks for it.
	store.Options
	// LoggingDisabled turns the changelog off: no topic, no writes, nothing to restore. Default false (logged). A store without a changelog is not fault-tolerant: it loses its state with its disk (a memory store with every restart).
	LoggingDisabled bool
	// TopicConfigs are the store's changelog topic configs (they win over app-wide configs and cleanup.policy=compact). Default none.
	TopicConfigs map[string]string
	// AdditionalRetention is added to a window or session store's retention for its
	// changelog topic's retention.ms (Kafka Streams' windowstore.changelog.additional.retention.ms).
	// Default 0.
	AdditionalRetention time.Duration
}

// Windowed reports whether the store is a window or session store.
func (s StoreSpec) Windowed() bool { return s.Kind == store.Window || s.Kind == store.Session }

// TopicDefaults returns the changelog topic configs of the store's type, before app-wide and
// the store's own configs: none for a key-value store (DefaultTopicConfigs apply), but
// message.timestamp.type=CreateTime for one with a TTL (its records carry their entries'
// write times); cleanup.policy=compact,delete and retention.ms = retention +
// AdditionalRetention for window and session stores, as Kafka Streams creates them, and
// message.timestamp.type=CreateTime (their records carry the stream time).
func (s StoreSpec) TopicDefaults() map[string]string {
	if !s.Windowed() {
		if s.TTL.Enabled() {
			return map[string]string{"message.timestamp.type": "CreateTime"}
		}
		return nil
	}
	retention := s.Window.Retention
	if retention == 0 { // the store's default
		retention = max(s.Window.Size+s.Window.Gap+s.Window.Grace, store.DefaultRetention)
	}
	ms := retention + s.AdditionalRetention.Milliseconds()
	if ms < retention { // overflow
		ms = math.MaxInt64
	}
	// CreateTime: the records' timestamps are the stream time a restore recovers.
	return map[string]string{"cleanup.policy": "compact,delete", "retention.ms": strconv.FormatInt(ms, 10),
		"message.timestamp.type": "CreateTime"}
}

// TopicSpecs returns the topic specs of the logged stores among specs, for TopicManager.Ensure.
func TopicSpecs(specs []StoreSpec) []TopicSpec {
	var out []TopicSpec
	for _, s := range specs {
		if !s.LoggingDisabled {
			out = append(out, TopicSpec{Store: s.Name, Defaults: s.TopicDefaults(), Configs: s.TopicConfigs})
		}
	}
	return out
}

// TaskConfig describes a task to open.
type TaskConfig struct {
	// AppID is the application id. Required.
	AppID string
	// Processor and Partition name the task. Required.
	Processor string
	Partition int32
	// Stores are the task's stores. A task without stores is valid (its commits only wait for its output records).
	Stores []StoreSpec
	// Logger is the parent logger. Default hclog.NewNullLogger().
	Logger hclog.Logger
	// ExportRecords and ExportInterval say how often a commit rewrites the task's .checkpoint
	// file (Task.Apply): when its offsets moved by more than ExportRecords in total since the
	// file was last written, or ExportInterval has passed since then. The first commit after
	// OpenTask writes it if it is missing, and Close writes it if it is behind. Defaults:
	// 10,000 records (Kafka Streams' threshold for its checkpoint files) and 1 minute; a
	// negative ExportRecords rewrites it at every commit that moves it (the file, its fsync and
	// its directory's fsync: two fsyncs per task per commit at 4,096 tasks, the cost this
	// bounds). The file is an export; the store holds the authoritative checkpoint.
	ExportRecords  int64
	ExportInterval time.Duration
}

// Defaults of TaskConfig.ExportRecords and ExportInterval.
const (
	DefaultExportRecords  = 10_000
	DefaultExportInterval = time.Minute
)

// Task is a task's state as the runtime drives it: its layered stores, its
// output producer, and its commit.
//
// A Task is used by one goroutine at a time. Its states: open -> (restored by
// restore.Restorer) -> processing and committing -> closed; a failed commit
// leaves it failed, and a failed task only closes.
type Task struct {
	cfg    TaskConfig
	st     *store.Task
	tr     *tracker
	log    hclog.Logger
	logged []LoggedStore
	logs   []*storeLog // the changelog writers of logged, in the same order
	failed error
	file   []store.CheckpointEntry // last exported checkpoint file
	// exportedAt is when the file was last written, or a time up to half of ExportInterval
	// before (at random, see jitter): the exports of tasks opened together do not fall on
	// one commit.
	exportedAt time.Time
}

// LoggedStore is a logged store partition of a task, as restore sees it.
type LoggedStore struct {
	Store     string
	Topic     string
	Partition int32
	Part      *store.Partition
}

// OpenTask opens the task's stores in m, logging them through p.
func OpenTask(m *store.Manager, p *Producer, cfg TaskConfig) (*Task, error) {
	if cfg.AppID == "" {
		return nil, errors.New("changelog: TaskConfig.AppID is required")
	}
	if p == nil {
		return nil, errors.New("changelog: nil producer")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.ExportRecords == 0 {
		cfg.ExportRecords = DefaultExportRecords
	}
	if cfg.ExportInterval <= 0 {
		cfg.ExportInterval = DefaultExportInterval
	}
	var logged []string
	for _, s := range cfg.Stores {
		if !s.LoggingDisabled {
			logged = append(logged, s.Name)
		}
	}
	tr, err := p.claim(cfg.Processor, cfg.Partition, logged)
	if err != nil {
		return nil, err
	}
	st, err := m.OpenTask(cfg.Processor, cfg.Partition)
	if err != nil {
		p.release(cfg.Processor, cfg.Partition, tr)
		return nil, err
	}
	t := &Task{
		cfg: cfg,
		st:  st,
		tr:  tr,
		log: cfg.Logger.Named("changelog").With("processor", cfg.Processor, "partition", cfg.Partition),
	}
	for _, s := range cfg.Stores {
		o := s.Options
		topic := TopicName(cfg.AppID, s.Name)
		var sl *storeLog
		if !s.LoggingDisabled {
			sl = newStoreLog(t.tr, topic, cfg.Partition)
			if s.Windowed() {
				sl.clock = st // its records carry the stream time: restores rebuild it
			}
			o.Changelog = sl
		}
		var err error
		switch s.Kind {
		case store.Window:
			_, err = st.OpenWindow(s.Name, o)
		case store.Session:
			_, err = st.OpenSession(s.Name, o)
		default:
			_, err = st.Open(s.Name, o)
		}
		if err != nil {
			_ = st.Close()
			p.release(cfg.Processor, cfg.Partition, tr)
			return nil, err
		}
		if !s.LoggingDisabled {
			t.logged = append(t.logged, LoggedStore{Store: s.Name, Topic: topic, Partition: cfg.Partition, Part: st.Partition(s.Name)})
			t.logs = append(t.logs, sl)
		}
	}
	if entries, err := store.ReadCheckpointFile(filepath.Join(st.Dir(), store.CheckpointFileName)); err == nil {
		t.file = entries
	}
	t.exportedAt = time.Now().Add(-t.jitter())
	return t, nil
}

// Processor returns the task's processor name.
func (t *Task) Processor() string { return t.cfg.Processor }

// Partition returns the task's partition.
func (t *Task) Partition() int32 { return t.cfg.Partition }

// Store returns the layered key-value store called name, or nil.
func (t *Task) Store(name string) store.Store { return t.st.Store(name) }

// WindowStore returns the window store called name, or nil.
func (t *Task) WindowStore(name string) store.WindowStore { return t.st.WindowStore(name) }

// SessionStore returns the session store called name, or nil.
func (t *Task) SessionStore(name string) store.SessionStore { return t.st.SessionStore(name) }

// LoggedStores returns the task's logged store partitions, in the order of TaskConfig.Stores.
func (t *Task) LoggedStores() []LoggedStore { return slices.Clone(t.logged) }

// StoreTask returns the underlying store task.
func (t *Task) StoreTask() *store.Task { return t.st }

// Dir returns the task's directory.
func (t *Task) Dir() string { return t.st.Dir() }

// WaitHook is told when one of a task's records waits for room among the producer's records
// in flight (the slow path of a store write or an Output: the producer has as many records in
// flight as its client may buffer, or as many bytes as its bound), and when that wait ends. The runtime passes the task's
// engine.HostWaits, which takes the wait off the time limit of the plugin call that writes or
// emits.
//
// Both methods are called on the goroutine that writes or outputs, around the wait.
type WaitHook interface {
	// BeginWait is called when the wait begins. It returns the context of the plugin call
	// in progress, or nil: a store write (which has no context of its own) stops waiting
	// when it ends.
	BeginWait() context.Context
	// EndWait is called when the wait ends, whether there is room or not.
	EndWait()
}

// SetWaitHook sets the hook told of the task's waits for room in the producer; nil removes
// it. Call it before the task writes or outputs.
func (t *Task) SetWaitHook(h WaitHook) { t.tr.hook = h }

// Output produces a record to an output topic through the task's tracking: the next Commit waits for its acknowledgement.
// Key, value and headers are copied. The record is queued with the task's changelog
// records, in order, until the next Flush.
//
// While the producer has as many records in flight as the client may buffer
// (kgo.MaxBufferedRecords), or their bytes reach its bound (WithMaxBytesInFlight), Output
// flushes the task's queue and waits for room (telling the task's WaitHook); when ctx ends
// first, it returns an error that wraps ctx's, and after the producer's wait limit one that
// matches ErrNoRoom, both naming the record's topic and partition and the producer's limits
// in flight; the record is not produced.
func (t *Task) Output(ctx context.Context, r OutputRecord) error {
	if err := t.check(); err != nil {
		return err
	}
	n := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	if err := t.tr.reserve(ctx, n); err != nil {
		return fmt.Errorf("changelog: output to %s partition %d: waiting for room among the producer's %s: %w",
			r.Topic, r.Partition, t.tr.p.bound(), err)
	}
	mem := &t.tr.mem
	kr := mem.record()
	kr.Topic, kr.Partition, kr.Timestamp = r.Topic, r.Partition, r.Timestamp
	if r.Key != nil {
		kr.Key = mem.copy(r.Key)
	}
	if r.Value != nil {
		kr.Value = mem.copy(r.Value)
	}
	if len(r.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)}
		}
	}
	t.tr.produce(kr, t.tr.promise, r.Input)
	return nil
}

// Flush hands the records that the task's stores and Output queued since the last Flush to
// the producer client, in order. Call it when a plugin call returns: records are queued, not
// produced, until then (a commit flushes them too).
func (t *Task) Flush() { t.tr.flush() }

// HandOvers counts the times records of the task were handed to the producer client: by a
// Flush, or by a write or Output that found no room and flushed the queue to wait for some.
// Under exactly-once such records are in the open transaction, so a commit must include
// what produced them. Safe to call from any goroutine.
func (t *Task) HandOvers() uint64 { return t.tr.handOvers.Load() }

// HasWork reports whether the task has anything to commit: uncommitted writes, or records
// produced since its last commit.
func (t *Task) HasWork() bool { return t.st.UncommittedBytes() > 0 || t.tr.producedSinceWait() }

// NeedsCommit reports whether the task's uncommitted writes exceed store.Settings.MaxUncommittedBytes: commit early.
func (t *Task) NeedsCommit() bool { return t.st.NeedsCommit() }

// Commit runs the at-least-once commit of the task, in this order:
//  1. the writes held by coalescing stores go down to the changelog;
//  2. every changelog and output record produced so far is acknowledged;
//  3. the task's write batch and its checkpoints (last acknowledged offset
//     per changelog partition) are applied in one atomic Pebble batch;
//  4. the .checkpoint file is exported, when it is due (TaskConfig.ExportRecords);
//  5. commitOffsets, if not nil, commits the input offsets.
//
// A failure in 1-3 applies nothing, never calls commitOffsets, and fails the
// task (ErrTaskFailed): close it and open it again; its stores hold the last
// commit and restore the changelog records produced after it. A failure of
// commitOffsets returns an *OffsetCommitError; the state is applied and the
// task stays usable. A failure to export the file is logged, not returned:
// the authoritative checkpoint is in the store.
//
// Exactly-once splits the same steps around a Kafka transaction: Prepare
// (1-2), then the transaction commits, then Apply (3-4).
func (t *Task) Commit(ctx context.Context, commitOffsets func(context.Context) error) error {
	p, err := t.Prepare(ctx)
	if err != nil {
		return err
	}
	if err := t.Apply(p); err != nil {
		return err
	}
	if commitOffsets != nil {
		if err := commitOffsets(ctx); err != nil {
			return &OffsetCommitError{Err: err}
		}
	}
	return nil
}

// Prepared is a task's commit whose records are all acknowledged, waiting to be applied to
// its stores.
type Prepared struct {
	checkpoints map[string]int64 // store -> offset of its last acknowledged changelog record
}

// Prepare runs steps 1 and 2 of Commit: the coalesced writes go down to the changelog and
// every record produced so far is acknowledged. Under exactly-once the records are then part
// of the producer's open transaction; Apply them only once it has committed, and close the
// task instead when it aborts. A failure fails the task (ErrTaskFailed).
func (t *Task) Prepare(ctx context.Context) (Prepared, error) {
	if err := t.check(); err != nil {
		return Prepared{}, err
	}
	if err := t.st.Flush(); err != nil {
		return Prepared{}, t.fail(err)
	}
	if err := t.tr.wait(ctx); err != nil {
		return Prepared{}, t.fail(err)
	}
	cps := make(map[string]int64)
	for i, ls := range t.logged {
		if o, ok := t.logs[i].take(); ok {
			cps[ls.Store] = o
		}
	}
	return Prepared{checkpoints: cps}, nil
}

// Apply runs steps 3 and 4 of Commit with what Prepare returned: the task's write batch and
// its checkpoints are applied in one atomic Pebble batch, then the .checkpoint file is
// exported if it is due (TaskConfig.ExportRecords). The task must not have written since
// Prepare. A failure fails the task.
func (t *Task) Apply(p Prepared) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := t.st.Apply(p.checkpoints); err != nil {
		return t.fail(err)
	}
	if err := t.export(false, false); err != nil {
		t.log.Warn("could not export the checkpoint file", "error", err)
	}
	return nil
}

// ExportCheckpoints writes the task's .checkpoint file from the checkpoints in
// its persistent logged stores, when they changed since the last export.
func (t *Task) ExportCheckpoints() error { return t.export(true, false) }

// export writes the .checkpoint file when the checkpoints changed since the last export and,
// unless force, the export is due: the file has no checkpoint yet, the offsets moved by more
// than ExportRecords, or ExportInterval has passed. Skipping leaves the file behind the store,
// never ahead of it: a restore starts from the store's checkpoint, and what the file claims
// the store holds. With sync, the store's restore batches are made durable first
// (store.Task.Sync), as a restore does before its export.
func (t *Task) export(force, sync bool) error {
	entries, err := t.checkpointEntries()
	if err != nil {
		return err
	}
	if slices.Equal(entries, t.file) {
		return nil
	}
	if !force && len(t.file) > 0 && time.Since(t.exportedAt) < t.cfg.ExportInterval &&
		t.cfg.ExportRecords >= 0 && offsetDelta(t.file, entries) <= t.cfg.ExportRecords {
		return nil
	}
	if sync {
		if err := t.st.Sync(); err != nil {
			return err
		}
	}
	if err := store.WriteCheckpointFile(t.checkpointPath(), entries); err != nil {
		return err
	}
	t.exported(entries)
	return nil
}

// ExportAll exports the checkpoint files of tasks as ExportCheckpoints does each, in one
// write of them all with two syncs of the file system in all (store.WriteCheckpointFiles):
// a restore of thousands of tasks exports as many files. The tasks' stores must be synced.
func ExportAll(tasks []*Task) error {
	var (
		files []store.CheckpointFile
		done  []*Task
		errs  []error
	)
	for _, t := range tasks {
		entries, err := t.checkpointEntries()
		if err != nil {
			errs = append(errs, fmt.Errorf("task %s_%d: %w", t.cfg.Processor, t.cfg.Partition, err))
			continue
		}
		if slices.Equal(entries, t.file) {
			continue
		}
		files = append(files, store.CheckpointFile{Path: t.checkpointPath(), Entries: entries})
		done = append(done, t)
	}
	if err := store.WriteCheckpointFiles(files); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i, t := range done {
		t.exported(files[i].Entries)
	}
	return errors.Join(errs...)
}

// checkpointPath is the path of the task's checkpoint file.
func (t *Task) checkpointPath() string { return filepath.Join(t.st.Dir(), store.CheckpointFileName) }

// exported records that the checkpoint file now holds entries.
func (t *Task) exported(entries []store.CheckpointEntry) {
	first := len(t.file) == 0
	t.file, t.exportedAt = entries, time.Now()
	if first {
		// The tasks opened together write their first checkpoints at one commit: their next
		// exports by ExportInterval fall apart.
		t.exportedAt = t.exportedAt.Add(-t.jitter())
	}
}

// jitter returns a random duration of up to half of ExportInterval.
func (t *Task) jitter() time.Duration { return rand.N(t.cfg.ExportInterval/2 + 1) }

// offsetDelta is how far the offsets of now moved past those of before, in total; an entry
// new in now counts its offset + 1.
func offsetDelta(before, now []store.CheckpointEntry) int64 {
	var n int64
	for _, e := range now {
		from := int64(-1)
		for _, b := range before {
			if b.Topic == e.Topic && b.Partition == e.Partition {
				from = b.Offset
				break
			}
		}
		n += max(e.Offset-from, 0)
	}
	return n
}

// checkpointEntries returns the checkpoints of the task's persistent logged stores, as the
// .checkpoint file lists them.
func (t *Task) checkpointEntries() ([]store.CheckpointEntry, error) {
	var entries []store.CheckpointEntry
	for _, ls := range t.logged {
		if !ls.Part.Persistent() {
			continue
		}
		cp, ok, err := ls.Part.Checkpoint()
		if err != nil {
			return nil, err
		}
		if ok {
			entries = append(entries, store.CheckpointEntry{Topic: ls.Topic, Partition: ls.Partition, Offset: cp.Offset})
		}
	}
	return entries, nil
}

func (t *Task) check() error {
	if t.failed != nil {
		return fmt.Errorf("%w: %w", ErrTaskFailed, t.failed)
	}
	return nil
}

func (t *Task) fail(err error) error {
	t.failed = err
	t.st.Fail(err)
	t.log.Error("commit failed, the task must be reopened", "error", err)
	return fmt.Errorf("%w: processor %s partition %d: %w", ErrTaskFailed, t.cfg.Processor, t.cfg.Partition, err)
}

// Err returns the error that failed the task, or nil.
func (t *Task) Err() error { return t.failed }

// Close writes the .checkpoint file if the commits left it behind the store (Apply exports it
// only when due), closes the task's stores, dropping its uncommitted writes, then waits
// until the records it produced are acknowledged or failed, or ctx ends.
//
// Records flushed since the last commit still reach the changelog (and are
// restored by the task's next owner: at-least-once); records still queued
// (written or emitted since the last Flush) are dropped, as the writes are. If
// ctx ends first, Close returns an error matching ErrInFlight, and OpenTask
// refuses the same task with an *InFlightError until those records have
// landed.
func (t *Task) Close(ctx context.Context) error {
	if t.failed == nil {
		// The commits that skipped the export (Apply): the file catches up with the store.
		// A failed task or database keeps the file it has, as a failed Apply does. Synced
		// first: a standby's restore batches (never synced) may have moved its checkpoints.
		if xerr := t.export(true, true); xerr != nil && !errors.Is(xerr, store.ErrTaskFailed) {
			t.log.Warn("could not export the checkpoint file", "error", xerr)
		}
	}
	err := t.st.Close()
	t.tr.discard()
	if werr := t.tr.wait(ctx); werr != nil && ctx.Err() != nil {
		err = errors.Join(err, fmt.Errorf("%w: %w", ErrInFlight, werr))
	}
	t.tr.p.release(t.cfg.Processor, t.cfg.Partition, t.tr)
	return err
}
