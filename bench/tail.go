package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tailShare: the warm tail is one changelog record in tailShare appended again, spread over
// the partitions as the changelog is.
const tailShare = 4

// appendTail produces again one record in every of topic's data records, each to its own
// partition with its own key, value and timestamp: a tail after the checkpoints of a
// restored state, as a restart after a stop or a standby meets it. It returns how many.
func (b *bench) appendTail(ctx context.Context, topic string, every int) (int64, error) {
	var tail []*kgo.Record
	i := 0
	if _, err := b.consume(ctx, topic, func(r *kgo.Record) {
		if i++; i%every == 0 {
			tail = append(tail, &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		}
	}); err != nil {
		return 0, err
	}
	return int64(len(tail)), b.produceAll(ctx, tail)
}

// produceAll produces recs to their partitions and waits for every acknowledgement.
func (b *bench) produceAll(ctx context.Context, recs []*kgo.Record) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(200000))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed atomic.Pointer[error] // the callbacks run on the client's goroutines
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if p := failed.Load(); p != nil {
		return fmt.Errorf("bench: produce: %w", *p)
	}
	return nil
}

// bigRestore is the restore of a large changelog into an empty state directory, with the
// restoring process's peak memory.
type bigRestore struct {
	records  int64
	took     time.Duration
	peakRSS  int64
	produced time.Duration
	// The restoring process's state_memory and memory_limit.
	stateMemory, memoryLimit string
}

// measureBigRestore writes a changelog of n records (n/4 distinct words, their counts rising)
// for the statehost count's store straight to the broker, and restores it cold, under the
// statehost contenders' state_memory and memory_limit, in a child process whose peak resident
// set it reports.
func (b *bench) measureBigRestore(ctx context.Context, n int) (bigRestore, error) {
	var res bigRestore
	app := "bench-restore-rss"
	s := spec{Kind: "statehost", Brokers: b.brokers, App: app, Input: "words-restore-rss", Output: app + "-out",
		Guarantee: "at_least_once", Dir: filepath.Join(b.dir, app), Module: b.module, CommitInterval: b.interval, Mode: "restore",
		StateMemory: b.stateMemory, MemoryLimit: b.memoryLimit}
	changelog := app + "-counts-changelog"
	compact := "compact"
	if err := createTopics(ctx, b.adm, nil, s.Input, s.Output); err != nil {
		return res, err
	}
	if err := createTopics(ctx, b.adm, map[string]*string{"cleanup.policy": &compact}, changelog); err != nil {
		return res, err
	}
	t0 := time.Now()
	distinct := max(n/4, 1)
	const chunk = 1 << 20
	for first := 0; first < n; first += chunk {
		recs := make([]*kgo.Record, 0, min(chunk, n-first))
		for i := first; i < min(first+chunk, n); i++ {
			w := i % distinct
			recs = append(recs, &kgo.Record{Topic: changelog, Partition: int32(w % partitions), Key: []byte(word(w)),
				Value: strconv.AppendInt(nil, int64(i/distinct+1), 10)})
		}
		if err := b.produceAll(ctx, recs); err != nil {
			return res, err
		}
	}
	res.produced = time.Since(t0)
	ch, err := b.start(s, app+".log")
	if err != nil {
		return res, err
	}
	select {
	case <-ch.exited:
	case <-time.After(b.timeout + time.Duration(n/20000)*time.Second):
		ch.cmd.Process.Kill()
		<-ch.exited
		return res, fmt.Errorf("bench: the restore of %d records did not finish (log: %s)", n, ch.log)
	}
	rep, rss, err := ch.result()
	if err != nil {
		return res, err
	}
	res.records, res.took, res.peakRSS = rep.Restored, time.Duration(rep.RestoreNanos), cmp.Or(rep.PeakRSS, rss)
	res.stateMemory, res.memoryLimit = s.StateMemory, cmp.Or(s.MemoryLimit, "none")
	return res, nil
}

// reportBigRestore prints the figures of a big restore, and its RESULT lines.
func reportBigRestore(out io.Writer, r bigRestore) {
	rate := float64(r.records) / r.took.Seconds()
	fmt.Fprintf(out, "\ncold restore of %d changelog records: %s (%.0f records/s), peak RSS %d MiB (state_memory %s, memory_limit %s)\n",
		r.records, r.took.Round(time.Millisecond), rate, r.peakRSS>>20, r.stateMemory, r.memoryLimit)
	fmt.Fprintf(out, "RESULT big_restore_records=%d\n", r.records)
	fmt.Fprintf(out, "RESULT big_restore_seconds=%.3f\n", r.took.Seconds())
	fmt.Fprintf(out, "RESULT big_restore_records_per_s=%.0f\n", rate)
	fmt.Fprintf(out, "RESULT big_restore_peak_rss_mib=%d\n", r.peakRSS>>20)
}
