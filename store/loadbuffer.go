package store

// loadBuffer holds a Loader's records until they are sorted: their keys and values copied
// into slabs, one small entry each, and a keySorter that keeps each key's last write. Copies,
// because a fetch's records point into its whole response: holding them would hold all of it.
type loadBuffer struct {
	slabs     [][]byte
	ents      []loadEntry
	ks        *keySorter
	slabBytes int64
	spare     [][]byte // slabs of an earlier run, empty, for add to fill again (reset)
}

// loadEntry is a record of a loadBuffer: its key, then its value, at off in slab.
type loadEntry struct {
	slab uint32
	off  uint32
	klen uint32
	vlen int32 // -1: a delete
}

// Slabs grow from firstLoadSlab to maxLoadSlab, doubling: a small buffer stays small.
const (
	firstLoadSlab = 64 << 10
	maxLoadSlab   = 1 << 20
)

func newLoadBuffer() *loadBuffer {
	b := &loadBuffer{}
	b.ks = newKeySorter(0, func(i int32) []byte { return b.key(b.ents[i]) })
	return b
}

// reserve makes room for n more records without growing the entries and the order one
// doubling at a time (each doubling copies them all): the first time, for as many records of
// avg bytes as share holds.
func (b *loadBuffer) reserve(n int, share int64, avg int) {
	if cap(b.ents)-len(b.ents) >= n && cap(b.ks.order)-len(b.ks.order) >= n {
		return
	}
	want := len(b.ents) + n
	if len(b.ents) == 0 {
		want = max(want, int(share/int64(avg+loadEntryBytes)))
	} else {
		want = max(want, 2*cap(b.ents))
	}
	// Each only when it lacks room: a reused buffer's order may be the radix sort's other
	// slice, of the last run's length.
	if cap(b.ents)-len(b.ents) < n {
		b.ents = append(make([]loadEntry, 0, want), b.ents...)
	}
	if cap(b.ks.order)-len(b.ks.order) < n {
		b.ks.order = append(make([]writeOrder, 0, want), b.ks.order...)
	}
}

// loadEntryBytes is what a record costs a loadBuffer beside its key and value: its entry
// and its place in the sorter's order.
const loadEntryBytes = 16 + 24

// add copies w into the buffer.
func (b *loadBuffer) add(w Write) {
	n := len(w.Key) + len(w.Value)
	last := len(b.slabs) - 1
	if last < 0 || cap(b.slabs[last])-len(b.slabs[last]) < n {
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
	e := loadEntry{slab: uint32(last), off: uint32(len(s)), klen: uint32(len(w.Key)), vlen: int32(len(w.Value))}
	if w.Delete {
		e.vlen = -1
	}
	s = append(s, w.Key...)
	if !w.Delete {
		s = append(s, w.Value...)
	}
	b.slabs[last] = s
	b.ents = append(b.ents, e)
	b.ks.add(b.key(e), int32(len(b.ents)-1))
}

func (b *loadBuffer) key(e loadEntry) []byte {
	return b.slabs[e.slab][e.off : e.off+e.klen : e.off+e.klen]
}

func (b *loadBuffer) value(e loadEntry) []byte {
	start := e.off + e.klen
	return b.slabs[e.slab][start : start+uint32(e.vlen) : start+uint32(e.vlen)]
}

// len returns the number of records added.
func (b *loadBuffer) len() int { return len(b.ents) }

// bytes estimates the memory the buffer holds: its slabs, its entries, the sorter's order and
// its map of the keys it has seen (about 40 bytes an entry). The entries and the order count
// as far as they are filled: reserve sizes them to fit the share with the records' data.
func (b *loadBuffer) bytes() int64 {
	n := b.slabBytes + int64(len(b.ents))*16 + int64(len(b.ks.order))*24
	if b.ks.latest != nil {
		n += int64(len(b.ks.latest)) * 40
	}
	return n
}

// sorted returns the last write of each key, in key order, as positions in ents.
func (b *loadBuffer) sorted() []writeOrder { return b.ks.sorted() }

// reset empties the buffer for the next run, keeping its memory: a run's buffer, once
// written, is the loader's next one, which then allocates (and the garbage collector
// scans) nothing new.
func (b *loadBuffer) reset() {
	// The slabs of the run before that this one did not take (a record larger than the next
	// one) are dropped: a buffer keeps at most one run's slabs.
	clear(b.spare)
	b.spare = b.spare[:0]
	for i := len(b.slabs) - 1; i >= 0; i-- {
		b.spare = append(b.spare, b.slabs[i][:0]) // the first slab last: the next to be taken
	}
	b.slabs, b.slabBytes = b.slabs[:0], 0
	b.ents = b.ents[:0]
	b.ks.reset()
}

// touch reads, while the writes of order are written out in key order, the entry of the
// write 16 places ahead and the first byte of the one 6 places ahead, and returns the byte.
// The records lie in the buffer in the order they came, so each one read in key order misses
// the CPU's caches twice (its entry, then its bytes): reading them ahead lets the misses of
// the next writes overlap with the work on this one, which costs the load a tenth less
// (BenchmarkLoader).
func (b *loadBuffer) touch(order []writeOrder, j int) uint32 {
	var sum uint32
	if j+16 < len(order) {
		sum += b.ents[order[j+16].i].off
	}
	if j+6 < len(order) {
		f := b.ents[order[j+6].i]
		sum += uint32(b.slabs[f.slab][:f.off+1][f.off])
	}
	return sum
}
