package store

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestSortedBatch checks the batch a commit applies instead of the task's: each key's last
// write only (a set or a delete), in key order, and nothing else; and no such batch for a
// batch with a range delete, whose effect depends on the order of the writes around it.
func TestSortedBatch(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	r := rand.New(rand.NewSource(1))
	b := m.db.NewBatch()
	defer b.Close()
	// Keys of 0 to 24 bytes over a small alphabet with 0x00 and 0xff, half of them after a
	// common 8 or 16 bytes, so that keys differ in their first 8 bytes, in the next 8 and
	// after 16, and some are prefixes of others.
	pool := make([]string, 300)
	for i := range pool {
		k := []byte("\x00abcdefg\x00hijklmn")[:8*r.Intn(3)]
		for range r.Intn(25 - len(k)) {
			k = append(k, "\x00\x01a\xff"[r.Intn(4)])
		}
		pool[i] = string(k)
	}
	want := map[string]*string{} // nil: deleted
	write := func(k string, i int) {
		if r.Intn(4) == 0 {
			_ = b.Delete([]byte(k), nil)
			want[k] = nil
			return
		}
		v := fmt.Sprintf("v%d", i)
		_ = b.Set([]byte(k), []byte(v), nil)
		want[k] = &v
	}
	for i := range 1000 {
		write(pool[r.Intn(len(pool))], i)
	}
	checkSorted(t, task, b, want)

	// A batch whose first writes are of distinct keys (sortedBatch stops looking for
	// earlier writes of a key), then writes of the same keys again.
	b.Reset()
	clear(want)
	for i := range 1100 {
		write(fmt.Sprintf("d%05d", i), i)
	}
	for i := range 2000 {
		write(fmt.Sprintf("d%05d", r.Intn(1100)), 1100+i)
	}
	checkSorted(t, task, b, want)

	_ = b.DeleteRange([]byte("k100"), []byte("k200"), nil)
	_ = b.Set([]byte("k150"), []byte("after the range delete"), nil)
	if rb := task.sortedBatch(b); rb != nil {
		rb.Close()
		t.Fatal("a batch with a range delete was reordered")
	}
	small := m.db.NewBatch()
	defer small.Close()
	_ = small.Set([]byte("a"), []byte("1"), nil)
	if sb := task.sortedBatch(small); sb != nil {
		sb.Close()
		t.Fatal("a one-write batch was copied")
	}
}

// checkSorted checks that sortedBatch(b) holds the last write of each key written (want;
// nil: a delete), once, in key order.
func checkSorted(t *testing.T, task *Task, b *pebble.Batch, want map[string]*string) {
	t.Helper()
	sb := task.sortedBatch(b)
	if sb == nil {
		t.Fatalf("no sorted batch for %d sets and deletes", b.Count())
	}
	defer sb.Close()
	rd := sb.Reader()
	var last []byte
	n := 0
	for {
		kind, k, v, ok, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n++
		if last != nil && bytes.Compare(last, k) >= 0 {
			t.Fatalf("key %q after %q: not in increasing order", k, last)
		}
		last = append(last[:0], k...)
		w, known := want[string(k)]
		switch {
		case !known:
			t.Fatalf("key %q was never written", k)
		case w == nil && kind != pebble.InternalKeyKindDelete:
			t.Fatalf("key %q: %s %q, want its last write, a delete", k, kind, v)
		case w != nil && (kind != pebble.InternalKeyKindSet || string(v) != *w):
			t.Fatalf("key %q: %s %q, want its last write, a set of %q", k, kind, v, *w)
		}
	}
	if n != len(want) || int(sb.Count()) != len(want) {
		t.Fatalf("%d writes (count %d), want one per key written: %d", n, sb.Count(), len(want))
	}
}

// TestCommitKeepsLastWrite checks the committed state after commits whose batches hold
// several writes of the same keys, in random order: with only sets and deletes (sorted and
// deduplicated at the commit), and with a range delete among them (committed as written).
// What a fresh reader of the database sees after a reopen must be each key's last write.
func TestCommitKeepsLastWrite(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	task, _ := m.OpenTask("p", 0)
	s, _ := task.Open("s", Options{Changelog: discardLog{}})
	ps := task.Partition("s").base.(*pebbleStore)
	r := rand.New(rand.NewSource(2))
	want := map[string]string{}
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	for round := range 6 {
		for i := range 2000 {
			k := key(r.Intn(500))
			if r.Intn(5) == 0 {
				if err := s.Delete([]byte(k)); err != nil {
					t.Fatal(err)
				}
				delete(want, k)
				continue
			}
			v := fmt.Sprintf("r%d-%d", round, i)
			mustPut(t, s, k, v)
			want[k] = v
			if round%2 == 1 && i == 1000 {
				// Odd rounds: a range delete in the middle, then more writes of its keys.
				if err := ps.deleteRange([]byte(key(100)), []byte(key(200))); err != nil {
					t.Fatal(err)
				}
				for j := 100; j < 200; j++ {
					delete(want, key(j))
				}
			}
		}
		if err := task.Apply(map[string]int64{"s": int64(round)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	checkReopened(t, dir, want, 5)
}

// checkReopened opens the Manager on dir again and checks that the store "s" of task p_0
// holds exactly want, with the checkpoint offset ckpt.
func checkReopened(t *testing.T, dir string, want map[string]string, ckpt int64) {
	t.Helper()
	m := openManager(t, dir)
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	s, _ := task.Open("s", Options{Changelog: discardLog{}})
	got := map[string]string{}
	it, err := s.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys after a reopen, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %q, want %q", k, got[k], v)
		}
	}
	if cp, ok, _ := task.Partition("s").Checkpoint(); !ok || cp.Offset != ckpt {
		t.Fatalf("checkpoint %d %v, want %d", cp.Offset, ok, ckpt)
	}
}

// TestRestoreKeepsLastWrite checks a restore of changelog batches that write the same keys
// several times, in random order or after a run of distinct keys, with deletes among them:
// each batch is applied sorted and deduplicated, and what a fresh reader of the database
// sees after a reopen must be each key's last write, with the last batch's checkpoint.
func TestRestoreKeepsLastWrite(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	task, _ := m.OpenTask("p", 0)
	if _, err := task.Open("s", Options{Changelog: discardLog{}}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(3))
	want := map[string]string{}
	offset := int64(0)
	for round := range 4 {
		ws := make([]Write, 0, 2000)
		perm := r.Perm(1500)
		for i := range 2000 {
			k := fmt.Sprintf("k%04d", r.Intn(500))
			if round%2 == 1 {
				// Distinct keys first (the sort stops looking for earlier writes of a
				// key), then the same keys again.
				k = fmt.Sprintf("k%04d", perm[i%1100])
			}
			if r.Intn(5) == 0 {
				ws = append(ws, Write{Key: []byte(k), Delete: true})
				delete(want, k)
				continue
			}
			v := fmt.Sprintf("r%d-%d", round, i)
			ws = append(ws, Write{Key: []byte(k), Value: []byte(v)})
			want[k] = v
		}
		offset += int64(len(ws))
		if err := task.Partition("s").ApplyRestore(ws, Checkpoint{Offset: offset - 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	checkReopened(t, dir, want, offset-1)
}

// TestRadixSort checks radixSort against a comparison sort, on entries whose words share a
// prefix, differ only in w1, repeat, or are random.
func TestRadixSort(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, n := range []int{0, 1, 2, 31, 33, 1000, 50_000} {
		order := make([]writeOrder, n)
		for i := range order {
			var w0, w1 uint64
			switch r.Intn(4) {
			case 0: // a common 7-byte prefix
				w0 = 0x7761626364656600 | uint64(r.Intn(256))
			case 1: // equal first words, differing second ones
				w0, w1 = 42, uint64(r.Intn(1000))<<40
			case 2: // a few repeated entries
				w0, w1 = uint64(r.Intn(3)), uint64(r.Intn(3))
			default:
				w0, w1 = r.Uint64(), r.Uint64()
			}
			order[i] = writeOrder{w0: w0, w1: w1, i: int32(i)}
		}
		want := slices.Clone(order)
		slices.SortFunc(want, func(a, b writeOrder) int {
			if c := cmp.Compare(a.w0, b.w0); c != 0 {
				return c
			}
			return cmp.Compare(a.w1, b.w1)
		})
		// Without a scratch slice, with one too small, with a used one large enough.
		for _, scratch := range [][]writeOrder{nil, make([]writeOrder, n/2), slices.Clone(order)} {
			got, _ := radixSort(slices.Clone(order), scratch)
			for i := range got {
				if got[i].w0 != want[i].w0 || got[i].w1 != want[i].w1 {
					t.Fatalf("n=%d, scratch of %d: entry %d is %x/%x, want %x/%x", n, len(scratch), i, got[i].w0, got[i].w1, want[i].w0, want[i].w1)
				}
			}
			seen := make([]bool, n)
			for _, o := range got {
				seen[o.i] = true
			}
			if slices.Contains(seen, false) {
				t.Fatalf("n=%d, scratch of %d: an entry was lost", n, len(scratch))
			}
		}
	}
}

// BenchmarkRadixSort sorts the orders of 40,000 of the bench's words (8 bytes: w1 is zero),
// about what a loader's run holds.
//
//	go test -run '^$' -bench RadixSort ./store/
func BenchmarkRadixSort(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	order := make([]writeOrder, 40_000)
	for i := range order {
		k := fmt.Appendf(nil, "w%07d", r.Intn(1_000_000))
		order[i] = writeOrder{w0: keyWord(k, 0), w1: keyWord(k, 8), i: int32(i)}
	}
	work, scratch := make([]writeOrder, len(order)), make([]writeOrder, len(order))
	b.ResetTimer()
	for range b.N {
		copy(work, order)
		radixSort(work, scratch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(order)), "ns/record")
}
