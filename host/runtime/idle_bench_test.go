package runtime

import (
	"bytes"
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkIdleTaskHeap runs count over 256 partitions, 64 records of 1 KiB values each, and
// reports the live heap per task once every record is committed and the tasks are idle,
// above the heap of the same runtime before the records came (the broker's copy of the
// records, 64 KiB a partition, is in both: kfake runs in the process). What an idle task
// keeps of its last batch and commit shows here: its records (and the fetch buffers their
// keys and values point into) and its store's write batch.
//
//	go test ./host/runtime -run '^$' -bench IdleTaskHeap -benchtime 1x
func BenchmarkIdleTaskHeap(b *testing.B) {
	const partitions, perPartition = 256, 64
	for range b.N {
		brokers, in := startCountTasks(b, partitions, func(o *Options) { o.NoWatch = true })
		cl, adm := client(b, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		committedSum(b, adm, "deploy", "words") // the client's connections, before the baseline
		time.Sleep(time.Second)
		before := liveHeap()

		value := bytes.Repeat([]byte("v"), 1024)
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for i := range perPartition {
				recs = append(recs, &kgo.Record{Topic: "words", Partition: p, Key: fmt.Appendf(nil, "w%d", i%16), Value: value})
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		recs = nil
		waitFor(b, 120*time.Second, "every record committed", func() bool { return committedSum(b, adm, "deploy", "words") == partitions*perPartition })
		time.Sleep(time.Second) // a few commit intervals: the tasks are idle
		after := liveHeap()
		b.ReportMetric(float64(after-before)/partitions, "heap-B/idle-task")
		if err := in.stop(b); err != nil {
			b.Fatal(err)
		}
	}
}

// committedSum returns the sum of the group's committed offsets of topic, through adm (one
// client for the whole wait: a client per poll would add its goroutines and heap).
func committedSum(b *testing.B, adm *kadm.Client, group, topic string) int64 {
	resp, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		b.Fatal(err)
	}
	n := int64(0)
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			n += o.At
		}
	})
	return n
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// startCountTasks runs count (adminHCL) over partitions partitions of words on a new broker,
// with mods, and waits until every task runs.
func startCountTasks(b *testing.B, partitions int, mods ...func(*Options)) ([]string, *instance) {
	brokers := cluster(b)
	src := strings.Replace(fmt.Sprintf(adminHCL, modules["count"]), "partitions = 2", fmt.Sprintf("partitions = %d", partitions), 1)
	in := start(b, loadConfig(b, b.TempDir(), src), brokers, mods...)
	waitFor(b, 120*time.Second, "the tasks to run", func() bool { return running(in.rt) == partitions })
	return brokers, in
}
