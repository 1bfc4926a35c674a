package store

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

func openManager(t *testing.T, dir string) *Manager {
	t.Helper()
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustPut(t *testing.T, s Store, k, v string) {
	t.Helper()
	if err := s.Put([]byte(k), []byte(v)); err != nil {
		t.Fatal(err)
	}
}

func mustGet(t *testing.T, s Store, k string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get([]byte(k))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

func scan(t *testing.T) func(Iterator, error) []string {
	return func(it Iterator, err error) []string { t.Helper(); return collect(t, it, err) }
}

func collect(t *testing.T, it Iterator, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for it.Next() {
		out = append(out, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func eachBackend(t *testing.T, fn func(t *testing.T, m *Manager, b Backend)) {
	for _, b := range []Backend{Pebble, Memory} {
		t.Run(b.String(), func(t *testing.T) {
			m := openManager(t, t.TempDir())
			defer m.Close()
			fn(t, m, b)
		})
	}
}

// TestStoreContract checks the Store contract on both backends, with and without
// coalescing, before and after a commit, so that overlays and committed data merge the same
// way.
func TestStoreContract(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, err := m.OpenTask("proc", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, coalesce := range []bool{false, true} {
			s, err := task.Open(fmt.Sprintf("kv%v", coalesce), Options{Backend: b, Coalesce: coalesce})
			if err != nil {
				t.Fatal(err)
			}
			storeContract(t, task, s, coalesce)
		}
	})
}

// storeContract checks the Store contract on s, a store of task, before and after a commit.
func storeContract(t *testing.T, task *Task, s Store, coalesce bool) {
	commit := func() error {
		if err := task.Flush(); err != nil {
			return err
		}
		return task.Apply(nil)
	}
	for _, commitBetween := range []bool{false, true} {
		t.Run(fmt.Sprintf("coalesce=%v/commit=%v", coalesce, commitBetween), func(t *testing.T) {
			for _, k := range []string{"a", "ab", "abc", "b", "c"} {
				mustPut(t, s, k, "v"+k)
			}
			if err := s.Put([]byte{}, []byte("empty-key")); err != nil {
				t.Fatal(err)
			}
			if err := s.Put([]byte("nil"), nil); err != nil {
				t.Fatal(err)
			}
			if commitBetween {
				if err := commit(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Delete([]byte("b")); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete([]byte("absent")); err != nil {
				t.Fatal(err)
			}
			if v, ok := mustGet(t, s, "a"); !ok || v != "va" {
				t.Fatalf("get a = %q %v", v, ok)
			}
			if _, ok := mustGet(t, s, "b"); ok {
				t.Fatal("b deleted but found")
			}
			if v, ok := mustGet(t, s, ""); !ok || v != "empty-key" {
				t.Fatalf("empty key = %q %v", v, ok)
			}
			if v, ok, _ := s.Get([]byte("nil")); !ok || len(v) != 0 {
				t.Fatalf("nil value: %q %v (want empty, found)", v, ok)
			}
			got := scan(t)(s.Range(nil, nil))
			want := []string{"=empty-key", "a=va", "ab=vab", "abc=vabc", "c=vc", "nil="}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("range all = %v, want %v", got, want)
			}
			if got := scan(t)(s.Range([]byte("ab"), []byte("c"))); fmt.Sprint(got) != "[ab=vab abc=vabc]" {
				t.Fatalf("range [ab,c) = %v", got)
			}
			if got := scan(t)(s.Range([]byte("c"), []byte("a"))); len(got) != 0 {
				t.Fatalf("inverted range = %v", got)
			}
			if got := scan(t)(s.Prefix([]byte("ab"))); fmt.Sprint(got) != "[ab=vab abc=vabc]" {
				t.Fatalf("prefix ab = %v", got)
			}
			if got := scan(t)(s.Prefix(nil)); len(got) != 6 {
				t.Fatalf("prefix nil = %v", got)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			// Clean up for the next round.
			for _, k := range []string{"", "a", "ab", "abc", "c", "nil"} {
				_ = s.Delete([]byte(k))
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			if got := scan(t)(s.Range(nil, nil)); len(got) != 0 {
				t.Fatalf("after delete all: %v", got)
			}
		})
	}
}

// TestStoresAreIsolated checks that stores of the same name in other tasks, and other stores of the task, do not see each other's keys, including 0xff-prefixed keys at the edge of a partition's key space.
func TestStoresAreIsolated(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		t0, _ := m.OpenTask("p", 0)
		t1, _ := m.OpenTask("p", 1)
		a0, _ := t0.Open("a", Options{Backend: b})
		b0, _ := t0.Open("b", Options{Backend: b})
		a1, _ := t1.Open("a", Options{Backend: b})
		mustPut(t, a0, "\xff\xff", "a0")
		mustPut(t, b0, "\x00", "b0")
		mustPut(t, a1, "k", "a1")
		for _, task := range []*Task{t0, t1} {
			if err := task.Apply(nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := scan(t)(a0.Prefix([]byte{0xff})); fmt.Sprint(got) != "[\xff\xff=a0]" {
			t.Fatalf("a0 = %q", got)
		}
		if got := scan(t)(b0.Range(nil, nil)); fmt.Sprint(got) != "[\x00=b0]" {
			t.Fatalf("b0 = %q", got)
		}
		if got := scan(t)(a1.Range(nil, nil)); fmt.Sprint(got) != "[k=a1]" {
			t.Fatalf("a1 = %q", got)
		}
	})
}

// TestIteratorWhileWriting checks the documented iterator semantics: writes
// during iteration are safe and not seen; a commit invalidates the iterator.
func TestIteratorWhileWriting(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, _ := m.OpenTask("p", 0)
		for _, coalesce := range []bool{false, true} {
			name := fmt.Sprintf("s%v", coalesce)
			s, err := task.Open(name, Options{Backend: b, Coalesce: coalesce})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				mustPut(t, s, fmt.Sprintf("k%02d", i), "v")
			}
			if err := task.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := task.Apply(nil); err != nil {
				t.Fatal(err)
			}
			mustPut(t, s, "k03", "pending")
			it, err := s.Range(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for it.Next() {
				k := string(it.Key())
				if k == "k03" && string(it.Value()) != "pending" {
					t.Fatalf("iterator does not see the write made before it opened")
				}
				// Writes while open: deletes ahead, inserts ahead, overwrite current.
				_ = s.Delete([]byte("k09"))
				mustPut(t, s, "k05x", "new")
				if k != "k09" {
					mustPut(t, s, k, "overwritten")
				}
				n++
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			it.Close()
			if n != 10 {
				t.Fatalf("iterated %d keys, want the 10 of the snapshot", n)
			}
			if _, ok := mustGet(t, s, "k09"); ok {
				t.Fatal("k09 deleted during iteration but found")
			}
			// A commit invalidates open iterators.
			it, _ = s.Range(nil, nil)
			if !it.Next() {
				t.Fatal("empty")
			}
			if err := task.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := task.Apply(nil); err != nil {
				t.Fatal(err)
			}
			if it.Next() {
				t.Fatal("Next true after commit")
			}
			if !errors.Is(it.Err(), ErrIteratorInvalidated) {
				t.Fatalf("err = %v, want ErrIteratorInvalidated", it.Err())
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestClosedAndFailed checks that closed and failed tasks return errors instead of panicking.
func TestClosedAndFailed(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, _ := m.OpenTask("p", 0)
		s, _ := task.Open("s", Options{Backend: b})
		mustPut(t, s, "a", "1")
		it, _ := s.Range(nil, nil)
		task.Fail(errors.New("boom"))
		if err := s.Put([]byte("b"), nil); !errors.Is(err, ErrTaskFailed) {
			t.Fatalf("put on failed task: %v", err)
		}
		if err := task.Apply(nil); !errors.Is(err, ErrTaskFailed) {
			t.Fatalf("apply on failed task: %v", err)
		}
		if it.Next() || !errors.Is(it.Err(), ErrTaskFailed) {
			t.Fatalf("iterator on failed task: %v", it.Err())
		}
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Get([]byte("a")); !errors.Is(err, ErrClosed) {
			t.Fatalf("get on closed: %v", err)
		}
		if _, err := s.Prefix(nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("prefix on closed: %v", err)
		}
		if err := task.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("double close: %v", err)
		}
		// The failed task's write was dropped.
		task2, err := m.OpenTask("p", 0)
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := task2.Open("s", Options{Backend: b})
		if _, ok := mustGet(t, s2, "a"); ok {
			t.Fatal("uncommitted write of a failed task survived")
		}
	})
}

// TestApplyIsDurableWithCheckpoint checks that committed data and checkpoint survive a reopen and uncommitted data does not.
func TestApplyIsDurableWithCheckpoint(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	task, _ := m.OpenTask("p", 3)
	s, _ := task.Open("s", Options{})
	mustPut(t, s, "a", "1")
	task.Partition("s").SetLogID([16]byte{9})
	if err := task.Apply(map[string]int64{"s": 41}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "b", "uncommitted")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, dir)
	defer m.Close()
	task, _ = m.OpenTask("p", 3)
	s, _ = task.Open("s", Options{})
	if v, ok := mustGet(t, s, "a"); !ok || v != "1" {
		t.Fatalf("a = %q %v", v, ok)
	}
	if _, ok := mustGet(t, s, "b"); ok {
		t.Fatal("uncommitted b survived")
	}
	cp, ok, err := task.Partition("s").Checkpoint()
	if err != nil || !ok || cp.Offset != 41 || cp.LogID != [16]byte{9} {
		t.Fatalf("checkpoint = %+v %v %v", cp, ok, err)
	}
	if err := task.Apply(map[string]int64{"nope": 1}); err == nil {
		t.Fatal("checkpoint for an unknown store accepted")
	}
}

// TestRestoreOps checks ApplyRestore and Wipe on both backends.
func TestRestoreOps(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, _ := m.OpenTask("p", 0)
		s, _ := task.Open("s", Options{Backend: b})
		p := task.Partition("s")
		err := p.ApplyRestore([]Write{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte{}}, {Key: []byte("a"), Delete: true}}, Checkpoint{Offset: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := scan(t)(s.Range(nil, nil)); fmt.Sprint(got) != "[b=]" {
			t.Fatalf("after restore: %v", got)
		}
		if cp, ok, _ := p.Checkpoint(); !ok || cp.Offset != 2 {
			t.Fatalf("checkpoint %v %v", cp, ok)
		}
		mustPut(t, s, "x", "y")
		if err := p.ApplyRestore(nil, Checkpoint{Offset: 3}); !errors.Is(err, ErrPendingWrites) {
			t.Fatalf("restore with pending writes: %v", err)
		}
		if err := task.Apply(nil); err != nil {
			t.Fatal(err)
		}
		if err := p.Wipe(); err != nil {
			t.Fatal(err)
		}
		if got := scan(t)(s.Range(nil, nil)); len(got) != 0 {
			t.Fatalf("after wipe: %v", got)
		}
		if _, ok, _ := p.Checkpoint(); ok {
			t.Fatal("checkpoint survived wipe")
		}
		if has, err := p.HasData(); err != nil || has {
			t.Fatalf("HasData after wipe = %v, %v", has, err)
		}
		mustPut(t, s, "z", "1")
		if has, _ := p.HasData(); has {
			t.Fatal("HasData sees an uncommitted write")
		}
		if err := task.Apply(nil); err != nil {
			t.Fatal(err)
		}
		if has, err := p.HasData(); err != nil || !has {
			t.Fatalf("HasData after a commit = %v, %v", has, err)
		}
	})
}

// TestTaskNames checks that a processor name cannot put a task directory outside tasks/.
func TestTaskNames(t *testing.T) {
	m := openManager(t, t.TempDir())
	for _, name := range []string{"", ".", "..", "a/b", "../x", `a\b`, "a\x00b"} {
		if task, err := m.OpenTask(name, 0); err == nil {
			t.Errorf("OpenTask(%q) succeeded, dir %s", name, task.Dir())
		}
	}
	if _, err := m.OpenTask("word-count.v2", 0); err != nil {
		t.Errorf("a plain name was refused: %v", err)
	}
}

// TestNeedsCommit checks the early-commit signal against MaxUncommittedBytes.
func TestNeedsCommit(t *testing.T) {
	m, err := Open(Settings{Dir: t.TempDir(), MemoryBytes: MinMemoryBytes, MaxUncommittedBytes: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	ps, _ := task.Open("pebble", Options{})
	ms, _ := task.Open("mem", Options{Backend: Memory})
	cs, _ := task.Open("cache", Options{Coalesce: true})
	for _, s := range []Store{ps, ms, cs} {
		before := task.UncommittedBytes()
		mustPut(t, s, "k", string(make([]byte, 1000)))
		if task.UncommittedBytes() <= before {
			t.Fatalf("uncommitted bytes did not grow: %d -> %d", before, task.UncommittedBytes())
		}
	}
	if task.NeedsCommit() {
		t.Fatal("needs commit below the bound")
	}
	for i := range 10 {
		mustPut(t, ps, fmt.Sprint(i), string(make([]byte, 1000)))
	}
	if !task.NeedsCommit() {
		t.Fatalf("no early-commit signal at %d bytes", task.UncommittedBytes())
	}
	_ = task.Flush()
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if n := task.UncommittedBytes(); n != 0 {
		t.Fatalf("uncommitted after apply = %d", n)
	}
}

// TestMemoryBoundedAcrossTasks checks that Pebble's memory stays within MemoryBytes however many tasks write.
func TestMemoryBoundedAcrossTasks(t *testing.T) {
	const bound = 16 << 20
	m, err := Open(Settings{Dir: t.TempDir(), MemoryBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	val := bytes.Repeat([]byte("x"), 1024)
	maxSeen := int64(0)
	for task := range 64 {
		tk, err := m.OpenTask("p", int32(task))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := tk.Open("s", Options{})
		for i := range 1024 {
			if err := s.Put(fmt.Appendf(nil, "%08d", i), val); err != nil {
				t.Fatal(err)
			}
		}
		if err := tk.Apply(nil); err != nil {
			t.Fatal(err)
		}
		// Read back to fill the block cache.
		it, _ := s.Range(nil, nil)
		for it.Next() {
		}
		it.Close()
		st := m.Stats()
		if used := st.MemTableBytes + st.BlockCacheBytes; used > maxSeen {
			maxSeen = used
		}
	}
	if st := m.Stats(); st.Tasks != 64 {
		t.Fatalf("tasks = %d", st.Tasks)
	}
	t.Logf("64 tasks x 1 MiB written: peak memtables+cache = %d bytes (bound %d)", maxSeen, bound)
	if maxSeen > bound {
		t.Fatalf("memory %d exceeds the bound %d", maxSeen, bound)
	}
	if maxSeen < bound/8 {
		t.Fatalf("memory %d suspiciously low: the test did not exercise Pebble", maxSeen)
	}
}

// TestLock checks that a second Manager cannot open a locked state directory.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	if _, err := Open(Settings{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	m.Close()
	m2 := openManager(t, dir)
	m2.Close()
}

// TestCheckpointFile checks the Kafka Streams text format round trip.
func TestCheckpointFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointFileName)
	in := []CheckpointEntry{{"app-b-changelog", 2, 7}, {"app-a-changelog", 2, 100}}
	if err := WriteCheckpointFile(path, in); err != nil {
		t.Fatal(err)
	}
	raw, _ := readFile(path)
	if want := "0\n2\napp-a-changelog 2 100\napp-b-changelog 2 7\n"; raw != want {
		t.Fatalf("file = %q, want %q", raw, want)
	}
	out, err := ReadCheckpointFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != "[{app-a-changelog 2 100} {app-b-changelog 2 7}]" {
		t.Fatalf("read = %v", out)
	}
}
