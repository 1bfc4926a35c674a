package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/store"
)

// Helpers of the crash-loop tests (crashloop_test.go).

// crashOffsets are the offsets of a topic that the tests compare: log start, last stable
// offset (read_committed's end) and high watermark, by partition.
type crashOffsets struct {
	start, stable, end map[int32]int64
}

// crashListOffsets returns the offsets of topic; a topic that does not exist has none.
func crashListOffsets(t testing.TB, addr, topic string) crashOffsets {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out := crashOffsets{start: map[int32]int64{}, stable: map[int32]int64{}, end: map[int32]int64{}}
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("listing topic %s: %v", topic, err)
	}
	if !topics.Has(topic) {
		return out
	}
	for _, l := range []struct {
		into map[int32]int64
		list func(context.Context, ...string) (kadm.ListedOffsets, error)
	}{{out.start, adm.ListStartOffsets}, {out.stable, adm.ListCommittedOffsets}, {out.end, adm.ListEndOffsets}} {
		listed, err := l.list(ctx, topic)
		if err != nil {
			t.Fatalf("offsets of %s: %v", topic, err)
		}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				t.Fatalf("offset of %s partition %d: %v", topic, o.Partition, o.Err)
			}
			l.into[o.Partition] = o.Offset
		})
	}
	return out
}

// crashInputProgress returns how many sentences the group has committed and how many there are.
func crashInputProgress(t testing.TB, addr string) (committed, produced int64) {
	t.Helper()
	committed, produced, err := tryInputProgress(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	return committed, produced
}

// tryInputProgress is crashInputProgress, which returns the error of a broker that does not
// answer (a Kafka node killed a moment ago still leads partitions in the metadata).
func tryInputProgress(t testing.TB, addr string) (committed, produced int64, err error) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	resp, err := adm.FetchOffsets(ctx, e2eApp)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("committed offsets of group %s: %w", e2eApp, err)
	}
	ends, err := adm.ListEndOffsets(ctx, "sentences")
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("end offsets of sentences: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		produced += o.Offset
		if c, ok := resp.Lookup("sentences", o.Partition); ok && c.Err == nil && c.At > 0 {
			committed += c.At
		}
	})
	return committed, produced, nil
}

// crashTail is, for one changelog partition just before a start, what lies beyond the
// task's exported checkpoint.
type crashTail struct {
	end        int64 // high watermark
	checkpoint int64 // offset in the .checkpoint file; -1 when the file has none
	tail       int64 // end - (checkpoint+1), or end - log start without a checkpoint
}

func (c crashTail) String() string {
	if c.checkpoint < 0 {
		return fmt.Sprintf("end %d, no checkpoint, tail %d", c.end, c.tail)
	}
	return fmt.Sprintf("end %d, checkpoint %d, tail %d", c.end, c.checkpoint, c.tail)
}

// crashTails computes the tail of every partition of the changelog, as checkpointTail
// does, from the .checkpoint files in stateDir.
func crashTails(t *testing.T, addr, stateDir string) map[int32]crashTail {
	t.Helper()
	offs := crashListOffsets(t, addr, e2eChangelog)
	out := map[int32]crashTail{}
	for p, end := range offs.end {
		path := filepath.Join(stateDir, "tasks", fmt.Sprintf("count_%d", p), store.CheckpointFileName)
		c := crashTail{end: end, checkpoint: -1}
		entries, err := store.ReadCheckpointFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("checkpoint of count_%d: %v", p, err)
		}
		for _, e := range entries {
			if e.Topic == e2eChangelog && e.Partition == p {
				c.checkpoint = e.Offset
			}
		}
		if c.checkpoint >= 0 {
			c.tail = end - (c.checkpoint + 1)
		} else {
			c.tail = end - offs.start[p]
		}
		out[p] = c
	}
	return out
}

// crashTryReadRecords reads topic from its start up to the offsets upTo (exclusive) and returns
// its data records by partition in offset order, read_committed with readCommitted. It keeps
// the control records to see where it is (the marker of a transaction is the last offset of a
// partition) and drops them from the result. Unlike readChecked, it gives up after timeout
// and returns the partitions it did not read to their end: a purge of the repartition topic,
// which the app makes while it runs, may have removed their last records meanwhile.
func crashTryReadRecords(t testing.TB, addr, topic string, readCommitted bool, upTo map[int32]int64, timeout time.Duration) (map[int32][]*kgo.Record, map[int32]int64) {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(200 * time.Millisecond)}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := testClient(t, addr, opts...)
	defer cl.Close()
	want := map[int32]int64{}
	for p, end := range upTo {
		if end > 0 {
			want[p] = end
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	out := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, want
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("reading %s partition %d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out, nil
}

// crashLastDataEnds returns, for each partition of topic, the offset after its last data record
// that read_committed sees below the last stable offset (0 when there is none): the offset a
// consumer group that processed everything committed in topic has committed at least.
func crashLastDataEnds(t testing.TB, addr, topic string) map[int32]int64 {
	t.Helper()
	for range 10 {
		offs := crashListOffsets(t, addr, topic)
		upTo := map[int32]int64{}
		for p, lso := range offs.stable {
			if lso > offs.start[p] {
				upTo[p] = lso
			}
		}
		recs, missing := crashTryReadRecords(t, addr, topic, true, upTo, 10*time.Second)
		if len(missing) > 0 {
			continue // purged meanwhile: list again
		}
		out := map[int32]int64{}
		for p := range offs.end {
			out[p] = 0
		}
		for p, rs := range recs {
			if len(rs) > 0 {
				out[p] = rs[len(rs)-1].Offset + 1
			}
		}
		return out
	}
	t.Fatalf("%s could not be read to its last stable offset 10 times", topic)
	return nil
}

// crashWaitProcessed waits until the group has committed, on every partition of each topic in
// order, an offset at or after its last committed data record. The topics are taken in order:
// the records of a later one (the repartition topic) are final once an earlier one (its
// source) is processed. Under exactly_once the end offset of a transactional topic counts the
// commit markers, which no consumer commits past: hence the last data record, not the end.
func crashWaitProcessed(t testing.TB, addr, group string, timeout time.Duration, topics ...string) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	for _, topic := range topics {
		for {
			need := crashLastDataEnds(t, addr, topic)
			resp, err := adm.FetchOffsets(t.Context(), group)
			if err != nil {
				t.Fatal(err)
			}
			var behind []string
			for p, n := range need {
				at := int64(0)
				if o, ok := resp.Lookup(topic, p); ok && o.Err == nil {
					at = o.At
				}
				if at < n {
					behind = append(behind, fmt.Sprintf("%s/%d committed %d, last data record ends at %d", topic, p, at, n))
				}
			}
			if len(behind) == 0 {
				break
			}
			if time.Now().After(deadline) {
				offs := crashListOffsets(t, addr, topic)
				t.Fatalf("group %s has not processed everything within %v: %v (offsets of %s: start %v, last stable %v, end %v)",
					group, timeout, behind, topic, offs.start, offs.stable, offs.end)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// crashWaitStable waits until no transaction is open on topic (its last stable offset equals its
// high watermark on every partition) and returns the offsets; it reports an error if one
// stays open beyond timeout.
func crashWaitStable(t testing.TB, addr, topic string, timeout time.Duration) crashOffsets {
	t.Helper()
	start := time.Now()
	for {
		offs := crashListOffsets(t, addr, topic)
		var open []string
		for p, end := range offs.end {
			if offs.stable[p] != end {
				open = append(open, fmt.Sprintf("partition %d: last stable %d, end %d", p, offs.stable[p], end))
			}
		}
		if len(open) == 0 {
			if waited := time.Since(start); waited > time.Second {
				t.Logf("%s: waited %v for its open transactions to end", topic, waited.Round(time.Millisecond))
			}
			return offs
		}
		if time.Since(start) > timeout {
			t.Errorf("%s: a transaction is still open %v after the last clean stop: %s", topic, timeout, strings.Join(open, "; "))
			return offs
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// crashStoreCounts opens the stopped app's state directory with the store package and returns the
// counts of the store counts over the count tasks of the given partitions.
func crashStoreCounts(t *testing.T, stateDir string, partitions []int32) map[string]int {
	t.Helper()
	m, err := store.Open(store.Settings{Dir: stateDir, MemoryBytes: store.MinMemoryBytes})
	if err != nil {
		t.Fatalf("opening the state directory %s: %v", stateDir, err)
	}
	defer m.Close()
	out := map[string]int{}
	for _, p := range partitions {
		task, err := m.OpenTask("count", p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := task.Open("counts", store.Options{Backend: store.Pebble})
		if err != nil {
			t.Fatalf("count_%d: opening the store counts: %v", p, err)
		}
		it, err := s.Range(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			n, err := strconv.Atoi(string(it.Value()))
			if err != nil {
				t.Errorf("store of count_%d: key %q has the value %q, not a count", p, it.Key(), it.Value())
				continue
			}
			if _, dup := out[string(it.Key())]; dup {
				t.Errorf("store of count_%d: key %q is also in another partition's store", p, it.Key())
			}
			out[string(it.Key())] = n
		}
		if err := it.Err(); err != nil {
			t.Fatalf("store of count_%d: %v", p, err)
		}
		it.Close()
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// crashValueSeqs groups the values of records by key, in offset order, as counts; a value that is
// not a count, or a key found in two partitions, is reported. where maps each key to the
// "partition@offset" of its records, for the messages.
func crashValueSeqs(t *testing.T, what string, recs []*kgo.Record) (seqs map[string][]int, where map[string][]string) {
	t.Helper()
	seqs, where = map[string][]int{}, map[string][]string{}
	partOf := map[string]int32{}
	for _, r := range recs {
		k, p := string(r.Key), r.Partition
		if q, ok := partOf[k]; !ok {
			partOf[k] = p
		} else if q != p && q >= 0 {
			t.Errorf("%s: key %q is in partitions %d and %d", what, k, q, p)
			partOf[k] = -1 // reported
		}
		n, err := strconv.Atoi(string(r.Value))
		if r.Value == nil || err != nil {
			t.Errorf("%s: key %q at %d@%d has the value %q, not a count", what, k, p, r.Offset, r.Value)
			continue
		}
		seqs[k] = append(seqs[k], n)
		where[k] = append(where[k], fmt.Sprintf("%d@%d", p, r.Offset))
	}
	return seqs, where
}

// checkWordCountTopics checks the word count's changelog and output topic, read_committed
// once no transaction is open on them, against the reference counts ref. exact (exactly_once):
// the changelog's last value of every word is its count and its values grow strictly, and
// every word's output values are exactly 1, 2, ..., ref[word] in offset order (no duplicate,
// no gap), with no word that is not in ref. Otherwise (at_least_once): no word is
// under-counted in either.
func checkWordCountTopics(t *testing.T, addr string, ref map[string]int, exact bool) {
	t.Helper()
	clOffs := crashWaitStable(t, addr, e2eChangelog, 70*time.Second)
	crashWaitStable(t, addr, "word-counts", 70*time.Second)
	clSeqs, clWhere := crashValueSeqs(t, "changelog "+e2eChangelog, readChecked(t, addr, e2eChangelog, true))
	outSeqs, outWhere := crashValueSeqs(t, "output word-counts", readChecked(t, addr, "word-counts", true))
	clLatest, outMax := map[string]int{}, map[string]int{}
	outRecords := 0
	for w, s := range clSeqs {
		clLatest[w] = s[len(s)-1]
	}
	for w, s := range outSeqs {
		outMax[w] = slices.Max(s)
		outRecords += len(s)
	}
	crashCompareCounts(t, "changelog "+e2eChangelog+" (latest values, read_committed)", clLatest, ref, exact)
	words := 0
	for _, c := range ref {
		words += c
	}
	t.Logf("output word-counts: %d records for %d words (%d more than one per word); changelog ends %v",
		outRecords, words, outRecords-words, clOffs.end)
	if !exact {
		crashCompareCounts(t, "output word-counts (greatest value of each word)", outMax, ref, false)
	} else {
		// Every committed changelog value of a word is its count after a committed
		// transaction: they grow strictly.
		d := &crashDiffs{t: t, check: "changelog " + e2eChangelog + " (read_committed)"}
		for _, w := range crashSortedKeys(clSeqs) {
			s := clSeqs[w]
			for i := 1; i < len(s); i++ {
				if s[i] <= s[i-1] {
					d.errorf("word %q: values do not grow at %s: %s, at %s", w, clWhere[w][i], crashAround(s, i), crashAround(clWhere[w], i))
					break
				}
			}
		}
		d.done(len(ref))
		// Each count of each word once, in order: no duplicate, no gap.
		d = &crashDiffs{t: t, check: "output word-counts (read_committed)"}
		for _, w := range crashSortedKeys(ref) {
			s := outSeqs[w]
			if i := crashFirstBreak(s); i >= 0 {
				d.errorf("word %q (reference %d): value %d at %s is not %d: values %s at %s; all: %s",
					w, ref[w], s[i], outWhere[w][i], i+1, crashAround(s, i), crashAround(outWhere[w], i), crashClip(s))
			} else if len(s) != ref[w] {
				d.errorf("word %q: counted to %d, want %d: values %s", w, len(s), ref[w], crashClip(s))
			}
		}
		for _, w := range crashSortedKeys(outSeqs) {
			if _, ok := ref[w]; !ok {
				d.errorf("word %q is not in the sentences: values %s", w, crashClip(outSeqs[w]))
			}
		}
		d.done(len(ref))
	}
}
