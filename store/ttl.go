package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Time to live of key-value stores (Options.TTL).
//
// An entry of a store with a TTL expires a fixed time after its last write. Each value of the
// store's local state (Pebble or memory) carries a header of stampLen bytes in front of the
// user's bytes: the entry's write time in milliseconds, big-endian, in the store's TTL clock
// (TTLStreamTime: the task's stream time at the write; TTLWallClock: the wall clock's). The
// changelog keeps the user's bytes only: the write time is the record's timestamp
// (TimedChangeLogger), from which a restore or a standby puts the header back
// (stampRestored).
//
// An entry is expired when now - written >= TTL, where now is the clock's time: the task's
// stream time (nothing expires while it is unknown, NoTime), or the wall clock. The ttl layer
// (ttlStore, under the metered layer and above coalescing, logging and the base store) hides
// expired entries from Get, Range and Prefix, strips the header from what it returns and puts
// one in front of what it writes; interactive queries filter the same way (ttl_query.go).
// The sweep (ttl_sweep.go) deletes expired entries through the layers below the ttl layer:
// their tombstones reach the changelog as any delete does.

// TTLClock is the clock a key-value store's TTL counts in.
type TTLClock uint8

const (
	// TTLStreamTime counts in stream time: an entry written at stream time w expires when
	// the task's stream time reaches w + TTL. Deterministic: the same records give the same
	// state, however fast and whenever they are processed. The default.
	TTLStreamTime TTLClock = iota
	// TTLWallClock counts in the wall clock (Settings.WallClock): an entry expires TTL after
	// the moment it was written, whether or not records arrive.
	TTLWallClock
)

// String returns "stream_time" or "wall_clock", the names of the configuration.
func (c TTLClock) String() string {
	switch c {
	case TTLStreamTime:
		return "stream_time"
	case TTLWallClock:
		return "wall_clock"
	}
	return fmt.Sprintf("ttlclock(%d)", int(c))
}

// ParseTTLClock returns the TTLClock named s ("stream_time" or "wall_clock").
func ParseTTLClock(s string) (TTLClock, error) {
	switch s {
	case "stream_time":
		return TTLStreamTime, nil
	case "wall_clock":
		return TTLWallClock, nil
	}
	return 0, fmt.Errorf("store: unknown TTL clock %q (want stream_time or wall_clock)", s)
}

// TTL is the time to live of a key-value store's entries.
type TTL struct {
	// Millis is how long an entry lives after its last write, in milliseconds of Clock. 0 (the
	// default): entries never expire, and values carry no header.
	Millis int64
	// Clock is what Millis counts in. Default TTLStreamTime.
	Clock TTLClock
}

// Enabled reports whether entries expire.
func (t TTL) Enabled() bool { return t.Millis > 0 }

func (t TTL) validate() error {
	if t.Millis < 0 {
		return fmt.Errorf("TTL %d ms is negative", t.Millis)
	}
	if t.Clock != TTLStreamTime && t.Clock != TTLWallClock {
		return fmt.Errorf("unknown TTL clock %v", t.Clock)
	}
	return nil
}

// expired reports whether an entry written at at has expired at now (NoTime: unknown, nothing
// has).
func (t TTL) expired(at, now int64) bool {
	return now != NoTime && now-max(at, 0) >= t.Millis
}

// TimedChangeLogger is a ChangeLogger whose records carry a timestamp of the caller's: the
// changelog of a store with a TTL, whose records' timestamps are the entries' write times.
type TimedChangeLogger interface {
	ChangeLogger
	// LogPutAt records that key was set to value (never nil), with timestamp ts (ms).
	LogPutAt(key, value []byte, ts int64) error
	// LogDeleteAt records that key was deleted (a tombstone), with timestamp ts (ms).
	LogDeleteAt(key []byte, ts int64) error
}

// stampLen is the size of the write time in front of a value of a store with a TTL.
const stampLen = 8

// appendStamped appends the write time at and then value to dst.
func appendStamped(dst []byte, at int64, value []byte) []byte {
	return append(binary.BigEndian.AppendUint64(dst, uint64(at)), value...)
}

// splitStamped splits a stored value into its write time and the user's bytes; ok is false
// when v is too short to hold a write time.
func splitStamped(v []byte) (at int64, value []byte, ok bool) {
	if len(v) < stampLen {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(v)), v[stampLen:], true
}

// errNoStamp is the error of a stored value of a store with a TTL too short for its write time.
var errNoStamp = errors.New("store: corrupt value: shorter than its write time")

// ttlState is the TTL of a key-value partition, and the state of its sweep (ttl_sweep.go).
type ttlState struct {
	spec  TTL
	below Store // the layer under the ttl layer: what the sweep reads and deletes through
	sweep sweepState
}

func newTTLState(o Options) *ttlState {
	if !o.TTL.Enabled() || o.Kind != KeyValue {
		return nil
	}
	return &ttlState{spec: o.TTL, sweep: sweepState{nextDue: math.MinInt64}}
}

// TTL returns the partition's TTL; zero when its entries never expire.
func (p *Partition) TTL() TTL {
	if p.ttl == nil {
		return TTL{}
	}
	return p.ttl.spec
}

// ttlNow returns the time of the partition's TTL clock: the task's stream time (NoTime when
// unknown) or the wall clock's milliseconds.
func (p *Partition) ttlNow() int64 {
	if p.ttl != nil && p.ttl.spec.Clock == TTLWallClock {
		return p.t.m.wallNow()
	}
	return p.t.time
}

// writeTime returns the write time of a write now: the clock's time, 0 while the stream time
// is unknown (a write of a plugin's init on a new task).
func (p *Partition) writeTime() int64 { return max(p.ttlNow(), 0) }

// wallNow returns the wall clock's time in milliseconds (Settings.WallClock).
func (m *Manager) wallNow() int64 {
	if m.set.WallClock != nil {
		return m.set.WallClock().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// newTTLLayer returns the ttl layer of p over below.
func (p *Partition) newTTLLayer(below Store) Store {
	p.ttl.below = below
	return &ttlStore{p: p, ttl: p.ttl.spec, below: below}
}

// timedLog returns the ChangeLogger the logging layer of p writes to: log itself when p has
// no TTL, else a ttlLog over it (planLayers checked that it takes timestamps).
func (p *Partition) timedLog(log ChangeLogger) ChangeLogger {
	if p.ttl == nil {
		return log
	}
	return ttlLog{inner: log.(TimedChangeLogger), p: p}
}

// ttlStore is the ttl layer of a key-value store with a TTL: it puts the write time in front
// of each value it passes down, and hides the entries that expired from what it reads.
type ttlStore struct {
	p     *Partition
	ttl   TTL
	below Store
	buf   []byte // the stamped value of the last Put: the layers below copy it
}

var _ Store = (*ttlStore)(nil)

func (s *ttlStore) Get(key []byte) ([]byte, bool, error) {
	v, ok, err := s.below.Get(key)
	if err != nil || !ok {
		return nil, false, err
	}
	at, value, ok := splitStamped(v)
	if !ok {
		return nil, false, s.p.noStamp(key)
	}
	if s.ttl.expired(at, s.p.ttlNow()) {
		return nil, false, nil
	}
	return value, true, nil
}

func (s *ttlStore) Put(key, value []byte) error {
	s.buf = appendStamped(s.buf[:0], s.p.writeTime(), value)
	err := s.below.Put(key, s.buf)
	if cap(s.buf) > maxStampBuffer {
		s.buf = nil // a large value's buffer is not kept
	}
	return err
}

// maxStampBuffer is the largest buffer of stamped values a ttl layer keeps between writes.
const maxStampBuffer = 64 << 10

func (s *ttlStore) Delete(key []byte) error { return s.below.Delete(key) }

func (s *ttlStore) Range(start, end []byte) (Iterator, error) {
	return s.live(s.below.Range(start, end))
}

func (s *ttlStore) Prefix(prefix []byte) (Iterator, error) {
	return s.live(s.below.Prefix(prefix))
}

// live wraps an iterator of the layer below in one that skips the entries expired when it is
// opened, and strips the write times.
func (s *ttlStore) live(in Iterator, err error) (Iterator, error) {
	if err != nil {
		return nil, err
	}
	return &ttlIter{in: in, p: s.p, ttl: s.ttl, now: s.p.ttlNow()}, nil
}

// ttlIter walks the entries of an iterator of stamped values that are not expired at now.
type ttlIter struct {
	in    Iterator
	p     *Partition
	ttl   TTL
	now   int64
	value []byte
	err   error
}

func (it *ttlIter) Next() bool {
	if it.err != nil {
		return false
	}
	for it.in.Next() {
		at, value, ok := splitStamped(it.in.Value())
		if !ok {
			if it.err = it.in.Err(); it.err == nil {
				it.err = it.p.noStamp(it.in.Key())
			}
			return false
		}
		if !it.ttl.expired(at, it.now) {
			it.value = value
			return true
		}
	}
	it.value = nil
	return false
}

func (it *ttlIter) Key() []byte   { return it.in.Key() }
func (it *ttlIter) Value() []byte { return it.value }

func (it *ttlIter) Err() error {
	if it.err != nil {
		return it.err
	}
	return it.in.Err()
}

func (it *ttlIter) Close() error { return it.in.Close() }

// noStamp is the error of a value of p, under key, too short for its write time.
func (p *Partition) noStamp(key []byte) error {
	return fmt.Errorf("store: task %s store %q: key %q: %w", p.t.id, p.name, key, errNoStamp)
}

// ttlLog is the ChangeLogger of the logging layer of a store with a TTL: it takes the write
// time off each value and gives it to the changelog as the record's timestamp. A tombstone is
// stamped with the clock's time.
type ttlLog struct {
	inner TimedChangeLogger
	p     *Partition
}

func (l ttlLog) LogPut(key, value []byte) error {
	at, v, ok := splitStamped(value)
	if !ok {
		return l.p.noStamp(key)
	}
	return l.inner.LogPutAt(key, v, at)
}

func (l ttlLog) LogDelete(key []byte) error { return l.inner.LogDeleteAt(key, l.p.writeTime()) }

// stampRestored turns changelog records of a partition with a TTL into writes of its local
// layout: each value gets its record's timestamp as its write time. A record whose timestamp
// is not the producer's (-1: the topic stamps LogAppendTime) counts from now: its entry lives
// a whole TTL from the restore, never less than it should. With the stream-time clock, the
// stream time rises to the records' timestamps, which were the stream time at their writes
// (0, a write before the stream time was known, does not count), as a window store's restore
// does. A partition without a TTL gets ws back as it is.
func (p *Partition) stampRestored(ws []Write) []Write {
	if p.ttl == nil {
		return ws
	}
	size := 0
	for _, w := range ws {
		if p.ttl.spec.Clock == TTLStreamTime && w.Timestamp > 0 {
			p.t.ObserveTime(w.Timestamp)
		}
		if !w.Delete {
			size += stampLen + len(w.Value)
		}
	}
	now := p.writeTime()
	buf := make([]byte, 0, size)
	out := make([]Write, len(ws))
	for i, w := range ws {
		out[i] = w
		if w.Delete {
			continue
		}
		at := w.Timestamp
		if at < 0 {
			at = now
		}
		start := len(buf)
		buf = appendStamped(buf, at, w.Value)
		out[i].Value = buf[start:len(buf):len(buf)]
	}
	return out
}

// planTTL checks the TTL of a store of kind k opened with o: only key-value stores have one,
// and their changelog must take timestamps (the entries' write times).
func planTTL(k Kind, o Options) error {
	if err := o.TTL.validate(); err != nil {
		return err
	}
	if k != KeyValue {
		return fmt.Errorf("%s stores have no TTL (their retention expires them)", k)
	}
	if o.Changelog != nil {
		if _, ok := o.Changelog.(TimedChangeLogger); !ok {
			return fmt.Errorf("a store with a TTL needs a changelog that takes timestamps (%T does not)", o.Changelog)
		}
	}
	return nil
}
