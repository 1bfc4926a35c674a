package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/hashicorp/go-hclog"
)

// Defaults of Settings.
const (
	// DefaultMemoryBytes is the default of Settings.MemoryBytes: 256 MiB.
	DefaultMemoryBytes = 256 << 20
	// DefaultMaxUncommittedBytes is the default of Settings.MaxUncommittedBytes: 64 MiB.
	DefaultMaxUncommittedBytes = 64 << 20
	// MinMemoryBytes is the smallest accepted Settings.MemoryBytes: 8 MiB.
	MinMemoryBytes = 8 << 20
)

// Settings configure a Manager.
type Settings struct {
	// Dir is the instance's state directory, <state_dir>/<application_id>. Required; created when missing.
	Dir string
	// MemoryBytes bounds the memory of the instance's state, however many tasks the instance holds: Pebble's block cache and memtables, and the read caches and key filters of the Pebble stores. Half goes to at most four memtables of MemoryBytes/8 each, 1/8 to the read caches, 1/32 to the key filters, the rest (11/32) to the block cache. The sort buffers of the restores that bypass the memtables (Loader) share another MemoryBytes/8: the size of the memtable they do not fill. Default DefaultMemoryBytes (256 MiB); at least MinMemoryBytes.
	MemoryBytes int64
	// MaxUncommittedBytes is the size of a task's uncommitted writes (write buffer, coalescing caches, memory-store overlays) above which Task.NeedsCommit reports true, asking the runtime for an early commit. Default DefaultMaxUncommittedBytes (64 MiB).
	MaxUncommittedBytes int64
	// SyncCommits makes every commit (Task.Apply) fsync Pebble's write-ahead log before it returns. Default false: a commit whose writes all go to logged stores is appended to the WAL without fsync. Pebble hands a WAL block to the operating system only when the block (32 KiB) fills or a sync is requested, so a killed process may drop its last commits (data and checkpoint together, never one without the other); the restore then replays them from the changelog, which holds every acknowledged record. A commit that writes to a Pebble store with logging disabled is always synced: nothing could restore it. Restore batches never fsync (Task.Sync makes them durable before a checkpoint file names them); wipes always do.
	SyncCommits bool
	// SkipLock leaves <Dir>/LOCK alone, for a runtime that already holds it. Default false: Open takes an exclusive flock on <Dir>/LOCK, released when the process dies.
	SkipLock bool
	// ReadOnly opens the state for inspection: Pebble's read-only mode (the write-ahead log is
	// replayed in memory, nothing is written), no directory is created, and the lock is taken
	// through a read-only handle, held only while the Manager is open (a running instance
	// still refuses to share the directory). Writes fail. Default false.
	ReadOnly bool
	// Logger receives the logs of the stores and of Pebble (Pebble's info lines at debug level). Default hclog.NewNullLogger().
	Logger hclog.Logger
	// WallClock is the clock of the stores whose TTL counts in wall-clock time (TTLWallClock).
	// Default time.Now.
	WallClock func() time.Time
}

func (s *Settings) validate() error {
	if s.Dir == "" {
		return errors.New("store: Settings.Dir is required")
	}
	if s.MemoryBytes == 0 {
		s.MemoryBytes = DefaultMemoryBytes
	}
	if s.MemoryBytes < MinMemoryBytes {
		return fmt.Errorf("store: Settings.MemoryBytes %d is below the minimum %d", s.MemoryBytes, MinMemoryBytes)
	}
	if s.MaxUncommittedBytes == 0 {
		s.MaxUncommittedBytes = DefaultMaxUncommittedBytes
	}
	if s.MaxUncommittedBytes < 0 {
		return fmt.Errorf("store: Settings.MaxUncommittedBytes %d is negative", s.MaxUncommittedBytes)
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	return nil
}

// Manager is the instance-wide state of statehost: one Pebble database under
// <Dir>/pebble shared by all the tasks of the instance, and the task
// directories under <Dir>/tasks.
//
// One database per instance keeps Pebble's memory bounded by one setting
// whatever the number of tasks (see docs/decisions/20261129_pebble_layout.md).
// A Manager is safe for concurrent use; each Task it opens is used by one
// goroutine at a time.
type Manager struct {
	set  Settings
	log  hclog.Logger
	db   *pebble.DB
	lock *os.File
	wo   *pebble.WriteOptions

	failed  dbFailure   // a write failed for good: every operation fails (disk.go)
	corrupt atomic.Bool // corruption was found and marked for the next Open (disk.go)
	wiped   wipes       // Open wiped the corrupt database: the tasks that had state (disk.go)

	caches  *cacheBudget  // the read caches of the tasks' Pebble partitions
	filters *filterBudget // the key filters of the tasks' Pebble partitions
	loads   *loadBudget   // the sort buffers of the Loaders (loader.go)
	popts   *pebble.Options
	sched   *compactionScheduler // holds compactions back while loaders run

	mu     sync.Mutex
	closed bool
	tasks  map[TaskID]*Task
	// readers counts the calls that read the database without holding mu (LocalTasks);
	// Close waits for them before it closes the database.
	readers sync.WaitGroup
}

// TaskID names a task: a processor and one of its input partitions.
type TaskID struct {
	Processor string
	Partition int32
}

// String returns "<processor>_<partition>", the name of the task's directory.
func (id TaskID) String() string { return fmt.Sprintf("%s_%d", id.Processor, id.Partition) }

// Open opens (creating when missing) the state of an instance in s.Dir.
func Open(s Settings) (*Manager, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if !s.ReadOnly {
		if err := os.MkdirAll(filepath.Join(s.Dir, "tasks"), 0o755); err != nil {
			return nil, fmt.Errorf("store: create state directory: %w", err)
		}
	}
	m := &Manager{set: s, log: s.Logger.Named("store"), tasks: make(map[TaskID]*Task), wo: pebble.NoSync,
		caches: newCacheBudget(s.MemoryBytes), filters: newFilterBudget(s.MemoryBytes), loads: newLoadBudget(s.MemoryBytes),
		sched: newCompactionScheduler()}
	if s.SyncCommits {
		m.wo = pebble.Sync
	}
	if !s.SkipLock {
		f, err := lockDir(filepath.Join(s.Dir, "LOCK"), s.ReadOnly)
		if err != nil {
			return nil, err
		}
		m.lock = f // nil: read-only, and no instance ever locked the directory
	}
	cache := pebble.NewCache(s.MemoryBytes/2 - s.MemoryBytes/readCacheShare - s.MemoryBytes/filterShare)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                uint64(s.MemoryBytes / 8),
		MemTableStopWritesThreshold: 4,
		Logger:                      pebbleLogger{m.log.Named("pebble"), m},
		EventListener:               m.eventListener(),
		ReadOnly:                    s.ReadOnly,
	}
	opts.Experimental.CompactionScheduler = m.sched
	// Bloom filters on L0 to L5: a Get of a key the store does not hold (the first record of
	// every new key) then skips the tables that cannot hold it instead of searching each L0
	// table and every level's index. Pebble keeps none by default. Not on L6: Pebble's point reads do not consult L6 filters (IterOptions.UseL6Filters is
	// off for DB.Get), so they would only cost their building and caching there.
	for i := range 6 {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	opts.Levels[6].FilterPolicy = pebble.NoFilterPolicy
	db, err := m.openDB(opts) // a corrupt database is wiped (disk.go)
	if err != nil {
		m.unlock()
		return nil, err
	}
	if !s.ReadOnly {
		if err := m.resetLoadDir(); err != nil {
			_ = db.Close()
			m.unlock()
			return nil, err
		}
	}
	m.db, m.popts = db, opts.Clone()
	m.sched.setL0(func() int { return int(db.Metrics().Levels[0].Sublevels) })
	m.popts.EnsureDefaults() // as Pebble's own copy: the loaders' sstable writers read them
	m.log.Debug("opened", "dir", s.Dir, "memory_bytes", s.MemoryBytes)
	return m, nil
}

// Settings returns the settings in force, defaults filled in.
func (m *Manager) Settings() Settings { return m.set }

// OpenTask opens the task (processor, partition), creating its directory
// <Dir>/tasks/<processor>_<partition>. A task can be open once at a time.
func (m *Manager) OpenTask(processor string, partition int32) (*Task, error) {
	id := TaskID{processor, partition}
	if err := checkName(processor); err != nil {
		return nil, fmt.Errorf("store: processor name: %w", err)
	}
	if partition < 0 {
		return nil, fmt.Errorf("store: task %s: negative partition", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if err := m.failure(); err != nil {
		return nil, fmt.Errorf("store: task %s: %w", id, err)
	}
	if _, ok := m.tasks[id]; ok {
		return nil, fmt.Errorf("store: task %s is already open", id)
	}
	dir := filepath.Join(m.set.Dir, "tasks", id.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: task %s: create directory: %w", id, err)
	}
	t := newTask(m, id, dir)
	m.tasks[id] = t
	return t, nil
}

// checkName refuses a processor name that cannot be a directory name under tasks/.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not allowed", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("%q contains a path separator or NUL", name)
	}
	return nil
}

// Stats describes the memory of the instance's Pebble database.
type Stats struct {
	// MemTableBytes is the memory allocated by memtables and large batches.
	MemTableBytes int64
	// BlockCacheBytes is the memory in use by the block cache.
	BlockCacheBytes int64
	// ReadCacheBytes is the memory the read caches of the Pebble stores hold (an estimate).
	ReadCacheBytes int64
	// KeyFilterBytes is the memory the key filters of the Pebble stores hold.
	KeyFilterBytes int64
	// Tasks is the number of open tasks.
	Tasks int
}

// Stats returns the current memory figures of the instance.
func (m *Manager) Stats() Stats {
	mt := m.db.Metrics()
	m.mu.Lock()
	n := len(m.tasks)
	m.mu.Unlock()
	return Stats{MemTableBytes: int64(mt.MemTable.Size), BlockCacheBytes: mt.BlockCache.Size,
		ReadCacheBytes: m.caches.total.Load(), KeyFilterBytes: m.filters.used.Load(), Tasks: n}
}

// Close closes every open task (dropping their uncommitted writes), then the database, then releases the lock.
//
// Tasks are not safe for concurrent use: stop the goroutines that use them
// (or close the tasks) before Close.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.closed = true
	tasks := make([]*Task, 0, len(m.tasks))
	for _, t := range m.tasks {
		tasks = append(tasks, t)
	}
	m.mu.Unlock()
	for _, t := range tasks {
		t.close()
	}
	m.readers.Wait()
	if ferr := m.failure(); ferr != nil {
		// Pebble's commit pipeline is broken: closing gives its files and lock back, and
		// fails again on the write that failed.
		_ = recoverFatal(m.db.Close)
		m.unlock()
		return fmt.Errorf("store: close: %w", ferr)
	}
	err := m.db.Close()
	m.unlock()
	if err != nil {
		return fmt.Errorf("store: close pebble: %w", err)
	}
	return nil
}

func (m *Manager) unlock() {
	if m.lock != nil {
		unlockDir(m.lock)
		m.lock = nil
	}
}

func (m *Manager) forget(id TaskID) {
	m.mu.Lock()
	delete(m.tasks, id)
	m.mu.Unlock()
}

// Key layout of the shared database. Every store partition gets a 4-byte id
// from a registry; its data and checkpoint live under that id.
const (
	nsMeta       = 0x00 // registry: nsMeta 'i' uvarint(len(processor)) processor partition(4) store -> id(4); nsMeta 'n' -> next id(4)
	nsData       = 0x01 // nsData id(4) user-key -> value
	nsCheckpoint = 0x02 // nsCheckpoint id(4) -> offset(8) logID(16)
	nsTime       = 0x03 // nsTime id(4) -> the task's stream time (8) at the partition's last commit or restore
	nsLayout     = 0x04 // nsLayout id(4) -> kind(1) segment interval(8), for window and session partitions
	nsVersion    = 0x05 // nsVersion id(4) -> the version of a key-value partition's entries, decimal (version.go)
)

// partitionID returns the id of store name of task id, allocating it on first use.
func (m *Manager) partitionID(id TaskID, name string) (uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	rk := registryKey(id, name)
	v, c, err := m.db.Get(rk)
	if err == nil {
		defer c.Close()
		if len(v) != 4 {
			return 0, fmt.Errorf("store: task %s store %q: corrupt registry entry", id, name)
		}
		return binary.BigEndian.Uint32(v), nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("store: task %s store %q: read registry: %w", id, name, err)
	}
	nk := []byte{nsMeta, 'n'}
	next := uint32(1)
	if v, c, err := m.db.Get(nk); err == nil {
		next = binary.BigEndian.Uint32(v)
		c.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("store: read registry: %w", err)
	}
	if next == ^uint32(0) {
		return 0, errors.New("store: store partition ids exhausted")
	}
	b := m.db.NewBatch()
	defer b.Close()
	_ = b.Set(rk, binary.BigEndian.AppendUint32(nil, next), nil)
	_ = b.Set(nk, binary.BigEndian.AppendUint32(nil, next+1), nil)
	if err := m.commit(b, pebble.Sync); err != nil {
		return 0, fmt.Errorf("store: task %s store %q: write registry in %s: %w", id, name, m.dbDir(), err)
	}
	return next, nil
}

// registryKey returns the registry key of store name of task id. With name "" it is the
// prefix of all the task's entries: the processor is length-prefixed and the partition
// fixed-width, so no other task's entries share it.
func registryKey(id TaskID, name string) []byte {
	rk := []byte{nsMeta, 'i'}
	rk = binary.AppendUvarint(rk, uint64(len(id.Processor)))
	rk = append(rk, id.Processor...)
	rk = binary.BigEndian.AppendUint32(rk, uint32(id.Partition))
	return append(rk, name...)
}

// prefixEnd returns the first key after every key that begins with prefix, nil when there is none.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// wipeKeys adds to b the deletion of store partition id's data, checkpoint, stream time and
// version.
func wipeKeys(b *pebble.Batch, id uint32) {
	_ = b.DeleteRange(dataPrefix(id), dataPrefix(id+1), nil)
	_ = b.Delete(checkpointKey(id), nil)
	_ = b.Delete(timeKey(id), nil)
	_ = b.Delete(versionKey(id), nil)
}

// anyKey reports whether r holds a key in [lower, upper).
func anyKey(r pebble.Reader, lower, upper []byte) (bool, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return false, err
	}
	found := it.First()
	return found, it.Close()
}

func dataPrefix(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{nsData}, id)
}

func checkpointKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{nsCheckpoint}, id)
}

func timeKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{nsTime}, id)
}

func layoutKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{nsLayout}, id)
}

func encodeTime(t int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t)) }

// pebbleLogger sends Pebble's logs to hclog. Fatalf, Pebble's word for an error it cannot
// recover from (a write of its log or MANIFEST failed), fails the Manager and panics with a
// fatalPanic, which the Manager's writes turn into an error (Manager.write); in Pebble's
// background work nothing can catch it, and the process stops after the error line.
type pebbleLogger struct {
	l hclog.Logger
	m *Manager
}

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Error(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(fatalPanic{p.m.fatal(fmt.Sprintf(format, args...))})
}
