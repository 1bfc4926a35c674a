package store

import (
	"bytes"
	"iter"
)

func compare(a, b []byte) int { return bytes.Compare(a, b) }

// source is one sorted input of a merge: entries in ascending key order, deletes included.
// The key and value it returns stay valid until its next call to next or close.
type source interface {
	next() (key []byte, e memEntry, ok bool)
	err() error
	close() error
}

// seqSource pulls from an iterator function.
type seqSource struct {
	next_ func() ([]byte, memEntry, bool)
	stop  func()
}

func newSeqSource(seq iter.Seq2[[]byte, memEntry]) *seqSource {
	next, stop := iter.Pull2(seq)
	return &seqSource{next_: next, stop: stop}
}

func (s *seqSource) next() ([]byte, memEntry, bool) { return s.next_() }
func (s *seqSource) err() error                     { return nil }
func (s *seqSource) close() error                   { s.stop(); return nil }

// iterSource reads a Store iterator (which holds no deletes).
type iterSource struct{ it Iterator }

func (s iterSource) next() ([]byte, memEntry, bool) {
	if !s.it.Next() {
		return nil, memEntry{}, false
	}
	return s.it.Key(), memEntry{value: s.it.Value()}, true
}
func (s iterSource) err() error   { return s.it.Err() }
func (s iterSource) close() error { return s.it.Close() }

// mergeIter merges an overlay of uncommitted writes (a) over a base (b):
// where both hold a key the overlay wins, and overlay deletes hide the key.
type mergeIter struct {
	t          *Task
	a, b       source
	ak, bk     []byte
	ae, be     memEntry
	aok, bok   bool
	advA, advB bool // the source's current entry was used: advance it before the next comparison
	started    bool
	key, value []byte
	done       bool
	err        error
}

func newMergeIter(a, b source) *mergeIter { return &mergeIter{a: a, b: b} }

func (m *mergeIter) Next() bool {
	if m.done || m.err != nil {
		return false
	}
	if !m.started {
		m.started = true
		m.advA, m.advB = true, true
	}
	for {
		if m.advA {
			m.ak, m.ae, m.aok = m.a.next()
			m.advA = false
		}
		if m.advB {
			m.bk, m.be, m.bok = m.b.next()
			m.advB = false
		}
		if err := m.a.err(); err != nil {
			m.err = err
		} else if err := m.b.err(); err != nil {
			m.err = err
		}
		if m.err != nil || (!m.aok && !m.bok) {
			m.done = true
			m.key, m.value = nil, nil
			return false
		}
		c := 1
		switch {
		case !m.bok:
			c = -1
		case m.aok:
			c = compare(m.ak, m.bk)
		}
		if c <= 0 {
			m.advA = true
			if c == 0 {
				m.advB = true
			}
			if m.ae.deleted {
				continue
			}
			m.key, m.value = m.ak, m.ae.value
			return true
		}
		m.advB = true
		if m.be.deleted {
			continue
		}
		m.key, m.value = m.bk, m.be.value
		return true
	}
}

func (m *mergeIter) Key() []byte   { return m.key }
func (m *mergeIter) Value() []byte { return m.value }
func (m *mergeIter) Err() error    { return m.err }

func (m *mergeIter) Close() error {
	if m.t != nil {
		m.t.removeIter(m)
	}
	return m.release()
}

func (m *mergeIter) release() error {
	if m.a == nil {
		return nil
	}
	err1 := m.a.close()
	err2 := m.b.close()
	m.a, m.b = closedSource{}, closedSource{}
	m.done = true
	m.key, m.value = nil, nil
	if err1 != nil {
		return err1
	}
	return err2
}

func (m *mergeIter) invalidate(err error) {
	wasDone := m.done
	_ = m.release()
	if !wasDone && m.err == nil {
		m.err = err
	}
}

type closedSource struct{}

func (closedSource) next() ([]byte, memEntry, bool) { return nil, memEntry{}, false }
func (closedSource) err() error                     { return nil }
func (closedSource) close() error                   { return nil }
