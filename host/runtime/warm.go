package runtime

import (
	"maps"
	"sync"
	"time"

	"github.com/statehost/statehost/restore"
	"github.com/statehost/statehost/store"
)

// localState is what this instance holds of each task's logged stores, for the balancer (the
// member's join metadata, memberState), for warmups (have they caught up?) and for the state
// cleanup (since when it holds state of a task it does not own). It is a restore.Listener of
// both the active restores and the standby follower, and safe for concurrent use: the group's
// goroutine reads it while the loop and the follower update it.
type localState struct {
	mu      sync.Mutex
	admin   string                            // the admin listener's address, published to the group
	stores  map[taskID]map[string]*storeState // logged stores held locally
	running map[taskID]bool                   // active tasks that run
	idle    map[taskID]time.Time              // tasks with local state that are neither active nor standby here, since when
	procs   map[string]*processor
	markers int64 // the transaction markers that end each changelog partition, not records to restore (endMarkers)
}

// storeState is a logged store partition held locally.
type storeState struct {
	offset     int64 // of the last changelog record applied; -1: none
	end        int64 // the changelog's end offset as last seen; -1: unknown
	persistent bool  // Pebble: it stays when the task closes
}

func newLocalState(procs []*processor) *localState {
	s := &localState{
		stores:  map[taskID]map[string]*storeState{},
		running: map[taskID]bool{},
		idle:    map[taskID]time.Time{},
		procs:   map[string]*processor{},
	}
	for _, p := range procs {
		s.procs[p.cfg.Name] = p
	}
	return s
}

// load records the tasks with state on disk (store.Manager.LocalTasks), idle since now.
func (s *localState) load(tasks []store.LocalTask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, lt := range tasks {
		id := lt.ID
		s.idle[id] = now
		for _, ls := range lt.Stores {
			if ls.HasCheckpoint {
				s.storeLocked(id, ls.Name, true).offset = ls.Checkpoint
			}
		}
	}
}

// storeLocked returns the state of a store of a task, created when missing.
func (s *localState) storeLocked(id taskID, name string, persistent bool) *storeState {
	m := s.stores[id]
	if m == nil {
		m = map[string]*storeState{}
		s.stores[id] = m
	}
	st := m[name]
	if st == nil {
		st = &storeState{offset: -1, end: -1, persistent: persistent}
		m[name] = st
	}
	return st
}

// persistent reports whether the store of a processor keeps its data when its task closes.
func (s *localState) persistent(proc, name string) bool {
	if p := s.procs[proc]; p != nil {
		for _, spec := range p.stores {
			if spec.Name == name {
				return spec.Backend == store.Pebble
			}
		}
	}
	return true
}

func (s *localState) OnRestoreStart(e restore.StartEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.storeLocked(taskID{Processor: e.Processor, Partition: e.Partition}, e.Store, s.persistent(e.Processor, e.Store))
	st.offset, st.end = e.StartOffset-1, e.EndOffset // below the start there is nothing to read
}

func (s *localState) OnBatchRestored(e restore.BatchEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.storeLocked(taskID{Processor: e.Processor, Partition: e.Partition}, e.Store, s.persistent(e.Processor, e.Store))
	st.offset = e.Offset
	st.end = max(st.end, e.HighWatermark)
}

func (s *localState) OnRestoreEnd(restore.EndEvent) {}

// setRunning records that an active task runs (true) or stopped running (false).
func (s *localState) setRunning(id taskID, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if running {
		s.running[id] = true
	} else {
		delete(s.running, id)
	}
}

// opened records that the task is open here, active or standby: its state is in use.
func (s *localState) opened(id taskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.idle, id)
}

// closed records that the task closed here, with the checkpoints its persistent stores kept
// (store -> offset; a store without a checkpoint is absent). Memory stores are gone.
func (s *localState) closed(id taskID, checkpoints map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, id)
	for name, st := range s.stores[id] {
		if !st.persistent {
			delete(s.stores[id], name)
		}
	}
	for name, off := range checkpoints {
		s.storeLocked(id, name, true).offset = off
	}
	if len(s.stores[id]) == 0 {
		delete(s.stores, id)
		return
	}
	s.idle[id] = time.Now()
}

// forget drops a task whose local state was deleted.
func (s *localState) forget(id taskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stores, id)
	delete(s.idle, id)
	delete(s.running, id)
}

// idleSince returns the tasks with local state that are neither active nor standby here.
func (s *localState) idleSince() map[taskID]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.idle)
}

// report is this member's state for its join metadata: per task, the sum over its processor's
// logged stores of the next offset to restore from (offsetRunning for a running task). Tasks
// of processors this instance does not run are left out: the leader could not judge them.
func (s *localState) report() memberState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := memberState{admin: s.admin, offsets: make(map[taskID]int64, len(s.stores)+len(s.running))}
	for id := range s.running {
		ms.offsets[id] = offsetRunning
	}
	for id, stores := range s.stores {
		p := s.procs[id.Processor]
		if p == nil || s.running[id] {
			continue
		}
		var sum int64
		for _, spec := range p.stores {
			if st := stores[spec.Name]; st != nil && !spec.LoggingDisabled {
				sum += st.offset + 1
			}
		}
		ms.offsets[id] = sum
	}
	return ms
}

// lag returns how many records the task's stores held here are behind the changelog ends last
// seen, and whether every logged store of the task has been seen (an end is known).
func (s *localState) lag(id taskID) (lag int64, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[id.Processor]
	if p == nil {
		return 0, false
	}
	for _, spec := range p.stores {
		if spec.LoggingDisabled {
			continue
		}
		st := s.stores[id][spec.Name]
		if st == nil || st.end < 0 {
			return 0, false
		}
		lag += restore.Lag(0, st.end, st.offset+1, s.markers)
	}
	return lag, true
}

// setAdmin records the admin listener's address, published in the join metadata.
func (s *localState) setAdmin(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admin = addr
}

// adminAddr returns the admin address this instance publishes.
func (s *localState) adminAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admin
}
