package store

import "encoding/binary"

// loadBuffer holds a Loader's records until they are sorted: each copied into slabs as a
// small header (its key's length and its value's, uvarints), its key and its value, and a
// keySorter that keeps each key's last write. Copies, because a fetch's records point into
// its whole response: holding them would hold all of it.
//
// A record is known by its position: its slab's index above slabShift bits, its offset in
// the slab below. Records are added at rising positions, so that the sorter's rule that the
// highest one of a key was written last holds; and the sorter's entry is all a record costs
// beside its bytes (loadEntryBytes).
type loadBuffer struct {
	slabs     [][]byte
	n         int // records added
	ks        *keySorter
	slabBytes int64
	spare     [][]byte // slabs of an earlier run, empty, for add to fill again (reset)
}

// Slabs grow from firstLoadSlab to maxLoadSlab, doubling: a small buffer stays small. A
// record larger than maxLoadSlab gets a slab of its own, at offset 0; every other record
// starts below maxLoadSlab in its slab, so that its offset fits in slabShift bits.
const (
	firstLoadSlab = 64 << 10
	maxLoadSlab   = 1 << slabShift
	slabShift     = 20
	// maxLoadSlabs is the most slabs whose positions fit an int32: maxLoadShare keeps a
	// buffer within half of them.
	maxLoadSlabs = 1 << (31 - slabShift)
)

func newLoadBuffer() *loadBuffer {
	b := &loadBuffer{}
	// Without a map of the keys seen: the sort meets a key's writes at less cost than
	// finding each in a map as it comes (a hash, a probe, a read of the earlier key), a
	// seventh of a load's CPU on skewed keys (BenchmarkLoaderPartitions). Its records are
	// in the buffer whatever the map finds.
	b.ks = newKeySorter(0, b.key, false)
	return b
}

// reserve makes room for n more records without growing the sorter's order one doubling at
// a time (each doubling copies it all): the first time, for as many records of avg bytes as
// share holds.
func (b *loadBuffer) reserve(n int, share int64, avg int) {
	if cap(b.ks.order)-len(b.ks.order) >= n {
		return
	}
	want := len(b.ks.order) + n
	if b.n == 0 {
		want = max(want, int(share/int64(avg+loadEntryBytes)))
	} else {
		want = max(want, 2*cap(b.ks.order))
	}
	b.ks.order = append(make([]writeOrder, 0, want), b.ks.order...)
}

// loadEntryBytes is what a record costs a loadBuffer beside its key and value: its place in
// the sorter's order and the header of a small record.
const loadEntryBytes = 24 + 2

// add copies w into the buffer and returns its position.
func (b *loadBuffer) add(w *Write) int32 {
	vlen := uint64(0) // a delete
	if !w.Delete {
		vlen = uint64(len(w.Value)) + 1
	}
	n := uvarintLen(uint64(len(w.Key))) + uvarintLen(vlen) + len(w.Key) + len(w.Value)
	last := len(b.slabs) - 1
	if last < 0 || cap(b.slabs[last])-len(b.slabs[last]) < n || len(b.slabs[last]) >= maxLoadSlab {
		size := firstLoadSlab
		if last >= 0 {
			size = min(2*cap(b.slabs[last]), maxLoadSlab)
		}
		var slab []byte
		if k := len(b.spare) - 1; k >= 0 && cap(b.spare[k]) >= n {
			slab, b.spare = b.spare[k], b.spare[:k]
		} else {
			slab = make([]byte, 0, max(size, n))
		}
		b.slabs = append(b.slabs, slab)
		last++
		b.slabBytes += int64(cap(b.slabs[last]))
	}
	s := b.slabs[last]
	pos := int32(last<<slabShift | len(s))
	s = binary.AppendUvarint(s, uint64(len(w.Key)))
	s = binary.AppendUvarint(s, vlen)
	s = append(s, w.Key...)
	if !w.Delete {
		s = append(s, w.Value...)
	}
	b.slabs[last] = s
	b.n++
	b.ks.add(w.Key, pos)
	return pos
}

// uvarintLen is the length of x as a uvarint.
func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// record returns the key and value of the record at pos; del reports a delete.
func (b *loadBuffer) record(pos int32) (key, value []byte, del bool) {
	s := b.slabs[pos>>slabShift][pos&(maxLoadSlab-1):]
	var klen, vlen uint64
	if s[0] < 0x80 && s[1] < 0x80 { // a key shorter than 128 bytes, a value than 127
		klen, vlen, s = uint64(s[0]), uint64(s[1]), s[2:]
	} else {
		var n int
		klen, n = binary.Uvarint(s)
		s = s[n:]
		vlen, n = binary.Uvarint(s)
		s = s[n:]
	}
	key = s[:klen:klen]
	if vlen == 0 {
		return key, nil, true
	}
	return key, s[klen : klen+vlen-1 : klen+vlen-1], false
}

func (b *loadBuffer) key(pos int32) []byte {
	k, _, _ := b.record(pos)
	return k
}

// len returns the number of records added.
func (b *loadBuffer) len() int { return b.n }

// bytes estimates the memory the buffer holds: its slabs and the sorter's order. The order
// counts as far as it is filled: reserve sizes it to fit the share with the records' data.
func (b *loadBuffer) bytes() int64 {
	return b.slabBytes + int64(len(b.ks.order))*24
}

// sorted returns the last write of each key, in key order, as positions of records.
func (b *loadBuffer) sorted() []writeOrder { return b.ks.sorted() }

// reset empties the buffer for the next run, keeping its memory: a run's buffer, once
// written, is the loader's next one, which then allocates (and the garbage collector
// scans) nothing new.
func (b *loadBuffer) reset() {
	// The slabs of the run before that this one did not take (a record larger than the next
	// one) are dropped: a buffer keeps at most one run's slabs. So are the slabs of records
	// larger than maxLoadSlab: a record added to one could start past slabShift bits.
	clear(b.spare)
	b.spare = b.spare[:0]
	for i := len(b.slabs) - 1; i >= 0; i-- {
		if cap(b.slabs[i]) <= maxLoadSlab {
			b.spare = append(b.spare, b.slabs[i][:0]) // the first slab last: the next to be taken
		}
	}
	clear(b.slabs)
	b.slabs, b.slabBytes, b.n = b.slabs[:0], 0, 0
	b.ks.reset()
}

// touch reads, while the writes of order are written out in key order, the first byte of the
// record 8 places ahead, and returns it. The records lie in the buffer in the order they
// came, so each one read in key order misses the CPU's caches: reading them ahead lets the
// misses of the next writes overlap with the work on this one (BenchmarkLoader).
func (b *loadBuffer) touch(order []writeOrder, j int) uint32 {
	if j+8 < len(order) {
		pos := order[j+8].i
		return uint32(b.slabs[pos>>slabShift][pos&(maxLoadSlab-1)])
	}
	return 0
}
