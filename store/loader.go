package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A Loader restores a large stretch of a Pebble store partition's changelog (a cold restore:
// into an empty partition, after a wipe, for a new standby) without Pebble's memtable and
// write-ahead log. The records it is given are copied into a sort buffer; when the buffer
// reaches its share of the instance's load budget, or at Finish, it is sorted, each key's
// last write is kept, and the result is written as an sstable with Pebble's sstable writer
// and ingested (DB.Ingest) in one atomic step with the partition's checkpoint (and stream
// time, and the version of a key-value store's version records: version.go): a run. A partition is never left holding data that its checkpoint does not cover, or
// a checkpoint for data it does not hold, whenever the process dies; the next restore resumes
// after the last run's checkpoint.
//
// Each run gets a sequence number of its own, above the ones before, so the newest write of a
// key wins across runs; Pebble merges the overlapping runs in its compactions. The first run
// into a partition that held nothing leaves its deletes out (there is nothing for them to
// delete); later runs keep them as tombstones. A window or session store's changelog records
// are turned into its local layout, as ApplyRestore does; the segments that expire during the
// load are left out of the next run, and removed from the earlier runs by a range deletion in
// it.
//
// While one run is written and ingested in the background, the next one fills: Add returns
// as soon as the records are copied. A Loader belongs to the goroutine that restores its
// partition: Add, Finish and Abort are called from it, one at a time; the partition and its
// task must not be used otherwise until Finish or Abort returns.
type Loader struct {
	p     *Partition
	m     *Manager
	empty bool // nothing lies below the next run: its deletes can be left out

	buf      *loadBuffer
	spare    *loadBuffer // the buffer of the last run that ended, emptied: the next to fill
	run      *loadRun    // the run being written and ingested, nil when none
	seq      int         // runs started, to name their files
	cp       Checkpoint  // of the last Add
	added    bool        // Add was called
	sealed   bool        // Flush sealed the last run
	sealedCp Checkpoint  // of the last run sealed
	end      int64       // SetEnd's offset, 0 for none
	ran      keyRange    // the keys the partition held at the start, and those of the runs ingested
	// lastPending: Flush found a run being written; the last one starts once it ended
	// (Ready, Finish).
	lastPending bool
	// notify, when not nil, is sent to without blocking whenever a run sealed after it was
	// set ends (Notify).
	notify chan<- struct{}

	dropTo []byte // window and session stores: the local keys below it are expired
	// version is the version of the last version record added (key-value stores), 0 for none:
	// the runs record it with their checkpoints.
	version uint32
	// droppedTo is the dropTo that the ingested runs applied: a run removes, with a range
	// deletion, what the ones before it hold below a higher one.
	droppedTo []byte

	runs int   // runs ingested
	err  error // the first failure: every later call returns it
	done bool
}

// loadRun is a sealed buffer on its way into Pebble.
type loadRun struct {
	done  chan struct{}
	err   error
	cp    Checkpoint
	time  int64  // the stream time to record with the checkpoint, NoTime for none
	ver   uint32 // the version to record with the checkpoint, 0 for none
	bytes int64  // the buffer's share of the load budget, given back when the run ends
	buf   *loadBuffer
	files []string
	keys  keyRange // of the points written: into buf until the run ends, copied then
}

// keyRange is the range of a partition's keys, without its prefix, that loaded runs hold.
type keyRange struct {
	lo, hi []byte
	ok     bool // the range holds keys: lo and hi are set
}

// overlaps reports whether the keys o of a run overlap r's.
func (r keyRange) overlaps(o keyRange) bool {
	return r.ok && o.ok && bytes.Compare(o.lo, r.hi) <= 0 && bytes.Compare(o.hi, r.lo) >= 0
}

// add returns the range of r and o.
func (r keyRange) add(o keyRange) keyRange {
	switch {
	case !o.ok:
		return r
	case !r.ok:
		return keyRange{lo: bytes.Clone(o.lo), hi: bytes.Clone(o.hi), ok: true}
	}
	out := r
	if bytes.Compare(o.lo, r.lo) < 0 {
		out.lo = bytes.Clone(o.lo)
	}
	if bytes.Compare(o.hi, r.hi) > 0 {
		out.hi = bytes.Clone(o.hi)
	}
	return out
}

// keyRange returns the range of the keys p's committed state holds.
func (p *Partition) keyRange() (keyRange, error) {
	it, err := p.t.m.db.NewIter(&pebble.IterOptions{LowerBound: p.prefix, UpperBound: p.upper})
	if err != nil {
		return keyRange{}, fmt.Errorf("store: task %s store %q: %w", p.t.id, p.name, err)
	}
	var r keyRange
	if it.First() {
		r.lo = bytes.Clone(it.Key()[len(p.prefix):])
		if it.Last() {
			r.hi, r.ok = bytes.Clone(it.Key()[len(p.prefix):]), true
		}
	}
	if err := it.Close(); err != nil {
		return keyRange{}, fmt.Errorf("store: task %s store %q: %w", p.t.id, p.name, err)
	}
	return r, nil
}

// LoadStats describe what a Loader did.
type LoadStats struct {
	// Runs is the number of sstable runs ingested.
	Runs int
}

// Load budget: the sort buffers of an instance's loaders hold at most
// Settings.MemoryBytes/loadShare in all (32 MiB by default): one memtable's worth, which a
// restore through a Loader does not fill. Each of n loaders fills its buffer up to half of
// budget/n (but at least minLoadBuffer, at most maxLoadShare), so that the run being written
// and the one filling fit; a run's buffer, once written, is kept for the loader's next run.
const (
	loadShare     = 8
	minLoadBuffer = 256 << 10
	// maxLoadShare bounds a buffer below what its records' positions can address
	// (maxLoadSlabs): Add takes records whose bytes fit what the share has left, and their
	// slabs can take up to twice their bytes (a slab ended short of each record).
	maxLoadShare = 1 << 29
)

// loadBudget counts the loaders of an instance and the memory their buffers hold.
type loadBudget struct {
	budget int64
	active atomic.Int64
	used   atomic.Int64
	// sem bounds the runs sorted and written at once to the processors of the machine: a
	// run holds it until its records are in its table, not while the table is synced and
	// ingested, which waits for the disk.
	sem chan struct{}
}

func newLoadBudget(memory int64) *loadBudget {
	return &loadBudget{budget: memory / loadShare, sem: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// share is the size at which a loader's buffer is sealed as a run.
func (b *loadBudget) share() int64 {
	n := max(b.active.Load(), 1)
	return min(max(b.budget/n/2, minLoadBuffer), maxLoadShare)
}

// ErrNotPebble is returned by NewLoader for a partition of the memory backend.
var ErrNotPebble = errors.New("not a Pebble store")

// NewLoader returns a Loader that restores p's changelog records after its checkpoint (all of
// them when it has none). p must be a Pebble partition with no uncommitted writes.
func (p *Partition) NewLoader() (*Loader, error) {
	if err := p.t.check(); err != nil {
		return nil, err
	}
	if p.backend != Pebble {
		return nil, fmt.Errorf("store: task %s store %q: load: %w", p.t.id, p.name, ErrNotPebble)
	}
	if p.t.hasPending() {
		return nil, fmt.Errorf("store: task %s store %q: load: %w", p.t.id, p.name, ErrPendingWrites)
	}
	if p.t.m.set.ReadOnly {
		return nil, fmt.Errorf("store: task %s store %q: load: %w", p.t.id, p.name, pebble.ErrReadOnly)
	}
	held, err := p.keyRange()
	if err != nil {
		return nil, err
	}
	l := &Loader{p: p, m: p.t.m, empty: !held.ok, buf: newLoadBuffer(), ran: held}
	l.m.loads.active.Add(1)
	l.m.sched.loadStarted()
	if p.cache != nil {
		p.cache.clear() // the load changes keys behind the cache
	}
	// Reads search Pebble until the load ends and a filter of its keys is built in the
	// background (release, wakeFilter): adding each key as it comes would cost the load a
	// third more.
	p.releaseFilter()
	return l, nil
}

// Add copies ws, the next changelog records of the partition, into the loader's buffer; cp is
// the checkpoint of the last of them, and each write's Offset must be its record's. When the
// buffer is full it is sealed as a run, which is written and ingested in the background while
// the next one fills; a batch larger than what the buffer has left is split between runs.
func (l *Loader) Add(ws []Write, cp Checkpoint) error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.sealed {
		return fmt.Errorf("store: task %s store %q: load: Add after Flush", l.p.t.id, l.p.name)
	}
	if err := l.collect(false); err != nil {
		return l.fail(err)
	}
	for len(ws) > 0 {
		// The records that fit in what the buffer has left of its share (one at least).
		share := l.m.loads.share()
		room := share - l.buf.bytes()
		n, size := 0, 0
		for n < len(ws) && (n == 0 || int64(size) < room) {
			size += len(ws[n].Key) + len(ws[n].Value) + loadEntryBytes
			n++
		}
		chunk := cp
		if n < len(ws) {
			chunk = Checkpoint{Offset: ws[n-1].Offset, LogID: cp.LogID}
		}
		if err := l.add(ws[:n], chunk, share, size/n-loadEntryBytes); err != nil {
			return l.fail(err)
		}
		ws = ws[n:]
	}
	return nil
}

// add adds ws, records of avg bytes each, whose last has checkpoint cp, and seals the buffer
// when it reaches share.
func (l *Loader) add(ws []Write, cp Checkpoint, share int64, avg int) error {
	ws, dropTo, version, err := l.p.restoreWrites(ws)
	if err != nil {
		return fmt.Errorf("store: task %s store %q: restore: %w", l.p.t.id, l.p.name, err)
	}
	if version != 0 {
		l.version = version
	}
	if dropTo != nil && bytes.Compare(dropTo, l.dropTo) > 0 {
		l.dropTo = append(l.dropTo[:0], dropTo...)
	}
	before := l.buf.bytes()
	l.buf.reserve(len(ws), share, avg)
	for i := range ws {
		l.buf.add(&ws[i])
	}
	l.m.loads.used.Add(l.buf.bytes() - before)
	l.cp, l.added = cp, true
	if l.buf.bytes() >= share || l.early() {
		return l.seal(false)
	}
	return nil
}

// SetEnd tells the loader that the records it is given end before offset end (the end of the
// changelog when the restore began): it then writes a run early as the end nears, so that
// less is left to write after the last Add.
func (l *Loader) SetEnd(end int64) { l.end = end }

// Notify makes the loader send to ch, without blocking, whenever a run sealed after the call
// has ended: Ready may then report true, or start the last run that Flush left pending. A
// caller that serves several loaders waits on one channel for them all (with a buffer of
// one, no end is missed).
func (l *Loader) Notify(ch chan<- struct{}) { l.notify = ch }

// minEarlyRun is the fewest records that a run written early holds: below it, a run's fixed
// costs (its files, their syncs, an ingest) outweigh what it takes off the end.
const minEarlyRun = 8192

// early reports whether the buffer is to be sealed before it is full: once it holds at least
// as many records as the offsets still to come (SetEnd), and no run is being written. A
// partition read to its end then leaves a last run of half what remained at most, or of what
// came while the run before was written, instead of a full buffer: the runs of the other
// partitions, and the fetches, keep the processors busy meanwhile. Offsets are an upper bound
// of the records to come (a compacted changelog skips some).
func (l *Loader) early() bool {
	n := l.buf.len()
	return l.end > 0 && n >= minEarlyRun && int64(n) >= l.end-1-l.cp.Offset && l.idle()
}

// Finish writes and ingests what the buffer holds, waits for every run to be in Pebble, and
// releases the loader. The partition then holds every record added, and the checkpoint of the
// last Add. A loader that was given nothing changes nothing.
func (l *Loader) Finish() (LoadStats, error) {
	if err := l.usable(); err != nil {
		return LoadStats{}, err
	}
	var err error
	if l.added && !l.sealed || l.lastPending {
		l.lastPending = false
		err = l.seal(true)
	}
	if err == nil {
		err = l.collect(true)
	}
	if err != nil {
		return LoadStats{}, l.fail(err)
	}
	l.release()
	return LoadStats{Runs: l.runs}, nil
}

// Flush starts writing and ingesting what the buffer holds, as Finish does, without waiting
// for it: Ready tells when Finish will not wait. While a run is being written, the last one
// starts when Ready finds it ended, or at Finish. Nothing can be added after it.
func (l *Loader) Flush() error {
	if err := l.usable(); err != nil {
		return err
	}
	if !l.added || l.sealed {
		return nil
	}
	l.sealed = true
	if !l.idle() {
		l.lastPending = true // not waiting here: the caller may have other loaders to serve
		return nil
	}
	if err := l.seal(true); err != nil {
		return l.fail(err)
	}
	return nil
}

// Ready reports whether no run is being written or ingested, nor waits to be: Finish then
// returns at once, after Flush. It starts the last run that Flush left for the one before
// to end; when that fails, it returns true, and Finish the failure.
func (l *Loader) Ready() bool {
	if !l.idle() {
		return false
	}
	if l.lastPending && l.err == nil {
		l.lastPending = false
		if err := l.seal(true); err != nil {
			l.fail(err)
			return true
		}
		return l.idle()
	}
	return true
}

// idle reports whether no run is being written or ingested.
func (l *Loader) idle() bool {
	if l.run == nil {
		return true
	}
	select {
	case <-l.run.done:
		return true
	default:
		return false
	}
}

// Abort stops the load: the run being ingested, if any, completes (the partition's checkpoint
// then covers it), and what the buffer holds is dropped. It is safe after Finish and after a
// failure.
func (l *Loader) Abort() {
	if l.done {
		return
	}
	_ = l.collect(true) // after a failure too: a run that was ingested moves the checkpoint
	l.release()
}

func (l *Loader) usable() error {
	switch {
	case l.err != nil:
		return l.err
	case l.done:
		return fmt.Errorf("store: task %s store %q: load: the loader is finished", l.p.t.id, l.p.name)
	}
	return l.p.t.check()
}

func (l *Loader) fail(err error) error {
	if l.err == nil {
		l.err = err
	}
	return l.err
}

func (l *Loader) release() {
	l.done = true
	if l.runs > 0 || !l.empty {
		// Built from the loaded keys when the task first uses the store, not while the
		// other stores of the instance restore.
		l.p.filterLazy = true
	} else {
		l.p.filter = l.m.filters.newFilter() // it holds no key: an empty filter is exact
	}
	l.m.loads.used.Add(-l.buf.bytes())
	l.buf, l.spare = newLoadBuffer(), nil
	l.m.loads.active.Add(-1)
	l.m.sched.loadEnded()
}

// collect applies the outcome of the run in the background: when wait is false, only if it
// has ended.
func (l *Loader) collect(wait bool) error {
	r := l.run
	if r == nil {
		return nil
	}
	if !wait {
		select {
		case <-r.done:
		default:
			return nil
		}
	}
	<-r.done
	return l.endRun(r)
}

// endRun gives back the run's memory and, when it was ingested, moves the partition to its
// checkpoint and stream time.
func (l *Loader) endRun(r *loadRun) error {
	l.run = nil
	l.m.loads.used.Add(-r.bytes)
	if r.err == nil {
		l.ran = l.ran.add(r.keys) // copied: the keys point into the buffer
	}
	r.keys = keyRange{}
	r.buf.reset()
	l.spare, r.buf = r.buf, nil
	for _, f := range r.files {
		_ = os.Remove(f) // ingested files were moved into Pebble; a failed run leaves its own
	}
	if r.err != nil {
		return r.err
	}
	p := l.p
	p.ckpt, p.hasCkpt, p.logID = r.cp.Offset, true, r.cp.LogID
	if r.time != NoTime {
		p.savedTime = max(p.savedTime, r.time)
	}
	if r.ver != 0 {
		p.version.Store(r.ver)
	}
	l.runs++
	return nil
}

// seal turns the buffer into a run and starts writing it, after the run before it has ended.
// With last, an empty buffer still makes a run: the checkpoint must be ingested.
func (l *Loader) seal(last bool) error {
	if l.buf.len() == 0 && (!last || l.seq > 0 && l.sealedCp == l.cp) {
		return nil // nothing new; or the last run sealed has the last checkpoint already
	}
	if err := l.collect(true); err != nil {
		return err
	}
	p := l.p
	r := &loadRun{done: make(chan struct{}), cp: l.cp, time: NoTime, ver: l.version, bytes: l.buf.bytes(), buf: l.buf}
	if p.t.time > p.savedTime {
		r.time = p.t.time
	}
	buf := l.buf
	if l.buf = l.spare; l.buf == nil {
		l.buf = newLoadBuffer()
	}
	l.spare = nil
	var rangeDel []byte
	if l.dropTo != nil && bytes.Compare(l.dropTo, l.droppedTo) > 0 {
		if !l.empty || l.seq > 0 {
			rangeDel = append([]byte(nil), l.dropTo...)
		}
		l.droppedTo = append(l.droppedTo[:0], l.dropTo...)
	}
	keepDeletes := !l.empty || l.seq > 0
	dropBelow := append([]byte(nil), l.droppedTo...)
	below := l.ran // ended with the run before (collect): the goroutine only reads it
	l.seq++
	l.sealedCp = l.cp
	l.run = r
	name := fmt.Sprintf("%08x-%s", p.id, strconv.Itoa(l.seq))
	notify := l.notify
	go func() {
		defer func() {
			close(r.done)
			if notify != nil {
				select {
				case notify <- struct{}{}:
				default: // a wake-up is pending already
				}
			}
		}()
		l.m.loads.sem <- struct{}{}
		held := true
		release := func() {
			if held {
				held = false
				<-l.m.loads.sem
			}
		}
		defer release()
		r.err = l.m.writeRun(p, r, name, buf, keepDeletes, dropBelow, rangeDel, below, release)
	}()
	return nil
}

// writeRun writes buf, sorted and with each key's last write, as an sstable of partition p's
// keys, and ingests it with the run's checkpoint and stream time, each in an sstable of its
// own (the ingested tables must not overlap), in one atomic ingest. Keys below dropBelow are
// left out; rangeDel, when not nil, deletes the partition's keys below it from the earlier
// runs. It calls cpuDone once the records are sorted and added to the table: what follows
// mostly waits for the disk. It touches neither p's fields nor its task's.
func (m *Manager) writeRun(p *Partition, r *loadRun, name string, buf *loadBuffer, keepDeletes bool, dropBelow, rangeDel []byte, below keyRange, cpuDone func()) error {
	dir := m.loadDir()
	order := buf.sorted()
	live := func(k []byte) bool { return len(dropBelow) == 0 || bytes.Compare(k, dropBelow) >= 0 }
	written := func(o writeOrder) ([]byte, bool) {
		k, _, del := buf.record(o.i)
		return k, (keepDeletes || !del) && live(k)
	}
	var points bool
	for _, o := range order {
		if r.keys.lo, points = written(o); points {
			break
		}
	}
	for j := len(order) - 1; points && j >= 0; j-- {
		if k, ok := written(order[j]); ok {
			r.keys.hi, r.keys.ok = k, true
			break
		}
	}
	// Pebble puts the first run of an empty partition in the last level, and so every later
	// run whose keys lie outside the earlier runs' and the partition's earlier data (keys
	// that rise with the changelog): those tables stay, and are compressed (the last level
	// has no filters). A run whose keys span theirs, or that deletes a range, lands above
	// them, in L0 for the bench's keys, where the compaction that merges the runs (once the
	// loads end, compactions.go) rewrites it, compressed and with the filters of the level
	// it lands in; until then the store's key filter (keyfilter.go) answers for the keys it
	// lacks. Compressing it and building its Bloom filter cost a fifth of a load's CPU
	// (BenchmarkLoaderPartitions, uniform keys) for a table that lives a few seconds. One
	// range stands for the runs: a run in a gap between two of them counts as overlapping.
	above := keepDeletes && (rangeDel != nil || below.overlaps(r.keys))
	level := 6
	if above {
		level = 0
	}
	wopts := m.popts.MakeWriterOptions(level, m.db.TableFormat())
	if above {
		wopts.Compression = sstable.NoCompression
		wopts.FilterPolicy = pebble.NoFilterPolicy
	}
	create := func(suffix string, fill func(w *sstable.Writer) error) error {
		path := filepath.Join(dir, name+suffix+".sst")
		f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("store: task %s store %q: create %s: %w", p.t.id, p.name, path, err)
		}
		r.files = append(r.files, path)
		// The points through a large buffer; the tables of one key each through Pebble's.
		var wr objstorage.Writable
		if suffix == "" {
			wr = newLoadWritable(f)
		} else {
			wr = objstorageprovider.NewFileWritable(f)
		}
		w := sstable.NewWriter(wr, wopts)
		if err := fill(w); err != nil {
			_ = w.Close()
			return fmt.Errorf("store: task %s store %q: write %s: %w", p.t.id, p.name, path, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("store: task %s store %q: write %s: %w", p.t.id, p.name, path, err)
		}
		return nil
	}
	var key []byte
	dk := func(k []byte) []byte {
		key = append(append(key[:0], p.prefix...), k...)
		return key
	}
	if points || rangeDel != nil {
		err := create("", func(w *sstable.Writer) error {
			if rangeDel != nil {
				if err := w.DeleteRange(p.prefix, append(append([]byte(nil), p.prefix...), rangeDel...)); err != nil {
					return err
				}
			}
			var touched uint32
			defer func() { loadTouched.Add(touched) }()
			for j, o := range order {
				touched += buf.touch(order, j)
				k, v, del := buf.record(o.i)
				if !live(k) {
					continue
				}
				var err error
				switch {
				case !del:
					err = w.Set(dk(k), v)
				case keepDeletes:
					err = w.Delete(dk(k))
				}
				if err != nil {
					return err
				}
			}
			cpuDone() // before the table's Close, which syncs it
			return nil
		})
		if err != nil {
			return err
		}
	}
	cpuDone()
	if err := create("-checkpoint", func(w *sstable.Writer) error {
		return w.Set(checkpointKey(p.id), encodeCheckpoint(r.cp))
	}); err != nil {
		return err
	}
	if r.time != NoTime {
		if err := create("-time", func(w *sstable.Writer) error {
			return w.Set(timeKey(p.id), encodeTime(r.time))
		}); err != nil {
			return err
		}
	}
	if r.ver != 0 {
		if err := create("-version", func(w *sstable.Writer) error {
			return w.Set(versionKey(p.id), encodeVersion(r.ver))
		}); err != nil {
			return err
		}
	}
	if err := m.write(func() error { return m.db.Ingest(context.Background(), r.files) }); err != nil {
		return fmt.Errorf("store: task %s store %q: ingest the run up to offset %d into %s: %w", p.t.id, p.name, r.cp.Offset, m.dbDir(), err)
	}
	return nil
}

// loadTouched takes the sum of the bytes that writeRun reads ahead (loadBuffer.touch), so
// that the compiler keeps the reads.
var loadTouched atomic.Uint32

// loadDir is where loaders write their sstables before Pebble takes them: <Dir>/load, on the
// file system of Pebble's directory (an ingest moves its files).
func (m *Manager) loadDir() string { return filepath.Join(m.set.Dir, "load") }

// resetLoadDir empties the load directory: what a killed process left there was never ingested.
func (m *Manager) resetLoadDir() error {
	dir := m.loadDir()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("store: clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("store: create %s: %w", dir, err)
	}
	return nil
}
