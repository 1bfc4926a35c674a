package store

import (
	"bytes"
	"fmt"
	"testing"
)

// TestReadCacheStaysExact writes far more keys than a Pebble partition's read cache holds
// (MinMemoryBytes gives it 256 KiB, about 2,500 entries), so that it evicts uncommitted
// writes, and checks that every read still answers the task's state exactly: before and after
// a commit, after deletes, through iterators, and after a restore and a reopen. An evicted
// uncommitted write must be read from the task's batch, never from the committed state.
func TestReadCacheStaysExact(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	m := openManager(t, dir)
	task, err := m.OpenTask("p", 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := task.Open("s", Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return fmt.Sprintf("k%06d", i) }
	check := func(when string, want func(i int) (string, bool)) {
		t.Helper()
		for i := range n {
			w, wok := want(i)
			if v, ok := mustGet(t, s, key(i)); ok != wok || v != w {
				t.Fatalf("%s: %s = %q %v, want %q %v", when, key(i), v, ok, w, wok)
			}
		}
	}
	// Absent keys first: the cache learns that they have no value, then must forget it.
	check("empty", func(int) (string, bool) { return "", false })
	for i := range n {
		mustPut(t, s, key(i), "v1-"+key(i))
	}
	if task.Partition("s").cache.knowsWrites(task.gen) {
		t.Fatal("the cache evicted no uncommitted write: the test does not test eviction")
	}
	check("uncommitted", func(i int) (string, bool) { return "v1-" + key(i), true })
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	check("committed", func(i int) (string, bool) { return "v1-" + key(i), true })
	for i := 0; i < n; i += 2 {
		if err := s.Delete([]byte(key(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < n; i += 4 {
		mustPut(t, s, key(i), "v2")
	}
	want := func(i int) (string, bool) {
		switch {
		case i%2 == 0:
			return "", false
		case i%4 == 1:
			return "v2", true
		}
		return "v1-" + key(i), true
	}
	check("deletes uncommitted", want)
	if got := scan(t)(s.Range(nil, nil)); len(got) != n/2 {
		t.Fatalf("range over uncommitted deletes: %d entries, want %d", len(got), n/2)
	}
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	check("deletes committed", want)

	// A restore writes behind the cache: it must not answer with what it held.
	p := task.Partition("s")
	mustGet(t, s, key(1)) // both in the cache now
	mustGet(t, s, key(3))
	if err := p.ApplyRestore([]Write{{Key: []byte(key(1)), Value: []byte("restored")}, {Key: []byte(key(3)), Delete: true}}, Checkpoint{Offset: 7}); err != nil {
		t.Fatal(err)
	}
	if v, ok := mustGet(t, s, key(1)); !ok || v != "restored" {
		t.Fatalf("after restore: %s = %q %v", key(1), v, ok)
	}
	if _, ok := mustGet(t, s, key(3)); ok {
		t.Fatalf("after restore: %s still present", key(3))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, dir)
	defer m.Close()
	task, _ = m.OpenTask("p", 0)
	s, _ = task.Open("s", Options{})
	if v, ok := mustGet(t, s, key(5)); !ok || v != "v2" {
		t.Fatalf("after reopen: %s = %q %v", key(5), v, ok)
	}
	if _, ok := mustGet(t, s, key(4)); ok {
		t.Fatalf("after reopen: %s present", key(4))
	}
}

// TestReadCacheRangeDelete checks that a range delete in the batch (window expiry) makes
// reads of keys the cache does not hold go through the batch until the commit.
func TestReadCacheRangeDelete(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	s, _ := task.Open("s", Options{})
	mustPut(t, s, "a1", "x")
	mustPut(t, s, "a2", "y")
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	ps := task.Partition("s").base.(*pebbleStore)
	if err := ps.deleteRange([]byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a1", "a2"} {
		if v, ok := mustGet(t, s, k); ok {
			t.Fatalf("%s = %q after an uncommitted range delete", k, v)
		}
	}
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustGet(t, s, "a1"); ok {
		t.Fatal("a1 present after the range delete committed")
	}
}

// TestReadCachesBounded checks that the read caches of an instance stay within their share of
// Settings.MemoryBytes however many tasks write, and that a cache whose hot keys' values grow
// (updates, not new keys) or shrink (buffers kept) still counts and bounds what it holds.
func TestReadCachesBounded(t *testing.T) {
	m := openManager(t, t.TempDir()) // MinMemoryBytes: 1 MiB for the caches, 256 KiB each
	defer m.Close()
	quota := m.caches.quota
	for task := range 16 {
		tk, err := m.OpenTask("p", int32(task))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := tk.Open("s", Options{})
		for i := range 3000 {
			mustPut(t, s, fmt.Sprintf("key-%06d", i), fmt.Sprintf("value-%d-%d", task, i))
		}
		if got := m.Stats().ReadCacheBytes; got > quota+quota/4 {
			t.Fatalf("after %d tasks the read caches hold %d bytes, above their quota %d", task+1, got, quota)
		}
	}
	m.Close()

	m = openManager(t, t.TempDir())
	defer m.Close()
	tk, _ := m.OpenTask("p", 0)
	s, _ := tk.Open("s", Options{})
	limit := m.caches.limit
	big := bytes.Repeat([]byte("v"), 64<<10)
	for round := range 3 {
		for i := range 100 {
			if err := s.Put([]byte(fmt.Sprintf("hot-%d", i)), big[:len(big)-round]); err != nil {
				t.Fatal(err)
			}
		}
		if c := tk.Partition("s").cache; c.bytes > limit+int64(len(big))+1024 {
			t.Fatalf("round %d: 100 hot keys of 64 KiB values: the cache holds %d bytes, above its limit %d", round, c.bytes, limit)
		}
	}
	// A value overwritten by a slightly smaller one (its buffer reused), then by a small one:
	// the large buffer is not kept uncounted.
	mustPut(t, s, "hot-0", string(big))
	mustPut(t, s, "hot-0", string(big[:len(big)-10]))
	mustPut(t, s, "hot-1", string(big[:100]))
	mustPut(t, s, "hot-1", string(big[:90]))
	mustPut(t, s, "hot-0", "x")
	if e := tk.Partition("s").cache.get([]byte("hot-0")); e != nil && cap(e.v) > 1024 {
		t.Fatalf("a 1-byte value holds a %d-byte buffer", cap(e.v))
	}
	var sum int64
	for k, e := range tk.Partition("s").cache.m {
		sum += int64(len(k)+cap(e.v)) + cacheEntryOverhead
	}
	if c := tk.Partition("s").cache; c.bytes != sum {
		t.Fatalf("the cache counts %d bytes, its entries hold %d", c.bytes, sum)
	}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.Stats().ReadCacheBytes; got != 0 {
		t.Fatalf("closed tasks' caches still count %d bytes", got)
	}
}
