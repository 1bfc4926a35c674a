package store

import (
	"errors"
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
}

// errFilterFull ends a build whose filter would pass its memory bound.
var errFilterFull = errors.New("the filter's memory budget is spent")

// errFilterStopped ends a build that the task gave up.
var errFilterStopped = errors.New("stopped")

// filterScanChunk is how many keys the scan hashes between two takes of mu.
const filterScanChunk = 256

// startFilterBuild starts the background build of the partition's filter.
func (p *Partition) startFilterBuild() {
	b := &filterBuild{f: p.t.m.filters.newFilter(), done: make(chan struct{})}
	p.building = b
	go b.scan(p.t.m.db, p.prefix, p.upper)
}

// scan adds the hash of every committed key in [lower, upper) (without the prefix lower) to
// the filter.
func (b *filterBuild) scan(db *pebble.DB, lower, upper []byte) {
	defer close(b.done)
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
	<-b.done
	b.f.release()
}
