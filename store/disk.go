package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Disk trouble: a database found corrupt, and writes that the disk refuses.
//
// The instance's stores share one Pebble database (see docs/decisions/20261129_pebble_layout.md),
// so a corrupt file cannot be pinned on one store: a table, the MANIFEST or the write-ahead log
// holds keys of any store partition. Wiping "the store" therefore means wiping the database:
// every store partition of the instance loses its local state and its checkpoint, and restores
// from its changelog from the start. Stores with logging disabled lose their data for good.
//
//   - Open wipes the database when opening it fails on corruption: a malformed MANIFEST, WAL or
//     table (Pebble's corruption errors), a MANIFEST or table that is missing, a table whose
//     size is not the one the MANIFEST recorded, or a read of the stores' metadata (registry,
//     checkpoints, stream times) or of the tables' properties that hits a corrupt block. It
//     logs a warning with the database's path and the error, and one per task that had state;
//     each store then logs, when its task opens it, a warning naming the store and partition.
//   - Corruption found later, by a read of a store's data (a block whose checksum does not
//     match), fails that read with Pebble's corruption error, and marks the database: the file
//     <Dir>/pebble-corrupt records the error, and the next Open wipes the database as above.
//     Pebble's default, a crash, is replaced by this.
//   - Nothing else wipes: a directory that cannot be read or written, a full disk, another
//     process holding the lock, fail Open with their error and leave the files alone.
//   - A write that Pebble cannot complete (its log cannot be written or synced: a full disk, a
//     read-only file system, an I/O error) fails the database: Pebble treats it as fatal, and
//     the commit returns an error wrapping ErrDatabaseFailed instead of crashing the process;
//     every later operation of the Manager fails with it. Nothing of that commit is applied:
//     its data and its checkpoint are one batch, and a batch torn in the log is dropped when
//     the log is replayed at the next Open. The exported checkpoint file is written only after
//     a commit succeeded. The next Open (after space was freed) finds the last durable commit.

// ErrDatabaseFailed is wrapped by the errors of every operation after a write to the instance's
// database failed in a way Pebble cannot recover from (its write-ahead log or MANIFEST could
// not be written: a full disk, a read-only file system, an I/O error). The Manager must be
// closed; the process may open the directory again once the disk is fixed.
var ErrDatabaseFailed = errors.New("store: the state database failed a write")

// corruptMarker is the file of the state directory that records corruption found after Open:
// the next Open wipes the database.
const corruptMarker = "pebble-corrupt"

// wipeSuffix names the database directory while it is being wiped: Open renames it first, so
// that a crash in the middle leaves no half-wiped database, and finishes an interrupted wipe.
const wipeSuffix = ".wipe"

// dbFailure is the state of a Manager whose database failed a write.
type dbFailure struct {
	err atomic.Pointer[error]
}

func (f *dbFailure) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (f *dbFailure) set(err error) { f.err.CompareAndSwap(nil, &err) }

// fatalPanic is the panic value of pebbleLogger.Fatalf: Manager.write recovers it as an error.
// Uncaught (in Pebble's background work), the process stops printing its message.
type fatalPanic struct{ err error }

func (f fatalPanic) Error() string { return f.err.Error() }

// wipedTask is what a task held before its database was wiped, for the warnings of its stores.
type wipedTask struct {
	cause       error
	checkpoints []CheckpointEntry // its exported checkpoint file, when it had one
	logged      map[string]bool   // the stores whose warning was logged
}

// wipes remembers, after Open wiped the database, the tasks that had state.
type wipes struct {
	mu    sync.Mutex
	tasks map[TaskID]wipedTask
}

// dbDir returns the directory of the instance's Pebble database.
func (m *Manager) dbDir() string { return filepath.Join(m.set.Dir, "pebble") }

// failure returns the error that failed the database, or nil.
func (m *Manager) failure() error { return m.failed.get() }

// commit commits b with wo. A failure that Pebble treats as fatal fails the database and comes
// back as an error wrapping ErrDatabaseFailed (see pebbleLogger.Fatalf) instead of a crash.
func (m *Manager) commit(b *pebble.Batch, wo *pebble.WriteOptions) error {
	return m.write(func() error { return b.Commit(wo) })
}

// write runs fn, a write to the database, unless the database has failed; a Pebble fatal error
// in fn is returned as an error.
func (m *Manager) write(fn func() error) error {
	if err := m.failure(); err != nil {
		return err
	}
	return recoverFatal(fn)
}

// recoverFatal runs fn and returns the error of a Pebble fatal error in it (a fatalPanic).
func recoverFatal(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	return fn()
}

// fatal records a fatal error of Pebble: the database is unusable from now on.
func (m *Manager) fatal(msg string) error {
	err := fmt.Errorf("%w (%s): %s", ErrDatabaseFailed, m.dbDir(), msg)
	m.failed.set(err)
	m.log.Error("the state database failed a write and cannot be used until the process restarts; nothing of the failed commit is applied",
		"path", m.dbDir(), "error", msg)
	return m.failure()
}

// eventListener returns the Pebble event listener of the database: corruption found by a read
// marks the database for a wipe at the next Open, instead of Pebble's default (a crash).
func (m *Manager) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			m.markCorrupt(info.Path, info.Details)
		},
		BackgroundError: func(err error) {
			m.log.Named("pebble").Error("background error", "path", m.dbDir(), "error", err)
		},
	}
}

// markCorrupt records that the database is corrupt (file path, error details): the next Open
// wipes it. It writes the marker once.
func (m *Manager) markCorrupt(path string, details error) {
	if m.set.ReadOnly {
		m.log.Error("the state database is corrupt", "path", path, "error", details)
		return
	}
	if !m.corrupt.CompareAndSwap(false, true) {
		return
	}
	marker := filepath.Join(m.set.Dir, corruptMarker)
	text := fmt.Sprintf("%s %s: %v\n", time.Now().UTC().Format(time.RFC3339), path, details)
	if err := writeFileSync(marker, []byte(text)); err != nil {
		m.log.Error("the state database is corrupt, and the marker that makes the next start wipe it could not be written: "+
			"delete the database to have every store restored from its changelog", "path", path, "marker", marker, "error", details, "marker_error", err)
		return
	}
	m.log.Error("the state database is corrupt: the next start wipes it and restores every store from its changelog",
		"path", path, "marker", marker, "error", details)
}

// openDB opens the database with opts. When it is corrupt (isCorrupt, or checkDB finds it so,
// or a previous run marked it), it wipes it and opens it empty; in read-only mode it only says
// so. Any other error is returned, and nothing is touched.
func (m *Manager) openDB(opts *pebble.Options) (*pebble.DB, error) {
	dir := m.dbDir()
	if !m.set.ReadOnly {
		// A directory that cannot be written fails Open here, with its path, rather than a
		// write of Pebble's background work later, which could only crash the process.
		for _, d := range []string{m.set.Dir, filepath.Join(m.set.Dir, "tasks"), dir} {
			if err := probeWritable(d); err != nil {
				return nil, fmt.Errorf("store: the state directory cannot be written: %w", err)
			}
		}
		if cause := m.pendingWipe(); cause != nil {
			if err := m.wipe(cause); err != nil {
				return nil, err
			}
		}
	}
	db, err := pebble.Open(dir, opts)
	if err == nil {
		if err = checkDB(db); err != nil {
			_ = db.Close() // it may complain about the corruption again
			db = nil
		}
	}
	if err == nil {
		return db, nil
	}
	if !isCorrupt(err) {
		return nil, fmt.Errorf("store: open the state database %s: %w", dir, err)
	}
	if m.set.ReadOnly {
		return nil, fmt.Errorf("store: the state database %s is corrupt (the next start of the application wipes it): %w", dir, err)
	}
	if err := m.wipe(err); err != nil {
		return nil, err
	}
	db, err = pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("store: open the state database %s after wiping it: %w", dir, err)
	}
	return db, nil
}

// pendingWipe returns why the database must be wiped before it is opened: a previous run
// marked it corrupt, or a wipe was interrupted; nil otherwise.
func (m *Manager) pendingWipe() error {
	if _, err := os.Stat(m.dbDir() + wipeSuffix); err == nil {
		return errors.New("a previous wipe of the state database was interrupted")
	}
	b, err := os.ReadFile(filepath.Join(m.set.Dir, corruptMarker))
	if err != nil {
		return nil
	}
	return fmt.Errorf("a previous run found the state database corrupt: %s", strings.TrimSpace(string(b)))
}

// isCorrupt reports whether err, from opening or checking the database, says that its files are
// corrupt: Pebble's corruption errors, a file of the database that is missing (the MANIFEST
// or a table it lists), a table whose size differs from the MANIFEST's. Permissions, a full
// disk, a lock held elsewhere are not.
func isCorrupt(err error) bool {
	switch {
	case pebble.IsCorruptionError(err):
		return true
	case errors.Is(err, fs.ErrPermission), errors.Is(err, pebble.ErrDBAlreadyExists), errors.Is(err, pebble.ErrDBDoesNotExist):
		return false
	case errors.Is(err, fs.ErrNotExist):
		// The directory exists (Pebble creates it): a file that the MANIFEST, or the marker
		// naming the MANIFEST, refers to is gone.
		return true
	}
	return strings.Contains(err.Error(), "object size mismatch")
}

// checkDB reads what Open and the first tasks read at once, so that corruption there is found
// (and wiped) at Open rather than in the middle of a run: the metadata of every store partition
// (registry, checkpoints, stream times, layouts, versions), and each table's properties and footer.
func checkDB(db *pebble.DB) error {
	if err := readAll(db, []byte{nsMeta}, []byte{nsData}); err != nil {
		return err
	}
	if err := readAll(db, []byte{nsCheckpoint}, []byte{nsVersion + 1}); err != nil {
		return err
	}
	_, err := db.SSTables(pebble.WithProperties())
	return err
}

// readAll reads every value in [lo, hi), so that a corrupt block there is an error now.
func readAll(db *pebble.DB, lo, hi []byte) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if _, err := it.ValueAndErr(); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// wipe deletes the database and every task's exported checkpoint file, because of cause, and
// remembers the tasks that had state for the warnings of their stores. The database directory
// is renamed first: after a crash in the middle, the next Open finishes the wipe.
func (m *Manager) wipe(cause error) error {
	dir := m.dbDir()
	aside := dir + wipeSuffix
	tasks := m.taskDirs()
	m.log.Warn("the state database is corrupt: wiping it; every store of the instance restores from its changelog from the start, and stores with logging disabled lose their data",
		"path", dir, "error", cause, "task_directories", len(tasks))
	if err := os.Rename(dir, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: wipe the corrupt state database %s: %w", dir, err)
	}
	if err := syncDir(m.set.Dir); err != nil {
		return fmt.Errorf("store: wipe the corrupt state database %s: %w", dir, err)
	}
	m.wiped.mu.Lock()
	if m.wiped.tasks == nil {
		m.wiped.tasks = make(map[TaskID]wipedTask)
	}
	for id, cps := range tasks {
		m.wiped.tasks[id] = wipedTask{cause: cause, checkpoints: cps}
		tdir := filepath.Join(m.set.Dir, "tasks", id.String())
		for _, name := range []string{CheckpointFileName, CheckpointFileName + ".tmp"} {
			if err := os.Remove(filepath.Join(tdir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				m.wiped.mu.Unlock()
				return fmt.Errorf("store: wipe the corrupt state database: remove the checkpoint file of task %s: %w", id, err)
			}
		}
		if len(cps) > 0 { // a task without a checkpoint file had no logged Pebble store
			m.log.Warn("task state wiped with the corrupt state database; its stores restore from their changelogs",
				"processor", id.Processor, "partition", id.Partition, "path", tdir, "checkpoints", describeEntries(cps))
		}
	}
	m.wiped.mu.Unlock()
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("store: wipe the corrupt state database %s: %w", dir, err)
	}
	if err := os.Remove(filepath.Join(m.set.Dir, corruptMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: wipe the corrupt state database: remove %s: %w", corruptMarker, err)
	}
	return syncDir(m.set.Dir)
}

// taskDirs returns the task directories of the state directory with the entries of their
// exported checkpoint files (nil for a file that is missing or unreadable).
func (m *Manager) taskDirs() map[TaskID][]CheckpointEntry {
	out := map[TaskID][]CheckpointEntry{}
	ents, err := os.ReadDir(filepath.Join(m.set.Dir, "tasks"))
	if err != nil {
		return out
	}
	for _, e := range ents {
		i := strings.LastIndexByte(e.Name(), '_')
		var part int32
		if !e.IsDir() || i <= 0 {
			continue
		}
		if _, err := fmt.Sscanf(e.Name()[i+1:], "%d", &part); err != nil || part < 0 {
			continue
		}
		id := TaskID{Processor: e.Name()[:i], Partition: part}
		cps, _ := ReadCheckpointFile(filepath.Join(m.set.Dir, "tasks", e.Name(), CheckpointFileName))
		out[id] = cps
	}
	return out
}

// noteWiped logs, when task id's store name opens after Open wiped the database, that the
// store lost its local state and restores from its changelog.
func (m *Manager) noteWiped(id TaskID, name string) {
	m.wiped.mu.Lock()
	w, ok := m.wiped.tasks[id]
	if ok && !w.logged[name] {
		if w.logged == nil {
			w.logged = map[string]bool{}
			m.wiped.tasks[id] = w
		}
		w.logged[name] = true
	} else {
		ok = false
	}
	m.wiped.mu.Unlock()
	if !ok {
		return
	}
	from := "none"
	for _, e := range w.checkpoints {
		if strings.HasSuffix(e.Topic, "-"+name+"-changelog") {
			from = fmt.Sprintf("%s partition %d offset %d", e.Topic, e.Partition, e.Offset)
		}
	}
	m.log.Warn("store wiped with the corrupt state database: it restores from its changelog from the start",
		"processor", id.Processor, "partition", id.Partition, "store", name, "path", m.dbDir(),
		"lost_checkpoint", from, "error", w.cause)
}

func describeEntries(es []CheckpointEntry) string {
	if len(es) == 0 {
		return "none"
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("%s/%d@%d", e.Topic, e.Partition, e.Offset)
	}
	return strings.Join(parts, ", ")
}

// probeWritable creates, writes and removes a file in dir; a dir that does not exist passes.
func probeWritable(dir string) error {
	path := filepath.Join(dir, ".write-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	_, err = f.Write([]byte{0})
	return errors.Join(err, f.Close(), os.Remove(path))
}

// writeFileSync writes b to path and fsyncs it and its directory.
func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs the directory dir, so that renames and removals in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// describeCommit names, for the error of a failed Apply, the task's Pebble stores and the
// checkpoints the commit would have written.
func (t *Task) describeCommit(checkpoints map[string]int64) string {
	var names []string
	for _, p := range t.order {
		if p.backend == Pebble {
			names = append(names, fmt.Sprintf("%q", p.name))
		}
	}
	var cps []string
	for _, name := range names {
		if o, ok := checkpoints[strings.Trim(name, `"`)]; ok {
			cps = append(cps, fmt.Sprintf("%s at offset %d", name, o))
		}
	}
	out := "stores " + strings.Join(names, ", ")
	if len(cps) > 0 {
		out += " (checkpoints " + strings.Join(cps, ", ") + ")"
	}
	return out
}
