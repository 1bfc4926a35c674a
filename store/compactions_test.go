package store

import (
	"testing"
	"time"
)

// TestLoadsHoldCompactions loads runs of the same keys, each ingested above the ones before,
// and checks that no compaction starts while the load runs, over several of the scheduler's
// turns, and that the compactions the runs call for start once it ends. A second load adds
// runs until L0 is heldL0Limit sublevels deep: its runs are compacted while it still runs.
// (A cold restore's runs after the first land in L0, one sublevel each.)
func TestLoadsHoldCompactions(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	m.loads.budget = 64 << 10 // a run every few batches
	compactions := func() int64 { return m.db.Metrics().Compact.Count }
	levels := func() (l0 int32, used int) {
		mt := m.db.Metrics()
		for _, l := range mt.Levels {
			if l.TablesCount > 0 {
				used++
			}
		}
		return mt.Levels[0].Sublevels, used
	}
	// add adds the batches of log to l, each once the run before it is in Pebble, until
	// enough says stop; it returns the batches not added.
	add := func(l *Loader, log [][]Write, enough func() bool) [][]Write {
		t.Helper()
		for len(log) > 0 && !enough() {
			ws := log[0]
			log = log[1:]
			if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the run in flight", l.Ready)
			if err := l.collect(true); err != nil {
				t.Fatal(err)
			}
		}
		return log
	}

	held := openLoadTask(t, m, "held", false)
	l, err := held.Partition("s").NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	before := compactions()
	// L0 as deep as Pebble compacts it (L0CompactionThreshold), not as deep as a load does.
	add(l, loadLog(7, 60000, 5000, 500, false), func() bool {
		l0, _ := levels()
		return l0 >= 4
	})
	time.Sleep(3 * grantInterval)
	l0, used := levels()
	if used < 2 || l0 < 4 || l0 >= heldL0Limit {
		t.Fatalf("%d runs fill %d levels, L0 %d sublevels deep: the test wants runs to compact in a shallow L0", l.runs, used, l0)
	}
	if n := compactions() - before; n != 0 {
		t.Fatalf("%d compactions ran while the load did", n)
	}
	if _, err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a compaction after the load", func() bool { return compactions() > before })

	deep := openLoadTask(t, m, "deep", false)
	l, err = deep.Partition("s").NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Abort()
	rest := add(l, loadLog(8, 200000, 5000, 500, false), func() bool {
		l0, _ := levels()
		return l0 >= heldL0Limit
	})
	if len(rest) == 0 {
		t.Fatalf("L0 never reached %d sublevels", heldL0Limit)
	}
	before = compactions()
	waitFor(t, "a compaction of a deep L0 during a load", func() bool { return compactions() > before })
}

// waitFor polls cond until it holds, for up to 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
	}
}
