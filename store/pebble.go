package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleStore is the base layer of a Pebble store partition. Writes go to the task's batch
// and to the partition's read cache (and key filter). A read is answered by the first of: the
// read cache (the key's latest value or absence); the key filter (a key it does not hold is
// absent); the committed state, when the cache holds every uncommitted write; else the
// task's batch, indexed for it. Reads see the task's uncommitted writes.
type pebbleStore struct{ p *Partition }

var _ Store = (*pebbleStore)(nil)

func (s *pebbleStore) Get(key []byte) ([]byte, bool, error) {
	t := s.p.t
	if err := t.check(); err != nil {
		return nil, false, err
	}
	rc := s.p.cache
	r := pebble.Reader(nil)
	s.p.wakeFilter()
	if rc != nil {
		if e := rc.get(key); e != nil {
			if e.absent {
				return nil, false, nil
			}
			return clone(e.v), true, nil
		}
		if s.p.building != nil {
			s.p.pollFilterBuild()
		}
		if f := s.p.filter; f != nil && !f.mayHold(filterHash(key)) {
			f.negatives++
			return nil, false, nil // neither the committed state nor the batch holds it
		}
		if rc.knowsWrites(t.gen) {
			r = t.m.db // the key has no uncommitted write: the committed state answers
		}
	}
	if r == nil {
		r = t.indexedBatch()
	}
	v, c, err := r.Get(s.p.key(key))
	if errors.Is(err, pebble.ErrNotFound) {
		if rc != nil {
			rc.fill(key, nil, true, t.gen)
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: task %s store %q: get: %w", t.id, s.p.name, err)
	}
	out := clone(v)
	_ = c.Close()
	if rc != nil {
		rc.fill(key, out, false, t.gen)
	}
	return out, true, nil
}

func (s *pebbleStore) Put(key, value []byte) error {
	t := s.p.t
	if err := t.check(); err != nil {
		return err
	}
	s.p.wakeFilter()
	if err := t.writes().Set(s.p.key(key), value, nil); err != nil {
		return fmt.Errorf("store: task %s store %q: put: %w", t.id, s.p.name, err)
	}
	had := false
	if s.p.cache != nil {
		had = s.p.cache.write(key, value, false, t.gen)
	}
	if !had {
		s.p.filterAdd(key) // the cache did not know it present: it may be new
	}
	t.unloggedWrites = t.unloggedWrites || !s.p.logged
	return nil
}

func (s *pebbleStore) Delete(key []byte) error {
	t := s.p.t
	if err := t.check(); err != nil {
		return err
	}
	if err := t.writes().Delete(s.p.key(key), nil); err != nil {
		return fmt.Errorf("store: task %s store %q: delete: %w", t.id, s.p.name, err)
	}
	if s.p.cache != nil {
		s.p.cache.write(key, nil, true, t.gen)
	}
	t.unloggedWrites = t.unloggedWrites || !s.p.logged
	return nil
}

// deleteRange deletes the user keys in [lo, hi) (lo nil: from the first) with one range
// tombstone in the task's batch. It is not logged: expiry is not a change a restore replays.
func (s *pebbleStore) deleteRange(lo, hi []byte) error {
	t := s.p.t
	if err := t.check(); err != nil {
		return err
	}
	start := append(append([]byte(nil), s.p.prefix...), lo...)
	end := append(append([]byte(nil), s.p.prefix...), hi...)
	if err := t.writes().DeleteRange(start, end, nil); err != nil {
		return fmt.Errorf("store: task %s store %q: delete range: %w", t.id, s.p.name, err)
	}
	if s.p.cache != nil {
		s.p.cache.clear()
		s.p.cache.lost(t.gen) // the range tombstone is known to the batch only
	}
	return nil
}

func (s *pebbleStore) Range(start, end []byte) (Iterator, error) {
	lo := append(append([]byte(nil), s.p.prefix...), start...)
	hi := s.p.upper
	if end != nil {
		hi = append(append([]byte(nil), s.p.prefix...), end...)
	}
	return s.iter(lo, hi)
}

func (s *pebbleStore) Prefix(prefix []byte) (Iterator, error) {
	lo := append(append([]byte(nil), s.p.prefix...), prefix...)
	hi := s.p.upper
	if succ := prefixSuccessor(prefix); succ != nil {
		hi = append(append([]byte(nil), s.p.prefix...), succ...)
	}
	return s.iter(lo, hi)
}

func (s *pebbleStore) iter(lo, hi []byte) (Iterator, error) {
	t := s.p.t
	if err := t.check(); err != nil {
		return nil, err
	}
	it := &pebbleIter{t: t, plen: len(s.p.prefix)}
	if compare(lo, hi) >= 0 {
		it.done = true
		return it, nil
	}
	pi, err := t.indexedBatch().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("store: task %s store %q: iterator: %w", t.id, s.p.name, err)
	}
	it.it = pi
	t.addIter(it)
	return it, nil
}

// pebbleIter walks a Pebble iterator over one partition's key range, stripping the partition prefix.
type pebbleIter struct {
	t       *Task
	it      *pebble.Iterator
	plen    int
	started bool
	done    bool
	err     error
}

func (i *pebbleIter) Next() bool {
	if i.done || i.err != nil || i.it == nil {
		return false
	}
	var ok bool
	if !i.started {
		i.started = true
		ok = i.it.First()
	} else {
		ok = i.it.Next()
	}
	if !ok {
		if err := i.it.Error(); err != nil {
			i.err = fmt.Errorf("store: iterate: %w", err)
		}
		i.done = true
		return false
	}
	return true
}

func (i *pebbleIter) Key() []byte {
	if i.done || i.it == nil || !i.started {
		return nil
	}
	return i.it.Key()[i.plen:]
}

func (i *pebbleIter) Value() []byte {
	if i.done || i.it == nil || !i.started {
		return nil
	}
	v, err := i.it.ValueAndErr()
	if err != nil {
		i.err = fmt.Errorf("store: read value: %w", err)
		return nil
	}
	return v
}

func (i *pebbleIter) Err() error { return i.err }

func (i *pebbleIter) Close() error {
	if i.it == nil {
		i.done = true
		return nil
	}
	err := i.it.Close()
	i.it = nil
	i.done = true
	i.t.removeIter(i)
	if err != nil {
		return fmt.Errorf("store: close iterator: %w", err)
	}
	return nil
}

func (i *pebbleIter) invalidate(err error) {
	if i.it != nil {
		_ = i.it.Close()
		i.it = nil
	}
	if !i.done && i.err == nil {
		i.err = err
	}
	i.done = true
}

// prefixSuccessor returns the smallest key greater than every key with the given prefix, or nil if there is none.
func prefixSuccessor(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			out := append([]byte(nil), prefix[:i+1]...)
			out[i]++
			return out
		}
	}
	return nil
}
