package store

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestScanWindowsCommitted: committed reads of window and session stores, Pebble and memory,
// return exactly the committed windows or sessions of one key (not of a key it prefixes) or
// of all keys, bounded in time as the store's own fetches are, in position order; After goes
// on after an entry, so pages of any size add up to the whole; uncommitted writes are not
// seen (Pebble), and windows expired at the committed stream time are never returned.
func TestScanWindowsCommitted(t *testing.T) {
	for _, b := range []Backend{Pebble, Memory} {
		t.Run(fmt.Sprint(b), func(t *testing.T) { testScanWindowsCommitted(t, b) })
	}
}

func testScanWindowsCommitted(t *testing.T, b Backend) {
	m := openManager(t, t.TempDir())
	id := TaskID{Processor: "wc", Partition: 0}
	task := mustOpenTask(t, m, "wc", 0)
	wspec := WindowSpec{Size: 10, Grace: 1000, Retention: 1010, SegmentInterval: 20}
	w, err := task.OpenWindow("w", Options{Backend: b, Kind: Window, Window: wspec})
	if err != nil {
		t.Fatal(err)
	}
	sspec := WindowSpec{Gap: 5, Grace: 1000, Retention: 1010, SegmentInterval: 20}
	s, err := task.OpenSession("s", Options{Backend: b, Kind: Session, Window: sspec})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "ab", "b"} {
		for start := int64(0); start < 100; start += 10 {
			if _, err := w.Put([]byte(key), start, fmt.Appendf(nil, "%s@%d", key, start)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ss := range [][2]int64{{0, 4}, {10, 30}, {45, 45}, {60, 90}} {
		if _, err := s.Put([]byte("a"), ss[0], ss[1], fmt.Appendf(nil, "a@%d-%d", ss[0], ss[1])); err != nil {
			t.Fatal(err)
		}
	}
	task.ObserveTime(100)
	mustApply(t, task, map[string]int64{"w": 1, "s": 1})
	if b == Pebble { // never seen: not committed
		if _, err := w.Put([]byte("a"), 15, []byte("uncommitted")); err != nil {
			t.Fatal(err)
		}
	}

	scan := func(name string, kind Kind, spec WindowSpec, q WindowQuery, limit int) (out []string, last []byte) {
		t.Helper()
		fn := func(e WindowEntry) bool {
			out = append(out, fmt.Sprintf("%s[%d,%d]=%s", e.Key, e.Start, e.End, e.Value))
			last = bytes.Clone(e.Position)
			return len(out) < limit
		}
		var err error
		if b == Pebble {
			err = m.ScanWindowsCommitted(id, name, kind, spec, q, fn)
		} else {
			err = task.Partition(name).ScanWindowsCommittedMemory(q, fn)
		}
		if err != nil {
			t.Fatal(err)
		}
		return out, last
	}
	windows := func(key string, from, to int64) []string {
		var out []string
		for start := from; start <= to; start += 10 {
			out = append(out, fmt.Sprintf("%s[%d,%d]=%s@%d", key, start, start+10, key, start))
		}
		return out
	}
	all := WindowQuery{From: math.MinInt64, To: math.MaxInt64}

	if got, _ := scan("w", Window, wspec, WindowQuery{Key: []byte("a"), From: 15, To: 50}, 100); !slices.Equal(got, windows("a", 20, 50)) {
		t.Errorf("windows of a starting in [15, 50]: %v, want %v", got, windows("a", 20, 50))
	}
	got, _ := scan("w", Window, wspec, all, 1000)
	if len(got) != 30 {
		t.Fatalf("every window: %d, want 30: %v", len(got), got)
	}
	// Position order: segment (20 ms), then the bytes of key and start together, where
	// "ab" comes before "a" (its start begins with 0x80).
	if want := append(append(windows("ab", 0, 10), windows("a", 0, 10)...), windows("b", 0, 10)...); !slices.Equal(got[:6], want) {
		t.Errorf("the first segment: %v, want %v", got[:6], want)
	}
	for _, size := range []int{1, 4, 7} {
		var pages []string
		q := all
		for {
			page, last := scan("w", Window, wspec, q, size)
			pages = append(pages, page...)
			if len(page) < size {
				break
			}
			q.After = last
		}
		if !slices.Equal(pages, got) {
			t.Errorf("pages of %d: %v, want %v", size, pages, got)
		}
	}
	q := WindowQuery{Key: []byte("ab"), From: math.MinInt64, To: math.MaxInt64}
	page, last := scan("w", Window, wspec, q, 3)
	q.After = last
	rest, _ := scan("w", Window, wspec, q, 100)
	if got := append(page, rest...); !slices.Equal(got, windows("ab", 0, 90)) {
		t.Errorf("the windows of ab in pages of 3 then the rest: %v, want %v", got, windows("ab", 0, 90))
	}

	// Sessions overlapping [12, 50]: end >= 12 and start <= 50.
	want := []string{"a[10,30]=a@10-30", "a[45,45]=a@45-45"}
	if got, _ := scan("s", Session, sspec, WindowQuery{Key: []byte("a"), From: 12, To: 50}, 100); !slices.Equal(got, want) {
		t.Errorf("sessions of a overlapping [12, 50]: %v, want %v", got, want)
	}
	if got, _ := scan("s", Session, sspec, all, 100); len(got) != 4 {
		t.Errorf("every session: %v, want 4", got)
	}

	// Stream time 1055: windows that start at or before 45 are expired, committed or not.
	task.ObserveTime(1055)
	mustApply(t, task, map[string]int64{"w": 2, "s": 2})
	if got, _ := scan("w", Window, wspec, WindowQuery{Key: []byte("b"), From: math.MinInt64, To: math.MaxInt64}, 100); !slices.Equal(got, windows("b", 50, 90)) {
		t.Errorf("after expiry: %v, want %v", got, windows("b", 50, 90))
	}
}
