package main

import (
	"context"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceAtRate produces rate records/s, in turns to each of topics, for span or until ctx
// ends, and returns how many records each topic got, every one acknowledged. The keys are
// drawn uniformly from scaleKeys words, so they spread evenly over the partitions; the value is
// "1" and the timestamp the time of the produce (windowcount's windows and punctuations follow
// it). Records go out in a burst every 10 ms, as many as the rate owes by then.
func (b *bench) produceAtRate(ctx context.Context, topics []string, rate int, span time.Duration) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.ProducerLinger(10*time.Millisecond),
		kgo.MaxBufferedRecords(max(10000, rate)))
	if err != nil {
		return nil, fmt.Errorf("bench: producer: %w", err)
	}
	defer cl.Close()
	var failed atomic.Pointer[error] // the callbacks run on the client's goroutines
	counts := make(map[string]int64, len(topics))
	value := []byte("1")
	rng := rand.New(rand.NewSource(int64(rate)))
	begin := time.Now()
	var sent int64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		now := time.Now()
		elapsed := min(now.Sub(begin), span)
		for due := int64(elapsed.Seconds() * float64(rate)); sent < due; sent++ {
			topic := topics[sent%int64(len(topics))]
			counts[topic]++
			cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Topic: topic, Key: []byte(word(rng.Intn(scaleKeys))), Value: value, Timestamp: now},
				func(_ *kgo.Record, err error) {
					if err != nil {
						failed.CompareAndSwap(nil, &err)
					}
				})
		}
		if elapsed >= span {
			break
		}
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return counts, fmt.Errorf("bench: produce: %w", err)
	}
	if p := failed.Load(); p != nil {
		return counts, fmt.Errorf("bench: produce: %w", *p)
	}
	return counts, nil
}
