package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// timedLog records the changelog writes of a store with a TTL, with their timestamps, as
// "key=value@ts" and "key deleted@ts".
type timedLog struct{ writes []string }

func (l *timedLog) LogPut(key, value []byte) error { return errors.New("LogPut without a timestamp") }
func (l *timedLog) LogDelete(key []byte) error     { return errors.New("LogDelete without a timestamp") }

func (l *timedLog) LogPutAt(key, value []byte, ts int64) error {
	l.writes = append(l.writes, fmt.Sprintf("%s=%s@%d", key, value, ts))
	return nil
}

func (l *timedLog) LogDeleteAt(key []byte, ts int64) error {
	l.writes = append(l.writes, fmt.Sprintf("%s deleted@%d", key, ts))
	return nil
}

// take returns the writes recorded since the last take.
func (l *timedLog) take() []string {
	w := l.writes
	l.writes = nil
	return w
}

// testClock is a wall clock the tests set.
type testClock struct{ now time.Time }

func (c *testClock) read() time.Time { return c.now }

func openClockManager(t *testing.T, dir string, c *testClock) *Manager {
	t.Helper()
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes, WallClock: c.read})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// commit flushes and applies the task's writes with checkpoint offset for each named store.
func commit(t *testing.T, task *Task, offset int64, stores ...string) {
	t.Helper()
	if err := task.Flush(); err != nil {
		t.Fatal(err)
	}
	cps := map[string]int64{}
	for _, s := range stores {
		cps[s] = offset
	}
	if err := task.Apply(cps); err != nil {
		t.Fatal(err)
	}
}

// sweep runs sweep steps on task until none is due (at most 100), and returns the entries each
// store deleted.
func sweep(t *testing.T, task *Task, budget int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range 100 {
		if !task.SweepDue() {
			return got
		}
		if err := task.SweepExpired(budget, func(s string, n int) { got[s] += n }); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the sweep is still due after 100 steps")
	return nil
}

// sweepCommit runs the sweep until it is done (budget entries a step), commits at offset, and
// checks that the store "kv" deleted as many entries as want has tombstones, and that the
// changelog got exactly want since the last take.
func sweepCommit(t *testing.T, task *Task, log *timedLog, offset int64, budget int, want ...string) {
	t.Helper()
	deleted := 0
	for _, w := range want {
		if strings.Contains(w, " deleted@") {
			deleted++
		}
	}
	if got := sweep(t, task, budget); got["kv"] != deleted {
		t.Fatalf("the sweep deleted %v, want kv: %d", got, deleted)
	}
	commit(t, task, offset, "kv")
	if got := log.take(); !slices.Equal(got, want) {
		t.Fatalf("changelog after the sweep %v, want %v", got, want)
	}
}

// TestTTLStreamTime checks a store with a TTL in stream time on both backends, with and
// without coalescing, before and after a commit: the entries expired at the stream time are
// absent from Get, Range and Prefix and from committed reads, the changelog records carry the
// write times, and the sweep deletes exactly the expired entries with stamped tombstones, in
// steps of its budget, and is not due again before the next entry can expire.
func TestTTLStreamTime(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		for _, coalesce := range []bool{false, true} {
			t.Run(fmt.Sprintf("coalesce=%v", coalesce), func(t *testing.T) {
				proc := fmt.Sprintf("st%v", coalesce)
				task, err := m.OpenTask(proc, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer task.Close()
				log := &timedLog{}
				s, err := task.Open("kv", Options{Backend: b, Coalesce: coalesce, Changelog: log, TTL: TTL{Millis: 100}})
				if err != nil {
					t.Fatal(err)
				}
				if task.SweepDue() {
					t.Fatal("sweep due while the stream time is unknown")
				}
				// Written at stream times 1000 (a1, a2), 1050 (b1) and 1090 (c1).
				task.ObserveTime(1000)
				mustPut(t, s, "a1", "x")
				mustPut(t, s, "a2", "y")
				task.ObserveTime(1050)
				mustPut(t, s, "b1", "z")
				task.ObserveTime(1090)
				mustPut(t, s, "c1", "w")
				if err := s.Delete([]byte("a2")); err != nil {
					t.Fatal(err)
				}
				commit(t, task, 4, "kv")
				want := []string{"a1=x@1000", "a2=y@1000", "b1=z@1050", "c1=w@1090", "a2 deleted@1090"}
				if coalesce { // one write per key, in the order of their first writes
					want = []string{"a1=x@1000", "a2 deleted@1090", "b1=z@1050", "c1=w@1090"}
				}
				if got := log.take(); !slices.Equal(got, want) {
					t.Fatalf("changelog %v, want %v", got, want)
				}
				// At 1099 nothing has expired; at 1100 a1 has (1100-1000 >= 100).
				task.ObserveTime(1099)
				if got := scan(t)(s.Range(nil, nil)); !slices.Equal(got, []string{"a1=x", "b1=z", "c1=w"}) {
					t.Fatalf("range at 1099: %v", got)
				}
				task.ObserveTime(1100)
				if _, ok := mustGet(t, s, "a1"); ok {
					t.Fatal("a1 found at 1100")
				}
				if v, ok := mustGet(t, s, "b1"); !ok || v != "z" {
					t.Fatalf("b1 = %q, %v", v, ok)
				}
				if got := scan(t)(s.Range(nil, nil)); !slices.Equal(got, []string{"b1=z", "c1=w"}) {
					t.Fatalf("range at 1100: %v", got)
				}
				if got := scan(t)(s.Prefix([]byte("a"))); len(got) != 0 {
					t.Fatalf("prefix a at 1100: %v", got)
				}
				// A write renews an entry: b1 rewritten at 1100 lives to 1200.
				mustPut(t, s, "b1", "z2")
				// The sweep examines one entry a step; it deletes a1 only, stamped at 1100.
				sweepCommit(t, task, log, 7, 1, "b1=z2@1100", "a1 deleted@1100")
				// The next pass is due when c1 can expire, at 1190.
				task.ObserveTime(1189)
				if task.SweepDue() {
					t.Fatal("sweep due at 1189")
				}
				task.ObserveTime(1190)
				sweepCommit(t, task, log, 8, 0, "c1 deleted@1190")
				if got := scan(t)(s.Range(nil, nil)); !slices.Equal(got, []string{"b1=z2"}) {
					t.Fatalf("range at 1190: %v", got)
				}
				if b == Pebble {
					v, ok, err := m.ReadCommitted(task.ID(), "kv", []byte("b1"))
					if err != nil || !ok || string(v) != "z2" {
						t.Fatalf("ReadCommitted b1 = %q, %v, %v", v, ok, err)
					}
				}
			})
		}
	})
}

// TestTTLCommittedReads checks that interactive queries hide what expired at the committed
// stream time and strip the write times, on both backends, and that the wall clock counts
// for a wall-clock TTL.
func TestTTLCommittedReads(t *testing.T) {
	for _, b := range []Backend{Pebble, Memory} {
		t.Run(b.String(), func(t *testing.T) {
			clock := &testClock{now: time.UnixMilli(50_000)}
			m := openClockManager(t, t.TempDir(), clock)
			defer m.Close()
			task, _ := m.OpenTask("p", 0)
			st, err := task.Open("st", Options{Backend: b, Changelog: &timedLog{}, TTL: TTL{Millis: 100}})
			if err != nil {
				t.Fatal(err)
			}
			wc, err := task.Open("wc", Options{Backend: b, Changelog: &timedLog{}, TTL: TTL{Millis: 100, Clock: TTLWallClock}})
			if err != nil {
				t.Fatal(err)
			}
			task.ObserveTime(1000)
			mustPut(t, st, "old", "1")
			mustPut(t, wc, "old", "1")
			task.ObserveTime(1060)
			clock.now = time.UnixMilli(50_060)
			mustPut(t, st, "new", "2")
			mustPut(t, wc, "new", "2")
			task.ObserveTime(1100) // "old" of st expires; the wall clock stays at 50_060
			commit(t, task, 1, "st", "wc")
			read := func(store, key string) string {
				t.Helper()
				var (
					v   []byte
					ok  bool
					err error
				)
				if b == Pebble {
					v, ok, err = m.ReadCommitted(task.ID(), store, []byte(key))
				} else {
					v, ok, err = task.Partition(store).ReadCommittedMemory([]byte(key))
				}
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					return "<none>"
				}
				return string(v)
			}
			scanAll := func(store string) []string {
				t.Helper()
				var out []string
				fn := func(k, v []byte) bool { out = append(out, string(k)+"="+string(v)); return true }
				var err error
				if b == Pebble {
					err = m.ScanCommitted(task.ID(), store, nil, nil, fn)
				} else {
					err = task.Partition(store).ScanCommittedMemory(nil, nil, fn)
				}
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			if got := []string{read("st", "old"), read("st", "new"), read("wc", "old")}; !slices.Equal(got, []string{"<none>", "2", "1"}) {
				t.Fatalf("reads at stream time 1100, wall 50_060: %v", got)
			}
			if got := scanAll("st"); !slices.Equal(got, []string{"new=2"}) {
				t.Fatalf("scan st: %v", got)
			}
			clock.now = time.UnixMilli(50_100)
			if got := []string{read("wc", "old"), read("wc", "new")}; !slices.Equal(got, []string{"<none>", "2"}) {
				t.Fatalf("wc reads at wall 50_100: %v", got)
			}
			if got := scanAll("wc"); !slices.Equal(got, []string{"new=2"}) {
				t.Fatalf("scan wc: %v", got)
			}
		})
	}
}

// TestTTLWallClock checks a wall-clock TTL: the stream time does not count, the wall clock
// does, and the sweep deletes with tombstones stamped with the wall clock.
func TestTTLWallClock(t *testing.T) {
	clock := &testClock{now: time.UnixMilli(10_000)}
	m := openClockManager(t, t.TempDir(), clock)
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	log := &timedLog{}
	s, err := task.Open("kv", Options{Changelog: log, TTL: TTL{Millis: 1000, Clock: TTLWallClock}})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "a", "1") // before any record: the wall clock stamps it
	clock.now = time.UnixMilli(10_500)
	mustPut(t, s, "b", "2")
	task.ObserveTime(1 << 40) // stream time far ahead: nothing expires by it
	commit(t, task, 1, "kv")
	if got := log.take(); !slices.Equal(got, []string{"a=1@10000", "b=2@10500"}) {
		t.Fatalf("changelog %v", got)
	}
	if task.SweepDue() {
		if got := sweep(t, task, 0); len(got) != 0 {
			t.Fatalf("sweep at 10_500 deleted %v", got)
		}
	}
	clock.now = time.UnixMilli(11_000)
	if got := scan(t)(s.Range(nil, nil)); !slices.Equal(got, []string{"b=2"}) {
		t.Fatalf("range at 11_000: %v", got)
	}
	sweepCommit(t, task, log, 2, 0, "a deleted@11000")
}

// TestTTLRestore checks that a restore, batch by batch and through a Loader, gives each entry
// its record's timestamp as its write time (the producer's; a LogAppendTime record's counts
// from the restore), raises the stream time of a stream-time store to the records' timestamps,
// and leaves the expired entries invisible and for the sweep to delete.
func TestTTLRestore(t *testing.T) {
	ws := []Write{
		{Key: []byte("a"), Value: []byte("1"), Timestamp: 1000, Offset: 0},
		{Key: []byte("b"), Value: []byte("2"), Timestamp: 1040, Offset: 1},
		{Key: []byte("c"), Value: []byte("3"), Timestamp: 1020, Offset: 2},
		{Key: []byte("c"), Delete: true, Timestamp: 1050, Offset: 3},
		{Key: []byte("d"), Value: []byte("4"), Timestamp: -1, Offset: 4}, // LogAppendTime
		{Key: []byte("e"), Value: []byte("5"), Timestamp: 1130, Offset: 5},
	}
	for _, how := range []string{"pebble-batches", "pebble-loader", "memory"} {
		t.Run(how, func(t *testing.T) {
			m := openManager(t, t.TempDir())
			defer m.Close()
			task, _ := m.OpenTask("p", 0)
			defer task.Close()
			b := Pebble
			if how == "memory" {
				b = Memory
			}
			log := &timedLog{}
			s, err := task.Open("kv", Options{Backend: b, Changelog: log, TTL: TTL{Millis: 100}})
			if err != nil {
				t.Fatal(err)
			}
			p := task.Partition("kv")
			cp := Checkpoint{Offset: 5}
			if how == "pebble-loader" {
				l, err := p.NewLoader()
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Add(slices.Clone(ws), cp); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Finish(); err != nil {
					t.Fatal(err)
				}
			} else if err := p.ApplyRestore(slices.Clone(ws), cp); err != nil {
				t.Fatal(err)
			}
			if task.StreamTime() != 1130 {
				t.Fatalf("stream time %d after the restore, want 1130", task.StreamTime())
			}
			// At 1130: a (1000) has expired; b (1040), d (the restore's 1130) and e live.
			if got := scan(t)(s.Range(nil, nil)); !slices.Equal(got, []string{"b=2", "d=4", "e=5"}) {
				t.Fatalf("range after the restore: %v", got)
			}
			sweepCommit(t, task, log, 6, 0, "a deleted@1130")
			if b == Pebble {
				var got []string
				if err := m.ScanCommitted(task.ID(), "kv", nil, nil, func(k, v []byte) bool {
					got = append(got, string(k)+"="+string(v))
					return true
				}); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, []string{"b=2", "d=4", "e=5"}) {
					t.Fatalf("committed scan: %v", got)
				}
			}
		})
	}
}

// TestTTLLayoutChange checks what happens to the local data of a Pebble store whose TTL is
// added or removed: a logged store's data and checkpoint are dropped, for its restore to
// rebuild them in the new form; an unlogged store's values are rewritten in place; a TTL that
// only changes its duration keeps the write times. A window store's data stays refused as a
// key-value store's, with or without a TTL.
func TestTTLLayoutChange(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, dir)
	defer func() { m.Close() }()
	reopen := func() {
		t.Helper()
		m.Close()
		m = openManager(t, dir)
	}
	open := func(name string, o Options) (*Task, Store) {
		t.Helper()
		task, err := m.OpenTask("p", 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := task.Open(name, o)
		if err != nil {
			t.Fatal(err)
		}
		return task, s
	}
	ttl := TTL{Millis: 100}
	// Plain, with data, committed at stream time 5000.
	for _, name := range []string{"logged", "unlogged"} {
		o := Options{}
		if name == "logged" {
			o.Changelog = &recordingLog{}
		}
		task, s := open(name, o)
		task.ObserveTime(5000)
		mustPut(t, s, "k", "v")
		commit(t, task, 9, name)
		task.Close()
	}
	reopen()
	// The TTL is added.
	task, s := open("logged", Options{Changelog: &timedLog{}, TTL: ttl})
	if has, _ := task.Partition("logged").HasData(); has {
		t.Fatal("the logged store kept its data when its TTL was added")
	}
	if _, ok, _ := task.Partition("logged").Checkpoint(); ok {
		t.Fatal("the logged store kept its checkpoint when its TTL was added")
	}
	task.Close()
	task, s = open("unlogged", Options{TTL: ttl})
	if v, ok := mustGet(t, s, "k"); !ok || v != "v" {
		t.Fatalf("unlogged k = %q, %v after the TTL was added", v, ok)
	}
	task.ObserveTime(5099)
	if _, ok := mustGet(t, s, "k"); !ok {
		t.Fatal("unlogged k expired at 5099, written at the stored stream time 5000")
	}
	task.ObserveTime(5100)
	if _, ok := mustGet(t, s, "k"); ok {
		t.Fatal("unlogged k lives at 5100")
	}
	task.Close()
	// The TTL changes: the write times stay.
	task, s = open("unlogged", Options{TTL: TTL{Millis: 1000}})
	task.ObserveTime(5100)
	if v, ok := mustGet(t, s, "k"); !ok || v != "v" {
		t.Fatalf("unlogged k = %q, %v with a TTL of 1000 at 5100", v, ok)
	}
	task.Close()
	// The TTL is removed.
	task, s = open("unlogged", Options{})
	if v, ok := mustGet(t, s, "k"); !ok || v != "v" {
		t.Fatalf("unlogged k = %q, %v after the TTL was removed", v, ok)
	}
	task.Close()
	task, s = open("logged", Options{Changelog: &timedLog{}, TTL: ttl})
	task.ObserveTime(6000)
	mustPut(t, s, "k2", "v2")
	commit(t, task, 11, "logged")
	task.Close()
	task, _ = open("logged", Options{Changelog: &recordingLog{}})
	if has, _ := task.Partition("logged").HasData(); has {
		t.Fatal("the logged store kept its data when its TTL was removed")
	}
	task.Close()
	// A window store's data is not a key-value store's, with a TTL or not.
	task, _ = m.OpenTask("p", 0)
	if _, err := task.OpenWindow("w", Options{Kind: Window, Window: WindowSpec{Size: 10}}); err != nil {
		t.Fatal(err)
	}
	task.Close()
	task, _ = m.OpenTask("p", 0)
	if _, err := task.Open("w", Options{TTL: ttl}); err == nil || !strings.Contains(err.Error(), "window store") {
		t.Fatalf("a window store opened as a key-value store with a TTL: %v", err)
	}
	task.Close()
}

// TestTTLRefused checks the options a TTL cannot go with.
func TestTTLRefused(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task, _ := m.OpenTask("p", 0)
	defer task.Close()
	for _, c := range []struct {
		name, want string
		open       func() error
	}{
		{"window", "window stores have no TTL", func() error {
			_, err := task.OpenWindow("w", Options{Kind: Window, Window: WindowSpec{Size: 10}, TTL: TTL{Millis: 5}})
			return err
		}},
		{"untimed changelog", "needs a changelog that takes timestamps", func() error {
			_, err := task.Open("u", Options{Changelog: &recordingLog{}, TTL: TTL{Millis: 5}})
			return err
		}},
		{"negative", "negative", func() error {
			_, err := task.Open("n", Options{TTL: TTL{Millis: -5}})
			return err
		}},
	} {
		if err := c.open(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
