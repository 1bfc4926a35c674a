package store

import (
	"fmt"
	"math"
)

// windowLayer is a window or session store as its layers see it. The times are those of the
// key layouts: t1 is a window's start or a session's end, t2 a session's start (0 for a
// window). The WindowStore and SessionStore faces (windowStore, sessionStore) sit on the
// top of the stack that the builder assembles (builder.go); windowBase is its inner store.
type windowLayer interface {
	// write puts, or deletes when value is nil, the window or session (t1, t2) of key;
	// stored is false when the write was dropped (late or expired).
	write(key []byte, t1, t2 int64, value []byte) (stored bool, err error)
	// get returns the value of key's window or session (t1, t2).
	get(key []byte, t1, t2 int64) (value []byte, found bool, err error)
	// scan iterates the entries whose t1 is in [lo, hi] and whose session start is
	// <= maxStart, for key or (key nil) all keys. key is the layer's to keep.
	scan(key []byte, lo, hi, maxStart int64) (WindowIterator, error)
}

var (
	_ windowLayer = (*windowBase)(nil)
	_ windowLayer = (*meteredWindow)(nil)
	_ windowLayer = (*loggingWindow)(nil)
)

// meteredWindow reports every operation of a window or session store to a Metrics hook: a
// write as OpPut (OpDelete when it deletes), dropped or not; a read as OpGet; the opening of
// an iterator as OpRange. It changes nothing else.
type meteredWindow struct {
	meter
	inner windowLayer
}

func (s *meteredWindow) write(key []byte, t1, t2 int64, value []byte) (bool, error) {
	op := OpPut
	if value == nil {
		op = OpDelete
	}
	t0 := s.start()
	stored, err := s.inner.write(key, t1, t2, value)
	s.observe(op, t0, err)
	return stored, err
}

func (s *meteredWindow) get(key []byte, t1, t2 int64) ([]byte, bool, error) {
	t0 := s.start()
	v, found, err := s.inner.get(key, t1, t2)
	s.observe(OpGet, t0, err)
	return v, found, err
}

func (s *meteredWindow) scan(key []byte, lo, hi, maxStart int64) (WindowIterator, error) {
	t0 := s.start()
	it, err := s.inner.scan(key, lo, hi, maxStart)
	s.observe(OpRange, t0, err)
	return it, err
}

// loggingWindow mirrors every write that the layer below stored into a ChangeLogger, under
// its changelog key (ChangelogKey). Dropped writes are not logged: a restore would drop them
// as well.
type loggingWindow struct {
	inner windowLayer
	kind  Kind
	log   ChangeLogger
}

func (s *loggingWindow) write(key []byte, t1, t2 int64, value []byte) (bool, error) {
	stored, err := s.inner.write(key, t1, t2, value)
	if err != nil || !stored {
		return stored, err
	}
	ck := ChangelogKey(s.kind, key, t1, t2)
	if value == nil {
		err = s.log.LogDelete(ck)
	} else {
		err = s.log.LogPut(ck, value)
	}
	return err == nil, err
}

func (s *loggingWindow) get(key []byte, t1, t2 int64) ([]byte, bool, error) {
	return s.inner.get(key, t1, t2)
}

func (s *loggingWindow) scan(key []byte, lo, hi, maxStart int64) (WindowIterator, error) {
	return s.inner.scan(key, lo, hi, maxStart)
}

// windowStore is the WindowStore face of a window or session store's stack; a session
// store's SessionStore face (sessionStore) wraps it.
type windowStore struct {
	top windowLayer
	w   *windowed
}

var (
	_ WindowStore  = (*windowStore)(nil)
	_ SessionStore = (*sessionStore)(nil)
)

// sessionStore is the SessionStore face of a windowStore.
type sessionStore struct{ s *windowStore }

// Spec implements WindowStore.
func (s *windowStore) Spec() WindowSpec { return s.w.spec }

// Spec implements SessionStore.
func (ss *sessionStore) Spec() WindowSpec { return ss.s.w.spec }

// Put implements WindowStore.
func (s *windowStore) Put(key []byte, start int64, value []byte) (bool, error) {
	return s.top.write(key, start, 0, value)
}

// Get implements WindowStore.
func (s *windowStore) Get(key []byte, start int64) ([]byte, bool, error) {
	return s.top.get(key, start, 0)
}

// Fetch implements WindowStore.
func (s *windowStore) Fetch(key []byte, from, to int64) (WindowIterator, error) {
	return s.top.scan(append([]byte{}, key...), from, to, math.MaxInt64)
}

// FetchAll implements WindowStore.
func (s *windowStore) FetchAll(from, to int64) (WindowIterator, error) {
	return s.top.scan(nil, from, to, math.MaxInt64)
}

// Put implements SessionStore.
func (ss *sessionStore) Put(key []byte, start, end int64, value []byte) (bool, error) {
	if start > end {
		return false, fmt.Errorf("%w: [%d, %d]", ErrBadWindow, start, end)
	}
	return ss.s.top.write(key, end, start, value)
}

// Get implements SessionStore.
func (ss *sessionStore) Get(key []byte, start, end int64) ([]byte, bool, error) {
	if start > end {
		return nil, false, nil
	}
	return ss.s.top.get(key, end, start)
}

// Find implements SessionStore.
func (ss *sessionStore) Find(key []byte, earliestEnd, latestStart int64) (WindowIterator, error) {
	return ss.s.top.scan(append([]byte{}, key...), earliestEnd, math.MaxInt64, latestStart)
}

// FindAll implements SessionStore.
func (ss *sessionStore) FindAll(earliestEnd, latestEnd int64) (WindowIterator, error) {
	return ss.s.top.scan(nil, earliestEnd, latestEnd, math.MaxInt64)
}
