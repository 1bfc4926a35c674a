package changelog

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/store"
)

const app = "app"

// env is a kfake cluster with a producer, an admin client and a state manager on a temp dir.
type env struct {
	c    *kfake.Cluster
	cl   *kgo.Client
	adm  *kadm.Client
	prod *Producer
	tm   *TopicManager
	m    *store.Manager
	dir  string
}

// newEnv starts the cluster and the env's clients; opts are added to the producer client's.
func newEnv(t testing.TB, partitions int32, opts ...kgo.Opt) *env {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "input", "output"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{c: c, cl: cl, adm: kadm.NewClient(cl), dir: t.TempDir()}
	if e.prod, err = NewProducer(cl); err != nil {
		t.Fatal(err)
	}
	if e.tm, err = NewTopicManager(e.adm, TopicSettings{AppID: app}); err != nil {
		t.Fatal(err)
	}
	e.openManager(t)
	return e
}

func (e *env) openManager(t testing.TB) {
	t.Helper()
	m, err := store.Open(store.Settings{Dir: e.dir, MemoryBytes: store.MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(func() { _ = m.Close() })
}

func (e *env) open(t testing.TB, partition int32, specs ...StoreSpec) *Task {
	t.Helper()
	if err := e.tm.Ensure(context.Background(), 3, TopicSpecs(specs)); err != nil {
		t.Fatal(err)
	}
	task, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "proc", Partition: partition, Stores: specs})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

type rec struct {
	Partition int32
	Offset    int64
	Key       string
	Value     *string // nil for a tombstone
}

// readAll consumes every record of topic, from the start to the end offsets listed now.
func (e *env) readAll(t testing.TB, topic string) []rec {
	t.Helper()
	var out []rec
	for _, r := range e.readRecords(t, topic) {
		var v *string
		if r.Value != nil {
			s := string(r.Value)
			v = &s
		}
		out = append(out, rec{r.Partition, r.Offset, string(r.Key), v})
	}
	return out
}

// readRecords consumes every record of topic, from the start to the end offsets listed now.
func (e *env) readRecords(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := e.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.c.ListenAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (still waiting for %v)", topic, err, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

func sp(s string) *string { return &s }
