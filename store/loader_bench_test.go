package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkLoader loads a changelog of 250,000 small records (the bench's word counts: keys
// of 8 bytes over a million words, values of up to 7) into an empty partition through a
// Loader, and, in the same run, through ApplyRestore in batches of the same size as the
// baseline; it reports the records per second of both and their ratio (load / batches).
//
//	go test -run '^$' -bench Loader -benchtime 5x ./store/
func BenchmarkLoader(b *testing.B) {
	const records, batch = 250_000, 30_000
	rng := rand.New(rand.NewPCG(1, 2))
	var log [][]Write
	for i := 0; i < records; i += batch {
		ws := make([]Write, 0, batch)
		for j := i; j < min(i+batch, records); j++ {
			ws = append(ws, Write{Key: fmt.Appendf(nil, "w%07d", rng.IntN(1_000_000)), Value: fmt.Appendf(nil, "%d", rng.IntN(1000)), Offset: int64(j)})
		}
		log = append(log, ws)
	}
	m, err := Open(Settings{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	var loadTime, batchTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		task := openLoadTask(b, m, fmt.Sprintf("load%d", i), false)
		t0 := time.Now()
		l, err := task.Partition("s").NewLoader()
		if err != nil {
			b.Fatal(err)
		}
		for _, ws := range log {
			if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.Finish(); err != nil {
			b.Fatal(err)
		}
		loadTime += time.Since(t0)
		task.Close()

		task = openLoadTask(b, m, fmt.Sprintf("batches%d", i), false)
		t0 = time.Now()
		for _, ws := range log {
			if err := task.Partition("s").ApplyRestore(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
				b.Fatal(err)
			}
		}
		batchTime += time.Since(t0)
		task.Close()
	}
	n := float64(records * b.N)
	b.ReportMetric(n/loadTime.Seconds(), "load-rec/s")
	b.ReportMetric(n/batchTime.Seconds(), "batch-rec/s")
	b.ReportMetric(batchTime.Seconds()/loadTime.Seconds(), "load/batches")
}

// BenchmarkLoaderPartitions loads 8 partitions of 250,000 records each at once, as the
// bench's cold restore of 2 million word counts does: two goroutines (a restore's appliers on
// two processors) each add to four loaders in turns, batch by batch, and the runs are written
// in the background. Keys are the bench's uniform words (a million, w%07d) or a skewed draw
// of them (zipf). It reports the records per second and the CPU time per record (user and
// system, of the whole process: the runs' writing counts as much as the adding), which is
// what bounds a restore on a machine whose cores are all busy.
//
//	go test -run '^$' -bench LoaderPartitions -benchtime 5x ./store/
func BenchmarkLoaderPartitions(b *testing.B) {
	const parts, records, batch, appliers = 8, 250_000, 3_000, 2
	for _, dist := range []string{"uniform", "zipf"} {
		b.Run(dist, func(b *testing.B) {
			// Each batch is held as the bytes of its records (a key of 8 bytes, a value's
			// length, the value), as a fetch's records are: 2 million Writes of their own
			// would be a heap for the garbage collector to mark that no restore has.
			rng := rand.New(rand.NewPCG(1, 2))
			zipf := rand.NewZipf(rng, 1.1, 1, 999_999)
			logs := make([][][]byte, parts)
			for p := range logs {
				for i := 0; i < records; i += batch {
					var data []byte
					for range min(batch, records-i) {
						w := rng.IntN(1_000_000)
						if dist == "zipf" {
							w = int(zipf.Uint64())
						}
						v := fmt.Appendf(nil, "%d", rng.IntN(1000))
						data = append(append(fmt.Appendf(data, "w%07d", w), byte(len(v))), v...)
					}
					logs[p] = append(logs[p], data)
				}
			}
			decode := func(ws []Write, data []byte, off int64) []Write {
				for ws = ws[:0]; len(data) > 0; off++ {
					n := int(data[8])
					ws = append(ws, Write{Key: data[:8:8], Value: data[9 : 9+n : 9+n], Offset: off})
					data = data[9+n:]
				}
				return ws
			}
			m, err := Open(Settings{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			var took, cpu time.Duration
			b.ResetTimer()
			for i := range b.N {
				tasks := make([]*Task, parts)
				for p := range tasks {
					tasks[p] = openLoadTask(b, m, fmt.Sprintf("load%d-%d", i, p), false)
				}
				cpu0, t0 := processCPU(), time.Now()
				errs := make(chan error, appliers)
				for a := range appliers {
					go func() {
						var ls []*Loader
						for p := a; p < parts; p += appliers {
							l, err := tasks[p].Partition("s").NewLoader()
							if err != nil {
								errs <- err
								return
							}
							ls = append(ls, l)
						}
						ws := make([]Write, 0, batch)
						for k := range logs[0] {
							for j, l := range ls {
								ws = decode(ws, logs[a+j*appliers][k], int64(k*batch))
								if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
									errs <- err
									return
								}
							}
						}
						for _, l := range ls {
							if _, err := l.Finish(); err != nil {
								errs <- err
								return
							}
						}
						errs <- nil
					}()
				}
				for range appliers {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				took += time.Since(t0)
				cpu += processCPU() - cpu0
				b.StopTimer()
				for _, t := range tasks {
					t.Close()
				}
				waitCompactions(m) // the compactions the loads held back, outside the timing
				b.StartTimer()
			}
			n := float64(parts * records * b.N)
			b.ReportMetric(n/took.Seconds(), "rec/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/rec")
		})
	}
}

// waitCompactions waits until m's Pebble runs no compaction and has none to run.
func waitCompactions(m *Manager) {
	for {
		time.Sleep(50 * time.Millisecond)
		met := m.db.Metrics()
		if met.Compact.NumInProgress == 0 && met.Levels[0].Sublevels <= 1 {
			return
		}
	}
}
