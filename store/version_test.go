package store

import (
	"slices"
	"testing"
)

// TestVersionCommitted checks SetVersion on both backends, with and without coalescing: the
// version changes only with the commit, the version record reaches the changelog after the
// coalesced writes of the same commit, a Pebble partition finds it again when reopened, and a
// wipe forgets it.
func TestVersionCommitted(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		for _, coalesce := range []bool{false, true} {
			proc := map[bool]string{false: "plain", true: "coalesce"}[coalesce]
			task, err := m.OpenTask(proc, 0)
			if err != nil {
				t.Fatal(err)
			}
			log := &recordingLog{}
			s, err := task.Open("s", Options{Backend: b, Coalesce: coalesce, Changelog: log})
			if err != nil {
				t.Fatal(err)
			}
			p := task.Partition("s")
			if v := p.Version(); v != DefaultVersion {
				t.Fatalf("a new partition's version = %d", v)
			}
			mustPut(t, s, "a", `{"n":1}`)
			if err := p.SetVersion(2); err != nil {
				t.Fatal(err)
			}
			if v := p.Version(); v != DefaultVersion {
				t.Fatalf("version before the commit = %d, want %d", v, DefaultVersion)
			}
			if err := task.Apply(map[string]int64{"s": 1}); err != nil {
				t.Fatal(err)
			}
			if v := p.Version(); v != 2 {
				t.Fatalf("version after the commit = %d, want 2", v)
			}
			if want := []string{`a={"n":1}`, VersionRecordKey + "=2"}; !slices.Equal(log.writes, want) {
				t.Fatalf("changelog = %q, want %q", log.writes, want)
			}
			if _, ok := mustGet(t, s, VersionRecordKey); ok {
				t.Fatal("the version record is an entry of the store")
			}
			if b == Pebble {
				task.Close()
				task, _ = m.OpenTask(proc, 0)
				if _, err := task.Open("s", Options{Backend: b}); err != nil {
					t.Fatal(err)
				}
				if v := task.Partition("s").Version(); v != 2 {
					t.Fatalf("version after reopening = %d, want 2", v)
				}
			}
			if err := task.Partition("s").Wipe(); err != nil {
				t.Fatal(err)
			}
			if v := task.Partition("s").Version(); v != DefaultVersion {
				t.Fatalf("version after a wipe = %d", v)
			}
			task.Close()
		}
	})
}

// TestVersionUncommittedDropped checks that a version set and not committed is gone with the
// task's other uncommitted writes.
func TestVersionUncommittedDropped(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	if _, err := task.Open("s", Options{Backend: Pebble}); err != nil {
		t.Fatal(err)
	}
	if err := task.Partition("s").SetVersion(3); err != nil {
		t.Fatal(err)
	}
	task.Close()
	task, _ = m.OpenTask("p", 0)
	if _, err := task.Open("s", Options{Backend: Pebble}); err != nil {
		t.Fatal(err)
	}
	if v := task.Partition("s").Version(); v != DefaultVersion {
		t.Fatalf("version = %d after a close without commit", v)
	}
}

// TestVersionRestored restores a changelog that holds a version record, batch by batch
// (ApplyRestore) and through a Loader, on both backends where they apply: the record is the
// partition's version, in the batch that holds it, and never one of its entries; a malformed
// one fails the restore with its offset.
func TestVersionRestored(t *testing.T) {
	log := []Write{
		{Key: []byte("a"), Value: []byte("1"), Offset: 0},
		{Key: []byte("b"), Value: []byte("2"), Offset: 1},
		{Key: []byte("a"), Value: []byte(`{"n":1}`), Offset: 2},
		{Key: []byte("b"), Value: []byte(`{"n":2}`), Offset: 3},
		{Key: []byte(VersionRecordKey), Value: []byte("2"), Offset: 4},
		{Key: []byte("c"), Value: []byte(`{"n":7}`), Offset: 5},
	}
	want := []string{`a={"n":1}`, `b={"n":2}`, `c={"n":7}`}
	check := func(t *testing.T, task *Task) {
		t.Helper()
		if v := task.Partition("s").Version(); v != 2 {
			t.Fatalf("version = %d, want 2", v)
		}
		if got := scan(t)(task.Store("s").Range(nil, nil)); !slices.Equal(got, want) {
			t.Fatalf("entries = %q, want %q", got, want)
		}
	}
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, _ := m.OpenTask("batches", 0)
		if _, err := task.Open("s", Options{Backend: b}); err != nil {
			t.Fatal(err)
		}
		p := task.Partition("s")
		if err := p.ApplyRestore(log[:3], Checkpoint{Offset: 2}); err != nil {
			t.Fatal(err)
		}
		if v := p.Version(); v != DefaultVersion {
			t.Fatalf("version before the record = %d", v)
		}
		if err := p.ApplyRestore(log[3:], Checkpoint{Offset: 5}); err != nil {
			t.Fatal(err)
		}
		check(t, task)
		if b == Pebble {
			task.Close()
			task, _ = m.OpenTask("batches", 0)
			if _, err := task.Open("s", Options{Backend: b}); err != nil {
				t.Fatal(err)
			}
			check(t, task)

			loaded := openLoadTask(t, m, "loaded", false)
			l, err := loaded.Partition("s").NewLoader()
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Add(log, Checkpoint{Offset: 5}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Finish(); err != nil {
				t.Fatal(err)
			}
			check(t, loaded)
			loaded.Close()
			loaded, _ = m.OpenTask("loaded", 0)
			if _, err := loaded.Open("s", Options{Backend: b}); err != nil {
				t.Fatal(err)
			}
			check(t, loaded)
		}
		bad := []Write{{Key: []byte(VersionRecordKey), Value: []byte("two"), Offset: 9}}
		if err := task.Partition("s").ApplyRestore(bad, Checkpoint{Offset: 9}); err == nil {
			t.Fatal("a malformed version record was applied")
		}
	})
}

// TestVersionIsUncommittedWork checks that a staged version alone is work for the next
// commit, even in an unlogged memory store whose entries did not change.
func TestVersionIsUncommittedWork(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	if _, err := task.Open("s", Options{Backend: Memory}); err != nil {
		t.Fatal(err)
	}
	if err := task.Partition("s").SetVersion(2); err != nil {
		t.Fatal(err)
	}
	if task.UncommittedBytes() == 0 {
		t.Fatal("a staged version is no uncommitted work")
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if n, v := task.UncommittedBytes(), task.Partition("s").Version(); n != 0 || v != 2 {
		t.Fatalf("after the commit: %d uncommitted bytes, version %d", n, v)
	}
}
