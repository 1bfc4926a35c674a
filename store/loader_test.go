package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// loadLog is a changelog for the loader tests: n records over keys distinct keys, a tenth of
// them deletes, in batches of up to batch records. With window set, the keys are a window
// store's changelog keys, at times that rise so that the earliest windows expire during the
// restore.
func loadLog(seed uint64, n, keys, batch int, window bool) [][]Write {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out [][]Write
	var cur []Write
	for i := range n {
		k := []byte(fmt.Sprintf("key-%06d", rng.IntN(keys)))
		w := Write{Key: k, Value: []byte(fmt.Sprintf("v%d-%d", i, rng.IntN(1000))), Offset: int64(i), Timestamp: int64(i)}
		if window {
			t := int64(i) - int64(rng.IntN(50))
			w.Key = ChangelogKey(Window, k, t/10*10, 0)
		}
		if rng.IntN(10) == 0 {
			w.Value, w.Delete = nil, true
		}
		cur = append(cur, w)
		if len(cur) == batch || i == n-1 {
			out = append(out, cur)
			cur = nil
		}
	}
	return out
}

// partitionState is everything a partition holds, as "key=value" lines, with its checkpoint.
func partitionState(t testing.TB, p *Partition) []string {
	t.Helper()
	it, err := p.t.m.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.SeekGE(p.prefix); ok && string(it.Key()) < string(p.upper); ok = it.Next() {
		out = append(out, fmt.Sprintf("%x=%s", it.Key()[len(p.prefix):], it.Value()))
	}
	cp, has, err := p.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	return append(out, fmt.Sprintf("checkpoint=%d,%v stream-time=%d", cp.Offset, has, p.t.StreamTime()))
}

func openLoadTask(t testing.TB, m *Manager, proc string, window bool) *Task {
	t.Helper()
	task, err := m.OpenTask(proc, 0)
	if err != nil {
		t.Fatal(err)
	}
	if window {
		_, err = task.OpenWindow("s", Options{Backend: Pebble, Kind: Window,
			Window: WindowSpec{Size: 10, Grace: 5, Retention: 2000, SegmentInterval: 500}})
	} else {
		_, err = task.Open("s", Options{Backend: Pebble})
	}
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// appliedTask opens task proc of m with a store s that holds log, applied batch by batch
// through ApplyRestore: the state a load of log must end in.
func appliedTask(t *testing.T, m *Manager, proc string, log [][]Write, window bool) *Task {
	t.Helper()
	task := openLoadTask(t, m, proc, window)
	for _, ws := range log {
		if err := task.Partition("s").ApplyRestore(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

// addAll adds log's batches to l, each with the checkpoint of its last write.
func addAll(t *testing.T, l *Loader, log [][]Write) {
	t.Helper()
	for _, ws := range log {
		if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoaderMatchesApplyRestore restores the same changelog through ApplyRestore, batch by
// batch, and through a Loader whose buffer spills many runs, and finds the same state: the
// newest write of every key, across runs, deletes applied, expired windows gone, the same
// checkpoint and stream time; and the key filter holds every loaded key.
func TestLoaderMatchesApplyRestore(t *testing.T) {
	for _, window := range []bool{false, true} {
		t.Run(fmt.Sprintf("window=%v", window), func(t *testing.T) {
			m := openManager(t, t.TempDir())
			defer m.Close()
			m.loads.budget = 64 << 10 // a run every few batches
			log := loadLog(7, 60000, 5000, 500, window)
			want := appliedTask(t, m, "batches", log, window)
			got := openLoadTask(t, m, "loaded", window)
			l, err := got.Partition("s").NewLoader()
			if err != nil {
				t.Fatal(err)
			}
			addAll(t, l, log)
			st, err := l.Finish()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d runs, %d lines", st.Runs, len(partitionState(t, got.Partition("s"))))
			if st.Runs < 10 {
				t.Fatalf("%d runs; the test wants the buffer to spill many", st.Runs)
			}
			w, g := partitionState(t, want.Partition("s")), partitionState(t, got.Partition("s"))
			if !slices.Equal(w, g) {
				t.Fatalf("loaded state differs from the batches' (%d vs %d lines): %q... vs %q...", len(g), len(w), g[:min(5, len(g))], w[:min(5, len(w))])
			}
			if m.loads.used.Load() != 0 || m.loads.active.Load() != 0 {
				t.Fatalf("the load budget holds %d bytes and %d loaders after Finish", m.loads.used.Load(), m.loads.active.Load())
			}
			if !window {
				// Reads through the store (the filter, then Pebble) see every loaded key.
				s := got.Store("s")
				for _, line := range w[:len(w)-1] {
					var k, v []byte
					fmt.Sscanf(line, "%x=%s", &k, &v)
					if gv, ok := mustGet(t, s, string(k)); !ok || gv != string(v) {
						t.Fatalf("Get(%s) = %q %v, want %q", k, gv, ok, v)
					}
				}
			}
			ents, err := os.ReadDir(m.loadDir())
			if err != nil || len(ents) != 0 {
				t.Fatalf("the load directory holds %d files (%v)", len(ents), err)
			}
		})
	}
}

// TestLoaderEarlyRuns loads a changelog that fits one buffer: without SetEnd in one run at
// Finish, with it in runs written as the end nears, and finds the state of the batches
// either way.
func TestLoaderEarlyRuns(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	m.loads.budget = 64 << 20 // the whole changelog fits one buffer
	log := loadLog(8, 60000, 20000, 500, false)
	want := appliedTask(t, m, "batches", log, false)
	for _, early := range []bool{false, true} {
		got := openLoadTask(t, m, fmt.Sprintf("loaded-%v", early), false)
		l, err := got.Partition("s").NewLoader()
		if err != nil {
			t.Fatal(err)
		}
		if early {
			l.SetEnd(60000)
		}
		addAll(t, l, log)
		st, err := l.Finish()
		if err != nil {
			t.Fatal(err)
		}
		// With SetEnd, the buffer is sealed when it holds the 30,000 offsets left to come
		// (no run is being written then), and again as the rest comes if that run ended.
		if early && st.Runs < 2 || !early && st.Runs != 1 {
			t.Fatalf("SetEnd %v: %d runs", early, st.Runs)
		}
		w, g := partitionState(t, want.Partition("s")), partitionState(t, got.Partition("s"))
		if !slices.Equal(w, g) {
			t.Fatalf("SetEnd %v: loaded state differs from the batches' (%d vs %d lines)", early, len(g), len(w))
		}
	}
}

// TestLoaderFlushDoesNotWait checks that Flush returns while a run is being written, leaving
// the last one to start when Ready finds that run ended, and that each run's end wakes the
// channel given to Notify: the runs are held back by taking every slot of the loads'
// semaphore.
func TestLoaderFlushDoesNotWait(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	m.loads.budget = 64 << 20 // the whole changelog fits one buffer
	log := loadLog(9, 30000, 10000, 500, false)
	want := appliedTask(t, m, "batches", log, false)
	got := openLoadTask(t, m, "loaded", false)
	l, err := got.Partition("s").NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.SetEnd(30000)
	wake := make(chan struct{}, 1)
	l.Notify(wake)
	for range cap(m.loads.sem) {
		m.loads.sem <- struct{}{}
	}
	addAll(t, l, log)
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Flush waits for the run being written")
	}
	if l.Ready() {
		t.Fatal("Ready with a run held back")
	}
	for range cap(m.loads.sem) {
		<-m.loads.sem
	}
	// The early run's end wakes the caller, whose Ready starts the last run; its end wakes
	// it again.
	for !l.Ready() {
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("a run ended without a wake-up")
		}
	}
	st, err := l.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 2 {
		t.Fatalf("%d runs, want the early one and the last", st.Runs)
	}
	if w, g := partitionState(t, want.Partition("s")), partitionState(t, got.Partition("s")); !slices.Equal(w, g) {
		t.Fatalf("loaded state differs from the batches' (%d vs %d lines)", len(g), len(w))
	}
}

// TestLoaderAbortKeepsARun checks that a load stopped midway leaves the state of a prefix of
// the changelog with its checkpoint, and that a loader resuming after that checkpoint, over
// data now (so keeping its deletes), ends in the state of the whole changelog.
func TestLoaderAbortKeepsARun(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	m.loads.budget = 64 << 10
	log := loadLog(11, 30000, 3000, 500, false)
	want := openLoadTask(t, m, "batches", false)
	got := openLoadTask(t, m, "loaded", false)
	l, err := got.Partition("s").NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	half := len(log) / 2
	for _, ws := range log[:half] {
		if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
			t.Fatal(err)
		}
	}
	l.Abort()
	cp, has, _ := got.Partition("s").Checkpoint()
	if !has || cp.Offset >= log[half-1][len(log[half-1])-1].Offset {
		t.Fatalf("checkpoint %d (%v) after the abort, want one of an ingested run before offset %d", cp.Offset, has, log[half-1][len(log[half-1])-1].Offset)
	}
	// The batches up to that checkpoint give the same state.
	var rest [][]Write
	for _, ws := range log {
		if ws[0].Offset > cp.Offset {
			rest = append(rest, ws)
			continue
		}
		if err := want.Partition("s").ApplyRestore(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
			t.Fatal(err)
		}
	}
	if w, g := partitionState(t, want.Partition("s")), partitionState(t, got.Partition("s")); !slices.Equal(w, g) {
		t.Fatalf("after the abort the state is not the changelog's up to its checkpoint %d", cp.Offset)
	}
	l, err = got.Partition("s").NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range rest {
		if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
			t.Fatal(err)
		}
		if err := want.Partition("s").ApplyRestore(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	if w, g := partitionState(t, want.Partition("s")), partitionState(t, got.Partition("s")); !slices.Equal(w, g) {
		t.Fatal("the resumed load differs from the batches")
	}
}

// TestLoaderEmptyAndRefused: a loader given nothing changes nothing; memory partitions and
// tasks with uncommitted writes get none.
func TestLoaderEmptyAndRefused(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task := openLoadTask(t, m, "p", false)
	l, err := task.Partition("s").NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, has, _ := task.Partition("s").Checkpoint(); has {
		t.Fatal("an empty load set a checkpoint")
	}
	mustPut(t, task.Store("s"), "k", "v")
	if _, err := task.Partition("s").NewLoader(); err == nil {
		t.Fatal("a loader over uncommitted writes")
	}
	mt, err := m.OpenTask("mem", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mt.Open("s", Options{Backend: Memory}); err != nil {
		t.Fatal(err)
	}
	if _, err := mt.Partition("s").NewLoader(); err == nil {
		t.Fatal("a loader for a memory store")
	}
}

// TestLoadBufferRecords adds records of every size class to a loadBuffer (headers of one and
// of several bytes, records larger than a slab, empty keys and values, deletes), then again
// after a reset that reuses its slabs, and reads each back at its position, in the order
// added; sorted must give each key's last write.
func TestLoadBufferRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := newLoadBuffer()
	for round := range 2 {
		var ws []Write
		var pos []int32
		last := map[string]int{}
		for i := range 3000 {
			size := rng.IntN(40)
			switch rng.IntN(50) {
			case 0:
				size = 128 + rng.IntN(1000) // a header of more than one byte
			case 1:
				size = maxLoadSlab + rng.IntN(1000) // a slab of its own
			}
			w := Write{Key: fmt.Appendf(nil, "k%03d", rng.IntN(500)), Value: make([]byte, size)}
			if rng.IntN(7) == 0 {
				w.Key = append(w.Key, make([]byte, size)...) // a long key
			}
			for j := range w.Value {
				w.Value[j] = byte(i + j)
			}
			switch rng.IntN(10) {
			case 0:
				w.Value, w.Delete = nil, true
			case 1:
				w.Value = []byte{}
			}
			ws = append(ws, w)
			pos = append(pos, b.add(&w))
			last[string(w.Key)] = i
		}
		if b.len() != len(ws) {
			t.Fatalf("round %d: len %d, want %d", round, b.len(), len(ws))
		}
		for i, w := range ws {
			if i > 0 && pos[i] <= pos[i-1] {
				t.Fatalf("round %d: record %d at position %x, after %x", round, i, pos[i], pos[i-1])
			}
			k, v, del := b.record(pos[i])
			if string(k) != string(w.Key) || del != w.Delete || string(v) != string(w.Value) {
				t.Fatalf("round %d: record %d: key %q value of %d bytes delete %v, want %q, %d bytes, %v",
					round, i, k, len(v), del, w.Key, len(w.Value), w.Delete)
			}
		}
		order := b.sorted()
		if len(order) != len(last) {
			t.Fatalf("round %d: sorted %d keys, want %d", round, len(order), len(last))
		}
		for j, o := range order {
			k, v, del := b.record(o.i)
			w := ws[last[string(k)]]
			if del != w.Delete || string(v) != string(w.Value) {
				t.Fatalf("round %d: key %q: not its last write", round, k)
			}
			if j > 0 {
				if prev, _, _ := b.record(order[j-1].i); string(prev) >= string(k) {
					t.Fatalf("round %d: key %q after %q", round, k, prev)
				}
			}
		}
		for _, s := range b.slabs {
			if cap(s) > maxLoadSlab && len(s) != cap(s) {
				t.Fatalf("round %d: a slab larger than maxLoadSlab holds room for more", round)
			}
		}
		b.reset()
	}
}

// TestLoaderRunsCompression checks the tables a load leaves behind: runs of rising keys (a
// changelog of keys that grow with it) land beside each other in the last level, where they
// stay, and must be written compressed, also when a second load resumes over the first one's
// data; runs over the same keys land in L0 uncompressed, and the compaction after the load
// rewrites them compressed.
func TestLoaderRunsCompression(t *testing.T) {
	for _, c := range []struct{ rising, resume bool }{{true, false}, {true, true}, {false, false}} {
		t.Run(fmt.Sprintf("rising=%v,resume=%v", c.rising, c.resume), func(t *testing.T) {
			m := openManager(t, t.TempDir())
			defer m.Close()
			m.loads.budget = 256 << 10 // a run every few batches
			task := openLoadTask(t, m, "p", false)
			l, err := task.Partition("s").NewLoader()
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			value := bytes.Repeat([]byte("compressible "), 8)
			for b := range 20 {
				if c.resume && b == 10 {
					st, err := l.Finish()
					if err != nil {
						t.Fatal(err)
					}
					runs += st.Runs
					if l, err = task.Partition("s").NewLoader(); err != nil {
						t.Fatal(err)
					}
				}
				var ws []Write
				for i := range 1000 {
					k := b*1000 + i
					if !c.rising {
						k = (k * 7919) % 20000
					}
					ws = append(ws, Write{Key: fmt.Appendf(nil, "key-%06d", k), Value: value, Offset: int64(b*1000 + i)})
				}
				if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
					t.Fatal(err)
				}
			}
			st, err := l.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if runs += st.Runs; runs < 3 {
				t.Fatalf("%d runs; the test wants several", runs)
			}
			waitCompactions(m)
			levels, err := m.db.SSTables(pebble.WithProperties())
			if err != nil {
				t.Fatal(err)
			}
			tables := 0
			for level, ts := range levels {
				for _, tbl := range ts {
					if tbl.Properties.NumEntries < 100 {
						continue // a checkpoint's table
					}
					tables++
					if strings.Contains(tbl.Properties.CompressionName, "NoCompression") {
						t.Errorf("a table of %d entries in L%d is not compressed", tbl.Properties.NumEntries, level)
					}
				}
			}
			if tables == 0 {
				t.Fatal("no table holds the loaded keys")
			}
		})
	}
}
