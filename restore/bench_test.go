package restore

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/store"
)

// BenchmarkRestoreVsConsume restores a changelog of benchRecords records into
// Pebble and, in the same run, consumes the same changelog with a plain
// franz-go direct consumer that only counts records; it reports both rates
// and their ratio (restore / consume). b.N is the number of rounds. The
// store uses the default Settings.MemoryBytes (256 MiB).
//
//	go test -run '^$' -bench RestoreVsConsume -benchtime 3x ./restore/
func BenchmarkRestoreVsConsume(b *testing.B) {
	const benchRecords = 200_000
	e := newEnv(b)
	e.mem = store.DefaultMemoryBytes
	topic := changelog.TopicName(app, "kv")
	if err := e.tm.Ensure(ctx, 3, []changelog.TopicSpec{{Store: "kv"}}); err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 100)
	for i := range benchRecords {
		e.cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "key%08d", i%50_000), Value: val}, nil)
	}
	if err := e.cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	var consumeTime, restoreTime time.Duration
	b.ResetTimer()
	for range b.N {
		// Plain consume.
		t0 := time.Now()
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for n < benchRecords {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				b.Fatal(err)
			}
			n += fs.NumRecords()
		}
		cl.Close()
		consumeTime += time.Since(t0)

		// Restore into an empty state directory.
		e.manager(b, b.TempDir())
		task := e.task(b, 0, kv)
		rec := &recorder{}
		r := e.restorer(b, rec, Settings{})
		t0 = time.Now()
		if err := r.Restore(timeout(b), task); err != nil {
			b.Fatal(err)
		}
		restoreTime += time.Since(t0)
		if got := rec.restored(); got != benchRecords {
			b.Fatalf("restored %d", got)
		}
		_ = task.Close(ctx)
	}
	total := float64(benchRecords * b.N)
	consumeRate := total / consumeTime.Seconds()
	restoreRate := total / restoreTime.Seconds()
	b.ReportMetric(consumeRate, "consume-rec/s")
	b.ReportMetric(restoreRate, "restore-rec/s")
	b.ReportMetric(restoreRate/consumeRate, "restore/consume")
}
