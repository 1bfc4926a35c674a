package store

import (
	"fmt"
	"testing"
	"time"
)

// TestFilterBuildsQueued checks that the filter builds of many partitions opened on a warm
// state directory run at most GOMAXPROCS at once, and that each still completes: every
// partition gets its filter, which answers for the keys its scan found.
func TestFilterBuildsQueued(t *testing.T) {
	dir := t.TempDir()
	const n = 64
	m := openManagerDefault(t, dir)
	for i := range n {
		task, err := m.OpenTask("proc", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		s, err := task.Open("kv", Options{Backend: Pebble})
		if err != nil {
			t.Fatal(err)
		}
		for k := range 100 {
			if err := s.Put(fmt.Appendf(nil, "k%d", k), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if err := task.Apply(nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManagerDefault(t, dir)
	defer m.Close()
	var parts []*Partition
	for i := range n {
		task, err := m.OpenTask("proc", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := task.Open("kv", Options{Backend: Pebble}); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, task.Partition("kv"))
	}
	for i, p := range parts {
		if p.building == nil {
			t.Fatalf("partition %d builds no filter", i)
		}
		<-p.building.done
		p.pollFilterBuild()
		if p.filter == nil || !p.filter.mayHold(filterHash([]byte("k7"))) {
			t.Fatalf("partition %d: filter %v after its build, want one that holds its keys", i, p.filter)
		}
	}
	q := &m.filters.scans
	// The last scans' goroutines leave the queue just after their builds end.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		q.mu.Lock()
		if q.running == 0 || time.Now().After(deadline) {
			break
		}
		q.mu.Unlock()
	}
	defer q.mu.Unlock()
	if q.peak < 1 || q.peak > q.limit || q.running != 0 || len(q.pending) != 0 {
		t.Errorf("scans: peak %d of a limit of %d, %d running, %d queued after the builds", q.peak, q.limit, q.running, len(q.pending))
	}
}

// TestScanQueueDrop checks that a build stopped while queued leaves the queue at once, and
// that a running one is not taken out.
func TestScanQueueDrop(t *testing.T) {
	q := &scanQueue{limit: 1, running: 1} // its one place is taken
	a, b := &filterBuild{done: make(chan struct{})}, &filterBuild{done: make(chan struct{})}
	q.run(a)
	q.run(b)
	if len(q.pending) != 2 {
		t.Fatalf("%d queued, want 2", len(q.pending))
	}
	if !q.drop(a) || q.drop(a) || len(q.pending) != 1 || q.pending[0] != b {
		t.Fatalf("after dropping a: %v queued, want b alone", q.pending)
	}
}
