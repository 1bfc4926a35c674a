package store

import (
	"bytes"
	"iter"

	"github.com/RaduBerinde/btreemap"
)

// memEntry is an uncommitted write of a memory store or a coalescing cache: a value, or a delete.
type memEntry struct {
	value   []byte
	deleted bool
}

// memData is the heap state of a memory store partition: committed data and uncommitted overlay.
type memData struct {
	data         *btreemap.BTreeMap[[]byte, []byte]
	pending      *btreemap.BTreeMap[[]byte, memEntry]
	pendingBytes int64
}

const btreeDegree = 32

func newMemData() *memData {
	return &memData{
		data:    btreemap.New[[]byte, []byte](btreeDegree, bytes.Compare),
		pending: btreemap.New[[]byte, memEntry](btreeDegree, bytes.Compare),
	}
}

// commit moves the overlay into the committed data.
func (m *memData) commit() {
	for k, e := range m.pending.Ascend(btreemap.Min[[]byte](), btreemap.Max[[]byte]()) {
		if e.deleted {
			m.data.Delete(k)
		} else {
			m.data.ReplaceOrInsert(k, e.value)
		}
	}
	m.pending.Clear(false)
	m.pendingBytes = 0
}

// memStore is the base layer of a memory store partition.
type memStore struct{ p *Partition }

var _ Store = (*memStore)(nil)

func (s *memStore) Get(key []byte) ([]byte, bool, error) {
	if err := s.p.t.check(); err != nil {
		return nil, false, err
	}
	m := s.p.mem
	if _, e, ok := m.pending.Get(key); ok {
		if e.deleted {
			return nil, false, nil
		}
		return e.value, true, nil
	}
	_, v, ok := m.data.Get(key)
	return v, ok, nil
}

func (s *memStore) Put(key, value []byte) error {
	if err := s.p.t.check(); err != nil {
		return err
	}
	s.p.mem.set(clone(key), memEntry{value: clone(value)})
	return nil
}

func (s *memStore) Delete(key []byte) error {
	if err := s.p.t.check(); err != nil {
		return err
	}
	s.p.mem.set(clone(key), memEntry{deleted: true})
	return nil
}

// deleteRange deletes the keys in [lo, hi) (lo nil: from the first) as uncommitted deletes.
func (s *memStore) deleteRange(lo, hi []byte) error {
	if err := s.p.t.check(); err != nil {
		return err
	}
	m := s.p.mem
	var keys [][]byte
	for k := range ascend(m.data, lo, hi) {
		keys = append(keys, k)
	}
	for k, e := range ascend(m.pending, lo, hi) {
		if !e.deleted {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		m.set(clone(k), memEntry{deleted: true})
	}
	return nil
}

// deleteCommitted deletes the committed keys in [lo, hi) (lo nil: from the first); restores use it.
func (m *memData) deleteCommitted(lo, hi []byte) {
	var keys [][]byte
	for k := range ascend(m.data, lo, hi) {
		keys = append(keys, k)
	}
	for _, k := range keys {
		m.data.Delete(k)
	}
}

func (m *memData) set(k []byte, e memEntry) {
	_, old, replaced := m.pending.ReplaceOrInsert(k, e)
	if replaced {
		m.pendingBytes -= int64(len(k) + len(old.value) + entryOverhead)
	}
	m.pendingBytes += int64(len(k) + len(e.value) + entryOverhead)
}

// entryOverhead approximates the per-entry memory of a btree item.
const entryOverhead = 64

func (s *memStore) Range(start, end []byte) (Iterator, error) {
	return s.iter(start, end)
}

func (s *memStore) Prefix(prefix []byte) (Iterator, error) {
	return s.iter(prefix, prefixSuccessor(prefix))
}

func (s *memStore) iter(start, end []byte) (Iterator, error) {
	t := s.p.t
	if err := t.check(); err != nil {
		return nil, err
	}
	// Clones are copy-on-write snapshots: later writes do not disturb them.
	m := s.p.mem
	over := newSeqSource(ascend(m.pending.Clone(), start, end))
	data := newSeqSource(func(yield func([]byte, memEntry) bool) {
		for k, v := range ascend(m.data.Clone(), start, end) {
			if !yield(k, memEntry{value: v}) {
				return
			}
		}
	})
	it := newMergeIter(over, data)
	it.t = t
	t.addIter(it)
	return it, nil
}

// ascend returns the entries of t with keys in [start, end); nil bounds are open.
func ascend[V any](t *btreemap.BTreeMap[[]byte, V], start, end []byte) iter.Seq2[[]byte, V] {
	lo := btreemap.Min[[]byte]()
	if start != nil {
		lo = btreemap.GE(start)
	}
	hi := btreemap.Max[[]byte]()
	if end != nil {
		hi = btreemap.LT(end)
	}
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return func(func([]byte, V) bool) {}
	}
	return t.Ascend(lo, hi)
}
