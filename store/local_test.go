package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func mustOpenTask(t *testing.T, m *Manager, processor string, partition int32) *Task {
	t.Helper()
	task, err := m.OpenTask(processor, partition)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func mustOpen(t *testing.T, task *Task, name string, o Options) Store {
	t.Helper()
	s, err := task.Open(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustApply(t *testing.T, task *Task, checkpoints map[string]int64) {
	t.Helper()
	if err := task.Apply(checkpoints); err != nil {
		t.Fatal(err)
	}
}

func mustLocalTasks(t *testing.T, m *Manager) string {
	t.Helper()
	ts, err := m.LocalTasks()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ts)
}

// TestLocalTasks checks that LocalTasks lists the tasks whose Pebble stores hold a checkpoint
// or data, open or closed, sorted, and again after the manager is reopened; that stores
// registered but never written, wiped stores and memory stores are not listed.
func TestLocalTasks(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)

	// "zz" sorts after "aaa" but its registry keys come first (shorter name).
	zz := mustOpenTask(t, m, "zz", 2)
	mustPut(t, mustOpen(t, zz, "kv", Options{}), "k", "v")
	mustApply(t, zz, map[string]int64{"kv": 41})
	_ = zz.Close()

	aaa := mustOpenTask(t, m, "aaa", 10)
	mustPut(t, mustOpen(t, aaa, "logged", Options{Changelog: &recLog{}}), "k", "v")
	mustPut(t, mustOpen(t, aaa, "b-unlogged", Options{}), "k", "v") // data, no checkpoint
	mustPut(t, mustOpen(t, aaa, "mem", Options{Backend: Memory}), "k", "v")
	mustOpen(t, aaa, "never-written", Options{})
	mustApply(t, aaa, map[string]int64{"logged": 7, "mem": 3})
	// aaa stays open: listed all the same.

	aaa2 := mustOpenTask(t, m, "aaa", 2)
	w, err := aaa2.OpenWindow("w", Options{Kind: Window, Window: WindowSpec{Size: 10}})
	if err != nil {
		t.Fatal(err)
	}
	mustWPut(t, w, "k", 0, "v")
	mustApply(t, aaa2, map[string]int64{"w": 0})
	_ = aaa2.Close()

	// A checkpoint without data (an empty changelog restored) counts.
	ckptOnly := mustOpenTask(t, m, "ckpt", 0)
	mustOpen(t, ckptOnly, "kv", Options{})
	if err := ckptOnly.Partition("kv").ApplyRestore(nil, Checkpoint{Offset: 99}); err != nil {
		t.Fatal(err)
	}
	_ = ckptOnly.Close()

	// Registered but never written, only a memory store, or wiped: not listed.
	empty := mustOpenTask(t, m, "empty", 0)
	mustOpen(t, empty, "kv", Options{})
	if _, err := empty.OpenSession("s", Options{Kind: Session, Window: WindowSpec{Gap: 5}}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, mustOpen(t, empty, "mem", Options{Backend: Memory}), "k", "v")
	mustApply(t, empty, map[string]int64{"mem": 1})
	_ = empty.Close()
	wiped := mustOpenTask(t, m, "wiped", 0)
	mustPut(t, mustOpen(t, wiped, "kv", Options{}), "k", "v")
	mustApply(t, wiped, map[string]int64{"kv": 5})
	if err := wiped.Partition("kv").Wipe(); err != nil {
		t.Fatal(err)
	}
	_ = wiped.Close()

	want := fmt.Sprint([]LocalTask{
		{ID: TaskID{"aaa", 2}, Stores: []LocalStore{{"w", 0, true}}},
		{ID: TaskID{"aaa", 10}, Stores: []LocalStore{{"b-unlogged", 0, false}, {"logged", 7, true}}},
		{ID: TaskID{"ckpt", 0}, Stores: []LocalStore{{"kv", 99, true}}},
		{ID: TaskID{"zz", 2}, Stores: []LocalStore{{"kv", 41, true}}},
	})
	if got := mustLocalTasks(t, m); got != want {
		t.Fatalf("LocalTasks:\n got %s\nwant %s", got, want)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.LocalTasks(); !errors.Is(err, ErrClosed) {
		t.Fatalf("LocalTasks on a closed manager: %v, want ErrClosed", err)
	}
	m = openManager(t, dir)
	defer m.Close()
	if got := mustLocalTasks(t, m); got != want {
		t.Fatalf("LocalTasks after reopening:\n got %s\nwant %s", got, want)
	}
}

// TestLocalTasksWhileCommitting lists the tasks while an open task commits in another
// goroutine (run with -race): every listing sees a whole commit, checkpoints never go back.
func TestLocalTasksWhileCommitting(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task := mustOpenTask(t, m, "p", 0)
	defer task.Close()
	s := mustOpen(t, task, "kv", Options{})
	const n = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range int64(n) {
			if err := s.Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
				t.Error(err)
				return
			}
			if err := task.Apply(map[string]int64{"kv": i}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	last := int64(-1)
	for last < n-1 {
		ts, err := m.LocalTasks()
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) == 0 {
			continue
		}
		st := ts[0].Stores[0]
		if !st.HasCheckpoint || st.Checkpoint < last {
			t.Fatalf("checkpoint %d (%v) after %d", st.Checkpoint, st.HasCheckpoint, last)
		}
		last = st.Checkpoint
	}
	wg.Wait()
}

// partitionIDs returns the ids of the task's open Pebble store partitions.
func partitionIDs(task *Task) []uint32 {
	var ids []uint32
	for _, p := range task.Partitions() {
		if p.Persistent() {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// keysOf counts the database keys under the partition ids given: data, checkpoint, stream
// time and layout.
func keysOf(t *testing.T, m *Manager, ids []uint32) int {
	t.Helper()
	it, err := m.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if k[0] >= nsData && k[0] <= nsLayout && len(k) >= 5 && slices.Contains(ids, binary.BigEndian.Uint32(k[1:])) {
			n++
		}
	}
	return n
}

// writeTask opens task (processor, partition) with a key-value, a window and a session store,
// writes to each and commits with checkpoints, a stream time and an exported checkpoint file.
func writeTask(t *testing.T, m *Manager, processor string, partition int32) *Task {
	t.Helper()
	task := mustOpenTask(t, m, processor, partition)
	mustPut(t, mustOpen(t, task, "kv", Options{}), "k", "v")
	w, err := task.OpenWindow("w", Options{Kind: Window, Window: WindowSpec{Size: 10, Retention: 100}})
	if err != nil {
		t.Fatal(err)
	}
	mustWPut(t, w, "k", 50, "v")
	s, err := task.OpenSession("s", Options{Kind: Session, Window: WindowSpec{Gap: 10, Retention: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("k"), 40, 50, []byte("v")); err != nil {
		t.Fatal(err)
	}
	task.ObserveTime(55)
	mustApply(t, task, map[string]int64{"kv": 10, "w": 11, "s": 12})
	if err := WriteCheckpointFile(filepath.Join(task.Dir(), CheckpointFileName), []CheckpointEntry{{"log", partition, 12}}); err != nil {
		t.Fatal(err)
	}
	return task
}

// TestDeleteTask checks that DeleteTask removes every key of a closed task's key-value,
// window and session stores and its directory, refuses an open task, leaves the other tasks
// alone, and that the task reopens empty, also after the manager is reopened.
func TestDeleteTask(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	gone := writeTask(t, m, "proc", 0)
	goneIDs := partitionIDs(gone)
	goneDir := gone.Dir()
	_ = gone.Close()
	kept := writeTask(t, m, "proc", 1)
	keptIDs := partitionIDs(kept)
	other := writeTask(t, m, "proc2", 0) // "proc" is a prefix of its name
	otherIDs := partitionIDs(other)
	_ = other.Close()
	if n := keysOf(t, m, goneIDs); n != 3*3+2 {
		t.Fatalf("%d keys before the deletion, want 11 (3 stores x data, checkpoint, time; 2 layouts)", n)
	}
	keptKeys, otherKeys := keysOf(t, m, keptIDs), keysOf(t, m, otherIDs)

	err := m.DeleteTask(kept.ID())
	if !errors.Is(err, ErrTaskOpen) {
		t.Fatalf("DeleteTask of an open task: %v, want ErrTaskOpen", err)
	}
	t.Logf("open task refused: %v", err)
	if err := m.DeleteTask(gone.ID()); err != nil {
		t.Fatal(err)
	}
	if n := keysOf(t, m, goneIDs); n != 0 {
		t.Fatalf("%d keys of the deleted task left", n)
	}
	if es, err := readRegistry(m.db, registryKey(gone.ID(), "")); err != nil || len(es) != 0 {
		t.Fatalf("registry entries left: %v %v", es, err)
	}
	if _, err := os.Stat(goneDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("task directory left: %v", err)
	}
	if keysOf(t, m, keptIDs) != keptKeys || keysOf(t, m, otherIDs) != otherKeys {
		t.Fatal("the deletion touched another task's keys")
	}
	for _, id := range []TaskID{kept.ID(), other.ID()} {
		if _, err := os.Stat(filepath.Join(dir, "tasks", id.String(), CheckpointFileName)); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	want := fmt.Sprint([]LocalTask{
		{ID: TaskID{"proc", 1}, Stores: []LocalStore{{"kv", 10, true}, {"s", 12, true}, {"w", 11, true}}},
		{ID: TaskID{"proc2", 0}, Stores: []LocalStore{{"kv", 10, true}, {"s", 12, true}, {"w", 11, true}}},
	})
	if got := mustLocalTasks(t, m); got != want {
		t.Fatalf("LocalTasks after the deletion:\n got %s\nwant %s", got, want)
	}
	// Deleting again, or a task that never existed, is not an error.
	for _, id := range []TaskID{gone.ID(), {"never", 3}} {
		if err := m.DeleteTask(id); err != nil {
			t.Fatalf("DeleteTask(%s): %v", id, err)
		}
	}
	_ = kept.Close()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteTask(gone.ID()); !errors.Is(err, ErrClosed) {
		t.Fatalf("DeleteTask on a closed manager: %v, want ErrClosed", err)
	}

	m = openManager(t, dir)
	defer m.Close()
	if got := mustLocalTasks(t, m); got != want {
		t.Fatalf("LocalTasks after reopening:\n got %s\nwant %s", got, want)
	}
	// The deleted task reopens empty, with new ids; a store may change type (its layout is gone).
	task := mustOpenTask(t, m, "proc", 0)
	defer task.Close()
	kv := mustOpen(t, task, "kv", Options{})
	if _, err := task.OpenWindow("s", Options{Kind: Window, Window: WindowSpec{Size: 10}}); err != nil {
		t.Fatalf("reopening a deleted session store as a window store: %v", err)
	}
	if _, ok := mustGet(t, kv, "k"); ok {
		t.Fatal("the deleted task's data is back")
	}
	for _, p := range task.Partitions() {
		if _, ok, _ := p.Checkpoint(); ok {
			t.Fatalf("store %q has a checkpoint", p.Name())
		}
		if has, _ := p.HasData(); has {
			t.Fatalf("store %q has data", p.Name())
		}
		if slices.Contains(goneIDs, p.id) {
			t.Fatalf("store %q reuses id %d", p.Name(), p.id)
		}
	}
	if task.StreamTime() != NoTime {
		t.Fatalf("stream time %d, want none", task.StreamTime())
	}
	if _, err := os.Stat(task.Dir()); err != nil {
		t.Fatal(err)
	}
	// The kept task still has its state.
	kept = mustOpenTask(t, m, "proc", 1)
	defer kept.Close()
	if v, ok := mustGet(t, mustOpen(t, kept, "kv", Options{}), "k"); !ok || v != "v" {
		t.Fatalf("kept task's kv: %q %v", v, ok)
	}
}

// TestDeleteTaskNames checks that DeleteTask refuses the names OpenTask refuses, which would
// name a directory outside tasks/.
func TestDeleteTaskNames(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, filepath.Join(dir, "state"))
	defer m.Close()
	victim := filepath.Join(dir, "state", "x_0")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, id := range []TaskID{{"../x", 0}, {"..", 0}, {"", 0}, {"p", -1}} {
		if err := m.DeleteTask(id); err == nil {
			t.Fatalf("DeleteTask(%q, %d) accepted", id.Processor, id.Partition)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteTaskRacesOpenTask opens, writes and closes a task in one goroutine while another
// deletes it (run with -race): a deletion either is refused or happens between two openings,
// never halfway through one; an open task always has its directory.
func TestDeleteTaskRacesOpenTask(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	id := TaskID{"p", 0}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var deleted, refused int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			switch err := m.DeleteTask(id); {
			case err == nil:
				deleted++
			case errors.Is(err, ErrTaskOpen):
				refused++
			default:
				t.Error(err)
				return
			}
		}
	}()
	for i := range int64(50) {
		task := mustOpenTask(t, m, id.Processor, id.Partition)
		s := mustOpen(t, task, "kv", Options{})
		mustPut(t, s, "k", "v")
		mustApply(t, task, map[string]int64{"kv": i})
		if _, err := os.Stat(task.Dir()); err != nil {
			t.Fatalf("open task's directory: %v", err)
		}
		if cp, ok, _ := task.Partition("kv").Checkpoint(); !ok || cp.Offset != i {
			t.Fatalf("checkpoint %d %v, want %d", cp.Offset, ok, i)
		}
		_ = task.Close()
	}
	close(done)
	wg.Wait()
	t.Logf("%d deletions, %d refused", deleted, refused)
}
