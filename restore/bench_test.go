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

// BenchmarkColdRestoreShortChangelogs restores 256 tasks whose changelogs hold 40 records
// each, cold, in one Restore (as a new instance restores the tasks a rebalance gave it): once
// through Loaders (ColdLoadMin 1: each store's one run written as sstables and ingested) and
// once in batches through the memtable (the default for changelogs this short). It reports
// both times per round and how many times faster the batches are.
//
//	go test -run '^$' -bench ColdRestoreShortChangelogs -benchtime 3x ./restore/
func BenchmarkColdRestoreShortChangelogs(b *testing.B) {
	const tasks, records = 256, 40
	e := newEnv(b)
	specs := []changelog.StoreSpec{{Name: "kv"}}
	if err := e.tm.Ensure(ctx, tasks, changelog.TopicSpecs(specs)); err != nil {
		b.Fatal(err)
	}
	topic := changelog.TopicName(app, "kv")
	for p := range int32(tasks) {
		for i := range records {
			e.cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "key%d", i), Value: []byte("1")}, nil)
		}
	}
	if err := e.cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	restoreAll := func(coldLoadMin int64) time.Duration {
		e.manager(b, b.TempDir())
		ts := make([]*changelog.Task, 0, tasks)
		for p := range int32(tasks) {
			task, err := changelog.OpenTask(e.m, e.prod, changelog.TaskConfig{AppID: app, Processor: "proc", Partition: p, Stores: specs})
			if err != nil {
				b.Fatal(err)
			}
			ts = append(ts, task)
		}
		rec := &recorder{}
		r := e.restorer(b, rec, Settings{ColdLoadMin: coldLoadMin})
		t0 := time.Now()
		if err := r.Restore(timeout(b), ts...); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		if got := rec.restored(); got != tasks*records {
			b.Fatalf("restored %d records, want %d", got, tasks*records)
		}
		for _, task := range ts {
			_ = task.Close(ctx)
		}
		return took
	}
	var loads, batches time.Duration
	b.ResetTimer()
	for range b.N {
		loads += restoreAll(1)
		batches += restoreAll(0)
	}
	b.ReportMetric(loads.Seconds()*1000/float64(b.N), "loader-ms")
	b.ReportMetric(batches.Seconds()*1000/float64(b.N), "batches-ms")
	b.ReportMetric(float64(loads)/float64(batches), "batches-speedup")
}
