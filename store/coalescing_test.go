package store

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
)

// recordingLog is the changelog of a logged store that keeps what it is given, in order.
type recordingLog struct{ writes []string }

func (l *recordingLog) LogPut(key, value []byte) error {
	l.writes = append(l.writes, string(key)+"="+string(value))
	return nil
}

func (l *recordingLog) LogDelete(key []byte) error {
	l.writes = append(l.writes, string(key)+" deleted")
	return nil
}

// TestCoalescingMatchesModel runs random writes, reads and scans on a coalescing store over
// several commit intervals, on both backends, against a model: every read and scan must see
// the interval's last writes over the committed state, and each flush must log each written
// key once, in the order of the key's first write in the interval, with its last write.
// Some intervals open no iterator, others open them before, among or after their writes (the
// ordered copy is built then and kept up to date).
func TestCoalescingMatchesModel(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task, _ := m.OpenTask("p", 0)
		log := &recordingLog{}
		s, err := task.Open("s", Options{Backend: b, Coalesce: true, Changelog: log})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewSource(4))
		committed := map[string]string{}
		for interval := range 8 {
			pending := map[string]*string{} // nil: deleted
			var first []string              // pending's keys, in the order they were first written
			scanEvery := []int{0, 1, 50, 700}[interval%4]
			for op := range 1500 {
				k := fmt.Sprintf("k%03d", r.Intn(300))
				if _, ok := pending[k]; !ok {
					first = append(first, k)
				}
				switch {
				case r.Intn(6) == 0:
					if err := s.Delete([]byte(k)); err != nil {
						t.Fatal(err)
					}
					pending[k] = nil
				default:
					v := fmt.Sprintf("i%d-%d", interval, op)
					mustPut(t, s, k, v)
					pending[k] = &v
				}
				state := maps.Clone(committed)
				for pk, pv := range pending {
					if pv == nil {
						delete(state, pk)
					} else {
						state[pk] = *pv
					}
				}
				g := fmt.Sprintf("k%03d", r.Intn(300))
				if v, ok := mustGet(t, s, g); ok != hasKey(state, g) || v != state[g] {
					t.Fatalf("interval %d op %d: get %s = %q %v, want %q %v", interval, op, g, v, ok, state[g], hasKey(state, g))
				}
				if scanEvery > 0 && op%scanEvery == 0 {
					lo, hi := fmt.Sprintf("k%03d", r.Intn(300)), fmt.Sprintf("k%03d", r.Intn(300))
					var want []string
					for _, sk := range slices.Sorted(maps.Keys(state)) {
						if sk >= lo && sk < hi {
							want = append(want, sk+"="+state[sk])
						}
					}
					if got := scan(t)(s.Range([]byte(lo), []byte(hi))); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("interval %d op %d: range [%s,%s) = %v, want %v", interval, op, lo, hi, got, want)
					}
				}
			}
			log.writes = nil
			if err := task.Flush(); err != nil {
				t.Fatal(err)
			}
			var wantLog []string
			for _, k := range first {
				if v := pending[k]; v == nil {
					wantLog = append(wantLog, k+" deleted")
					delete(committed, k)
				} else {
					wantLog = append(wantLog, k+"="+*v)
					committed[k] = *v
				}
			}
			if fmt.Sprint(log.writes) != fmt.Sprint(wantLog) {
				t.Fatalf("interval %d: the flush logged %d writes, want %d in the order of their keys' first writes:\n got %v\nwant %v",
					interval, len(log.writes), len(wantLog), log.writes, wantLog)
			}
			if err := task.Apply(nil); err != nil {
				t.Fatal(err)
			}
			if n := task.UncommittedBytes(); n != 0 {
				t.Fatalf("interval %d: %d uncommitted bytes after the commit", interval, n)
			}
			var want []string
			for _, k := range slices.Sorted(maps.Keys(committed)) {
				want = append(want, k+"="+committed[k])
			}
			if got := scan(t)(s.Range(nil, nil)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("interval %d: committed state %v, want %v", interval, got, want)
			}
		}
	})
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
