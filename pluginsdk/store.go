package pluginsdk

import (
	"fmt"

	"github.com/statehost/statehost/abi"
)

// Store is a handle to one of the processor's key/value stores, opened once per instance.
//
// Keys are byte strings ordered bytewise; keys are never null. A Store is used from the
// processor's goroutine only.
type Store struct {
	name   string
	handle int32
	err    error // set when the store could not be opened
	buf    []byte
}

// Name returns the store's name.
func (s *Store) Name() string { return s.name }

// Get returns the value under key and whether there is one. The returned slice is valid
// until the next Get on this store; copy it to keep it.
func (s *Store) Get(key []byte) (value []byte, found bool, err error) {
	if s.err != nil {
		return nil, false, s.err
	}
	for {
		n := hStateGet(s.handle, key, s.buf[:cap(s.buf)])
		switch {
		case n >= 0:
			return s.buf[:n:n], true, nil
		case n == abi.CodeNotFound:
			return nil, false, nil
		case n == abi.CodeBufferTooSmall:
			s.buf = make([]byte, grow(cap(s.buf), hBufferNeeded()))
		default:
			return nil, false, s.fail("get", n)
		}
	}
}

// Put stores value under key; a nil value deletes the key (as Kafka Streams' put(k, null)).
// The host copies both. A write whose changelog record would not fit the store's changelog
// topic is refused with an error matching ErrLimit (a key and value of about 1 MiB together,
// by default), and changes nothing.
func (s *Store) Put(key, value []byte) error {
	if s.err != nil {
		return s.err
	}
	if n := hStatePut(s.handle, key, value); n < 0 {
		return s.fail("put", n)
	}
	return nil
}

// Delete removes key; removing an absent key is not an error.
func (s *Store) Delete(key []byte) error {
	if s.err != nil {
		return s.err
	}
	if n := hStateDelete(s.handle, key); n < 0 {
		return s.fail("delete", n)
	}
	return nil
}

// Range returns an iterator over start <= key < end in ascending order; a nil bound is
// unbounded. Close it when done (the host allows abi.MaxOpenIterators open at once).
//
// The store may be written while the iterator is open: the iterator returns the store as
// it was when Range was called, without the writes made since (as Prefix's does).
func (s *Store) Range(start, end []byte) *Iterator {
	if s.err != nil {
		return &Iterator{err: s.err, done: true}
	}
	return s.iterator("range", hStateRange(s.handle, start, end))
}

// Prefix returns an iterator, in ascending order, over the keys that begin with prefix.
// Close it when done. Like Range's, the iterator returns the store as it was when Prefix
// was called, whatever is written to it meanwhile.
func (s *Store) Prefix(prefix []byte) *Iterator {
	if s.err != nil {
		return &Iterator{err: s.err, done: true}
	}
	if prefix == nil {
		prefix = []byte{}
	}
	return s.iterator("prefix", hStatePrefix(s.handle, prefix))
}

func (s *Store) iterator(op string, h int32) *Iterator {
	if h < 0 {
		return &Iterator{err: s.fail(op, h), done: true}
	}
	return &Iterator{store: s, handle: h, buf: g.iterBuf()}
}

func (s *Store) fail(op string, code int32) error { return storeFail(s.name, op, code) }

// storeFail is the error of operation op on the store named name that the host answered
// with code.
func storeFail(name, op string, code int32) error {
	return fmt.Errorf("pluginsdk: store %q: %s: %w", name, op, Code(code))
}

// Iterator walks store entries in ascending key order:
//
//	it := store.Prefix(p)
//	defer it.Close()
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
//
// The host fills the iterator's buffer with as many entries as fit per call.
type Iterator struct {
	store      *Store
	handle     int32
	buf        []byte
	rest       []byte
	key, value []byte
	err        error
	done       bool
	closed     bool
}

// Next advances to the next entry and reports whether there is one.
func (it *Iterator) Next() bool {
	if it.err != nil || it.closed {
		return false
	}
	if len(it.rest) == 0 {
		if it.done {
			return false
		}
		n := iterFill(it.handle, &it.buf)
		if n < 0 {
			it.err = it.store.fail("iterate", n)
			return false
		}
		if n == 0 {
			it.done = true
			return false
		}
		it.rest = it.buf[:n]
	}
	k, v, rest, ok := abi.NextEntry(it.rest)
	if !ok {
		it.err = fmt.Errorf("pluginsdk: store %q: iterate: malformed entry", it.store.name)
		return false
	}
	it.key, it.value, it.rest = k, v, rest
	return true
}

// Key returns the current key, valid until the next Next or Close.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value, valid until the next Next or Close.
func (it *Iterator) Value() []byte { return it.value }

// Err returns the error that stopped the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Close releases the iterator; it is idempotent.
func (it *Iterator) Close() error {
	if it.closed || it.store == nil {
		it.closed = true
		return nil
	}
	it.closed = true
	g.releaseIterBuf(it.buf)
	if n := hIterClose(it.handle); n < 0 {
		return it.store.fail("close iterator", n)
	}
	return nil
}

// grow returns a buffer capacity of at least need, at least double of old.
func grow(old int, need int32) int {
	return max(int(need), 2*old, 64)
}
