package store

import (
	"fmt"
	"testing"
)

// TestKeyFilterStaysExact checks the reads of a store whose key filter answers for absent
// keys: a new store (it has a filter), through writes, deletes, commits, a range delete, a
// restore of keys the task never wrote (the cache is cleared, so only the filter can know
// them), a wipe, and a reopen (the store holds keys then: no filter, reads from Pebble). A
// read the filter answers "absent" must be of a key that is absent.
func TestKeyFilterStaysExact(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	task, _ := m.OpenTask("p", 0)
	s, _ := task.Open("s", Options{})
	p := task.Partition("s")
	if p.filter == nil {
		t.Fatal("a new store has no key filter")
	}
	key := func(i int) string { return fmt.Sprintf("k%05d", i) }
	want := map[string]string{}
	check := func(when string, n int) {
		t.Helper()
		for i := range n {
			w, wok := want[key(i)]
			if v, ok := mustGet(t, s, key(i)); v != w || ok != wok {
				t.Fatalf("%s: %s = %q %v, want %q %v", when, key(i), v, ok, w, wok)
			}
		}
	}
	for i := 0; i < 2000; i += 2 {
		mustPut(t, s, key(i), "a")
		want[key(i)] = "a"
	}
	check("uncommitted", 4000)
	if p.filter.negatives < 1500 {
		t.Fatalf("the filter answered %d reads of the 2,000 absent keys", p.filter.negatives)
	}
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i += 4 {
		if err := s.Delete([]byte(key(i))); err != nil {
			t.Fatal(err)
		}
		delete(want, key(i))
	}
	check("deletes uncommitted", 4000)
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	check("committed", 4000)

	// A restore writes keys the task never wrote, behind the cache.
	var ws []Write
	for i := 1; i < 3000; i += 2 {
		ws = append(ws, Write{Key: []byte(key(i)), Value: []byte("r")})
		want[key(i)] = "r"
	}
	if err := p.ApplyRestore(ws, Checkpoint{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	check("restored", 4000)

	// A range delete leaves the keys in the filter (reads go through the batch).
	if err := p.base.(*pebbleStore).deleteRange([]byte(key(0)), []byte(key(1000))); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		delete(want, key(i))
	}
	check("range delete", 4000)
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, key(5000), "b")
	want[key(5000)] = "b"
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	check("range delete committed", 6000)

	// A reopen: the store holds keys, so it has no filter, and reads are Pebble's.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, dir)
	defer m.Close()
	task, _ = m.OpenTask("p", 0)
	s, _ = task.Open("s", Options{})
	p = task.Partition("s")
	if p.filter != nil {
		t.Fatal("a store that holds keys got a key filter at its open")
	}
	check("reopened", 6000)

	// A wipe empties the store: it gets an empty filter, exact again.
	if err := p.Wipe(); err != nil {
		t.Fatal(err)
	}
	if p.filter == nil {
		t.Fatal("a wiped store has no key filter")
	}
	want = map[string]string{}
	mustPut(t, s, key(7), "c")
	want[key(7)] = "c"
	ws = ws[:0]
	for i := 100; i < 200; i++ {
		ws = append(ws, Write{Key: []byte(key(i)), Value: []byte("r2")})
		want[key(i)] = "r2"
	}
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	if err := p.ApplyRestore(ws, Checkpoint{Offset: 2}); err != nil {
		t.Fatal(err)
	}
	check("wiped", 6000)
	if p.filter.negatives == 0 {
		t.Fatal("the wiped store's filter answered no read")
	}
}

// TestKeyFilterBudget checks that the key filters of an instance stay within their share of
// Settings.MemoryBytes, that a filter that would pass its bound is dropped (and its memory
// given back) while the reads stay exact, and that closed tasks give theirs back.
func TestKeyFilterBudget(t *testing.T) {
	m := openManager(t, t.TempDir()) // MinMemoryBytes: 256 KiB for the filters, 64 KiB each
	defer m.Close()
	quota, limit := m.filters.quota, m.filters.limit
	key := func(i int) string { return fmt.Sprintf("key-%06d", i) }
	var tasks []*Task
	for n := range 16 {
		task, err := m.OpenTask("p", int32(n))
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
		s, _ := task.Open("s", Options{})
		p := task.Partition("s")
		for i := range 5000 { // fits in a partition's 64 KiB: layers of 4 and 16 KiB
			mustPut(t, s, key(i), "v")
		}
		if got := m.Stats().KeyFilterBytes; got > quota {
			t.Fatalf("after %d tasks the key filters hold %d bytes, above their quota %d", n+1, got, quota)
		}
		if p.filter != nil && p.filter.bytes > limit {
			t.Fatalf("a filter holds %d bytes, above its bound %d", p.filter.bytes, limit)
		}
		for i := range 6000 {
			if v, ok := mustGet(t, s, key(i)); (i < 5000) != ok || ok && v != "v" {
				t.Fatalf("task %d: %s = %q %v", n, key(i), v, ok)
			}
		}
	}
	if got := m.Stats().KeyFilterBytes; got < quota-limit {
		t.Fatalf("16 tasks of 5,000 keys hold %d bytes of filters: the quota %d was not used", got, quota)
	}
	var dropped int
	for _, task := range tasks {
		if task.Partition("s").filter == nil {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("16 filters of 20 KiB fit in 256 KiB: the quota does not bound them")
	}

	for _, task := range tasks {
		task.Close()
	}
	if got := m.Stats().KeyFilterBytes; got != 0 {
		t.Fatalf("closed tasks' filters still hold %d bytes", got)
	}

	// A partition whose keys outgrow its filter's bound drops it (with the instance's quota
	// free), and reads stay exact.
	task, _ := m.OpenTask("q", 0)
	s, _ := task.Open("s", Options{})
	p := task.Partition("s")
	for i := range 20000 { // a third layer (64 KiB) does not fit in 64 KiB with the first two
		mustPut(t, s, key(i), "w")
		if p.filter != nil && p.filter.bytes > limit {
			t.Fatalf("a filter holds %d bytes, above its bound %d", p.filter.bytes, limit)
		}
	}
	if p.filter != nil {
		t.Fatalf("20,000 keys in a filter of at most %d bytes", limit)
	}
	if got := m.Stats().KeyFilterBytes; got != 0 {
		t.Fatalf("the dropped filter still holds %d bytes", got)
	}
	for i := range 22000 {
		if v, ok := mustGet(t, s, key(i)); (i < 20000) != ok || ok && v != "w" {
			t.Fatalf("after the filter was dropped: %s = %q %v", key(i), v, ok)
		}
	}
}
