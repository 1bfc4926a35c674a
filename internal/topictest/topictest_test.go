package topictest

import (
	"context"
	"maps"
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
