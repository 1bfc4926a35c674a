package store

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// recLog records changelog writes.
type recLog struct{ writes []Write }

func (l *recLog) LogPut(key, value []byte) error {
	l.writes = append(l.writes, Write{Key: clone(key), Value: clone(value)})
	return nil
}
func (l *recLog) LogDelete(key []byte) error {
	l.writes = append(l.writes, Write{Key: clone(key), Delete: true})
	return nil
}

func windows(t *testing.T) func(WindowIterator, error) []string {
	return func(it WindowIterator, err error) []string { t.Helper(); return collectWindows(t, it, err) }
}

func collectWindows(t *testing.T, it WindowIterator, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for it.Next() {
		out = append(out, fmt.Sprintf("%s@%d-%d=%s", it.Key(), it.Start(), it.End(), it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustWPut(t *testing.T, w WindowStore, k string, start int64, v string) bool {
	t.Helper()
	var val []byte
	if v != "" {
		val = []byte(v)
	}
	ok, err := w.Put([]byte(k), start, val)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestWindowStore checks windows on both backends, before and after a commit: point reads,
// per-key fetches in start order (keys that extend one another included), fetches over all
// keys, closing by grace, expiry by retention, and the changelog keys.
func TestWindowStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		for _, commit := range []bool{false, true} {
			t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
				task, err := m.OpenTask(fmt.Sprintf("w%v", commit), 0)
				if err != nil {
					t.Fatal(err)
				}
				defer task.Close()
				log := &recLog{}
				// size 10, grace 5, retention 100, segments of 40: windows spread over segments.
				w, err := task.OpenWindow("w", Options{Backend: b, Kind: Window, Changelog: log,
					Window: WindowSpec{Size: 10, Grace: 5, Retention: 100, SegmentInterval: 40}})
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range []int64{-20, 0, 10, 50, 90} { // no stream time yet: nothing is closed
					mustWPut(t, w, "a", s, fmt.Sprint("a", s))
					mustWPut(t, w, "a\x00\x00\x00\x00\x00\x00\x00\x00", s, "long")
					mustWPut(t, w, "b", s, fmt.Sprint("b", s))
				}
				if commit {
					if err := task.Apply(nil); err != nil {
						t.Fatal(err)
					}
				}
				if v, ok, _ := w.Get([]byte("a"), 50); !ok || string(v) != "a50" {
					t.Fatalf("Get(a, 50) = %q %v", v, ok)
				}
				if _, ok, _ := w.Get([]byte("a"), 51); ok {
					t.Fatal("Get(a, 51) found a window that was never written")
				}
				got := windows(t)(w.Fetch([]byte("a"), 0, 90))
				want := []string{"a@0-10=a0", "a@10-20=a10", "a@50-60=a50", "a@90-100=a90"}
				if !slices.Equal(got, want) {
					t.Fatalf("Fetch(a, 0, 90) = %q, want %q", got, want)
				}
				if got := windows(t)(w.Fetch([]byte("a"), math.MinInt64, math.MaxInt64)); len(got) != 5 || got[0] != "a@-20--10=a-20" {
					t.Fatalf("Fetch(a, all) = %q", got)
				}
				all := windows(t)(w.FetchAll(10, 50))
				if len(all) != 6 {
					t.Fatalf("FetchAll(10, 50) = %q, want 6 windows", all)
				}
				// Stream time 25: window 10 (end 20, +grace 5 = 25) is closed; 20 is open.
				task.ObserveTime(25)
				if mustWPut(t, w, "c", -20, "late") {
					t.Fatal("a put into a closed window was stored")
				}
				if mustWPut(t, w, "c", 10, "late") {
					t.Fatal("a put into a closed window was stored")
				}
				if !mustWPut(t, w, "c", 20, "ok") {
					t.Fatal("a put into an open window was dropped")
				}
				if !mustWPut(t, w, "a", 10, "") {
					t.Fatal("a delete in a closed window was dropped")
				}
				// Stream time 150: windows with start <= 50 are expired (retention 100).
				task.ObserveTime(150)
				if mustWPut(t, w, "d", 50, "") || mustWPut(t, w, "d", 40, "x") {
					t.Fatal("a write to an expired window was stored")
				}
				if _, ok, _ := w.Get([]byte("a"), 50); ok {
					t.Fatal("an expired window is visible")
				}
				got = windows(t)(w.FetchAll(math.MinInt64, math.MaxInt64))
				want = []string{"a\x00\x00\x00\x00\x00\x00\x00\x00@90-100=long", "a@90-100=a90", "b@90-100=b90"} // local key order
				if !slices.Equal(got, want) {
					t.Fatalf("after expiry FetchAll = %q, want %q", got, want)
				}
				late, expired, _ := task.DroppedWrites()
				if late != 2 || expired != 2 {
					t.Fatalf("dropped late=%d expired=%d, want 2 and 2", late, expired)
				}
				// The changelog got Kafka Streams' keys: key | start (8 bytes big-endian).
				last := log.writes[len(log.writes)-1]
				if k, s, _, err := ParseChangelogKey(Window, last.Key); err != nil || string(k) != "a" || s != 10 || !last.Delete {
					t.Fatalf("last changelog write %q -> %q %d %v", last.Key, k, s, err)
				}
			})
		}
	})
}

// TestWindowExpiryDropsSegments checks that expiry deletes whole segments from the
// committed data: after a commit the expired windows are gone from the partition.
func TestWindowExpiryDropsSegments(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, err := m.OpenTask("x", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		w, err := task.OpenWindow("w", Options{Backend: b, Kind: Window, Window: WindowSpec{Size: 10, Retention: 10, SegmentInterval: 100}})
		if err != nil {
			t.Fatal(err)
		}
		task.ObserveTime(0)
		for s := int64(0); s < 1000; s += 10 {
			mustWPut(t, w, "k", s, "v")
		}
		if err := task.Apply(nil); err != nil {
			t.Fatal(err)
		}
		task.ObserveTime(1005) // live: start > 995; segments below 9 expire
		if _, err := w.Put([]byte("k"), 1000, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := task.Apply(nil); err != nil {
			t.Fatal(err)
		}
		p := task.Partition("w")
		// Read the base directly: what remains is segment 9 (900..990) and 1000.
		it, err := p.base.Range(nil, nil)
		n := len(collect(t, it, err))
		if n != 11 {
			t.Fatalf("%d windows left in the partition, want the 11 of live segments", n)
		}
	})
}

// TestSessionStore checks sessions: find by overlap in end order, find all by end, closing
// by grace, expiry, and the changelog key key | end | start.
func TestSessionStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, err := m.OpenTask("s", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		log := &recLog{}
		s, err := task.OpenSession("s", Options{Backend: b, Kind: Session, Changelog: log,
			Window: WindowSpec{Gap: 10, Grace: 5, Retention: 200, SegmentInterval: 60}})
		if err != nil {
			t.Fatal(err)
		}
		put := func(k string, start, end int64, v string) bool {
			t.Helper()
			ok, err := s.Put([]byte(k), start, end, []byte(v))
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		put("u", 0, 30, "s1")
		put("u", 50, 70, "s2")
		put("u", 75, 130, "s3")
		put("v", 40, 60, "v1")
		if _, err := s.Put([]byte("u"), 10, 5, []byte("x")); err == nil {
			t.Fatal("a session ending before its start was accepted")
		}
		got := windows(t)(s.Find([]byte("u"), 60, 80))
		want := []string{"u@50-70=s2", "u@75-130=s3"}
		if !slices.Equal(got, want) {
			t.Fatalf("Find(u, 60, 80) = %q, want %q", got, want)
		}
		got = windows(t)(s.FindAll(30, 60))
		want = []string{"u@0-30=s1", "v@40-60=v1"}
		if !slices.Equal(got, want) {
			t.Fatalf("FindAll(30, 60) = %q, want %q", got, want)
		}
		if v, ok, _ := s.Get([]byte("u"), 50, 70); !ok || string(v) != "s2" {
			t.Fatalf("Get(u, 50, 70) = %q %v", v, ok)
		}
		// Stream time 76: a session ending at 70 is closed (70 + 5 < 76).
		task.ObserveTime(76)
		if put("u", 50, 70, "again") {
			t.Fatal("a put of a closed session was stored")
		}
		if ok, err := s.Put([]byte("u"), 50, 70, nil); err != nil || !ok {
			t.Fatalf("removing a closed session: %v %v", ok, err)
		}
		if _, ok, _ := s.Get([]byte("u"), 50, 70); ok {
			t.Fatal("a removed session is still there")
		}
		// Stream time 230: sessions ending at <= 30 are expired.
		task.ObserveTime(230)
		if got := windows(t)(s.Find([]byte("u"), math.MinInt64, math.MaxInt64)); !slices.Equal(got, []string{"u@75-130=s3"}) {
			t.Fatalf("after expiry Find(u) = %q", got)
		}
		k, end, start, err := ParseChangelogKey(Session, log.writes[0].Key)
		if err != nil || string(k) != "u" || end != 30 || start != 0 {
			t.Fatalf("session changelog key %q -> %q %d %d %v", log.writes[0].Key, k, end, start, err)
		}
	})
}

// TestWindowRestore checks that a restore rebuilds windows from changelog keys, raises the
// stream time to the records' timestamps, skips what is already expired, and that the stream
// time persists with a commit.
func TestWindowRestore(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		o := Options{Backend: b, Kind: Window, Window: WindowSpec{Size: 10, Retention: 100, SegmentInterval: 50}}
		task, err := m.OpenTask("r", 0)
		if err != nil {
			t.Fatal(err)
		}
		w, err := task.OpenWindow("w", o)
		if err != nil {
			t.Fatal(err)
		}
		if task.StreamTime() != NoTime {
			t.Fatalf("stream time %d before anything", task.StreamTime())
		}
		ws := []Write{
			{Key: ChangelogKey(Window, []byte("a"), 0, 0), Value: []byte("1"), Timestamp: 5},
			{Key: ChangelogKey(Window, []byte("a"), 100, 0), Value: []byte("2"), Timestamp: 105},
			{Key: ChangelogKey(Window, []byte("b"), 0, 0), Value: []byte("3"), Timestamp: 105}, // expired at 105
			{Key: ChangelogKey(Window, []byte("a"), 110, 0), Timestamp: 115, Delete: true},
			{Key: ChangelogKey(Window, []byte("c"), 120, 0), Value: []byte("4"), Timestamp: 121},
		}
		if err := task.Partition("w").ApplyRestore(ws, Checkpoint{Offset: 4}); err != nil {
			t.Fatal(err)
		}
		if task.StreamTime() != 121 {
			t.Fatalf("stream time after restore %d, want 121", task.StreamTime())
		}
		got := windows(t)(w.FetchAll(math.MinInt64, math.MaxInt64))
		want := []string{"a@100-110=2", "c@120-130=4"}
		if !slices.Equal(got, want) {
			t.Fatalf("restored %q, want %q", got, want)
		}
		// a@0 and b@0 are expired at the batch's final stream time, 121: neither is written.
		if _, _, skipped := task.DroppedWrites(); skipped != 2 {
			t.Fatalf("skipped %d, want 2", skipped)
		}
		if err := task.Partition("w").ApplyRestore([]Write{{Key: []byte("short")}}, Checkpoint{Offset: 5}); err == nil {
			t.Fatal("a malformed changelog key was applied")
		}
		task.ObserveTime(130)
		if err := task.Apply(nil); err != nil {
			t.Fatal(err)
		}
		_ = task.Close()
		task, err = m.OpenTask("r", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		if _, err := task.OpenWindow("w", o); err != nil {
			t.Fatal(err)
		}
		want2 := int64(130)
		if b == Memory {
			want2 = NoTime // memory stores keep nothing: their restore brings the time back
		}
		if task.StreamTime() != want2 {
			t.Fatalf("stream time after reopening %d, want %d", task.StreamTime(), want2)
		}
	})
}

func TestWindowSpecValidation(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, err := m.OpenTask("v", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"no size", Options{Kind: Window}},
		{"retention below size+grace", Options{Kind: Window, Window: WindowSpec{Size: 10, Grace: 5, Retention: 14}}},
		{"no gap", Options{Kind: Session}},
		{"coalesce", Options{Kind: Window, Coalesce: true, Window: WindowSpec{Size: 10}}},
	} {
		var err error
		if tc.o.Kind == Window {
			_, err = task.OpenWindow(tc.name, tc.o)
		} else {
			_, err = task.OpenSession(tc.name, tc.o)
		}
		if err == nil {
			t.Errorf("%s: opened", tc.name)
		}
	}
	if _, err := task.Open("kv", Options{Kind: Window}); err == nil {
		t.Error("Open opened a window store")
	}
}

// TestWindowLayoutChange checks that a Pebble window store reopened with another retention
// keeps its data in the segment interval it was written in, and that a store reopened as
// another type is refused with an error instead of reading keys of another layout.
func TestWindowLayoutChange(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	openWindow := func(o Options) (*Task, WindowStore, error) {
		t.Helper()
		task, err := m.OpenTask("l", 0)
		if err != nil {
			t.Fatal(err)
		}
		w, err := task.OpenWindow("w", o)
		return task, w, err
	}
	short := Options{Kind: Window, Window: WindowSpec{Size: 10, Retention: 200_000}}
	long := Options{Kind: Window, Window: WindowSpec{Size: 10, Retention: 2_000_000}}
	task, w, err := openWindow(short)
	if err != nil {
		t.Fatal(err)
	}
	task.ObserveTime(150_000)
	mustWPut(t, w, "a", 150_000, "1")
	if err := task.Apply(map[string]int64{"w": 7}); err != nil {
		t.Fatal(err)
	}
	_ = task.Close()

	task, w, err = openWindow(long)
	if err != nil {
		t.Fatal(err)
	}
	if got := windows(t)(w.Fetch([]byte("a"), 0, 200_000)); len(got) != 1 {
		t.Fatalf("after the retention grew: %q, want the window written before", got)
	}
	if got := w.Spec().SegmentInterval; got != 100_000 {
		t.Errorf("segment interval %d, want the recorded 100000 (retention 200000 / 2)", got)
	}
	if got := w.Spec().Retention; got != 2_000_000 {
		t.Errorf("retention %d, want the new 2000000", got)
	}
	_ = task.Close()

	task, err = m.OpenTask("l", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Open("w", Options{}); err == nil || !strings.Contains(err.Error(), "data of a window store") {
		t.Fatalf("reopened as key-value: %v, want an error naming the old type", err)
	}
	if _, err := task.OpenSession("w", Options{Kind: Session, Window: WindowSpec{Gap: 10}}); err == nil {
		t.Fatal("a window store reopened as a session store")
	}
	_ = task.Close()

	// A key-value store with data cannot become a window store; an unused one can.
	task, err = m.OpenTask("kv", 0)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := task.Open("x", Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, kv, "k", "v")
	if _, err := task.Open("y", Options{}); err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	_ = task.Close()
	task, err = m.OpenTask("kv", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if _, err := task.OpenWindow("x", short); err == nil {
		t.Error("a key-value store with data reopened as a window store")
	}
	if _, err := task.OpenWindow("y", short); err != nil {
		t.Errorf("an unused key-value store reopened as a window store: %v", err)
	}
}

// TestRestoredStreamTime checks that a restore raises the stream time only to the records'
// timestamps (the stream time when they were written), never to a window's own time, and
// not for timestamps that stand for none (0, written before any record; -1, not the
// producer's).
func TestRestoredStreamTime(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, err := m.OpenTask("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if _, err := task.OpenWindow("w", Options{Kind: Window, Window: WindowSpec{Size: 10}}); err != nil {
		t.Fatal(err)
	}
	ws := []Write{
		{Key: ChangelogKey(Window, []byte("a"), 5000, 0), Value: []byte("init"), Timestamp: 0},
		{Key: ChangelogKey(Window, []byte("b"), 9000, 0), Value: []byte("appended"), Timestamp: -1},
	}
	if err := task.Partition("w").ApplyRestore(ws, Checkpoint{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	if st := task.StreamTime(); st != NoTime {
		t.Fatalf("stream time %d after restoring records without one, want NoTime", st)
	}
	err = task.Partition("w").ApplyRestore([]Write{{Key: []byte("x"), Value: []byte("v"), Offset: 41}}, Checkpoint{Offset: 42})
	if err == nil || !strings.Contains(err.Error(), "offset 41") {
		t.Fatalf("malformed key: %v, want an error naming offset 41", err)
	}
}

// TestWindowTimesNearLimits checks that times near the int64 limits neither overflow the
// closed and expired checks nor pass validation.
func TestWindowTimesNearLimits(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, err := m.OpenTask("n", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	w, err := task.OpenWindow("w", Options{Kind: Window, Window: WindowSpec{Size: 10, Grace: 5}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := task.OpenSession("s", Options{Kind: Session, Window: WindowSpec{Gap: 10, Grace: 5}})
	if err != nil {
		t.Fatal(err)
	}
	task.ObserveTime(1000)
	if !mustWPut(t, w, "a", math.MaxInt64-5, "v") {
		t.Error("a window far in the future was dropped")
	}
	if ok, err := s.Put([]byte("a"), 0, math.MaxInt64-1, []byte("v")); err != nil || !ok {
		t.Errorf("a session ending far in the future: %v %v", ok, err)
	}
	if _, err := task.OpenWindow("big", Options{Kind: Window, Window: WindowSpec{Size: math.MaxInt64 - 1, Grace: 5}}); err == nil {
		t.Error("a window size + grace that overflows was accepted")
	}
}
