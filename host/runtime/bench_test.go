package runtime

import (
	"fmt"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/wordgen"
)

// BenchmarkWordCount runs the two-processor word count over b.N sentences (3 to 7 words
// each), with synced and unsynced commits, and reports sentences per second from the moment
// the tasks run to the last count in the output topic (produce time included).
// Compare the two in one run:
//
//	go test ./host/runtime -run '^$' -bench WordCount -benchtime 20000x
func BenchmarkWordCount(b *testing.B) {
	for _, sync := range []bool{true, false} {
		b.Run(fmt.Sprintf("sync=%t", sync), func(b *testing.B) {
			brokers := cluster(b)
			src := fmt.Sprintf(wordcountHCL, "pebble", true)
			cfg := loadConfig(b, b.TempDir(), src)
			lines, ref := wordgen.Sentences(b.N, 9)
			cl, _ := client(b, brokers)
			in := start(b, cfg, brokers, func(o *Options) { o.NoSyncCommits = !sync })
			waitFor(b, 60*time.Second, "the tasks to run", func() bool { return running(in.rt) == 7 })
			want := wordgen.Strings(ref)
			b.ResetTimer()
			begin := time.Now()
			produce(b, cl, "sentences", lines...)
			waitCounts(b, brokers, "word-counts", want)
			b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "sentences/s")
			b.StopTimer()
			if err := in.stop(b); err != nil {
				b.Fatal(err)
			}
		})
	}
}
