package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkJobGoroutines runs count over 256 partitions with 2 workers, 64 records each
// produced at once, and reports the most goroutines seen (sampled every millisecond) while the
// records are processed, above the count before they came: the jobs waiting for a worker.
//
//	go test ./host/runtime -run '^$' -bench JobGoroutines -benchtime 1x
func BenchmarkJobGoroutines(b *testing.B) {
	const partitions, perPartition = 256, 64
	for range b.N {
		brokers, in := startCountTasks(b, partitions, func(o *Options) { o.NoWatch, o.Workers = true, 2 })
		time.Sleep(time.Second)
		base := goruntime.NumGoroutine()
		peak := base
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					peak = max(peak, goruntime.NumGoroutine())
				}
			}
		}()
		cl, adm := client(b, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for i := range perPartition {
				recs = append(recs, &kgo.Record{Topic: "words", Partition: p, Key: fmt.Appendf(nil, "w%d", i%16), Value: []byte("1")})
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		waitFor(b, 120*time.Second, "every record committed", func() bool { return committedSum(b, adm, "deploy", "words") == partitions*perPartition })
		close(stop)
		<-sampled
		b.ReportMetric(float64(peak-base), "goroutines-peak")
		if err := in.stop(b); err != nil {
			b.Fatal(err)
		}
	}
}
