// Package topictest reads topics for tests: the last value of every key up to the end a
// topic has when the read begins, and waiting until those values equal an expectation.
package topictest

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Latest reads topic from its start to the end offsets it has when Latest begins, and returns
// the last value of each key (a tombstone, a null value, removes the key) and the number of
// records read. It fails t when the topic cannot be read within 30 seconds.
func Latest(t testing.TB, brokers []string, topic string) (map[string]string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s partition %d: %v", topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	out := map[string]string{}
	n := 0
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
			n++
			if r.Value == nil {
				delete(out, string(r.Key))
			} else {
				out[string(r.Key)] = string(r.Value)
			}
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out, n
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
