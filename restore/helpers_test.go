package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/store"
)

const app = "app"

var ctx = context.Background()

// env is a broker with a producer, an admin client, and one state directory. The broker is
// kfake, or with STATEHOST_TEST_KAFKA=1 an Apache Kafka cluster per test (3 nodes unless
// STATEHOST_TEST_KAFKA_NODES=1); CI runs the tests of a changelog truncated or recreated there
// (TestTruncatedChangelog, TestRecreatedChangelog, TestTruncatedDuringRestore).
type env struct {
	brokers []string
	cl      *kgo.Client
	adm     *kadm.Client
	prod    *changelog.Producer
	tm      *changelog.TopicManager
	dir     string
	m       *store.Manager
	mem     int64 // Settings.MemoryBytes of the managers opened; 0 for the default
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{dir: t.TempDir()}
	if kafkacluster.Requested() {
		e.brokers = kafkacluster.Start(t, kafkacluster.Nodes(t)).Brokers()
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "input"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		e.brokers = c.ListenAddrs()
	}
	e.cl = e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e.adm = kadm.NewClient(e.cl)
	if kafkacluster.Requested() {
		resp, err := e.adm.CreateTopic(ctx, 3, -1, nil, "input")
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("creating the topic input: %v", err)
		}
	}
	var err error
	if e.prod, err = changelog.NewProducer(e.cl); err != nil {
		t.Fatal(err)
	}
	if e.tm, err = changelog.NewTopicManager(e.adm, changelog.TopicSettings{AppID: app}); err != nil {
		t.Fatal(err)
	}
	return e
}

// truncate deletes the records of topic partition 0 below offset at (DeleteRecords). Apache
// Kafka refuses DeleteRecords on a topic that is only compacted (POLICY_VIOLATION; kfake
// takes it): there the changelog is first made "compact,delete", as a window store's is, the
// changelog that retention truncates.
func (e *env) truncate(t testing.TB, topic string, at int64) {
	t.Helper()
	if kafkacluster.Requested() {
		resp, err := e.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact,delete")}}, topic)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = resp.On(topic, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatalf("cleanup.policy=compact,delete on %s: %v", topic, err)
		}
	}
	// The leader applies the new policy a moment after the controller took it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := e.adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: at}}})
		if err == nil {
			err = resp.Error()
		}
		if errors.Is(err, kerr.PolicyViolation) && kafkacluster.Requested() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Errorf("delete records of %s below %d: %v", topic, at, err)
		}
		return
	}
}

func (e *env) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// manager (re)opens the state manager on dir, closing the previous one.
func (e *env) manager(t testing.TB, dir string) *store.Manager {
	t.Helper()
	if e.m != nil {
		_ = e.m.Close()
	}
	mem := e.mem
	if mem == 0 {
		mem = store.MinMemoryBytes
	}
	m, err := store.Open(store.Settings{Dir: dir, MemoryBytes: mem})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func (e *env) task(t testing.TB, partition int32, specs ...changelog.StoreSpec) *changelog.Task {
	t.Helper()
	if e.m == nil {
		e.manager(t, e.dir)
	}
	if err := e.tm.Ensure(ctx, 3, changelog.TopicSpecs(specs)); err != nil {
		t.Fatal(err)
	}
	task, err := changelog.OpenTask(e.m, e.prod, changelog.TaskConfig{AppID: app, Processor: "proc", Partition: partition, Stores: specs})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// restorer returns a Restorer with its own client, recording events.
func (e *env) restorer(t testing.TB, rec *recorder, s Settings, opts ...kgo.Opt) *Restorer {
	t.Helper()
	cl := e.client(t, append([]kgo.Opt{kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
	if rec != nil {
		s.Listener = rec
	}
	if s.Logger == nil {
		s.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	}
	r, err := New(cl, kadm.NewClient(cl), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// recorder is a Listener that keeps every event.
type recorder struct {
	mu        sync.Mutex
	starts    []StartEvent
	batches   []BatchEvent
	ends      []EndEvent
	discarded []*CheckpointError
	onBatch   func(n int)
}

func (r *recorder) OnRestoreStart(e StartEvent) {
	r.mu.Lock()
	r.starts = append(r.starts, e)
	r.mu.Unlock()
}
func (r *recorder) OnBatchRestored(e BatchEvent) {
	r.mu.Lock()
	r.batches = append(r.batches, e)
	n := len(r.batches)
	r.mu.Unlock()
	if r.onBatch != nil {
		r.onBatch(n)
	}
}
func (r *recorder) OnRestoreEnd(e EndEvent) { r.mu.Lock(); r.ends = append(r.ends, e); r.mu.Unlock() }
func (r *recorder) OnCheckpointDiscarded(e *CheckpointError) {
	r.mu.Lock()
	r.discarded = append(r.discarded, e)
	r.mu.Unlock()
}

func (r *recorder) restored() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(0)
	for _, e := range r.ends {
		n += e.Records
	}
	return n
}

// dump returns the content of a store as "k=v" lines, sorted by key.
func dump(t testing.TB, s store.Store) []string {
	t.Helper()
	it, err := s.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.Next() {
		out = append(out, fmt.Sprintf("%s=%s", it.Key(), it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// produce writes n records key<i>=val<i> (i from first) to partition of topic, flushing every batch records so the log has many batches.
func (e *env) produce(t testing.TB, topic string, partition int32, first, n, batch int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		e.cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "key%06d", i), Value: fmt.Appendf(nil, "val%06d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
		if (i-first+1)%batch == 0 {
			if err := e.cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func expectKeys(first, n int) []string {
	var out []string
	for i := first; i < first+n; i++ {
		out = append(out, fmt.Sprintf("key%06d=val%06d", i, i))
	}
	sort.Strings(out)
	return out
}

// awaitTopicGone waits until the metadata no longer lists a deleted topic: on a real
// cluster the brokers learn of a deletion a moment after it, and a broker that still lists
// the topic would let Ensure skip creating it anew.
func awaitTopicGone(t testing.TB, adm *kadm.Client, topic string) {
	t.Helper()
	c := timeout(t)
	for {
		// WithAuthorizedOps bypasses kadm's metadata cache.
		md, err := adm.Metadata(kadm.WithAuthorizedOps(c), topic)
		if err == nil {
			if d, ok := md.Topics[topic]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
				return
			}
		}
		select {
		case <-c.Done():
			t.Fatalf("topic %s still listed after its deletion: %v", topic, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func timeout(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// lastStable returns the last stable offset of a partition.
func (e *env) lastStable(t testing.TB, topic string, partition int32) int64 {
	t.Helper()
	lsos, err := e.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := lsos.Lookup(topic, partition)
	if !ok || o.Err != nil {
		t.Fatalf("last stable offset of %s/%d: %v", topic, partition, o.Err)
	}
	return o.Offset
}

// restoredBatches returns the records applied in the batches so far (a standby has no end events).
func (r *recorder) restoredBatches() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(0)
	for _, e := range r.batches {
		n += int64(e.Records)
	}
	return n
}
