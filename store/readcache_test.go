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

// TestReadCachePinsUncommittedWrites checks that eviction keeps the task's uncommitted writes
// while other entries can go: reads of thousands of other keys evict what they filled, the
// batch is never indexed, and every read stays exact. Only when the uncommitted writes alone
// pass the cache's bound are some evicted, and the reads they no longer answer go through the
// batch; the cache's bytes stay within its bound all along.
func TestReadCachePinsUncommittedWrites(t *testing.T) {
	m := openManager(t, t.TempDir()) // MinMemoryBytes: 256 KiB per cache, about 2,500 entries
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	s, _ := task.Open("s", Options{})
	c := task.Partition("s").cache
	key := func(i int) string { return fmt.Sprintf("k%06d", i) }
	const committed = 20000
	for i := range committed {
		mustPut(t, s, key(i), "c")
	}
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	// 1,000 uncommitted writes (about 100 KiB), among reads of 20,000 keys: committed ones
	// and absent ones, each filling the cache.
	const writes = 1000
	for i := range writes {
		mustPut(t, s, key(i*7), "u")
	}
	wantAt := func(i int, uncommitted int) (string, bool) {
		switch {
		case i%7 == 0 && i/7 < uncommitted:
			return "u", true
		case i < committed:
			return "c", true
		}
		return "", false
	}
	for round := range 2 {
		for i := range 2 * committed {
			w, wok := wantAt(i, writes)
			if v, ok := mustGet(t, s, key(i)); v != w || ok != wok {
				t.Fatalf("round %d: %s = %q %v, want %q %v", round, key(i), v, ok, w, wok)
			}
			if c.bytes > c.limit {
				t.Fatalf("the cache holds %d bytes, above its limit %d", c.bytes, c.limit)
			}
		}
	}
	if !c.knowsWrites(task.gen) {
		t.Fatal("an uncommitted write was evicted while other entries could be")
	}
	if batchIndexed(task) {
		t.Fatal("reads indexed the batch although the cache held every uncommitted write")
	}
	for i := range writes {
		if e := c.get([]byte(key(i * 7))); e == nil || string(e.v) != "u" {
			t.Fatalf("uncommitted write %s is not in the cache", key(i*7))
		}
	}
	var pinned int64
	for k, e := range c.m {
		if e.written == task.gen {
			pinned += entrySize(len(k), e)
		}
	}
	if pinned != c.pinned {
		t.Fatalf("the cache counts %d pinned bytes, its entries written now hold %d", c.pinned, pinned)
	}

	// Uncommitted writes alone beyond the bound: some go, and the batch answers for them.
	const many = 3000 // keys 0, 7, ..., 20993, about 300 KiB
	for i := writes; i < many; i++ {
		mustPut(t, s, key(i*7), "u")
		if c.bytes > c.limit {
			t.Fatalf("after %d uncommitted writes the cache holds %d bytes, above its limit %d", i+1, c.bytes, c.limit)
		}
	}
	if c.knowsWrites(task.gen) {
		t.Fatal("uncommitted writes beyond the cache's bound were all kept")
	}
	for i := range 7 * many {
		w, wok := wantAt(i, many)
		if v, ok := mustGet(t, s, key(i)); v != w || ok != wok {
			t.Fatalf("with evicted writes: %s = %q %v, want %q %v", key(i), v, ok, w, wok)
		}
	}
	if !batchIndexed(task) {
		t.Fatal("reads after evicted uncommitted writes did not go through the batch")
	}
	// The commit unpins them: the next interval starts with nothing pinned nor lost.
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, key(1), "n")
	if !c.knowsWrites(task.gen) || c.pinned != entrySize(len(key(1)), c.get([]byte(key(1)))) {
		t.Fatalf("after the commit: knows writes %v, %d pinned bytes", c.knowsWrites(task.gen), c.pinned)
	}
	for i := range 7 * many {
		w, wok := wantAt(i, many)
		if i == 1 {
			w, wok = "n", true
		}
		if v, ok := mustGet(t, s, key(i)); v != w || ok != wok {
			t.Fatalf("after the commit: %s = %q %v, want %q %v", key(i), v, ok, w, wok)
		}
	}
	if !c.knowsWrites(task.gen) || batchIndexed(task) {
		t.Fatalf("after the commit, reads of other keys lost the pinned write (%v) or indexed the batch (%v)",
			!c.knowsWrites(task.gen), batchIndexed(task))
	}
}

// batchIndexed reports whether task holds a batch of uncommitted writes indexed for reads.
func batchIndexed(task *Task) bool { return task.batch != nil && task.batch.Indexed() }
