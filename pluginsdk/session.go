package pluginsdk

import (
	"fmt"

	"github.com/statehost/statehost/abi"
)

// Session is a session's time span, [Start, End] in milliseconds, both inclusive: the
// timestamps of its first and last record.
type Session struct {
	Start, End int64
}

// SessionStore is a handle to one of the processor's session stores, opened once per
// instance: it keeps a value per key and session (see "Windows and sessions" in package
// abi). A session is identified by key, start and end; Merge does the usual work of
// sessionization: merging a record's time into the key's sessions within the store's
// inactivity gap.
//
// The store bounds sessions in stream time: a put of a closed session is dropped (Put
// reports stored = false and the host counts a late record), and an expired session is
// invisible. A SessionStore is used from the processor's goroutine only.
type SessionStore struct {
	name   string
	handle int32
	info   abi.StoreInfo
	err    error // set when the store could not be opened
	buf    []byte

	// Merge's scratch state, reused.
	it    WindowIterator
	found []foundSession
	arena []byte // the found sessions' values, back to back
	acc   []byte
}

// foundSession is a session Merge found; its value is arena[lo:hi].
type foundSession struct {
	s      Session
	lo, hi int
}

// MergeFunc combines two session values for SessionStore.Merge: acc, the value
// accumulated so far, and v, the next one. It returns the combined value, and may build it
// in acc's memory (acc is the SDK's scratch copy, e.g. strconv.AppendInt(acc[:0], ...)). It
// must not keep acc, v or its result after it returns. An error stops the merge, which
// changes nothing then.
type MergeFunc func(acc, v []byte) ([]byte, error)

// Name returns the store's name.
func (s *SessionStore) Name() string { return s.name }

// Err returns the error that kept the store from opening (an unknown store, a store that
// is not a session store), or nil. Every operation returns it too.
func (s *SessionStore) Err() error { return s.err }

// Info returns the store's description (store_info, read when the store was opened): its
// InactivityGap, Grace and Retention in milliseconds. It is the zero StoreInfo if the store
// could not be opened.
func (s *SessionStore) Info() abi.StoreInfo { return s.info }

// Get returns the value of key's session sess, and whether there is one (an expired session
// is absent). The returned slice is valid until the next Get on this store.
func (s *SessionStore) Get(key []byte, sess Session) (value []byte, found bool, err error) {
	if s.err != nil {
		return nil, false, s.err
	}
	return getValue(&s.buf, s.name, func(buf []byte) int32 { return hSessionGet(s.handle, key, sess.Start, sess.End, buf) })
}

// Put stores value under key for the session sess (sess.Start <= sess.End, else an error
// matching ErrBadArgument); a nil value removes the session. stored is false, with no
// error, when the host dropped the put: the session is closed (for a value) or expired. The
// host counts dropped puts. The host copies key and value. A write whose changelog record
// would not fit is refused with an error matching ErrLimit, as Store.Put's.
func (s *SessionStore) Put(key []byte, sess Session, value []byte) (stored bool, err error) {
	if s.err != nil {
		return false, s.err
	}
	switch n := hSessionPut(s.handle, key, sess.Start, sess.End, value); {
	case n == abi.CodeDropped:
		return false, nil
	case n < 0:
		return false, s.fail("put", n)
	}
	return true, nil
}

// Remove removes key's session sess; removing an absent session is not an error, and a
// closed session can be removed (an expired one is gone already).
func (s *SessionStore) Remove(key []byte, sess Session) error {
	if s.err != nil {
		return s.err
	}
	if n := hSessionPut(s.handle, key, sess.Start, sess.End, nil); n < 0 {
		return s.fail("remove", n)
	}
	return nil
}

// Find returns an iterator over key's sessions that overlap [earliestEnd, latestStart]:
// end >= earliestEnd and start <= latestStart, ascending by end, then start. The sessions
// a record at time t merges with are Find(key, t-gap, t+gap). Close it when done.
func (s *SessionStore) Find(key []byte, earliestEnd, latestStart int64) *WindowIterator {
	it := new(WindowIterator)
	s.find(it, key, earliestEnd, latestStart)
	return it
}

func (s *SessionStore) find(it *WindowIterator, key []byte, earliestEnd, latestStart int64) {
	if s.err != nil {
		*it = WindowIterator{err: s.err, done: true, buf: it.buf}
		return
	}
	it.open(s.name, "find", hSessionFind(s.handle, key, earliestEnd, latestStart))
}

// FindAll returns an iterator over every key's sessions with earliestEnd <= end <=
// latestEnd, each once, in an order the host chooses. Close it when done.
//
// The store may be written while the iterator is open, and the iterator stays valid; it
// returns what was there when it was opened and has not been written since, but whether
// it returns the writes made meanwhile is not specified: collect what you need first if it
// matters.
func (s *SessionStore) FindAll(earliestEnd, latestEnd int64) *WindowIterator {
	it := new(WindowIterator)
	if s.err != nil {
		it.err, it.done = s.err, true
		return it
	}
	it.open(s.name, "find all", hSessionFindAll(s.handle, earliestEnd, latestEnd))
	return it
}

// Merge adds a record at time ts (milliseconds) with value to key's sessions, as a
// session window aggregation does:
//
//   - It finds key's sessions within the store's inactivity gap of ts (those that overlap
//     [ts-gap, ts+gap]). The merged session spans them and ts: [min start, max end].
//   - If the record is late, closed by its own time ts (abi.StoreInfo.SessionClosed(ts,
//     stream time): ts + grace < stream time), Merge changes nothing and returns stored =
//     false: merged, it could extend or bridge a session that is already final and may
//     have been emitted. (It offers the session [ts, ts] to the host, which drops it and
//     counts the late record.) A record that is not late never makes a closed session.
//   - Else the merged value is the found sessions' values, in the order Find gives them
//     (ascending by end), folded with merge, then merged with value: merge(...merge(v1,
//     v2)..., value); it is value itself when no session was found (merge is not called).
//     Merge puts the merged session with the merged value, then removes the found sessions
//     that differ from it.
//
// It returns the merged session, the merged value (nil when not stored; valid until the
// next Merge on this store) and whether it was stored. A nil value or merge result is taken
// as empty. Errors name the store and the step that failed; an error from merge is
// returned wrapped, before anything changed.
func (s *SessionStore) Merge(key []byte, ts int64, value []byte, merge MergeFunc) (sess Session, merged []byte, stored bool, err error) {
	if s.err != nil {
		return Session{}, nil, false, s.err
	}
	if value == nil {
		value = []byte{}
	}
	gap := s.info.InactivityGap
	sess = Session{Start: ts, End: ts}
	if now := streamTime(); s.info.SessionClosed(ts, now) {
		// Late by its own time: merging it could extend or bridge a session that is already
		// final (end + gap + grace < stream time), which a punctuation may have emitted.
		// Offer the record's own session so that the host drops it and counts it.
		switch n := hSessionPut(s.handle, key, ts, ts, value); {
		case n == abi.CodeDropped:
			return sess, nil, false, nil
		case n < 0:
			return sess, nil, false, s.fail("merge: put", n)
		}
		return sess, nil, false, fmt.Errorf("pluginsdk: store %q: merge: the host stored the session [%d, %d] of a late record (stream time %d)", s.name, ts, ts, now)
	}
	s.found, s.arena = s.found[:0], s.arena[:0]
	// Collect the sessions first: the iterator may or may not see the writes below.
	it := &s.it
	s.find(it, key, ts-gap, ts+gap)
	for it.Next() {
		lo := len(s.arena)
		s.arena = append(s.arena, it.Value()...)
		f := foundSession{s: it.Session(), lo: lo, hi: len(s.arena)}
		s.found = append(s.found, f)
		sess.Start, sess.End = min(sess.Start, f.s.Start), max(sess.End, f.s.End)
	}
	err = it.Err()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sess, nil, false, err
	}

	merged = value
	if len(s.found) > 0 {
		f0 := s.found[0]
		s.acc = append(s.acc[:0], s.arena[f0.lo:f0.hi]...)
		merged = s.acc
		for _, f := range s.found[1:] {
			if merged, err = merge(merged, s.arena[f.lo:f.hi]); err != nil {
				return sess, nil, false, fmt.Errorf("pluginsdk: store %q: merge: %w", s.name, err)
			}
		}
		if merged, err = merge(merged, value); err != nil {
			return sess, nil, false, fmt.Errorf("pluginsdk: store %q: merge: %w", s.name, err)
		}
		if merged == nil {
			merged = []byte{}
		}
	}
	// Put first: if the host drops it, the sessions found stay as they were.
	switch n := hSessionPut(s.handle, key, sess.Start, sess.End, merged); {
	case n == abi.CodeDropped:
		return sess, nil, false, nil
	case n < 0:
		return sess, nil, false, s.fail("merge: put", n)
	}
	for _, f := range s.found {
		if f.s == sess {
			continue // overwritten by the put above
		}
		if n := hSessionPut(s.handle, key, f.s.Start, f.s.End, nil); n < 0 {
			return sess, nil, false, s.fail("merge: remove", n)
		}
	}
	return sess, merged, true, nil
}

func (s *SessionStore) fail(op string, code int32) error { return storeFail(s.name, op, code) }
