package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/RaduBerinde/btreemap"
	"github.com/cockroachdb/pebble/v2"
)

// Interactive queries of window and session stores read their committed state as those of
// key-value stores do (query.go), decoding the local key layout (window.go). Windows and
// sessions expired at the stream time committed with the partition are never returned, as a
// task's own reads never return them.

// WindowQuery is what a committed read of a window or session store partition asks for.
type WindowQuery struct {
	// Key is the one key to read; nil reads every key.
	Key []byte
	// From and To bound the times, both inclusive: the windows that start in [From, To]; the
	// sessions that overlap it (end >= From and start <= To). Use math.MinInt64 and
	// math.MaxInt64 for no bound.
	From, To int64
	// After is the Position of an entry a previous read returned: the read goes on after it.
	// Nil: from the first entry.
	After []byte
}

// WindowEntry is one window or session of a committed read. Its slices are valid only during
// the callback.
type WindowEntry struct {
	Key []byte
	// Start is the window's or session's start; End a window's end (start + size, exclusive)
	// or a session's end (inclusive).
	Start, End int64
	Value      []byte
	// Position is where the entry lies in the partition: a WindowQuery.After that goes on
	// after it. Entries come in Position order: by time segment, then by the bytes of the
	// key and its times together (so a key that extends another may come first).
	Position []byte
}

// rawScan calls fn with the local keys of a partition in [lower, upper) (upper nil: to the
// partition's end), in order, until fn returns false.
type rawScan func(lower, upper []byte, fn func(k, v []byte) bool) error

// ScanWindowsCommitted calls fn with the committed windows (kind Window) or sessions (kind
// Session) of store name of task id that q asks for, in Position order, until fn returns
// false. spec is the store's spec (defaults are filled in here).
func (m *Manager) ScanWindowsCommitted(id TaskID, name string, kind Kind, spec WindowSpec, q WindowQuery, fn func(WindowEntry) bool) error {
	if err := spec.validate(kind); err != nil {
		return fmt.Errorf("store: task %s store %q: %w", id, name, err)
	}
	done, err := m.beginRead()
	if err != nil {
		return err
	}
	defer done()
	part, ok, err := m.queryID(id, name)
	if err != nil || !ok {
		return err
	}
	now, err := m.committedTime(part)
	if err != nil {
		return fmt.Errorf("store: task %s store %q: read stream time: %w", id, name, err)
	}
	scan := func(lower, upper []byte, f func(k, v []byte) bool) error { return m.scanPart(part, lower, upper, f) }
	w := &windowed{kind: kind, spec: spec}
	if err := w.scanCommitted(now, scan, q, fn); err != nil {
		return fmt.Errorf("store: task %s store %q: scan: %w", id, name, err)
	}
	return nil
}

// committedTime returns the stream time stored with partition part, NoTime when none. The
// caller holds a read (beginRead).
func (m *Manager) committedTime(part uint32) (int64, error) {
	v, c, err := m.db.Get(timeKey(part))
	if errors.Is(err, pebble.ErrNotFound) {
		return NoTime, nil
	}
	if err != nil {
		return NoTime, err
	}
	defer c.Close()
	if len(v) != 8 {
		return NoTime, fmt.Errorf("corrupt stream time of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// ScanWindowsCommittedMemory is ScanWindowsCommitted for a memory partition, under the
// condition of ReadCommittedMemory; expiry is at the task's stream time.
func (p *Partition) ScanWindowsCommittedMemory(q WindowQuery, fn func(WindowEntry) bool) error {
	if p.backend != Memory || p.win == nil {
		return fmt.Errorf("store: task %s store %q: not a memory window or session store", p.t.id, p.name)
	}
	if err := p.t.check(); err != nil {
		return err
	}
	scan := func(lower, upper []byte, f func(k, v []byte) bool) error {
		hi := btreemap.Max[[]byte]()
		if upper != nil {
			hi = btreemap.LT(upper)
		}
		for k, v := range p.mem.data.Ascend(btreemap.GE(lower), hi) {
			if !f(k, v) {
				break
			}
		}
		return nil
	}
	return p.win.scanCommitted(p.t.time, scan, q, fn)
}

// scanCommitted reads q through scan, the partition's committed local keys, with the stream
// time now. It visits only the segments that hold data, and for one key only that key's slot
// in each, as segIter does.
func (w *windowed) scanCommitted(now int64, scan rawScan, q WindowQuery, fn func(WindowEntry) bool) error {
	lo, hi := max(q.From, w.liveFrom(now)), q.To
	if w.kind == Session {
		hi = math.MaxInt64 // a session that starts by To may end at any time after it
	}
	if lo > hi || w.kind == Session && q.From > q.To {
		return nil
	}
	seg, lastSeg := w.segment(lo), w.segment(hi)
	if len(q.After) >= 8 {
		seg = max(seg, decTime(q.After))
	}
	more := true
	for more && seg <= lastSeg {
		next, found, err := w.nextSegment(scan, seg)
		if err != nil || !found || next > lastSeg {
			return err
		}
		seg = next
		lower, upper := encTime(nil, seg), []byte(nil)
		if seg < math.MaxInt64 {
			upper = encTime(nil, seg+1)
		}
		if q.Key != nil {
			slot := append(encTime(nil, seg), q.Key...)
			lower = encTime(bytes.Clone(slot), lo)
			upper = prefixSuccessor(encTime(slot, hi))
		}
		if q.After != nil && bytes.Compare(q.After, lower) >= 0 {
			lower = append(bytes.Clone(q.After), 0) // the first key after it
		}
		if upper == nil || bytes.Compare(lower, upper) < 0 {
			err = scan(lower, upper, func(k, v []byte) bool {
				e, ok := w.entry(k, v, q, lo, hi)
				if ok {
					more = fn(e)
				}
				return more
			})
			if err != nil {
				return err
			}
		}
		if seg == math.MaxInt64 {
			break
		}
		seg++
	}
	return nil
}

// nextSegment returns the first segment >= seg that holds a key.
func (w *windowed) nextSegment(scan rawScan, seg int64) (next int64, found bool, err error) {
	bad := -1 // the length of a key too short to hold a segment
	err = scan(encTime(nil, seg), nil, func(k, _ []byte) bool {
		if len(k) < 8 {
			bad = len(k)
		} else {
			next, found = decTime(k), true
		}
		return false
	})
	if err == nil && bad >= 0 {
		err = fmt.Errorf("malformed window key of %d bytes", bad)
	}
	return next, found && err == nil, err
}

// entry decodes the local key k with value v, and reports whether q asks for it, with the
// first time (a window's start, a session's end) in [lo, hi].
func (w *windowed) entry(k, v []byte, q WindowQuery, lo, hi int64) (WindowEntry, bool) {
	key, t1, t2, ok := w.parseLocal(k)
	if !ok || q.Key != nil && !bytes.Equal(key, q.Key) || t1 < lo || t1 > hi {
		return WindowEntry{}, false // another key with q.Key as a prefix, or out of time
	}
	e := WindowEntry{Key: key, Value: v, Position: k, Start: t1, End: t1 + w.spec.Size}
	if w.kind == Session {
		if t2 > q.To {
			return WindowEntry{}, false
		}
		e.Start, e.End = t2, t1
	}
	return e, true
}

// Filled returns the spec of a store of kind k with its defaults filled in, as the store uses
// it, or why it is not valid.
func (s WindowSpec) Filled(k Kind) (WindowSpec, error) {
	err := s.validate(k)
	return s, err
}
