package pluginsdk

import (
	"fmt"

	"github.com/statehost/statehost/abi"
)

// WindowStore is a handle to one of the processor's window stores, opened once per
// instance: it keeps a value per key and window, a window being [start, start +
// WindowSize) (see "Windows and sessions" in package abi). Which windows a record belongs
// to is the processor's logic; WindowsFor computes it for windows aligned to multiples of
// the store's advance.
//
// The store bounds windows in stream time: a put into a closed window is dropped (Put
// reports stored = false and the host counts a late record), and an expired window is
// invisible. A WindowStore is used from the processor's goroutine only.
type WindowStore struct {
	name   string
	handle int32
	info   abi.StoreInfo
	err    error // set when the store could not be opened
	buf    []byte
	starts []int64 // WindowsFor's result
}

// Name returns the store's name.
func (s *WindowStore) Name() string { return s.name }

// Err returns the error that kept the store from opening (an unknown store, a store that
// is not a window store), or nil. Every operation returns it too; check it where nothing
// else would, e.g. before using WindowsFor, which returns no windows then.
func (s *WindowStore) Err() error { return s.err }

// Info returns the store's description (store_info, read when the store was opened): its
// WindowSize, Advance, Grace and Retention in milliseconds. It is the zero StoreInfo if the
// store could not be opened.
func (s *WindowStore) Info() abi.StoreInfo { return s.info }

// WindowsFor returns the starts, ascending, of the store's windows that contain the time
// ts (milliseconds): the windows [start, start+WindowSize) whose start is a multiple of
// Advance. Tumbling windows (Advance == WindowSize) give one start, hopping windows
// WindowSize/Advance rounded up or down. The slice is reused by the next WindowsFor on
// this store.
func (s *WindowStore) WindowsFor(ts int64) []int64 {
	s.starts = AppendWindowStarts(s.starts[:0], ts, s.info.WindowSize, s.info.Advance)
	return s.starts
}

// AppendWindowStarts appends to dst the starts, ascending, of the windows [start,
// start+size) that contain ts among the windows whose starts are the multiples of advance
// (negative ones included: starts are floor-aligned), and returns the extended slice. It
// appends nothing if size or advance is not positive.
func AppendWindowStarts(dst []int64, ts, size, advance int64) []int64 {
	if size <= 0 || advance <= 0 {
		return dst
	}
	// The first start past ts - size, up to the last start at or before ts.
	first := (floorDiv(ts-size, advance) + 1) * advance
	last := floorDiv(ts, advance) * advance
	for start := first; start <= last; start += advance {
		dst = append(dst, start)
	}
	return dst
}

// floorDiv is a / b rounded towards minus infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Get returns the value of key's window that starts at start, and whether there is one (an
// expired window is absent). The returned slice is valid until the next Get on this store.
func (s *WindowStore) Get(key []byte, start int64) (value []byte, found bool, err error) {
	if s.err != nil {
		return nil, false, s.err
	}
	return getValue(&s.buf, s.name, func(buf []byte) int32 { return hWindowGet(s.handle, key, start, buf) })
}

// getValue calls get with *buf until the value fits, growing *buf on CodeBufferTooSmall, as
// Store.Get does (written out there: it is on the per-record path of most plugins).
func getValue(buf *[]byte, store string, get func(buf []byte) int32) ([]byte, bool, error) {
	for {
		n := get((*buf)[:cap(*buf)])
		switch {
		case n >= 0:
			return (*buf)[:n:n], true, nil
		case n == abi.CodeNotFound:
			return nil, false, nil
		case n == abi.CodeBufferTooSmall:
			*buf = make([]byte, grow(cap(*buf), hBufferNeeded()))
		default:
			return nil, false, storeFail(store, "get", n)
		}
	}
}

// Put stores value under key in the window that starts at start; a nil value deletes the
// window. stored is false, with no error, when the host dropped the put: the window is
// closed (for a value) or expired. The host counts dropped puts; nothing more needs doing.
// The host copies key and value. A write whose changelog record would not fit is refused
// with an error matching ErrLimit, as Store.Put's.
func (s *WindowStore) Put(key []byte, start int64, value []byte) (stored bool, err error) {
	if s.err != nil {
		return false, s.err
	}
	switch n := hWindowPut(s.handle, key, start, value); {
	case n == abi.CodeDropped:
		return false, nil
	case n < 0:
		return false, s.fail("put", n)
	}
	return true, nil
}

// Delete removes key's window that starts at start; removing an absent window is not an
// error, and a closed window can be deleted (an expired one is gone already).
func (s *WindowStore) Delete(key []byte, start int64) error {
	if s.err != nil {
		return s.err
	}
	if n := hWindowPut(s.handle, key, start, nil); n < 0 {
		return s.fail("delete", n)
	}
	return nil
}

// Fetch returns an iterator over key's windows with from <= start <= to, ascending by
// start. Close it when done.
func (s *WindowStore) Fetch(key []byte, from, to int64) *WindowIterator {
	it := new(WindowIterator)
	if s.err != nil {
		it.err, it.done = s.err, true
		return it
	}
	it.open(s.name, "fetch", hWindowFetch(s.handle, key, from, to))
	return it
}

// FetchAll returns an iterator over every key's windows with from <= start <= to, each
// window once, in an order the host chooses (not by start). Close it when done.
//
// The store may be written while the iterator is open, and the iterator stays valid; it
// returns what was there when it was opened and has not been written since, but whether
// it returns the writes made meanwhile is not specified: collect what you need first if it
// matters.
func (s *WindowStore) FetchAll(from, to int64) *WindowIterator {
	it := new(WindowIterator)
	if s.err != nil {
		it.err, it.done = s.err, true
		return it
	}
	it.open(s.name, "fetch all", hWindowFetchAll(s.handle, from, to))
	return it
}

func (s *WindowStore) fail(op string, code int32) error { return storeFail(s.name, op, code) }

// WindowIterator walks the windows of a WindowStore or the sessions of a SessionStore:
//
//	it := windows.Fetch(key, from, to)
//	defer it.Close()
//	for it.Next() {
//		use(it.Start(), it.End(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
//
// For a window, End is start + window size (exclusive); for a session, the session's end
// (inclusive). The host fills the iterator's buffer with as many entries as fit per call.
type WindowIterator struct {
	store  string // the store's name, for errors
	op     string
	handle int32
	buf    []byte
	rest   []byte
	e      abi.WindowEntry
	err    error
	done   bool
	opened bool // handle is a host iterator
	closed bool
}

// open makes it iterate over the host iterator h (or fail with h's code), for operation op
// on the store named store.
func (it *WindowIterator) open(store, op string, h int32) {
	*it = WindowIterator{store: store, op: op, buf: it.buf[:0]}
	if h < 0 {
		it.err, it.done = storeFail(store, op, h), true
		return
	}
	it.handle, it.opened = h, true
	if cap(it.buf) == 0 {
		it.buf = g.iterBuf()
	}
}

// Next advances to the next window or session and reports whether there is one.
func (it *WindowIterator) Next() bool {
	if it.err != nil || it.closed {
		return false
	}
	if len(it.rest) == 0 {
		if it.done {
			return false
		}
		n := iterFill(it.handle, &it.buf)
		if n < 0 {
			it.err = storeFail(it.store, it.op, n)
			return false
		}
		if n == 0 {
			it.done = true
			return false
		}
		it.rest = it.buf[:n]
	}
	e, rest, ok := abi.NextWindowEntry(it.rest)
	if !ok {
		it.err = fmt.Errorf("pluginsdk: store %q: %s: malformed window entry", it.store, it.op)
		return false
	}
	it.e, it.rest = e, rest
	return true
}

// Key returns the current key, valid until the next Next or Close.
func (it *WindowIterator) Key() []byte { return it.e.Key }

// Start returns the current window's or session's start, in milliseconds.
func (it *WindowIterator) Start() int64 { return it.e.Start }

// End returns the current window's end (start + window size, exclusive) or session's end
// (inclusive), in milliseconds.
func (it *WindowIterator) End() int64 { return it.e.End }

// Session returns the current session: Session{Start(), End()}.
func (it *WindowIterator) Session() Session { return Session{Start: it.e.Start, End: it.e.End} }

// Value returns the current value, valid until the next Next or Close.
func (it *WindowIterator) Value() []byte { return it.e.Value }

// Err returns the error that stopped the iteration, if any.
func (it *WindowIterator) Err() error { return it.err }

// Close releases the iterator; it is idempotent.
func (it *WindowIterator) Close() error {
	if it.closed || !it.opened {
		it.closed = true
		return nil
	}
	it.closed = true
	g.releaseIterBuf(it.buf)
	it.buf, it.rest, it.e = nil, nil, abi.WindowEntry{}
	if n := hIterClose(it.handle); n < 0 {
		return storeFail(it.store, "close iterator", n)
	}
	return nil
}
