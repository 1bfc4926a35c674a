package store

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// compactionScheduler is the Pebble CompactionScheduler of a Manager. It grants compactions as
// Pebble's default one does (as many at once as DB.GetAllowedWithoutPermission allows, tried
// again when one ends and every grantInterval), except while loaders run: a cold restore
// ingests run after run of the same keys, each above the one before, and compacting them while
// more come rewrites the early runs once for every later one, on the cores that decode and
// sort the restore (a fifth of the bench's cold restore of 2 million records). While loads
// run, compactions wait, unless L0 has heldL0Limit sublevels or more (ingested runs, flushes
// of the tasks that process meanwhile): it then compacts as usual, before writes stall. When the last load ends, what waited is
// granted at once.
type compactionScheduler struct {
	// l0 returns the sublevels of L0 (nil until the database is open): read by the granter,
	// never while Pebble calls the scheduler, which may hold the database's lock.
	l0    atomic.Pointer[func() int]
	loads atomic.Int64 // loaders running
	deep  atomic.Bool  // L0 had heldL0Limit sublevels or more when the granter last looked

	mu struct {
		sync.Mutex
		db           pebble.DBForCompaction // nil when not registered
		running      int
		granting     bool
		grantingDone *sync.Cond
		stop         chan struct{} // closes the granter
		stopped      chan struct{} // closed by the granter when it returns
	}
	poke chan struct{}
}

// grantInterval is how often the scheduler looks for compactions to grant and, while loads
// run, at the depth of L0.
const grantInterval = 100 * time.Millisecond

// heldL0Limit is the depth of L0, in sublevels, at which compactions run even while loads do:
// two thirds of Pebble's L0StopWritesThreshold (12, the default the Manager keeps), twice its
// L0CompactionThreshold. A cold restore's runs after the first land in L0 (the levels above
// the last are not in use yet), one sublevel each.
const heldL0Limit = 8

func newCompactionScheduler() *compactionScheduler {
	s := &compactionScheduler{poke: make(chan struct{}, 1)}
	s.mu.grantingDone = sync.NewCond(&s.mu.Mutex)
	return s
}

var _ pebble.CompactionScheduler = (*compactionScheduler)(nil)

// setL0 gives the scheduler the depth of L0 of the open database, until it unregisters.
func (s *compactionScheduler) setL0(f func() int) { s.l0.Store(&f) }

// loadStarted and loadEnded count the loaders that run.
func (s *compactionScheduler) loadStarted() { s.loads.Add(1) }

func (s *compactionScheduler) loadEnded() {
	if s.loads.Add(-1) == 0 {
		s.wake()
	}
}

// held reports whether no compaction may start: loads run and L0 is shallow.
func (s *compactionScheduler) held() bool { return s.loads.Load() > 0 && !s.deep.Load() }

// wake has the granter look for compactions now.
func (s *compactionScheduler) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// Register implements pebble.CompactionScheduler; a database that is closed and opened again
// (disk.go's wipe of a corrupt one) registers again.
func (s *compactionScheduler) Register(_ int, db pebble.DBForCompaction) {
	s.stopGranter() // of a database whose open failed after it registered: Pebble does not unregister it
	stop, stopped := make(chan struct{}), make(chan struct{})
	s.mu.Lock()
	s.mu.db, s.mu.stop, s.mu.stopped = db, stop, stopped
	s.mu.Unlock()
	go s.granter(stop, stopped)
}

// Unregister implements pebble.CompactionScheduler: it returns when the scheduler no longer
// calls the database.
func (s *compactionScheduler) Unregister() {
	s.l0.Store(nil)
	s.stopGranter()
}

// stopGranter forgets the database and returns once the granter has stopped.
func (s *compactionScheduler) stopGranter() {
	s.mu.Lock()
	stop, stopped := s.mu.stop, s.mu.stopped
	s.mu.db, s.mu.stop, s.mu.stopped = nil, nil, nil
	for s.mu.granting {
		s.mu.grantingDone.Wait()
	}
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-stopped
	}
}

// TrySchedule implements pebble.CompactionScheduler.
func (s *compactionScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db == nil || s.held() || s.mu.db.GetAllowedWithoutPermission() <= s.mu.running {
		return false, nil
	}
	s.mu.running++
	return true, grant{s}
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler.
func (s *compactionScheduler) UpdateGetAllowedWithoutPermission() { s.wake() }

// granter grants waiting compactions every grantInterval and when woken, and while loads run
// it lets compactions run when L0 deepens, until stop closes.
func (s *compactionScheduler) granter(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(grantInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-s.poke:
		}
		if s.loads.Load() > 0 {
			if l0 := s.l0.Load(); l0 != nil {
				s.deep.Store((*l0)() >= heldL0Limit)
			}
		}
		s.grant()
	}
}

// grant grants compactions while the database has some waiting and allows more, one granter
// at a time.
func (s *compactionScheduler) grant() {
	s.mu.Lock()
	for s.mu.granting {
		s.mu.grantingDone.Wait()
	}
	db := s.mu.db
	if db == nil || s.held() {
		s.mu.Unlock()
		return
	}
	n := db.GetAllowedWithoutPermission() - s.mu.running
	if n <= 0 {
		s.mu.Unlock()
		return
	}
	s.mu.granting = true
	s.mu.Unlock()
	// The database's methods are called without s.mu: Schedule starts the compaction, which
	// may end (Done) before it returns.
	for ; n > 0; n-- {
		if waiting, _ := db.GetWaitingCompaction(); !waiting {
			break
		}
		s.mu.Lock()
		s.mu.running++
		s.mu.Unlock()
		if !db.Schedule(grant{s}) {
			s.mu.Lock()
			s.mu.running--
			s.mu.Unlock()
			break
		}
	}
	s.mu.Lock()
	s.mu.granting = false
	s.mu.grantingDone.Broadcast()
	s.mu.Unlock()
}

// grant is the pebble.CompactionGrantHandle of a compaction that s granted.
type grant struct{ s *compactionScheduler }

func (grant) Started()                                          {}
func (grant) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (grant) CumulativeStats(pebble.CompactionGrantHandleStats) {}
func (g grant) Done() {
	g.s.mu.Lock()
	g.s.mu.running--
	g.s.mu.Unlock()
	g.s.wake()
}
