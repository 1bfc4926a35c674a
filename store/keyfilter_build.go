package store

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// filterBuild builds, in the background, the key filter of a partition that already held
// keys when its task opened (a restart or a rebalance on a warm state directory): a scan of
// the partition's committed keys adds them to a new filter, while the task adds the keys it
// writes or restores meanwhile (filterAdd), under mu. Once the scan has ended, the task's
// next read installs the filter (pollFilterBuild): it then holds every key the partition may
// hold, as a filter made at the partition's creation would.
//
// The scan reads the committed state as of its start (a Pebble iterator is a snapshot); a
// key written by the task after the open goes through filterAdd whichever side of that
// start its commit lands, so no key falls between the two.
type filterBuild struct {
	mu sync.Mutex // orders the scan's adds and the task's
	f  *keyFilter

	stop atomic.Bool   // the task closes, wipes or drops its filter: give up
	done chan struct{} // closed when the scan has ended
	err  error         // why the scan ended without a complete filter; read after done

	db           *pebble.DB // the scan's: the committed keys in [lower, upper)
	lower, upper []byte
}

// errFilterFull ends a build whose filter would pass its memory bound.
var errFilterFull = errors.New("the filter's memory budget is spent")

// errFilterStopped ends a build that the task gave up.
var errFilterStopped = errors.New("stopped")

// filterScanChunk is how many keys the scan hashes between two takes of mu.
const filterScanChunk = 256

// startFilterBuild starts the background build of the partition's filter.
func (p *Partition) startFilterBuild() {
	b := &filterBuild{f: p.t.m.filters.newFilter(), done: make(chan struct{}), db: p.t.m.db, lower: p.prefix, upper: p.upper}
	p.building = b
	p.t.m.filters.scans.run(b)
}

// scanQueue runs the scans of the filter builds, at most limit at once, in the order they
// were queued. A goroutine per build was one per store partition that opens on a warm state
// directory: 4,096 at once, each with its Pebble iterator, when an instance of 4,096 tasks
// restarts. The scans use the CPU while they run; more of them at once than cores only hold
// more iterators and stacks. A build stopped while queued leaves the queue (drop).
type scanQueue struct {
	mu      sync.Mutex
	limit   int
	running int
	peak    int // the most scans that ran at once
	pending []*filterBuild
}

// run runs b's scan on one of the queue's goroutines, now or when one is free.
func (q *scanQueue) run(b *filterBuild) {
	q.mu.Lock()
	if q.running < max(q.limit, 1) {
		q.running++
		q.peak = max(q.peak, q.running)
		q.mu.Unlock()
		go q.work(b)
		return
	}
	q.pending = append(q.pending, b)
	q.mu.Unlock()
}

// work runs b's scan, then the queued ones, until there are none.
func (q *scanQueue) work(b *filterBuild) {
	for b != nil {
		b.scan()
		q.mu.Lock()
		b = nil
		if len(q.pending) > 0 {
			b, q.pending[0] = q.pending[0], nil
			q.pending = q.pending[1:]
		} else {
			q.running--
		}
		q.mu.Unlock()
	}
}

// drop takes b out of the queue if its scan has not started, and reports whether it did.
func (q *scanQueue) drop(b *filterBuild) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.pending, b)
	if i < 0 {
		return false
	}
	q.pending = slices.Delete(q.pending, i, i+1)
	return true
}

// scan adds the hash of every committed key in [lower, upper) (without the prefix lower) to
// the filter.
func (b *filterBuild) scan() {
	db, lower, upper := b.db, b.lower, b.upper
	defer close(b.done)
	if b.stop.Load() { // stopped while queued
		b.err = errFilterStopped
		return
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		b.err = err
		return
	}
	var hashes [filterScanChunk]uint64
	n := 0
	add := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, h := range hashes[:n] {
			if !b.f.add(h) {
				b.err = errFilterFull
				return false
			}
		}
		n = 0
		return true
	}
	for valid := it.First(); valid; valid = it.Next() {
		hashes[n] = filterHash(it.Key()[len(lower):])
		if n++; n == filterScanChunk {
			if b.stop.Load() {
				b.err = errFilterStopped
				break
			}
			if !add() {
				break
			}
		}
	}
	if b.err == nil {
		add()
	}
	if err := it.Close(); b.err == nil {
		b.err = err
	}
}

// add adds the key of hash h for the task, while the scan may run. It returns false when the
// filter cannot take it.
func (b *filterBuild) add(h uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.f.add(h)
}

// pollFilterBuild installs the built filter once the scan has ended; a scan that failed
// leaves the partition without one.
func (p *Partition) pollFilterBuild() {
	b := p.building
	select {
	case <-b.done:
	default:
		return
	}
	p.building = nil
	if b.err != nil {
		b.f.release()
		p.t.log.Debug("no key filter", "store", p.name, "reason", b.err)
		return
	}
	p.filter = b.f
}

// stopFilterBuild ends the partition's filter build, if any, and gives its memory back.
func (p *Partition) stopFilterBuild() {
	b := p.building
	if b == nil {
		return
	}
	p.building = nil
	b.stop.Store(true)
	if p.t.m.filters.scans.drop(b) { // not started: it never will
		b.err = errFilterStopped
		close(b.done)
	}
	<-b.done
	b.f.release()
}
