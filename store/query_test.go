package store

import (
	"fmt"
	"slices"
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
