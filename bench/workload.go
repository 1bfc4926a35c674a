package main

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitions is the partition count of every topic of the benchmark: the input, the outputs
// and the changelogs.
const partitions = 8

// workload is one input stream of pre-tokenized words: a record per word, keyed by the word
// (its value is the word too, as the word count's tokenizer emits it).
type workload struct {
	name  string // "zipf" or "uniform"
	topic string // the input topic, "words-<name>"
	zipf  bool   // Zipf(s=1.1) keys; else uniform
	keys  int    // distinct words to draw from
	n     int    // records

	// counts[i] is how many times word i occurs: the reference of the final state.
	counts []int32
	// distinct is the number of words that occur at least once.
	distinct int
}

// zipfS is the Zipf exponent of the skewed workload: a few hot words, a long tail.
const zipfS = 1.1

// word returns the i-th of the distinct words: "w" and a base-36 scramble of i (a bijection
// on uint32, so distinct i give distinct words), 5 to 8 bytes.
func word(i int) string {
	x := uint32(i)*2654435761 + 0x9e3779b9
	return "w" + strconv.FormatUint(uint64(x), 36)
}

// draw returns the word indices of w's records, the same for the same seed.
func (w *workload) draw(seed int64) []uint32 {
	r := rand.New(rand.NewSource(seed))
	out := make([]uint32, w.n)
	var z *rand.Zipf
	if w.zipf {
		z = rand.NewZipf(r, zipfS, 1, uint64(w.keys-1))
	}
	w.counts = make([]int32, w.keys)
	for i := range out {
		var k uint32
		if z != nil {
			k = uint32(z.Uint64())
		} else {
			k = uint32(r.Intn(w.keys))
		}
		out[i] = k
		if w.counts[k] == 0 {
			w.distinct++
		}
		w.counts[k]++
	}
	return out
}

// produceWorkload creates w's input topic and writes its records, keyed by word with the
// default (murmur2) partitioner, as a Kafka producer would.
func produceWorkload(ctx context.Context, brokers []string, w *workload, seed int64) error {
	adm, cl, err := adminClient(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := createTopics(ctx, adm, nil, w.topic); err != nil {
		return err
	}
	idx := w.draw(seed)
	pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100000))
	if err != nil {
		return fmt.Errorf("bench: producer: %w", err)
	}
	defer pcl.Close()
	var (
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	for _, k := range idx {
		wd := []byte(word(int(k)))
		wg.Add(1)
		pcl.Produce(ctx, &kgo.Record{Topic: w.topic, Key: wd, Value: wd}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return fmt.Errorf("bench: produce %s: %w", w.topic, *p)
	}
	return nil
}

// adminClient returns an admin client on a new plain client.
func adminClient(brokers []string, opts ...kgo.Opt) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: client: %w", err)
	}
	return kadm.NewClient(cl), cl, nil
}

// createTopics creates topics with the benchmark's partition count and configs.
func createTopics(ctx context.Context, adm *kadm.Client, configs map[string]*string, topics ...string) error {
	resp, err := adm.CreateTopics(ctx, partitions, 1, configs, topics...)
	if err != nil {
		return fmt.Errorf("bench: create topics %v: %w", topics, err)
	}
	for _, r := range resp {
		if r.Err != nil {
			return fmt.Errorf("bench: create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}
