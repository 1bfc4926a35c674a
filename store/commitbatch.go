package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// sortedBatch returns a batch with the effect of b (the writes of a task's commit interval,
// in the order they were made) holding each key's last write only, in key order; or nil when
// b holds something else than point sets and deletes (a range delete: reordering would
// change what it deletes), or is too small or too large to be worth it.
//
// Committing it instead of b applies the same state atomically (a batch is applied whole or
// not at all, and nothing reads a batch's intermediate states; the checkpoint is one of its
// keys), but costs the memtable less: each key is inserted once, and in key order, so that
// Pebble's skiplist inserter starts from the position of the last insert instead of
// searching from the top for every key. The copy costs a sort and the batch's size in memory
// until the commit: above Settings.MemoryBytes/64 (4 MiB by default; Pebble takes a batch
// larger than half a memtable whole, without inserts, anyway) b is committed as it is.
func (t *Task) sortedBatch(b *pebble.Batch) *pebble.Batch {
	if b.Count() < sortedBatchMin || b.Count() > math.MaxInt32 || int64(b.Len()) > t.m.set.MemoryBytes/64 {
		return nil
	}
	ws := make([]batchWrite, 0, b.Count())
	ks := newKeySorter(int(b.Count()), func(i int32) []byte { return ws[i].key }, true)
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return nil // the batch is the task's own: leave it to Commit to fail on it
		}
		if !ok {
			break
		}
		if kind != pebble.InternalKeyKindSet && kind != pebble.InternalKeyKindDelete {
			return nil
		}
		ws = append(ws, batchWrite{key: k, value: v, kind: kind})
		ks.add(k, int32(len(ws)-1))
	}
	order := ks.sorted()
	size := 0
	for _, o := range order {
		size += len(ws[o.i].key) + len(ws[o.i].value) + 8
	}
	out := t.m.db.NewBatchWithSize(size + 12)
	for _, o := range order {
		if w := ws[o.i]; w.kind == pebble.InternalKeyKindSet {
			_ = out.Set(w.key, w.value, nil)
		} else {
			_ = out.Delete(w.key, nil)
		}
	}
	return out
}

// keySorter orders writes by key, keeping the last write of each key: sortedBatch's and a
// restore's. Its entries are small to move: the first 16 bytes of a key, as two words,
// decide most comparisons without a call.
type keySorter struct {
	key   func(i int32) []byte // the key of write i
	order []writeOrder
	// latest maps the hash of a key to its entry in order, whose write a later write of the
	// same key replaces: a key written n times is sorted once. A key whose hash is another
	// key's gets entries of its own, which sorted deduplicates, as it does all keys once
	// latest is dropped: when the first writes show few keys written twice (uniform keys),
	// the map would cost more than it saves the sort.
	latest map[uint64]int32
	added  int
	// scratch is radixSort's second slice, kept for the next sort after a reset.
	scratch []writeOrder
}

// newKeySorter returns a keySorter for about n writes. With dedup, it looks for a key's
// earlier writes as they are added (latest); without, only the sort meets them.
func newKeySorter(n int, key func(i int32) []byte, dedup bool) *keySorter {
	s := &keySorter{key: key, order: make([]writeOrder, 0, n)}
	if dedup {
		s.latest = make(map[uint64]int32, min(n, 4096))
	}
	return s
}

// reset empties s for new writes, keeping its memory (a loadBuffer's sorter, which has no
// map of keys).
func (s *keySorter) reset() {
	s.order, s.added = s.order[:0], 0
	clear(s.latest)
}

// add adds write i, of key k; writes are added in the order they were made.
func (s *keySorter) add(k []byte, i int32) {
	if s.added++; s.latest != nil && s.added == dedupSample && len(s.order) > dedupSample-dedupSample/8 {
		s.latest = nil
	}
	if s.latest != nil {
		h := maphash.Bytes(sortSeed, k)
		j, ok := s.latest[h]
		if ok && bytes.Equal(s.key(s.order[j].i), k) {
			s.order[j].i = i
			return
		}
		if !ok {
			s.latest[h] = int32(len(s.order))
		}
	}
	s.order = append(s.order, writeOrder{w0: keyWord(k, 0), w1: keyWord(k, 8), i: i})
}

// sorted returns the last write of each key, in key order.
func (s *keySorter) sorted() []writeOrder {
	order := s.order
	// The writes of one key compare equal, whatever their positions: the sort then puts
	// them together at the cost of one partition (pdqsort's handling of equal elements),
	// where a tie broken by position would sort them too.
	compare := func(a, b writeOrder) int {
		if a.w0 != b.w0 {
			return cmp.Compare(a.w0, b.w0)
		}
		if a.w1 != b.w1 {
			return cmp.Compare(a.w1, b.w1)
		}
		return bytes.Compare(s.key(a.i), s.key(b.i))
	}
	if len(order) < radixSortMin {
		slices.SortFunc(order, compare)
	} else {
		order, s.scratch = radixSort(order, s.scratch)
		// Keys that share their first 16 bytes are in the order they were added: sort
		// them by their whole keys.
		for i := 0; i < len(order); {
			j := i + 1
			for j < len(order) && order[j].w0 == order[i].w0 && order[j].w1 == order[i].w1 {
				j++
			}
			if j-i > 1 {
				slices.SortFunc(order[i:j], compare)
			}
			i = j
		}
		s.order = order
	}
	n := 0
	for j := 0; j < len(order); {
		// The writes of one key, in any order: the last one made holds.
		last := order[j]
		for j++; j < len(order) && compare(order[j], last) == 0; j++ {
			if order[j].i > last.i {
				last = order[j]
			}
		}
		order[n] = last
		n++
	}
	return order[:n]
}

// radixSortMin is the fewest writes that sorted orders by radix (radixSort) rather than by
// comparisons: half the time of pdqsort on a quarter of a million of the bench's words
// (BenchmarkLoader's profile).
const radixSortMin = 1024

// radixSort returns order sorted by (w0, w1), stably: a least-significant-digit radix sort
// over their 16 bytes, one byte a pass. One read of the entries counts the bytes of all 16
// positions at once; the passes of the bytes in which all entries agree (a short key's zero
// padding, a common prefix) are skipped. It moves the entries between order and a second
// slice, scratch when it is large enough, and returns the one that holds the result, then
// the other one (nil if none was needed).
func radixSort(order, scratch []writeOrder) (sorted, spare []writeOrder) {
	n := len(order)
	if n < 2 {
		return order, scratch
	}
	// counts[p] counts the values of byte p, 0 to 7 of w1 then 0 to 7 of w0, least
	// significant first: the order of the passes.
	var counts [16][256]uint32
	for i := range order {
		w0, w1 := order[i].w0, order[i].w1
		counts[0][byte(w1)]++
		counts[1][byte(w1>>8)]++
		counts[2][byte(w1>>16)]++
		counts[3][byte(w1>>24)]++
		counts[4][byte(w1>>32)]++
		counts[5][byte(w1>>40)]++
		counts[6][byte(w1>>48)]++
		counts[7][byte(w1>>56)]++
		counts[8][byte(w0)]++
		counts[9][byte(w0>>8)]++
		counts[10][byte(w0>>16)]++
		counts[11][byte(w0>>24)]++
		counts[12][byte(w0>>32)]++
		counts[13][byte(w0>>40)]++
		counts[14][byte(w0>>48)]++
		counts[15][byte(w0>>56)]++
	}
	src := order
	var dst []writeOrder
	if cap(scratch) >= n {
		dst = scratch[:n]
	}
	for pass := range 16 {
		shift := uint(pass%8) * 8
		hi := pass >= 8
		first := src[0].w1
		if hi {
			first = src[0].w0
		}
		count := &counts[pass]
		if count[byte(first>>shift)] == uint32(n) {
			continue // every entry has this byte: the pass would not move any
		}
		if dst == nil {
			dst = make([]writeOrder, n)
		}
		var at [256]uint32
		sum := uint32(0)
		for d, c := range count {
			at[d] = sum
			sum += c
		}
		if hi {
			for i := range src {
				d := byte(src[i].w0 >> shift)
				dst[at[d]] = src[i]
				at[d]++
			}
		} else {
			for i := range src {
				d := byte(src[i].w1 >> shift)
				dst[at[d]] = src[i]
				at[d]++
			}
		}
		src, dst = dst, src
	}
	return src, dst
}

// dedupSample is the number of writes after which a keySorter stops looking for a key's
// earlier writes when fewer than one in eight were of a key written before.
const dedupSample = 1024

// sortSeed keys the hashes with which a keySorter finds a key's earlier writes.
var sortSeed = maphash.MakeSeed()

// sortedBatchMin is the fewest writes for which sortedBatch sorts a commit's batch.
const sortedBatchMin = 64

// batchWrite is one write of a batch: its key and value point into the batch.
type batchWrite struct {
	key, value []byte
	kind       pebble.InternalKeyKind
}

// writeOrder is the sort key of the write at position i of a batch: w0 and w1 are its key's
// bytes 0 to 7 and 8 to 15, big-endian, zero-padded (keyWord), which order keys as their
// bytes do wherever they differ.
type writeOrder struct {
	w0, w1 uint64
	i      int32
}

// keyWord returns bytes off to off+7 of k as a big-endian word, zero-padded past k's end.
func keyWord(k []byte, off int) uint64 {
	if len(k) >= off+8 {
		return binary.BigEndian.Uint64(k[off:])
	}
	var b [8]byte
	if off < len(k) {
		copy(b[:], k[off:])
	}
	return binary.BigEndian.Uint64(b[:])
}
