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
