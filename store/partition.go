package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Partition is the restore-facing handle of one store partition of a task:
// its checkpoint, batch application of changelog records, and wipe.
//
// Restore operations write the committed state directly; they fail with
// ErrPendingWrites while the task has uncommitted writes.
type Partition struct {
	t       *Task
	name    string
	backend Backend
	logged  bool

	id     uint32 // pebble only
	prefix []byte // pebble only: first key of the partition's data
	upper  []byte // pebble only: first key after the partition's data
	mem    *memData
	cache  *readCache // pebble only: the latest values of recently used keys
	filter *keyFilter // pebble only: the keys the partition may hold; nil when it has none
	// building is the partition's filter being built in the background, nil when none is.
	building *filterBuild
	// filterLazy: the partition has no filter yet, and builds one when it is first used
	// (wakeFilter): a Loader filled it.
	filterLazy bool

	base    Store
	top     Store
	scratch []byte

	ckpt    int64
	hasCkpt bool
	logID   [16]byte

	clog           ChangeLogger  // the changelog of a logged partition, nil when unlogged
	version        atomic.Uint32 // the version of the committed entries, 0 for none recorded (version.go)
	pendingVersion uint32        // the version the next commit records, 0 for none (SetVersion)

	ttl       *ttlState    // key-value stores with a TTL only (ttl.go)
	win       *windowed    // window and session stores only
	windows   *windowStore // window and session stores only: the face of the top of their stack
	savedTime int64        // pebble only: the stream time stored with the partition; NoTime when none
}

// Checkpoint is the position of a store partition in its changelog.
type Checkpoint struct {
	// Offset is the offset of the last changelog record applied to the store.
	Offset int64
	// LogID identifies the changelog the offset refers to (the Kafka topic ID), all zeros when unknown.
	LogID [16]byte
}

// Write is one changelog record to apply during a restore: a put, or a delete when Delete is true.
type Write struct {
	Key    []byte
	Value  []byte
	Delete bool
	// Timestamp is the record's timestamp in ms, or -1 when it is not the producer's (a
	// topic with message.timestamp.type=LogAppendTime). A window or session store's
	// changelog records carry the task's stream time when they were written (0 while it was
	// unknown): the restore raises the stream time to it. A key-value store with a TTL takes
	// it as the entry's write time (stampRestored).
	Timestamp int64
	// Offset is the record's offset in the changelog, for errors.
	Offset int64
}

// Kind returns the partition's store type.
func (p *Partition) Kind() Kind {
	if p.win == nil {
		return KeyValue
	}
	return p.win.kind
}

// Name returns the store's name.
func (p *Partition) Name() string { return p.name }

// Task returns the task the partition belongs to.
func (p *Partition) Task() *Task { return p.t }

// Backend returns the partition's backend.
func (p *Partition) Backend() Backend { return p.backend }

// Persistent reports whether the partition keeps its data across restarts (the Pebble backend).
func (p *Partition) Persistent() bool { return p.backend == Pebble }

// Logged reports whether the partition was opened with a changelog.
func (p *Partition) Logged() bool { return p.logged }

// Checkpoint returns the partition's committed checkpoint and whether it has one.
// A memory partition has one only for what was applied since the task opened.
func (p *Partition) Checkpoint() (Checkpoint, bool, error) {
	if err := p.t.check(); err != nil {
		return Checkpoint{}, false, err
	}
	return Checkpoint{p.ckpt, p.logID}, p.hasCkpt, nil
}

// SetLogID sets the identity of the changelog that the next checkpoints refer to; restore sets it.
func (p *Partition) SetLogID(id [16]byte) { p.logID = id }

// ApplyRestore applies changelog records to the committed state together with
// the checkpoint cp, in one atomic batch.
func (p *Partition) ApplyRestore(ws []Write, cp Checkpoint) error {
	if err := p.t.check(); err != nil {
		return err
	}
	if p.t.hasPending() {
		return fmt.Errorf("store: task %s store %q: restore: %w", p.t.id, p.name, ErrPendingWrites)
	}
	ws, dropTo, version, err := p.restoreWrites(ws)
	if err != nil {
		return fmt.Errorf("store: task %s store %q: restore: %w", p.t.id, p.name, err)
	}
	if p.cache != nil {
		p.cache.clear() // whatever happens next, the restore changes keys behind the cache
	}
	if p.backend == Memory {
		if dropTo != nil {
			p.mem.deleteCommitted(nil, dropTo)
		}
		for _, w := range ws {
			if w.Delete {
				p.mem.data.Delete(w.Key)
			} else {
				p.mem.data.ReplaceOrInsert(clone(w.Key), clone(w.Value))
			}
		}
	} else {
		b := p.t.m.db.NewBatchWithSize(batchSize(ws))
		defer b.Close()
		if dropTo != nil {
			_ = b.DeleteRange(p.prefix, append(append([]byte(nil), p.prefix...), dropTo...), nil)
		}
		apply := func(w Write) error {
			k := p.key(w.Key)
			if w.Delete {
				return b.Delete(k, nil)
			}
			p.filterAdd(w.Key) // before the commit: the filter may hold more keys, never fewer
			return b.Set(k, w.Value, nil)
		}
		var err error
		if len(ws) < sortedBatchMin {
			for _, w := range ws {
				if err = apply(w); err != nil {
					break
				}
			}
		} else {
			// A changelog's records come in the order they were written, with their keys
			// scattered: inserted in key order, each key once, they cost the memtable less
			// (see sortedBatch). After the range delete, if any: the batch applies its
			// writes in order, and the range delete drops older keys only.
			ks := newKeySorter(len(ws), func(i int32) []byte { return ws[i].Key }, true)
			for i, w := range ws {
				ks.add(w.Key, int32(i))
			}
			for _, o := range ks.sorted() {
				if err = apply(ws[o.i]); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("store: task %s store %q: restore batch: %w", p.t.id, p.name, err)
		}
		_ = b.Set(checkpointKey(p.id), encodeCheckpoint(cp), nil)
		if version != 0 {
			_ = b.Set(versionKey(p.id), encodeVersion(version), nil)
		}
		if p.t.time > p.savedTime {
			_ = b.Set(timeKey(p.id), encodeTime(p.t.time), nil)
		}
		if err := p.t.m.commit(b, pebble.NoSync); err != nil {
			return fmt.Errorf("store: task %s store %q: restore batch at offset %d to %s: %w", p.t.id, p.name, cp.Offset, p.t.m.dbDir(), err)
		}
		p.savedTime = max(p.savedTime, p.t.time)
	}
	p.ckpt, p.hasCkpt, p.logID = cp.Offset, true, cp.LogID
	if version != 0 {
		p.version.Store(version)
	}
	return nil
}

// restoreWrites turns a window or session store's changelog records into writes of its
// local layout: the stream time rises to each record's timestamp and time, records expired
// at that stream time are skipped (and counted), and dropTo, when not nil, ends the local
// key range of the segments that are now expired. A key-value store's writes pass as they are,
// but its version records (version.go), which are left out: version is the last one's, 0 when
// ws has none; with a TTL, each value gets its write time in front (stampRestored).
func (p *Partition) restoreWrites(ws []Write) (out []Write, dropTo []byte, version uint32, err error) {
	w := p.win
	if w == nil {
		out, version, err = takeVersionRecords(ws)
		return p.stampRestored(out), nil, version, err
	}
	// The stream time when each record was written; 0 stands for "none yet" (a write of a
	// plugin's init). The windows' own times do not count: processing does not raise the
	// stream time to them either. Records are judged at the batch's final stream time: what
	// a later record of the batch made expired is not written.
	for _, rec := range ws {
		if rec.Timestamp > 0 {
			p.t.ObserveTime(rec.Timestamp)
		}
	}
	out = make([]Write, 0, len(ws))
	for _, rec := range ws {
		key, t1, t2, err := ParseChangelogKey(w.kind, rec.Key)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("changelog record at offset %d: %w", rec.Offset, err)
		}
		if w.isExpired(t1, p.t.time) {
			w.skipped++
			continue
		}
		out = append(out, Write{Key: w.localKey(nil, key, t1, t2), Value: rec.Value, Delete: rec.Delete})
	}
	dropTo, _ = w.dropSegments(p.t.time)
	return out, dropTo, 0, nil
}

// HasData reports whether the partition's committed state holds any key.
func (p *Partition) HasData() (bool, error) {
	if err := p.t.check(); err != nil {
		return false, err
	}
	if p.backend == Memory {
		return p.mem.data.Len() > 0, nil
	}
	found, err := anyKey(p.t.m.db, p.prefix, p.upper)
	if err != nil {
		return false, fmt.Errorf("store: task %s store %q: %w", p.t.id, p.name, err)
	}
	return found, nil
}

// Wipe deletes the partition's data and checkpoint (durably, for Pebble).
func (p *Partition) Wipe() error {
	if err := p.t.check(); err != nil {
		return err
	}
	if p.t.hasPending() {
		return fmt.Errorf("store: task %s store %q: wipe: %w", p.t.id, p.name, ErrPendingWrites)
	}
	if p.cache != nil {
		p.cache.clear()
	}
	if p.backend == Memory {
		p.mem = newMemData()
	} else {
		b := p.t.m.db.NewBatch()
		defer b.Close()
		wipeKeys(b, p.id)
		if err := p.t.m.commit(b, pebble.Sync); err != nil {
			return fmt.Errorf("store: task %s store %q: wipe in %s: %w", p.t.id, p.name, p.t.m.dbDir(), err)
		}
		p.savedTime = NoTime
		p.releaseFilter()
		if !p.t.m.set.ReadOnly {
			// The partition holds no key: an empty filter is exact, whether it had one
			// (full of the wiped keys), was building one, or had none (it was dropped).
			p.filter = p.t.m.filters.newFilter()
		}
	}
	p.ckpt, p.hasCkpt, p.logID = 0, false, [16]byte{}
	p.version.Store(0)
	if p.win != nil {
		p.win.dropBelow = math.MinInt64
	}
	// The wiped store's stream time goes with it: the task keeps what its other stores hold.
	p.t.time = NoTime
	for _, o := range p.t.order {
		if o.backend == Pebble {
			p.t.ObserveTime(o.savedTime)
		}
	}
	return nil
}

// checkLayout compares the type the partition's data was written as with the one it is
// opened as, and keeps the segment interval of a window or session partition as its data was
// written. A window or session partition records its layout, kind(1) and segment
// interval(8); a key-value partition records none, as before window stores existed, unless
// its values carry write times (a TTL: checkKeyValueLayout).
//
// The segment interval follows the retention: when the retention changes, the partition
// keeps the interval its data is laid out in (any interval works for expiry). A partition
// opened as another type than the one its data was written as is refused with an error: its
// local data and its changelog hold records of the old type.
func (p *Partition) checkLayout() error {
	if p.win == nil {
		return p.checkKeyValueLayout()
	}
	kind := byte(p.win.kind)
	v, c, err := p.t.m.db.Get(layoutKey(p.id))
	switch {
	case err == nil:
		have := append([]byte(nil), v...)
		c.Close()
		if len(have) == kvLayoutLen && have[0] == byte(KeyValue) {
			return p.typeChanged(KeyValue)
		}
		if len(have) != 9 {
			return fmt.Errorf("store: task %s store %q: corrupt layout record of %d bytes", p.t.id, p.name, len(have))
		}
		if have[0] != kind {
			return p.typeChanged(Kind(have[0]))
		}
		p.win.spec.SegmentInterval = int64(binary.BigEndian.Uint64(have[1:]))
		return nil
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("store: task %s store %q: read layout: %w", p.t.id, p.name, err)
	case p.used():
		return p.typeChanged(KeyValue)
	}
	rec := binary.BigEndian.AppendUint64([]byte{kind}, uint64(p.win.spec.SegmentInterval))
	if err := p.t.m.write(func() error { return p.t.m.db.Set(layoutKey(p.id), rec, pebble.Sync) }); err != nil {
		return fmt.Errorf("store: task %s store %q: write layout in %s: %w", p.t.id, p.name, p.t.m.dbDir(), err)
	}
	return nil
}

// typeChanged is the error of a partition whose data was written as a store of type was.
func (p *Partition) typeChanged(was Kind) error {
	return fmt.Errorf("store: task %s store %q: it holds the data of a %s store, and is opened as a %s store: "+
		"its local data and its changelog hold records of the old type; give the store another name, "+
		"or delete its changelog topic and the task's state to start it empty", p.t.id, p.name, was, p.Kind())
}

// used reports whether the partition's committed state holds a key or a checkpoint (true on
// error: the caller then refuses it).
func (p *Partition) used() bool {
	if _, c, err := p.t.m.db.Get(checkpointKey(p.id)); err == nil {
		c.Close()
		return true
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return true
	}
	found, err := anyKey(p.t.m.db, p.prefix, p.upper)
	return found || err != nil
}

// loadTime reads the stream time stored with the partition.
func (p *Partition) loadTime() error {
	p.savedTime = NoTime
	v, c, err := p.t.m.db.Get(timeKey(p.id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: task %s store %q: read stream time: %w", p.t.id, p.name, err)
	}
	defer c.Close()
	if len(v) != 8 {
		return fmt.Errorf("store: task %s store %q: corrupt stream time record of %d bytes", p.t.id, p.name, len(v))
	}
	p.savedTime = int64(binary.BigEndian.Uint64(v))
	return nil
}

func (p *Partition) loadCheckpoint() error {
	v, c, err := p.t.m.db.Get(checkpointKey(p.id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: task %s store %q: read checkpoint: %w", p.t.id, p.name, err)
	}
	defer c.Close()
	cp, err := decodeCheckpoint(v)
	if err != nil {
		return fmt.Errorf("store: task %s store %q: %w", p.t.id, p.name, err)
	}
	p.ckpt, p.hasCkpt, p.logID = cp.Offset, true, cp.LogID
	return nil
}

// key returns the database key of user key k, in a buffer reused by the next call.
func (p *Partition) key(k []byte) []byte {
	p.scratch = append(append(p.scratch[:0], p.prefix...), k...)
	return p.scratch
}

func encodeCheckpoint(cp Checkpoint) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 24), uint64(cp.Offset))
	return append(b, cp.LogID[:]...)
}

func decodeCheckpoint(v []byte) (Checkpoint, error) {
	if len(v) != 24 {
		return Checkpoint{}, fmt.Errorf("store: corrupt checkpoint record of %d bytes", len(v))
	}
	var cp Checkpoint
	cp.Offset = int64(binary.BigEndian.Uint64(v))
	copy(cp.LogID[:], v[8:])
	return cp, nil
}

func batchSize(ws []Write) int {
	n := 64
	for _, w := range ws {
		n += len(w.Key) + len(w.Value) + 16
	}
	return n
}

func clone(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return append(make([]byte, 0, len(b)), b...)
}
