package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/statehost/statehost/store"
)

// Benchmarks report ratios measured in the same run:
//
//	go test ./host/engine -run '^$' -bench . -benchtime 2s
//
// BenchmarkStateOp: ns per state_get / state_put called from a guest (C and Go SDK), with
// and without the time limit, and x-go-direct, the ratio to the same store operation
// (the store package's memory backend)
// called from Go in the same run.
// BenchmarkWordCount: records/s per instance for count (Go and C) and tokenize.
// BenchmarkWindowCount: records/s of windowcount over a window store, and its ratio to count.
// BenchmarkTimeLimit: the cost of Config.BatchTimeout (termination checks + a deadline per
// call) against no limit, on a compute loop and on count.

func BenchmarkStateOp(b *testing.B) {
	for _, op := range []string{"get", "put"} {
		for _, guest := range []string{"probe", "goprobe"} {
			for _, limit := range []struct {
				name    string
				timeout time.Duration
			}{{"limit", DefaultBatchTimeout}, {"nolimit", -1}} {
				b.Run(op+"/"+guest+"/"+limit.name, func(b *testing.B) {
					e, _ := testEngine(b, Config{BatchTimeout: limit.timeout})
					r := newRig(b, "s")
					_ = r.stores["s"].Put([]byte("key"), []byte("value"))
					in := instantiate(b, e, guest, r.task(guest, "out"))
					batch := recs(fmt.Sprintf("%s %d", op, b.N))
					b.ResetTimer()
					if err := in.ProcessBatch(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					guestNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					b.ReportMetric(guestNs/directNs(r.stores["s"], op, b.N), "x-go-direct")
				})
			}
		}
	}
}

var benchSink int

// directNs returns the ns per operation of op called on s from Go, n times.
func directNs(s Store, op string, n int) float64 {
	key, value := []byte("key"), []byte("value")
	start := time.Now()
	for range n {
		if op == "get" {
			v, _, _ := s.Get(key)
			benchSink += len(v)
		} else {
			_ = s.Put(key, value)
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// wordBatches returns batches of word records drawn from a Zipf distribution over vocab
// words, as tokenize emits them.
func wordBatches(nBatches, size, vocab int) [][]Record {
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(vocab-1))
	out := make([][]Record, nBatches)
	off := int64(0)
	for i := range out {
		out[i] = make([]Record, size)
		for j := range out[i] {
			out[i][j] = Record{Topic: "words", Offset: off, Timestamp: time.UnixMilli(off),
				Key: fmt.Appendf(nil, "word%d", zipf.Uint64()), Value: []byte("1")}
			off++
		}
	}
	return out
}

// lineBatches returns batches of ten-word lines for tokenize.
func lineBatches(nBatches, size int) [][]Record {
	words := wordBatches(nBatches*10, size, 1000)
	out := make([][]Record, nBatches)
	for i := range out {
		out[i] = make([]Record, size)
		for j := range out[i] {
			var line []byte
			for w := range 10 {
				line = append(append(line, words[i*10+w][j].Key...), ' ')
			}
			out[i][j] = Record{Topic: "lines", Offset: int64(i*size + j), Value: line}
		}
	}
	return out
}

// discard is an Emitter that drops records, as a producer's buffer would take them.
type discard struct{ n int }

func (d *discard) Emit(context.Context, OutputRecord) error { d.n++; return nil }

// benchTask is a task whose emitted records are discarded, and its rig.
func benchTask(b *testing.B, processor string, stores ...string) (Task, *rig) {
	r := newRig(b, stores...)
	t := r.task(processor, "out")
	t.Emitter = &discard{}
	return t, r
}

// runBatches feeds batches round-robin to in, b.N records in all, applies the task's
// writes every ten batches as a commit would (the store is not logged), and reports
// records/s.
func runBatches(b *testing.B, in *Instance, r *rig, batches [][]Record) {
	b.ResetTimer()
	done := 0
	for i := 0; done < b.N; i++ {
		batch := batches[i%len(batches)]
		if err := in.ProcessBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		done += len(batch)
		if i%10 == 9 {
			if err := r.st.Apply(nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

func BenchmarkWordCount(b *testing.B) {
	const batchSize = 500
	words := wordBatches(20, batchSize, 1000)
	for _, guest := range []string{"count", "count_c"} {
		b.Run(guest, func(b *testing.B) {
			e, _ := testEngine(b, Config{})
			task, r := benchTask(b, guest, "counts")
			runBatches(b, instantiate(b, e, guest, task), r, words)
		})
	}
	b.Run("tokenize", func(b *testing.B) {
		e, _ := testEngine(b, Config{})
		task, r := benchTask(b, "tokenize")
		runBatches(b, instantiate(b, e, "tokenize", task), r, lineBatches(4, batchSize))
	})
}

func BenchmarkTimeLimit(b *testing.B) {
	for _, limit := range []struct {
		name    string
		timeout time.Duration
	}{{"limit", DefaultBatchTimeout}, {"nolimit", -1}} {
		b.Run("spin/"+limit.name, func(b *testing.B) {
			e, _ := testEngine(b, Config{BatchTimeout: limit.timeout})
			task, _ := benchTask(b, "probe")
			in := instantiate(b, e, "probe", task)
			batch := recs("spin 100000")
			b.ResetTimer()
			for range b.N {
				if err := in.ProcessBatch(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, guest := range []string{"count", "count_c"} {
			b.Run(guest+"/"+limit.name, func(b *testing.B) {
				e, _ := testEngine(b, Config{BatchTimeout: limit.timeout})
				task, r := benchTask(b, guest, "counts")
				runBatches(b, instantiate(b, e, guest, task), r, wordBatches(20, 500, 1000))
			})
		}
	}
}

// BenchmarkWindowCount: records/s of plugins/windowcount over a Pebble window store
// (hopping windows of 10s every 5s: two windows per record, 1ms of stream time per record, a
// stream-time punctuation after each batch emitting and deleting the closed windows), and
// x-count, its rate against plugins/count over a key-value store on the same records in the
// same run.
func BenchmarkWindowCount(b *testing.B) {
	const batchSize = 500
	batches := wordBatches(20, batchSize, 1000)
	rate := func(b *testing.B, guest string, n int) float64 {
		e, _ := testEngine(b, Config{})
		r := newRig(b)
		task := r.task(guest, "out")
		task.Emitter = &discard{}
		if guest == "count" {
			kv, err := r.st.Open("counts", store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			task.Stores = map[string]Store{"counts": kv}
		} else {
			w, err := r.st.OpenWindow("windows", store.Options{Kind: store.Window, Window: store.WindowSpec{Size: 10_000, Advance: 5_000}})
			if err != nil {
				b.Fatal(err)
			}
			task.Windows, task.Clock = map[string]store.WindowStore{"windows": w}, r.st
		}
		in := instantiate(b, e, guest, task)
		ctx := context.Background()
		start := time.Now()
		ts := int64(1_700_000_000_000)
		for i, done := 0, 0; done < n; i++ {
			batch := batches[i%len(batches)]
			for j := range batch {
				batch[j].Timestamp = time.UnixMilli(ts)
				ts++
			}
			if err := in.ProcessBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			if _, err := in.Punctuate(ctx); err != nil {
				b.Fatal(err)
			}
			done += len(batch)
			if i%10 == 9 {
				if err := r.st.Apply(nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		return float64(n) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	windows := rate(b, "windowcount", b.N)
	b.StopTimer()
	count := rate(b, "count", b.N)
	b.ReportMetric(windows, "records/s")
	b.ReportMetric(windows/count, "x-count")
	b.ReportMetric(0, "ns/op")
}
