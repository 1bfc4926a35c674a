//go:build unix

package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCount is the keyed count of bench/ without Kafka and the guest: 8 tasks (one per
// input partition) of one instance with default settings, each with a logged Pebble store;
// every op reads a word's count and writes it back incremented, and every task commits after
// each 10,000 records of its own (about one commit interval of the bench). Words are drawn
// from 1,000,000, uniformly or Zipf(1.1), as in bench/workload.go. In the "preloaded" case
// the stores first hold 2,000,000 words, compacted (to the last level, as a long-running
// instance's state mostly is), and the op's words are drawn uniformly from 4,000,000: half
// are found there. The "restarted" case is "preloaded" after a restart of the instance: the
// Manager is closed and opened again on the same directory before the ops (the key filters
// are then built from the stores' keys, in the background, while the ops run). Run it with
// a fixed number of records, for instance
//
//	go test ./store -run '^$' -bench BenchmarkCount -benchtime 1000000x
func BenchmarkCount(b *testing.B) {
	b.Run("uniform", func(b *testing.B) { benchCount(b, false, 1000000, 0, false) })
	b.Run("zipf", func(b *testing.B) { benchCount(b, true, 1000000, 0, false) })
	b.Run("preloaded", func(b *testing.B) { benchCount(b, false, 4000000, 2000000, false) })
	b.Run("restarted", func(b *testing.B) { benchCount(b, false, 4000000, 2000000, true) })
}

func benchCount(b *testing.B, zipf bool, words, preload int, restart bool) {
	const (
		parts    = 8
		interval = 10000
	)
	dir := b.TempDir()
	var (
		m      *Manager
		err    error
		tasks  = make([]*Task, parts)
		stores = make([]Store, parts)
	)
	open := func() {
		if m, err = Open(Settings{Dir: dir}); err != nil {
			b.Fatal(err)
		}
		for p := range parts {
			if tasks[p], err = m.OpenTask("count", int32(p)); err != nil {
				b.Fatal(err)
			}
			if stores[p], err = tasks[p].Open("counts", Options{Changelog: discardLog{}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	open()
	defer func() { m.Close() }()
	pending := make([]int, parts)
	word := func(k uint64) []byte {
		x := uint32(k)*2654435761 + 0x9e3779b9
		return []byte("w" + strconv.FormatUint(uint64(x), 36))
	}
	partOf := func(k []byte) uint32 {
		h := fnv.New32a()
		h.Write(k)
		return h.Sum32() % parts
	}
	if preload > 0 {
		ws := make([][]Write, parts)
		for k := range preload {
			w := word(uint64(k))
			p := partOf(w)
			ws[p] = append(ws[p], Write{Key: w, Value: []byte("1")})
			if len(ws[p]) == interval {
				if err := tasks[p].Partition("counts").ApplyRestore(ws[p], Checkpoint{Offset: int64(k)}); err != nil {
					b.Fatal(err)
				}
				ws[p] = ws[p][:0]
			}
		}
		for p := range parts {
			if err := tasks[p].Partition("counts").ApplyRestore(ws[p], Checkpoint{Offset: int64(preload)}); err != nil {
				b.Fatal(err)
			}
		}
		if err := m.db.Compact(context.Background(), []byte{nsData}, []byte{nsData + 1}, true); err != nil {
			b.Fatal(err)
		}
	}
	if restart {
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		open()
	}
	r := rand.New(rand.NewSource(1))
	z := rand.NewZipf(r, 1.1, 1, uint64(words-1))
	keys := make([][]byte, b.N)
	for i := range keys {
		if zipf {
			keys[i] = word(z.Uint64())
		} else {
			keys[i] = word(uint64(r.Intn(words)))
		}
	}
	var num []byte
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for _, k := range keys {
		p := partOf(k)
		s := stores[p]
		v, found, err := s.Get(k)
		if err != nil {
			b.Fatal(err)
		}
		n := uint64(0)
		if found {
			if n, err = strconv.ParseUint(string(v), 10, 64); err != nil {
				b.Fatal(err)
			}
		}
		num = strconv.AppendUint(num[:0], n+1, 10)
		if err := s.Put(k, num); err != nil {
			b.Fatal(err)
		}
		if pending[p]++; pending[p] == interval {
			if err := tasks[p].Apply(map[string]int64{"counts": 1}); err != nil {
				b.Fatal(err)
			}
			pending[p] = 0
		}
	}
	// Pebble's flushes and compactions run on other goroutines: the process's CPU time per
	// record counts them, as the bench's CPU µs/record does.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.StopTimer()
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSortedBatch measures sortedBatch on a commit interval's writes of one task of the
// bench's count: 34,000 writes (270,000 records/s over 8 tasks) of words drawn Zipf(1.1) or
// uniformly from 1,000,000.
//
//	go test ./store -run '^$' -bench SortedBatch
func BenchmarkSortedBatch(b *testing.B) {
	for _, zipf := range []bool{true, false} {
		b.Run(map[bool]string{true: "zipf", false: "uniform"}[zipf], func(b *testing.B) {
			m := openManagerDefault(b, b.TempDir())
			defer m.Close()
			task, _ := m.OpenTask("p", 0)
			_, _ = task.Open("s", Options{})
			p := task.Partition("s")
			r := rand.New(rand.NewSource(1))
			z := rand.NewZipf(r, 1.1, 1, 999_999)
			batch := m.db.NewBatch()
			defer batch.Close()
			for range 34_000 {
				k := uint64(r.Intn(1_000_000))
				if zipf {
					k = z.Uint64()
				}
				_ = batch.Set(p.key(fmt.Appendf(nil, "w%x", uint32(k)*2654435761)), []byte("12345"), nil)
			}
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				sb := task.sortedBatch(batch)
				if sb == nil {
					b.Fatal("the batch was not sorted")
				}
				sb.Close()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
