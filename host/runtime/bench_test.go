package runtime

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

// BenchmarkGuarantee runs the word count over b.N sentences under at_least_once and
// exactly_once, each with commit_interval 100ms and 1s, and reports sentences per second from
// the first produce to the last count read (read_committed) from the output topic. Under
// exactly-once each of the two stages makes its output visible only when its transaction
// commits, which adds about two commit intervals to the run: use enough sentences for that to
// be small. Compare them in one run:
//
//	go test ./host/runtime -run '^$' -bench Guarantee -benchtime 200000x
func BenchmarkGuarantee(b *testing.B) {
	for _, guarantee := range []string{"at_least_once", "exactly_once"} {
		for _, interval := range []string{"100ms", "1s"} {
			b.Run(fmt.Sprintf("%s/commit=%s", guarantee, interval), func(b *testing.B) {
				brokers := cluster(b)
				src := strings.Replace(fmt.Sprintf(wordcountHCL, "pebble", true), `commit_interval = "200ms"`,
					fmt.Sprintf("commit_interval = %q\nprocessing_guarantee = %q", interval, guarantee), 1)
				cfg := loadConfig(b, b.TempDir(), src)
				lines, ref := wordgen.Sentences(b.N, 9)
				cl, _ := client(b, brokers)
				in := start(b, cfg, brokers)
				waitFor(b, 60*time.Second, "the tasks to run", func() bool { return running(in.rt) == 7 })
				want := wordgen.Strings(ref)
				follow := followCounts(b, brokers, "word-counts", want)
				b.ResetTimer()
				begin := time.Now()
				produce(b, cl, "sentences", lines...)
				<-follow
				b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "sentences/s")
				b.StopTimer()
				if err := in.stop(b); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// followCounts reads topic (read_committed) from its start in the background, and closes the
// returned channel once the last value of every key of want equals want's.
func followCounts(b *testing.B, brokers []string, topic string, want map[string]string) <-chan struct{} {
	cl, _ := client(b, brokers, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		got := make(map[string]string, len(want))
		equal := 0
		for equal < len(want) {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				b.Errorf("%s: %d of %d counts reached before the deadline", topic, equal, len(want))
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				k := string(r.Key)
				w, ok := want[k]
				if !ok {
					return
				}
				was := got[k] == w
				got[k] = string(r.Value)
				if now := got[k] == w; now != was {
					if now {
						equal++
					} else {
						equal--
					}
				}
			})
		}
	}()
	return done
}

// BenchmarkSwitchPause deploys count and countv2 in turn, b.N times, into the word count
// under exactly-once while sentences arrive continuously, and reports the processing pause
// of a task during a switch: the loop switches the tasks of a commit boundary together
// (their new instances start in parallel, then the old ones close), and every task of that
// round waits for the whole round. p50 and p99 over every task switch, in microseconds, and the
// deploy time (validation and trial included, until every task switched) p50.
//
//	go test ./host/runtime -run '^$' -bench SwitchPause -benchtime 20x
func BenchmarkSwitchPause(b *testing.B) {
	brokers := cluster(b)
	in := start(b, loadConfig(b, b.TempDir(), eosHCL()), brokers)
	cl, _ := client(b, brokers)
	var versions [2][]byte
	for i, name := range []string{"count", "countv2"} {
		wasm, err := os.ReadFile(modules[name])
		if err != nil {
			b.Fatal(err)
		}
		versions[i] = wasm
	}
	waitFor(b, 60*time.Second, "the tasks to run", func() bool { return running(in.rt) == 7 })
	stopFeed := produceContinuously(b, cl, 50, 20*time.Millisecond)
	var deploys []time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := in.rt.Deploy(context.Background(), "count", "bench", versions[(i+1)%2]); err != nil {
			b.Fatal(err)
		}
		deploys = append(deploys, time.Since(t0))
	}
	b.StopTimer()
	stopFeed()
	pauses := in.rt.SwitchPauses()
	b.ReportMetric(float64(percentile(pauses, 50).Microseconds()), "pause-p50-µs")
	b.ReportMetric(float64(percentile(pauses, 99).Microseconds()), "pause-p99-µs")
	b.ReportMetric(float64(percentile(deploys, 50).Milliseconds()), "deploy-p50-ms")
	b.ReportMetric(0, "ns/op")
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}
