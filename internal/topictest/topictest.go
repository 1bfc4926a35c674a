// Package topictest reads topics for tests: the last value of every key up to the end a
// topic has when the read begins, and waiting until those values equal an expectation.
package topictest

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Latest reads topic from its start to the end offsets it has when Latest begins
// (read_uncommitted), and returns the last value of each key (a tombstone, a null value,
// removes the key) and the number of records read. It fails t when the topic cannot be read
// within 30 seconds.
func Latest(t testing.TB, brokers []string, topic string) (map[string]string, int) {
	t.Helper()
	return latest(Read(t, brokers, topic, false))
}

// LatestCommitted is Latest over the committed records only (read_committed, up to the last
// stable offsets).
func LatestCommitted(t testing.TB, brokers []string, topic string) (map[string]string, int) {
	t.Helper()
	return latest(Read(t, brokers, topic, true))
}

func latest(recs []*kgo.Record) (map[string]string, int) {
	out := map[string]string{}
	for _, r := range recs {
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = string(r.Value)
		}
	}
	return out, len(recs)
}

// Histories reads the committed records of topic and returns, per key, its values in offset
// order (a null value as ""). A key must live in one partition for the order to mean
// anything, as keyed records do.
func Histories(t testing.TB, brokers []string, topic string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range Read(t, brokers, topic, true) {
		out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
	}
	return out
}

// Read returns the data records of topic from its start offsets to the end offsets it has
// when Read begins: the high watermarks, or with committed the last stable offsets, reading
// read_committed (records of aborted transactions are left out). The records come partition
// by partition, each in offset order. It fails t when the topic cannot be read within 30
// seconds.
func Read(t testing.TB, brokers []string, topic string, committed bool) []*kgo.Record {
	t.Helper()
	return ReadWith(t, []kgo.Opt{kgo.SeedBrokers(brokers...)}, topic, committed)
}

// LatestCommittedWith is LatestCommitted with a client of opts (the seed brokers, and the
// TLS and SASL of a secured cluster).
func LatestCommittedWith(t testing.TB, opts []kgo.Opt, topic string) (map[string]string, int) {
	t.Helper()
	return latest(ReadWith(t, opts, topic, true))
}

// ReadWith is Read with a client of opts (the seed brokers among them).
func ReadWith(t testing.TB, clientOpts []kgo.Opt, topic string, committed bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Control records (transaction markers) are kept so that a partition that ends with one
	// is seen to end.
	opts := append(slices.Clip(clientOpts), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("start offsets of %s: %v", topic, err)
	}
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s partition %d: %v", topic, o.Partition, o.Err)
		}
		if s, ok := starts.Lookup(topic, o.Partition); ok && o.Offset > s.Offset {
			want[o.Partition] = o.Offset
		}
	})
	parts := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (still waiting for partitions %v)", topic, ctx.Err(), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return // beyond the end listed at the start
			}
			if !r.Attrs.IsControl() {
				parts[r.Partition] = append(parts[r.Partition], r)
			}
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	var out []*kgo.Record
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		out = append(out, parts[p]...)
	}
	return out
}

// WaitLatest waits until Latest of topic equals want, and fails t with the first differences
// when timeout passes first.
func WaitLatest(t testing.TB, brokers []string, topic string, want map[string]string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, _ := Latest(t, brokers, topic)
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			diff := 0
			for k, v := range want {
				if got[k] != v {
					if diff < 5 {
						t.Errorf("%s: %q = %q, want %q", topic, k, got[k], v)
					}
					diff++
				}
			}
			t.Fatalf("%s: %d of %d keys differ (got %d keys)", topic, diff, len(want), len(got))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// BatchCodecs reads topic (read_committed) with a client of opts, the seed brokers among
// them, and counts its record batches by compression codec: 0 none (transaction markers
// are), 1 gzip, 2 snappy, 3 lz4, 4 zstd. It fails t when the topic is empty.
func BatchCodecs(t testing.TB, opts []kgo.Opt, topic string) map[uint8]int {
	t.Helper()
	h := &codecHook{n: map[uint8]int{}}
	if recs := ReadWith(t, append(slices.Clip(opts), kgo.WithHooks(h)), topic, true); len(recs) == 0 {
		t.Fatalf("%s is empty", topic)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.n)
}

type codecHook struct {
	mu sync.Mutex
	n  map[uint8]int
}

func (h *codecHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.mu.Lock()
	h.n[m.CompressionType]++
	h.mu.Unlock()
}
