package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadCommitted: interactive query reads see a task's committed state only, open or
// closed, and nothing of its uncommitted writes; scans are bounded inclusively and ordered;
// a store without state reads as absent; other tasks and stores stay apart.
func TestReadCommitted(t *testing.T) {
	m := openManager(t, t.TempDir())
	id := TaskID{"count", 1}
	task := mustOpenTask(t, m, "count", 1)
	kv := mustOpen(t, task, "kv", Options{})
	for _, k := range []string{"a", "b", "c", "d"} {
		mustPut(t, kv, k, "v"+k)
	}
	if _, ok, err := m.ReadCommitted(id, "kv", []byte("a")); ok || err != nil {
		t.Fatalf("uncommitted write read: %v, %v", ok, err)
	}
	mustApply(t, task, map[string]int64{"kv": 3})
	mustPut(t, kv, "a", "uncommitted")
	v, ok, err := m.ReadCommitted(id, "kv", []byte("a"))
	if string(v) != "va" || !ok || err != nil {
		t.Fatalf("ReadCommitted(a) = %q, %v, %v; want the committed va", v, ok, err)
	}
	scan := func(id TaskID, name string, from, to []byte) []string {
		var out []string
		if err := m.ScanCommitted(id, name, from, to, func(k, v []byte) bool {
			out = append(out, fmt.Sprintf("%s=%s", k, v))
			return len(out) < 10
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := scan(id, "kv", []byte("b"), []byte("c")); !slices.Equal(got, []string{"b=vb", "c=vc"}) {
		t.Errorf("scan [b, c] = %v", got)
	}
	if got := scan(id, "kv", nil, nil); len(got) != 4 {
		t.Errorf("full scan = %v, want 4 entries", got)
	}
	if got := scan(TaskID{"count", 2}, "kv", nil, nil); len(got) != 0 {
		t.Errorf("another partition's scan = %v", got)
	}
	if _, ok, _ := m.ReadCommitted(id, "other", []byte("a")); ok {
		t.Error("another store read a value")
	}
	_ = task.Close()
	if v, ok, _ := m.ReadCommitted(id, "kv", []byte("d")); string(v) != "vd" || !ok {
		t.Errorf("closed task: ReadCommitted(d) = %q, %v", v, ok)
	}
}

// TestReadOnlyOpen: a read-only Manager reads the state (the log replayed in memory) and
// changes no file of the directory; it is refused while an instance holds the directory.
func TestReadOnlyOpen(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	task := mustOpenTask(t, m, "count", 0)
	mustPut(t, mustOpen(t, task, "kv", Options{}), "k", "v")
	mustApply(t, task, map[string]int64{"kv": 7})

	if _, err := Open(Settings{Dir: dir, ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open beside a running instance: %v, want ErrLocked", err)
	}
	_ = task.Close()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	before := listFiles(t, dir)
	ro, err := Open(Settings{Dir: dir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := ro.LocalTasks()
	if err != nil || len(ts) != 1 || ts[0].Stores[0].Checkpoint != 7 {
		t.Fatalf("LocalTasks read-only: %+v, %v", ts, err)
	}
	if v, ok, err := ro.ReadCommitted(TaskID{"count", 0}, "kv", []byte("k")); string(v) != "v" || !ok || err != nil {
		t.Fatalf("ReadCommitted read-only: %q %v %v", v, ok, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after := listFiles(t, dir); !slices.Equal(before, after) {
		t.Errorf("a read-only open changed the directory:\nbefore %v\nafter  %v", before, after)
	}
}

// listFiles lists the files under dir with their sizes.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d", strings.TrimPrefix(p, dir), info.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
