package runtime

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/topictest"
)

// BenchmarkMigration measures the rate of a store migration: the word count under exactly-once
// counts 60,000 distinct words with count (20,000 entries in each of its 3 store partitions),
// then countjson is deployed over it, which migrates every count to JSON, one task after the
// other. Run it with
//
//	go test ./host/runtime -run '^$' -bench Migration -benchtime 1x
//
// It reports entries per second:
//
//   - job-entries/s: over the migration jobs, from each task's migration_started to its
//     migration_done (its old entries read, the module's statehost_migrate calls, the new
//     entries written to the store's batch and handed to the producer);
//   - switched-entries/s: from the first migration_started until every task runs countjson (the
//     jobs, and the commits of the new entries and the switches at the commit boundaries);
//   - deploy-entries/s: over the whole Deploy (the module's compilation and trial, the trial
//     migrations over every task's committed entries, and the above).
func BenchmarkMigration(b *testing.B) {
	v2, err := os.ReadFile(modules["countjson"])
	if err != nil {
		b.Fatal(err)
	}
	const words = 60_000
	lines := make([]string, words/10)
	for i := range lines {
		w := make([]string, 10)
		for j := range w {
			w[j] = fmt.Sprintf("w%06d", i*10+j)
		}
		lines[i] = strings.Join(w, " ")
	}
	var jobs, switching, deploying time.Duration
	var entries int64
	for range b.N {
		b.StopTimer()
		brokers := cluster(b)
		rec := &eventRecorder{}
		in := start(b, loadConfig(b, b.TempDir(), eosHCL()), brokers, func(o *Options) { o.OnEvent = rec.add })
		cl, _ := client(b, brokers)
		produce(b, cl, "sentences", lines...)
		waitFor(b, 120*time.Second, "every word counted", func() bool {
			n, _ := topictest.LatestCommitted(b, brokers, "wc-counts-changelog")
			return len(n) == words
		})
		b.StartTimer()
		t0 := time.Now()
		if _, err := in.rt.Deploy(context.Background(), "count", "bench", v2); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		deploying += t1.Sub(t0)
		b.StopTimer()
		began := map[int32]time.Time{}
		var first time.Time
		for _, ev := range rec.all() {
			switch ev.Kind {
			case EventMigrationStarted:
				began[ev.Partition] = ev.Time
				if first.IsZero() {
					first = ev.Time
				}
			case EventMigrationDone:
				jobs += ev.Time.Sub(began[ev.Partition])
				entries += ev.Records
			}
		}
		switching += t1.Sub(first)
		if err := in.stop(b); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(entries)/jobs.Seconds(), "job-entries/s")
	b.ReportMetric(float64(entries)/switching.Seconds(), "switched-entries/s")
	b.ReportMetric(float64(entries)/deploying.Seconds(), "deploy-entries/s")
	b.ReportMetric(0, "ns/op")
}
