package store

import (
	"fmt"
	"testing"
)

// openFiltered opens n tasks of one Pebble store each in m, then writes a key to each, as an
// assignment of n tasks does (their stores open, then restore and process): every partition
// starts a key filter. It returns the partitions.
func openFiltered(t testing.TB, m *Manager, n int) []*Partition {
	t.Helper()
	parts := make([]*Partition, n)
	stores := make([]Store, n)
	for i := range parts {
		task, err := m.OpenTask("proc", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		if stores[i], err = task.Open("kv", Options{Backend: Pebble}); err != nil {
			t.Fatal(err)
		}
		parts[i] = task.Partition("kv")
	}
	for i, s := range stores {
		if err := s.Put([]byte(fmt.Sprint("key", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	return parts
}

// TestKeyFiltersShareTheBudgetAtManyPartitions checks that with the default memory bound,
// 4,096 store partitions all get a key filter: their first layers shrink with their number
// instead of the first ones taking the whole budget, and stay within half of it.
func TestKeyFiltersShareTheBudgetAtManyPartitions(t *testing.T) {
	m := openManagerDefault(t, t.TempDir())
	defer m.Close()
	parts := openFiltered(t, m, 4096)
	without := 0
	for _, p := range parts {
		if p.filter == nil {
			without++
		}
	}
	if without > 0 {
		t.Errorf("%d of %d partitions have no key filter", without, len(parts))
	}
	if used, quota := m.filters.used.Load(), m.filters.quota; used > quota/2 {
		t.Errorf("the first layers take %d bytes of the filters' %d", used, quota)
	}
	// A partition of a few keys still has a first layer of filterFirstBlocks.
	m2 := openManagerDefault(t, t.TempDir())
	defer m2.Close()
	if p := openFiltered(t, m2, 1)[0]; p.filter == nil || len(p.filter.layers[0].blocks) != filterFirstBlocks {
		t.Errorf("one partition: filter %+v, want a first layer of %d blocks", p.filter, filterFirstBlocks)
	}
}

// BenchmarkKeyFiltersAtScale reports, at 4,096 store partitions of one key each and the
// default memory bound, the partitions with a key filter and the filters' bytes per partition.
//
//	go test ./store -run '^$' -bench KeyFiltersAtScale -benchtime 1x
func BenchmarkKeyFiltersAtScale(b *testing.B) {
	for range b.N {
		m := openManagerDefault(b, b.TempDir())
		parts := openFiltered(b, m, 4096)
		with := 0
		for _, p := range parts {
			if p.filter != nil {
				with++
			}
		}
		b.ReportMetric(float64(with), "partitions-filtered")
		b.ReportMetric(float64(m.filters.used.Load())/float64(len(parts)), "filter-B/partition")
		_ = m.Close()
	}
}
