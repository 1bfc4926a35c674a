package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Kind is the type of a store partition.
type Kind int

const (
	// KeyValue is an ordered key-value map (Store).
	KeyValue Kind = iota
	// Window keeps a value per key and window start (WindowStore).
	Window
	// Session keeps a value per key and session [start, end] (SessionStore).
	Session
)

// String returns "keyvalue", "window" or "session".
func (k Kind) String() string {
	switch k {
	case KeyValue:
		return "keyvalue"
	case Window:
		return "window"
	case Session:
		return "session"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// NoTime is the stream time of a task that has seen no record with a timestamp.
const NoTime int64 = -1

// DefaultRetention is the least default retention: a day, Kafka Streams' former default. A
// retention of exactly size + grace would expire a window the moment it closes, before a
// punctuation could emit its final result.
const DefaultRetention int64 = 24 * 60 * 60 * 1000

// DefaultMinSegmentInterval is the smallest default segment interval: 60s, as Kafka Streams.
const DefaultMinSegmentInterval int64 = 60_000

// WindowSpec configures a window or session store partition. Times are milliseconds.
type WindowSpec struct {
	// Size is a window store's window size (> 0). Windows cover [start, start+Size).
	Size int64
	// Advance is a window store's hop, for the plugins that assign windows (the store does
	// not use it); default Size (tumbling windows).
	Advance int64
	// Gap is a session store's inactivity gap (> 0).
	Gap int64
	// Grace is how long after a window's end (a session's end) writes with a value are still
	// accepted, in stream time (>= 0).
	Grace int64
	// Retention is how long windows (by start) and sessions (by end) are kept behind the
	// stream time; at least Size+Grace (Gap+Grace). Default the larger of DefaultRetention
	// and Size+Grace (Gap+Grace).
	Retention int64
	// SegmentInterval is the time span of one segment: expired data is deleted a whole
	// segment at a time. Default max(Retention/2, 60s), as Kafka Streams.
	SegmentInterval int64
}

func (s *WindowSpec) validate(k Kind) error {
	var span int64
	switch k {
	case Window:
		if s.Size <= 0 {
			return fmt.Errorf("window size %d ms is not positive", s.Size)
		}
		if s.Advance == 0 {
			s.Advance = s.Size
		}
		if s.Advance < 0 || s.Advance > s.Size {
			return fmt.Errorf("advance %d ms is not in (0, %d] (the window size)", s.Advance, s.Size)
		}
		span = s.Size
	case Session:
		if s.Gap <= 0 {
			return fmt.Errorf("inactivity gap %d ms is not positive", s.Gap)
		}
		span = s.Gap
	default:
		return fmt.Errorf("a %s store has no window spec", k)
	}
	if s.Grace < 0 {
		return fmt.Errorf("grace %d ms is negative", s.Grace)
	}
	if s.Grace > math.MaxInt64/2 || span > math.MaxInt64/2 {
		return fmt.Errorf("size or gap %d ms and grace %d ms are too large", span, s.Grace)
	}
	if s.Retention == 0 {
		s.Retention = max(span+s.Grace, DefaultRetention)
	}
	if s.Retention < span+s.Grace {
		return fmt.Errorf("retention %d ms is shorter than %d ms (size or gap + grace)", s.Retention, span+s.Grace)
	}
	if s.SegmentInterval == 0 {
		s.SegmentInterval = max(s.Retention/2, DefaultMinSegmentInterval)
	}
	if s.SegmentInterval <= 0 {
		return fmt.Errorf("segment interval %d ms is not positive", s.SegmentInterval)
	}
	return nil
}

// WindowStore is a window store partition as a task sees it: a value per key and window
// start, bounded in time by the task's stream time (see Task.StreamTime).
//
// A window [start, start+Size) is closed when start+Size+Grace <= stream time: a put with
// a value is dropped (counted as late). It is expired when start <= stream time -
// Retention: it is invisible, writes to it are dropped (counted as expired), and its
// segment is deleted. Reads see the task's uncommitted writes.
type WindowStore interface {
	// Put sets key's value in the window starting at start; a nil value deletes it. stored is
	// false when the write was dropped.
	Put(key []byte, start int64, value []byte) (stored bool, err error)
	// Get returns key's value in the window starting at start. The slice is valid until the next write.
	Get(key []byte, start int64) (value []byte, found bool, err error)
	// Fetch iterates key's windows with from <= start <= to, ascending by start.
	Fetch(key []byte, from, to int64) (WindowIterator, error)
	// FetchAll iterates every window with from <= start <= to, by segment, then key, then start.
	FetchAll(from, to int64) (WindowIterator, error)
	// Spec returns the store's spec, defaults filled in.
	Spec() WindowSpec
}

// SessionStore is a session store partition as a task sees it: a value per key and session
// [start, end], bounded in time by the task's stream time by the session's end.
//
// A session is closed when end+Grace < stream time (a put with a value is dropped, counted
// as late), and expired when end <= stream time - Retention.
type SessionStore interface {
	// Put sets the value of key's session [start, end]; a nil value removes it.
	Put(key []byte, start, end int64, value []byte) (stored bool, err error)
	// Get returns the value of key's session [start, end].
	Get(key []byte, start, end int64) (value []byte, found bool, err error)
	// Find iterates key's sessions with end >= earliestEnd and start <= latestStart,
	// ascending by end, then start.
	Find(key []byte, earliestEnd, latestStart int64) (WindowIterator, error)
	// FindAll iterates every session with earliestEnd <= end <= latestEnd, by segment, then
	// key, then end and start.
	FindAll(earliestEnd, latestEnd int64) (WindowIterator, error)
	// Spec returns the store's spec, defaults filled in.
	Spec() WindowSpec
}

// WindowIterator walks windows or sessions. Key and Value are valid until the next Next or
// Close. Commits invalidate it as they do Iterator.
type WindowIterator interface {
	Next() bool
	Key() []byte
	// Start is the window's or session's start.
	Start() int64
	// End is a window's end (start + size, exclusive) or a session's end (inclusive).
	End() int64
	Value() []byte
	Err() error
	Close() error
}

// ErrBadWindow is returned for a session whose start is after its end.
var ErrBadWindow = errors.New("store: session start is after its end")

// Local key layout of a window or session partition (under the partition's prefix):
//
//	window:  segment(8) key start(8)
//	session: segment(8) key end(8) start(8)
//
// Times and segments are big-endian with the sign bit flipped, so that they sort as
// numbers. A window's segment is start/SegmentInterval, a session's end/SegmentInterval.
//
// Changelog key layout (Kafka Streams' own), big-endian two's complement:
//
//	window:  key start(8)
//	session: key end(8) start(8)

func encTime(b []byte, t int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(t)^1<<63) }
func decTime(b []byte) int64           { return int64(binary.BigEndian.Uint64(b) ^ 1<<63) }

// floorDiv divides rounding towards minus infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// suffixLen is the size of the times after the key.
func suffixLen(k Kind) int {
	if k == Session {
		return 16
	}
	return 8
}

// ChangelogKey returns the changelog key of key's window (t1 = start) or session (t1 = end,
// t2 = start).
func ChangelogKey(k Kind, key []byte, t1, t2 int64) []byte {
	b := make([]byte, 0, len(key)+suffixLen(k))
	b = append(b, key...)
	b = binary.BigEndian.AppendUint64(b, uint64(t1))
	if k == Session {
		b = binary.BigEndian.AppendUint64(b, uint64(t2))
	}
	return b
}

// ParseChangelogKey splits a window or session changelog key into the key and its times
// (window: t1 = start; session: t1 = end, t2 = start).
func ParseChangelogKey(k Kind, ck []byte) (key []byte, t1, t2 int64, err error) {
	n := suffixLen(k)
	if len(ck) < n {
		return nil, 0, 0, fmt.Errorf("store: %s changelog key of %d bytes is shorter than its %d time bytes", k, len(ck), n)
	}
	key = ck[:len(ck)-n]
	t1 = int64(binary.BigEndian.Uint64(ck[len(key):]))
	if k == Session {
		t2 = int64(binary.BigEndian.Uint64(ck[len(key)+8:]))
		if t2 > t1 {
			return nil, 0, 0, fmt.Errorf("store: session changelog key with start %d after end %d", t2, t1)
		}
	}
	return key, t1, t2, nil
}

// windowed is the time logic shared by window and session partitions.
type windowed struct {
	kind Kind
	spec WindowSpec
	// dropBelow: the segments below it were deleted by expiry; math.MinInt64 = none yet.
	dropBelow int64
	late      int64 // puts dropped because their window or session was closed
	expired   int64 // writes dropped because their window or session was expired
	skipped   int64 // changelog records a restore skipped because they were expired
}

func (w *windowed) segment(t int64) int64 { return floorDiv(t, w.spec.SegmentInterval) }

// isExpired reports whether time t (a window's start, a session's end) is expired at now.
func (w *windowed) isExpired(t, now int64) bool { return now != NoTime && t <= now-w.spec.Retention }

// liveFrom returns the earliest time that is not expired at now.
func (w *windowed) liveFrom(now int64) int64 {
	if now == NoTime {
		return math.MinInt64
	}
	return now - w.spec.Retention + 1
}

// localKey builds segment | key | t1 [| t2] into buf.
func (w *windowed) localKey(buf, key []byte, t1, t2 int64) []byte {
	b := encTime(buf[:0], w.segment(t1))
	b = append(b, key...)
	b = encTime(b, t1)
	if w.kind == Session {
		b = encTime(b, t2)
	}
	return b
}

// parseLocal splits a local key; ok is false when it is not laid out as one.
func (w *windowed) parseLocal(lk []byte) (key []byte, t1, t2 int64, ok bool) {
	n := suffixLen(w.kind)
	if len(lk) < 8+n {
		return nil, 0, 0, false
	}
	key = lk[8 : len(lk)-n]
	t1 = decTime(lk[len(lk)-n:])
	if w.kind == Session {
		t2 = decTime(lk[len(lk)-8:])
	}
	return key, t1, t2, true
}

// dropSegments returns the local key range of the segments that are expired at now and not
// deleted yet (lo nil: from the partition's start), and marks them deleted; ok is false when
// there is nothing new to delete.
func (w *windowed) dropSegments(now int64) (hi []byte, ok bool) {
	if now == NoTime {
		return nil, false
	}
	live := w.segment(w.liveFrom(now))
	if live <= w.dropBelow {
		return nil, false
	}
	w.dropBelow = live
	return encTime(nil, live), true
}

// rangeDeleter deletes a local key range [lo, hi) of a base store; lo nil is the partition's start.
type rangeDeleter interface {
	deleteRange(lo, hi []byte) error
}

// windowBase is the inner store of a window or session store's stack: the time logic
// (segments, grace, expiry) over the partition's base store. Its layers are stacked over it
// by the builder (builder.go).
type windowBase struct {
	p    *Partition
	w    *windowed
	base Store
	del  rangeDeleter
	buf  []byte
}

// expire deletes the segments expired at the task's stream time.
func (s *windowBase) expire() error {
	hi, ok := s.w.dropSegments(s.p.t.time)
	if !ok {
		return nil
	}
	if err := s.del.deleteRange(nil, hi); err != nil {
		return fmt.Errorf("store: task %s store %q: delete expired segments: %w", s.p.t.id, s.p.name, err)
	}
	return nil
}

// write puts or deletes (value nil) the window or session (t1, t2) of key.
func (s *windowBase) write(key []byte, t1, t2 int64, value []byte) (stored bool, err error) {
	if err := s.p.t.check(); err != nil {
		return false, err
	}
	if err := s.expire(); err != nil {
		return false, err
	}
	now := s.p.t.time
	if s.w.isExpired(t1, now) {
		s.w.expired++
		return false, nil
	}
	if value != nil && now != NoTime {
		// Subtractions from now (>= 0) cannot overflow; additions to t1 could.
		closed := t1 < now-s.w.spec.Grace // a session closes when end + grace < now
		if s.w.kind == Window {
			closed = t1 <= now-s.w.spec.Size-s.w.spec.Grace
		}
		if closed {
			s.w.late++
			return false, nil
		}
	}
	s.buf = s.w.localKey(s.buf, key, t1, t2)
	if value == nil {
		err = s.base.Delete(s.buf)
	} else {
		err = s.base.Put(s.buf, value)
	}
	return err == nil, err
}

func (s *windowBase) get(key []byte, t1, t2 int64) (v []byte, found bool, err error) {
	if err := s.p.t.check(); err != nil {
		return nil, false, err
	}
	if s.w.isExpired(t1, s.p.t.time) {
		return nil, false, nil
	}
	s.buf = s.w.localKey(s.buf, key, t1, t2)
	return s.base.Get(s.buf)
}

// scan opens an iterator over the entries whose first time (window start, session end) is
// in [lo, hi] and whose session start is <= maxStart, for one key or (key nil) all keys.
func (s *windowBase) scan(key []byte, lo, hi, maxStart int64) (WindowIterator, error) {
	if err := s.p.t.check(); err != nil {
		return nil, err
	}
	if err := s.expire(); err != nil {
		return nil, err
	}
	lo = max(lo, s.w.liveFrom(s.p.t.time))
	si := &segIter{s: s, key: key, lo: lo, hi: hi, maxStart: maxStart, seg: s.w.segment(lo), lastSeg: s.w.segment(hi)}
	if lo > hi {
		si.done = true
	}
	return si, nil
}

// segIter visits the segments that hold data from lo's segment to hi's, one base range per
// segment: for one key only its slot in each segment, so a fetch costs what it returns
// plus two seeks per live segment.
type segIter struct {
	s             *windowBase
	key           []byte // nil: all keys
	lo, hi        int64
	maxStart      int64
	seg, lastSeg  int64 // next segment to look at, and the last one
	cur           Iterator
	k, v          []byte
	start, end    int64
	done, started bool
	err           error
}

// nextSegment returns the first segment >= seg that holds a key.
func (i *segIter) nextSegment(seg int64) (int64, bool, error) {
	it, err := i.s.base.Range(encTime(nil, seg), nil)
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	if !it.Next() {
		return 0, false, it.Err()
	}
	k := it.Key()
	if len(k) < 8 {
		return 0, false, fmt.Errorf("store: store %q: malformed window key of %d bytes", i.s.p.name, len(k))
	}
	return decTime(k), true, nil
}

// open opens the base range of segment seg.
func (i *segIter) open(seg int64) (Iterator, error) {
	if i.key == nil {
		var upper []byte
		if seg < math.MaxInt64 {
			upper = encTime(nil, seg+1)
		}
		return i.s.base.Range(encTime(nil, seg), upper)
	}
	prefix := append(encTime(nil, seg), i.key...)
	lower := encTime(append([]byte{}, prefix...), i.lo)
	return i.s.base.Range(lower, prefixSuccessor(encTime(prefix, i.hi)))
}

func (i *segIter) Next() bool {
	for !i.done && i.err == nil {
		if i.cur == nil {
			if i.started && i.seg == math.MaxInt64 || i.seg > i.lastSeg {
				i.done = true
				break
			}
			i.started = true
			seg, ok, err := i.nextSegment(i.seg)
			if err != nil {
				i.err = err
				break
			}
			if !ok || seg > i.lastSeg {
				i.done = true
				break
			}
			if i.cur, i.err = i.open(seg); i.err != nil {
				break
			}
			i.seg = seg
			if seg < math.MaxInt64 {
				i.seg = seg + 1
			}
			continue
		}
		if !i.cur.Next() {
			i.err = i.cur.Err()
			_ = i.cur.Close()
			i.cur = nil
			continue
		}
		key, t1, t2, ok := i.s.w.parseLocal(i.cur.Key())
		if !ok || (i.key != nil && len(key) != len(i.key)) || t1 < i.lo || t1 > i.hi {
			continue // another key with this one as a prefix, or outside the range
		}
		i.k, i.v = key, i.cur.Value()
		if i.s.w.kind == Session {
			if t2 > i.maxStart {
				continue
			}
			i.start, i.end = t2, t1
		} else {
			i.start, i.end = t1, t1+i.s.w.spec.Size
		}
		return true
	}
	i.k, i.v = nil, nil
	return false
}

func (i *segIter) Key() []byte   { return i.k }
func (i *segIter) Value() []byte { return i.v }
func (i *segIter) Start() int64  { return i.start }
func (i *segIter) End() int64    { return i.end }
func (i *segIter) Err() error    { return i.err }

func (i *segIter) Close() error {
	i.done = true
	i.k, i.v = nil, nil
	if i.cur != nil {
		err := i.cur.Close()
		i.cur = nil
		return err
	}
	return nil
}
