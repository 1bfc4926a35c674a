package store

import (
	"bytes"
	"iter"
	"strings"
	"time"

	"github.com/RaduBerinde/btreemap"
)

// Metrics observes the operations of a store (the hook of the metered layer).
// Implementations must be cheap and safe for concurrent use by many tasks.
type Metrics interface {
	// Observe reports one operation on store: its kind, how long it took, and its error (nil on success).
	Observe(store string, op Op, took time.Duration, err error)
}

// UntimedMetrics is a Metrics that does not use the durations: the metered layer then does not
// read the clock, and Observe gets 0 for took. Reading the clock twice costs more than a
// memory store's get.
type UntimedMetrics interface {
	Metrics
	Untimed()
}

// meter reports operations of one store to a Metrics hook, reading the clock only when the
// hook uses durations. The metered layers of every store kind share it.
type meter struct {
	name  string
	m     Metrics
	timed bool // m uses durations (it is not an UntimedMetrics)
}

func newMeter(name string, m Metrics) meter {
	_, untimed := m.(UntimedMetrics)
	return meter{name: name, m: m, timed: !untimed}
}

// start reads the clock when durations are observed.
func (m *meter) start() time.Time {
	if m.timed {
		return time.Now()
	}
	return time.Time{}
}

// observe reports an operation begun at t0.
func (m *meter) observe(op Op, t0 time.Time, err error) {
	var took time.Duration
	if m.timed {
		took = time.Since(t0)
	}
	m.m.Observe(m.name, op, took, err)
}

// metered reports every operation to a Metrics hook; it changes nothing else.
type metered struct {
	meter
	inner Store
}

var _ Store = (*metered)(nil)

func newMetered(inner Store, name string, m Metrics) *metered {
	return &metered{meter: newMeter(name, m), inner: inner}
}

func (s *metered) Get(key []byte) ([]byte, bool, error) {
	t0 := s.start()
	v, ok, err := s.inner.Get(key)
	s.observe(OpGet, t0, err)
	return v, ok, err
}

func (s *metered) Put(key, value []byte) error {
	t0 := s.start()
	err := s.inner.Put(key, value)
	s.observe(OpPut, t0, err)
	return err
}

func (s *metered) Delete(key []byte) error {
	t0 := s.start()
	err := s.inner.Delete(key)
	s.observe(OpDelete, t0, err)
	return err
}

func (s *metered) Range(start, end []byte) (Iterator, error) {
	t0 := s.start()
	it, err := s.inner.Range(start, end)
	s.observe(OpRange, t0, err)
	return it, err
}

func (s *metered) Prefix(prefix []byte) (Iterator, error) {
	t0 := s.start()
	it, err := s.inner.Prefix(prefix)
	s.observe(OpPrefix, t0, err)
	return it, err
}

// logging mirrors every write into a ChangeLogger after the layer below took it.
type logging struct {
	inner Store
	log   ChangeLogger
}

var _ Store = (*logging)(nil)

func (s *logging) Get(key []byte) ([]byte, bool, error) { return s.inner.Get(key) }

func (s *logging) Put(key, value []byte) error {
	if err := s.inner.Put(key, value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	return s.log.LogPut(key, value)
}

func (s *logging) Delete(key []byte) error {
	if err := s.inner.Delete(key); err != nil {
		return err
	}
	return s.log.LogDelete(key)
}

func (s *logging) Range(start, end []byte) (Iterator, error) { return s.inner.Range(start, end) }
func (s *logging) Prefix(prefix []byte) (Iterator, error)    { return s.inner.Prefix(prefix) }

// coalescing holds the writes of a commit interval, one entry per key, and
// passes them down when the task flushes, in the order their keys were first
// written in the interval: only the last value of each key reaches the layers
// below, like Kafka Streams' record cache (which flushes its dirty keys in that
// order too).
//
// The entries live in a hash map, which point reads and writes use. Key order is needed only
// by iterators: the first iterator of an interval builds an ordered copy of the entries
// (sorted), which the writes then keep up to date until the flush; a store that is only read
// and written by key never pays for ordered inserts.
type coalescing struct {
	t      *Task
	inner  Store
	dirty  map[string]memEntry
	keys   []string                             // dirty's keys, in the order they were first written
	sorted *btreemap.BTreeMap[string, memEntry] // nil until an iterator needs key order
	peak   int                                  // the most keys dirty held since it was made
	bytes  int64
	label  string
}

var _ Store = (*coalescing)(nil)

func newCoalescing(t *Task, name string, inner Store) *coalescing {
	return &coalescing{t: t, label: name, inner: inner, dirty: map[string]memEntry{}}
}

func (c *coalescing) name() string { return c.label }

func (c *coalescing) Get(key []byte) ([]byte, bool, error) {
	if err := c.t.check(); err != nil {
		return nil, false, err
	}
	if e, ok := c.dirty[string(key)]; ok {
		if e.deleted {
			return nil, false, nil
		}
		return e.value, true, nil
	}
	return c.inner.Get(key)
}

func (c *coalescing) Put(key, value []byte) error {
	if err := c.t.check(); err != nil {
		return err
	}
	c.set(key, memEntry{value: clone(value)})
	return nil
}

func (c *coalescing) Delete(key []byte) error {
	if err := c.t.check(); err != nil {
		return err
	}
	c.set(key, memEntry{deleted: true})
	return nil
}

func (c *coalescing) set(key []byte, e memEntry) {
	old, had := c.dirty[string(key)]
	if had {
		c.bytes -= int64(len(key) + len(old.value) + entryOverhead)
	}
	k := string(key) // a copy: the key is the caller's
	if !had {
		c.keys = append(c.keys, k)
	}
	c.dirty[k] = e
	if c.sorted != nil {
		c.sorted.ReplaceOrInsert(k, e)
	}
	c.bytes += int64(len(key) + len(e.value) + entryOverhead)
}

// ordered returns the entries in key order, building the ordered copy if there is none.
func (c *coalescing) ordered() *btreemap.BTreeMap[string, memEntry] {
	if c.sorted == nil {
		c.sorted = btreemap.New[string, memEntry](btreeDegree, strings.Compare)
		for k, e := range c.dirty {
			c.sorted.ReplaceOrInsert(k, e)
		}
	}
	return c.sorted
}

func (c *coalescing) Range(start, end []byte) (Iterator, error) {
	return c.iter(start, end, func() (Iterator, error) { return c.inner.Range(start, end) })
}

func (c *coalescing) Prefix(prefix []byte) (Iterator, error) {
	return c.iter(prefix, prefixSuccessor(prefix), func() (Iterator, error) { return c.inner.Prefix(prefix) })
}

func (c *coalescing) iter(start, end []byte, open func() (Iterator, error)) (Iterator, error) {
	if err := c.t.check(); err != nil {
		return nil, err
	}
	in, err := open()
	if err != nil {
		return nil, err
	}
	it := newMergeIter(newSeqSource(ascendStrings(c.ordered().Clone(), start, end)), iterSource{in})
	it.t = c.t
	c.t.addIter(it)
	return it, nil
}

// flush passes the held writes down, in the order their keys were first written, and empties
// the cache.
func (c *coalescing) flush() error {
	for _, k := range c.keys {
		var err error
		if e := c.dirty[k]; e.deleted {
			err = c.inner.Delete([]byte(k))
		} else {
			err = c.inner.Put([]byte(k), e.value)
		}
		if err != nil {
			return err
		}
	}
	c.clear()
	return nil
}

// clear empties the cache. A map that held four times more keys than this interval's (a
// burst) is made anew, so that it does not keep the burst's memory.
func (c *coalescing) clear() {
	n := len(c.dirty)
	c.peak = max(c.peak, n)
	if c.peak > coalescingKeepKeys && n < c.peak/4 {
		c.dirty, c.keys, c.peak = make(map[string]memEntry, n), nil, n
	} else {
		clear(c.dirty)
		clear(c.keys)
		c.keys = c.keys[:0]
	}
	c.sorted = nil
	c.bytes = 0
}

// coalescingKeepKeys is the size up to which a flushed cache's map is always kept for the
// next interval.
const coalescingKeepKeys = 1 << 12

// ascendStrings returns the entries of t with keys in [start, end); nil bounds are open.
func ascendStrings(t *btreemap.BTreeMap[string, memEntry], start, end []byte) iter.Seq2[[]byte, memEntry] {
	lo, hi := btreemap.Min[string](), btreemap.Max[string]()
	if start != nil {
		lo = btreemap.GE(string(start))
	}
	if end != nil {
		hi = btreemap.LT(string(end))
	}
	return func(yield func([]byte, memEntry) bool) {
		if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
			return
		}
		for k, e := range t.Ascend(lo, hi) {
			if !yield([]byte(k), e) {
				return
			}
		}
	}
}
