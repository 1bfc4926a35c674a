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

	// A reopen: the store holds keys, so its filter is built in the background; reads are
	// Pebble's until it is complete, and exact after.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, dir)
	defer m.Close()
	task, _ = m.OpenTask("p", 0)
	s, _ = task.Open("s", Options{})
	p = task.Partition("s")
	if p.filter != nil || p.building == nil {
		t.Fatal("a store that holds keys got a key filter at its open, or none is being built")
	}
	check("reopened", 6000)
	waitFilterBuilt(t, p)
	check("reopened, filter built", 8000)
	if p.filter.negatives < 1500 {
		t.Fatalf("the built filter answered %d reads of absent keys", p.filter.negatives)
	}

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

// waitFilterBuilt waits for the background build of p's filter to end, and installs it as
// the next read would; p must then have a filter.
func waitFilterBuilt(t *testing.T, p *Partition) {
	t.Helper()
	if b := p.building; b != nil {
		<-b.done
		p.pollFilterBuild()
	}
	if p.filter == nil {
		t.Fatal("no key filter after its build")
	}
}

// TestKeyFilterBuiltAtReopen checks the background build of the filter of a store that holds
// keys at its open: the task writes, deletes and restores keys while the scan runs, and
// commits some of them before the scan starts reading (so that no key falls between the
// scan's snapshot and the task's adds); once built, the filter must hold every key present.
// A close or a wipe during a build ends it and gives its memory back.
func TestKeyFilterBuiltAtReopen(t *testing.T) {
	dir := t.TempDir()
	m := openManagerDefault(t, dir)
	task, _ := m.OpenTask("p", 0)
	s, _ := task.Open("s", Options{})
	key := func(i int) string { return fmt.Sprintf("k%07d", i) }
	want := map[string]string{}
	const held = 50_000
	for i := range held {
		mustPut(t, s, key(2*i), "a")
		want[key(2*i)] = "a"
		if i%20_000 == 0 {
			if err := task.Apply(map[string]int64{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := task.Apply(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	for round := range 2 {
		m = openManagerDefault(t, dir)
		task, _ = m.OpenTask("p", 0)
		s, _ = task.Open("s", Options{})
		p := task.Partition("s")
		if p.building == nil {
			t.Fatalf("round %d: no filter is being built for a store that holds keys", round)
		}
		// Writes and a restore of new keys while the scan runs, committed at once.
		base := 1 + 2*held*(round+1)
		for i := range 2000 {
			mustPut(t, s, key(base+2*i), "w")
			want[key(base+2*i)] = "w"
			if i == 1000 {
				if err := task.Apply(map[string]int64{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Delete([]byte(key(0))); err != nil {
			t.Fatal(err)
		}
		delete(want, key(0))
		if err := task.Apply(map[string]int64{}); err != nil {
			t.Fatal(err)
		}
		var ws []Write
		for i := range 500 {
			ws = append(ws, Write{Key: []byte(key(base + 10_000 + 2*i)), Value: []byte("r")})
			want[key(base+10_000+2*i)] = "r"
		}
		if err := p.ApplyRestore(ws, Checkpoint{Offset: int64(round)}); err != nil {
			t.Fatal(err)
		}
		waitFilterBuilt(t, p)
		negatives := p.filter.negatives
		for k, v := range want {
			if got, ok := mustGet(t, s, k); !ok || got != v {
				t.Fatalf("round %d: %s = %q %v, want %q", round, k, got, ok, v)
			}
		}
		for i := range 20_000 {
			k := key(2*held*4 + 2*i + 1) // never written
			if _, ok := mustGet(t, s, k); ok {
				t.Fatalf("round %d: %s found", round, k)
			}
		}
		if n := p.filter.negatives - negatives; n < 19_000 { // 0.4% false positives
			t.Fatalf("round %d: the built filter answered %d of 20,000 reads of absent keys", round, n)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A close during the build ends it, and a wipe during one replaces it with an empty filter.
	m = openManagerDefault(t, dir)
	defer m.Close()
	task, _ = m.OpenTask("p", 0)
	task.Open("s", Options{})
	b := task.Partition("s").building
	if b == nil {
		t.Fatal("no filter is being built")
	}
	task.Close()
	select {
	case <-b.done:
	default:
		t.Fatal("the build still runs after its task closed")
	}
	if got := m.Stats().KeyFilterBytes; got != 0 {
		t.Fatalf("the closed task's filter build still holds %d bytes", got)
	}
	task, _ = m.OpenTask("p", 0)
	s, _ = task.Open("s", Options{})
	p := task.Partition("s")
	if err := p.Wipe(); err != nil {
		t.Fatal(err)
	}
	if p.building != nil || p.filter == nil {
		t.Fatal("a wiped store still builds its filter, or has none")
	}
	if _, ok := mustGet(t, s, key(2)); ok {
		t.Fatal("a wiped store holds a key")
	}
}

// openManagerDefault opens a Manager with the default memory bound: 2 MiB of key filter per
// partition, 930,000 keys.
func openManagerDefault(t testing.TB, dir string) *Manager {
	t.Helper()
	m, err := Open(Settings{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
