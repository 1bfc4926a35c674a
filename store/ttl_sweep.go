package store

import (
	"fmt"
	"math"
)

// The sweep deletes the expired entries of a task's key-value stores with a TTL, a bounded
// number of entries at a time (Task.SweepExpired), so that it never holds up processing. A
// pass walks the store in key order from a cursor, a step of at most budget entries at each
// call; the entries expired at the step's time are deleted through the layers under the ttl
// layer (coalescing, logging, the base store), as the plugin's deletes are: their tombstones
// go to the changelog, in the task's next commit (under exactly-once, in its transaction). A
// restore or a standby applies them like any tombstone, and compaction drops the deleted keys.
//
// Between passes nothing is read: a pass that ends knows that no entry can expire before the
// least write time it kept (or, for the entries written since it began, its start) plus the
// TTL, and the next pass waits for the clock to reach that time.

// sweepState is where the sweep of one partition is.
type sweepState struct {
	active    bool   // a pass is under way
	cursor    []byte // the next key the pass examines; nil: from the first
	passStart int64  // the clock's time when the pass began
	minLive   int64  // the least write time of the entries the pass kept
	nextDue   int64  // the clock's time from which the next pass is due (MinInt64: at once)
}

// DefaultSweepBudget is the number of entries of each store a sweep step examines when
// Task.SweepExpired is given no budget.
const DefaultSweepBudget = 1000

// SweepDue reports whether the sweep has work on one of the task's stores with a TTL: a pass
// under way, or a pass due (the clock reached the time the last pass said). Nothing is due
// while the stream time of a stream-time store is unknown.
func (t *Task) SweepDue() bool {
	for _, p := range t.order {
		if p.sweepDue() {
			return true
		}
	}
	return false
}

// SweepExpired runs a step of the sweep on each of the task's stores with a TTL whose sweep
// has work (SweepDue): it examines at most budget entries (DefaultSweepBudget when budget <=
// 0) and deletes those that have expired, through the store's layers (its changelog among
// them). deleted, when not nil, is called for each store that deleted entries, with their
// number. An error fails nothing by itself: the deletes before it stand, as a plugin's would.
func (t *Task) SweepExpired(budget int, deleted func(store string, n int)) error {
	if err := t.check(); err != nil {
		return err
	}
	if budget <= 0 {
		budget = DefaultSweepBudget
	}
	for _, p := range t.order {
		if !p.sweepDue() {
			continue
		}
		n, err := p.sweepStep(budget)
		if n > 0 && deleted != nil {
			deleted(p.name, n)
		}
		if err != nil {
			return fmt.Errorf("store: task %s store %q: sweep expired entries: %w", t.id, p.name, err)
		}
	}
	return nil
}

func (p *Partition) sweepDue() bool {
	if p.ttl == nil || p.ttl.below == nil {
		return false
	}
	now := p.ttlNow()
	return now != NoTime && (p.ttl.sweep.active || now >= p.ttl.sweep.nextDue)
}

// sweepStep examines the next budget entries of the pass (beginning one when none is under
// way) and deletes the expired ones; it returns how many it deleted.
func (p *Partition) sweepStep(budget int) (int, error) {
	s, below, ttl := &p.ttl.sweep, p.ttl.below, p.ttl.spec
	now := p.ttlNow()
	if !s.active {
		*s = sweepState{active: true, passStart: now, minLive: math.MaxInt64, nextDue: s.nextDue}
	}
	it, err := below.Range(s.cursor, nil)
	if err != nil {
		return 0, err
	}
	var dead [][]byte
	examined, done := 0, true
	for it.Next() {
		if examined == budget {
			s.cursor, done = clone(it.Key()), false
			break
		}
		examined++
		at, _, ok := splitStamped(it.Value())
		if !ok {
			if err = it.Err(); err == nil {
				err = p.noStamp(it.Key())
			}
			break
		}
		if ttl.expired(at, now) {
			dead = append(dead, clone(it.Key()))
		} else {
			s.minLive = min(s.minLive, at)
		}
	}
	if err == nil {
		err = it.Err()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	for i, k := range dead {
		if err := below.Delete(k); err != nil {
			return i, err
		}
	}
	if done {
		// Nothing the pass kept expires before its least write time + TTL, nor anything
		// written since it began (written at passStart or later).
		first := min(s.minLive, s.passStart)
		s.active, s.cursor, s.nextDue = false, nil, math.MaxInt64
		if first <= math.MaxInt64-ttl.Millis {
			s.nextDue = max(first, 0) + ttl.Millis
		}
	}
	return len(dead), nil
}
