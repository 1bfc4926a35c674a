package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/RaduBerinde/btreemap"
	"github.com/cockroachdb/pebble/v2"
)

// Interactive queries read the committed state of key-value Pebble stores straight from the
// database, whatever their task is doing: running, restoring, a standby, or closed. They never
// see a task's uncommitted writes (its write buffer and coalescing caches): a value is as of
// the task's last commit, or as far as a restore or a standby has applied. They take no lock
// of the task and are safe for concurrent use. Memory stores keep their committed data on the
// heap of their open task, and window and session stores another layout: these functions
// are not for them. The values of a store with a TTL are read without their write times, and
// its expired entries are absent (ttl_query.go).

// ReadCommitted returns the committed value of key in store name of task id: the value and
// true, or false when the key (or the store's state) is absent.
func (m *Manager) ReadCommitted(id TaskID, name string, key []byte) ([]byte, bool, error) {
	done, err := m.beginRead()
	if err != nil {
		return nil, false, err
	}
	defer done()
	part, ok, err := m.queryID(id, name)
	if err != nil || !ok {
		return nil, false, err
	}
	tv, err := m.committedTTL(part)
	if err != nil {
		return nil, false, fmt.Errorf("store: task %s store %q: read: %w", id, name, err)
	}
	k := append(dataPrefix(part), key...)
	v, c, err := m.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: task %s store %q: read: %w", id, name, err)
	}
	defer c.Close()
	if v, ok, err = tv.read(v); err != nil {
		return nil, false, fmt.Errorf("store: task %s store %q: read key %q: %w", id, name, key, err)
	}
	return v, ok, nil
}

// ScanCommitted calls fn with the committed entries of store name of task id whose keys are
// in [from, to] (both inclusive; nil: unbounded), in key order, until fn returns false. The
// slices are valid only during the call.
func (m *Manager) ScanCommitted(id TaskID, name string, from, to []byte, fn func(key, value []byte) bool) error {
	done, err := m.beginRead()
	if err != nil {
		return err
	}
	defer done()
	part, ok, err := m.queryID(id, name)
	if err != nil || !ok {
		return err
	}
	tv, err := m.committedTTL(part)
	if err != nil {
		return fmt.Errorf("store: task %s store %q: scan: %w", id, name, err)
	}
	var failed error
	fn = tv.scan(fn, &failed)
	var upper []byte
	if to != nil {
		upper = append(slices.Clip(to), 0) // the smallest key after to
	}
	if err := cmp.Or(m.scanPart(part, from, upper, fn), failed); err != nil {
		return fmt.Errorf("store: task %s store %q: scan: %w", id, name, err)
	}
	return nil
}

// scanPart calls fn with the local keys of partition part in [lower, upper) (upper nil: to
// the partition's end) and their values, in order, until fn returns false. The caller holds a
// read (beginRead).
func (m *Manager) scanPart(part uint32, lower, upper []byte, fn func(k, v []byte) bool) error {
	prefix := dataPrefix(part)
	opts := &pebble.IterOptions{LowerBound: append(dataPrefix(part), lower...), UpperBound: dataPrefix(part + 1)}
	if upper != nil {
		opts.UpperBound = append(dataPrefix(part), upper...)
	}
	it, err := m.db.NewIter(opts)
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		if !fn(it.Key()[len(prefix):], it.Value()) {
			break
		}
	}
	return it.Close()
}

// beginRead registers a read of the database without m.mu, which Close waits for; call done
// when it ends.
func (m *Manager) beginRead() (done func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	m.readers.Add(1)
	return m.readers.Done, nil
}

// queryID looks the store partition up in the registry without allocating an id. The caller
// holds a read (beginRead).
func (m *Manager) queryID(id TaskID, name string) (uint32, bool, error) {
	v, c, err := m.db.Get(registryKey(id, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: task %s store %q: read registry: %w", id, name, err)
	}
	defer c.Close()
	if len(v) != 4 {
		return 0, false, fmt.Errorf("store: task %s store %q: corrupt registry entry", id, name)
	}
	return binary.BigEndian.Uint32(v), true, nil
}

// ReadCommittedMemory returns the committed value of key in a memory partition. The caller
// keeps the partition's task from writing meanwhile (its goroutine holds no batch): the heap
// data has no lock of its own.
func (p *Partition) ReadCommittedMemory(key []byte) ([]byte, bool, error) {
	if p.backend != Memory {
		return nil, false, fmt.Errorf("store: task %s store %q: not a memory store", p.t.id, p.name)
	}
	if err := p.t.check(); err != nil {
		return nil, false, err
	}
	_, v, ok := p.mem.data.Get(key)
	if !ok {
		return nil, false, nil
	}
	v, ok, err := p.memoryTTLView().read(v)
	if err != nil {
		return nil, false, fmt.Errorf("store: task %s store %q: read key %q: %w", p.t.id, p.name, key, err)
	}
	return v, ok, nil
}

// ScanCommittedMemory is ScanCommitted for a memory partition, under the same condition as
// ReadCommittedMemory.
func (p *Partition) ScanCommittedMemory(from, to []byte, fn func(key, value []byte) bool) error {
	if p.backend != Memory {
		return fmt.Errorf("store: task %s store %q: not a memory store", p.t.id, p.name)
	}
	if err := p.t.check(); err != nil {
		return err
	}
	lo, hi := btreemap.Min[[]byte](), btreemap.Max[[]byte]()
	if from != nil {
		lo = btreemap.GE(from)
	}
	if to != nil {
		hi = btreemap.LE(to)
	}
	var failed error
	fn = p.memoryTTLView().scan(fn, &failed)
	for k, v := range p.mem.data.Ascend(lo, hi) {
		if !fn(k, v) {
			break
		}
	}
	if failed != nil {
		return fmt.Errorf("store: task %s store %q: scan: %w", p.t.id, p.name, failed)
	}
	return nil
}
