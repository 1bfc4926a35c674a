package topictest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestLatest(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t", "empty"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := func(k, v string) *kgo.Record {
		r := &kgo.Record{Topic: "t", Key: []byte(k)}
		if v != "" {
			r.Value = []byte(v)
		}
		return r
	}
	if err := cl.ProduceSync(context.Background(), rec("a", "1"), rec("b", "1"), rec("a", "2"), rec("c", "1"), rec("c", "")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, n := Latest(t, brokers, "t")
	if want := map[string]string{"a": "2", "b": "1"}; !maps.Equal(got, want) || n != 5 {
		t.Errorf("Latest = %v after %d records, want %v after 5", got, n, want)
	}
	if got, n := Latest(t, brokers, "empty"); len(got) != 0 || n != 0 {
		t.Errorf("Latest of an empty topic = %v, %d", got, n)
	}
	WaitLatest(t, brokers, "t", map[string]string{"a": "2", "b": "1"}, time.Second)
}

// TestTransactional reads a topic written in transactions: the last offset of each partition
// is a marker that a consumer never returns without KeepControlRecords, and aborted records
// must not count as committed.
func TestTransactional(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := []byte{byte('1' + i)}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("k"), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	if got := Histories(t, brokers, "t"); !slices.Equal(got["k"], []string{"1", "3"}) {
		t.Errorf("Histories = %v, want k: [1 3] (2 was aborted)", got)
	}
	if got, n := Latest(t, brokers, "t"); got["k"] != "3" || n != 3 {
		t.Errorf("Latest = %v after %d records, want k=3 after 3 (read_uncommitted sees the aborted one)", got, n)
	}
	if got, n := LatestCommitted(t, brokers, "t"); got["k"] != "3" || n != 2 {
		t.Errorf("LatestCommitted = %v after %d records, want k=3 after 2", got, n)
	}
}
