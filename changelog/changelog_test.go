package changelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/store"
)

var ctx = context.Background()

// TestPutsAndDeletesReachChangelog checks that puts appear as records and deletes (even of absent keys) as tombstones, in order, and that the commit's checkpoint is the last acknowledged offset, in the store and in the .checkpoint file.
func TestPutsAndDeletesReachChangelog(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 1, StoreSpec{Name: "kv"})
	s := task.Store("kv")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put([]byte("a"), []byte("1")))
	must(s.Put([]byte("b"), []byte("2")))
	must(s.Delete([]byte("a")))
	must(s.Delete([]byte("absent")))
	must(s.Put([]byte("c"), nil))
	must(task.Commit(ctx, nil))

	got := e.readAll(t, TopicName(app, "kv"))
	want := []rec{{1, 0, "a", sp("1")}, {1, 1, "b", sp("2")}, {1, 2, "a", nil}, {1, 3, "absent", nil}, {1, 4, "c", sp("")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changelog:\n got %s\nwant %s", show(got), show(want))
	}
	cp, ok, err := task.StoreTask().Partition("kv").Checkpoint()
	if err != nil || !ok || cp.Offset != 4 {
		t.Fatalf("checkpoint = %v %v %v, want 4", cp.Offset, ok, err)
	}
	raw, err := os.ReadFile(filepath.Join(task.Dir(), store.CheckpointFileName))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n1\napp-kv-changelog 1 4\n"; string(raw) != want {
		t.Fatalf(".checkpoint = %q, want %q", raw, want)
	}
	if !strings.HasSuffix(task.Dir(), filepath.Join("tasks", "proc_1")) {
		t.Fatalf("task dir %s", task.Dir())
	}
}

func show(rs []rec) string {
	var b strings.Builder
	for _, r := range rs {
		v := "<nil>"
		if r.Value != nil {
			v = fmt.Sprintf("%q", *r.Value)
		}
		fmt.Fprintf(&b, "[p%d@%d %s=%s] ", r.Partition, r.Offset, r.Key, v)
	}
	return b.String()
}

// TestPartitionMapping checks that store partition N writes changelog partition N.
func TestPartitionMapping(t *testing.T) {
	e := newEnv(t, 3)
	for p := range int32(3) {
		task := e.open(t, p, StoreSpec{Name: "kv"})
		for i := range 5 {
			if err := task.Store("kv").Put(fmt.Appendf(nil, "task%d-%d", p, i), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if err := task.Commit(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := e.readAll(t, TopicName(app, "kv"))
	if len(got) != 15 {
		t.Fatalf("%d records, want 15", len(got))
	}
	for _, r := range got {
		if want := fmt.Sprintf("task%d-", r.Partition); !strings.HasPrefix(r.Key, want) {
			t.Fatalf("record %s on partition %d", r.Key, r.Partition)
		}
	}
}

// TestTopicConfigs checks the created topics' partition count and configs, read back with DescribeConfigs: compact by default, app-wide configs over it, store configs over both.
func TestTopicConfigs(t *testing.T) {
	e := newEnv(t, 3)
	tm, err := NewTopicManager(e.adm, TopicSettings{AppID: app, Configs: map[string]string{"retention.ms": "1000", "segment.bytes": "2097152"}})
	if err != nil {
		t.Fatal(err)
	}
	specs := []TopicSpec{
		{Store: "plain"},
		{Store: "custom", Configs: map[string]string{"cleanup.policy": "compact,delete", "segment.bytes": "1048576"}},
	}
	if err := tm.Ensure(ctx, 3, specs); err != nil {
		t.Fatal(err)
	}
	if err := tm.Ensure(ctx, 3, specs); err != nil { // idempotent
		t.Fatalf("second ensure: %v", err)
	}
	md, err := e.adm.Metadata(ctx, TopicName(app, "plain"), TopicName(app, "custom"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range md.Topics {
		if d.Err != nil || len(d.Partitions) != 3 {
			t.Fatalf("topic %s: %v, %d partitions", d.Topic, d.Err, len(d.Partitions))
		}
	}
	rcs, err := e.adm.DescribeTopicConfigs(ctx, TopicName(app, "plain"), TopicName(app, "custom"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		TopicName(app, "plain"):  {"cleanup.policy": "compact", "retention.ms": "1000", "segment.bytes": "2097152"},
		TopicName(app, "custom"): {"cleanup.policy": "compact,delete", "retention.ms": "1000", "segment.bytes": "1048576"},
	}
	for topic, kv := range want {
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("%s: %v %v", topic, err, rc.Err)
		}
		for k, v := range kv {
			found := false
			for _, c := range rc.Configs {
				if c.Key == k {
					found = true
					if c.Value == nil || *c.Value != v {
						t.Fatalf("%s %s = %v, want %s", topic, k, c.MaybeValue(), v)
					}
				}
			}
			if !found {
				t.Fatalf("%s: config %s not described", topic, k)
			}
		}
	}
}

// TestEnsureTopicCreatedMeanwhile: another instance creates the changelog between Ensure's
// check and its CreateTopics, and the broker asked does not list the topic yet (a Kafka
// broker learns of a new topic from the controller a moment later; kfake is made to answer
// so for the first three metadata requests naming it). Ensure waits for the metadata instead
// of failing with "exist and do not exist", as two instances starting together on Apache
// Kafka did.
func TestEnsureTopicCreatedMeanwhile(t *testing.T) {
	e := newEnv(t, 3)
	topic := TopicName(app, "kv")
	if _, err := e.adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var hidden atomic.Int32
	e.c.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kr.(*kmsg.MetadataRequest)
		names := false
		for _, rt := range req.Topics {
			names = names || (rt.Topic != nil && *rt.Topic == topic)
		}
		if !names || hidden.Load() >= 3 {
			return nil, nil, false
		}
		hidden.Add(1)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = rt.Topic, kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
		}
		return resp, nil, true
	})
	if err := e.tm.Ensure(ctx, 3, []TopicSpec{{Store: "kv"}}); err != nil {
		t.Fatalf("Ensure with the topic created meanwhile: %v", err)
	}
	if n := hidden.Load(); n != 3 {
		t.Fatalf("the metadata hid the topic %d times, want 3 (Ensure asked fewer times)", n)
	}
}

// TestPartitionMismatch checks that an existing changelog with another partition count is an error naming the topic and both counts.
func TestPartitionMismatch(t *testing.T) {
	e := newEnv(t, 3)
	topic := TopicName(app, "kv")
	if _, err := e.adm.CreateTopic(ctx, 2, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	err := e.tm.Ensure(ctx, 3, []TopicSpec{{Store: "kv"}})
	var pm *PartitionMismatchError
	if !errors.As(err, &pm) {
		t.Fatalf("err = %v, want *PartitionMismatchError", err)
	}
	if pm.Topic != topic || pm.Expected != 3 || pm.Actual != 2 {
		t.Fatalf("mismatch = %+v", pm)
	}
	for _, s := range []string{topic, "2 partitions", "expected 3"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("message %q lacks %q", err, s)
		}
	}
}

// TestLoggingDisabled checks that a store with logging disabled gets no topic and produces nothing, while its data is still committed locally.
func TestLoggingDisabled(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 0, StoreSpec{Name: "nolog", LoggingDisabled: true}, StoreSpec{Name: "logged"})
	if err := task.Store("nolog").Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(task.LoggedStores()) != 1 || task.LoggedStores()[0].Store != "logged" {
		t.Fatalf("logged stores = %+v", task.LoggedStores())
	}
	topics, err := e.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(TopicName(app, "nolog")) {
		t.Fatal("a changelog topic was created for a store with logging disabled")
	}
	if !topics.Has(TopicName(app, "logged")) {
		t.Fatal("the logged store has no topic")
	}
	if v, ok, _ := task.Store("nolog").Get([]byte("k")); !ok || string(v) != "v" {
		t.Fatal("unlogged store lost its committed write")
	}
	if rs := e.readAll(t, TopicName(app, "logged")); len(rs) != 0 {
		t.Fatalf("records in the logged store's changelog: %v", show(rs))
	}
}

// TestCoalescing checks that with coalescing on only the last value of each key within a commit reaches the changelog, and with it off every write does.
func TestCoalescing(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 0, StoreSpec{Name: "cached", Options: store.Options{Coalesce: true}}, StoreSpec{Name: "direct"})
	for _, name := range []string{"cached", "direct"} {
		s := task.Store(name)
		for i := range 10 {
			_ = s.Put([]byte("a"), fmt.Appendf(nil, "%d", i))
		}
		_ = s.Put([]byte("b"), []byte("x"))
		_ = s.Delete([]byte("b"))
		_ = s.Put([]byte("c"), []byte("y"))
		// Reads see the cached writes.
		if v, ok, _ := s.Get([]byte("a")); !ok || string(v) != "9" {
			t.Fatalf("%s: get a = %q", name, v)
		}
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = task.Store("cached").Put([]byte("a"), []byte("10"))
	_ = task.Store("cached").Put([]byte("a"), []byte("11"))
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got := e.readAll(t, TopicName(app, "cached"))
	want := []rec{{0, 0, "a", sp("9")}, {0, 1, "b", nil}, {0, 2, "c", sp("y")}, {0, 3, "a", sp("11")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("coalesced changelog:\n got %s\nwant %s", show(got), show(want))
	}
	if n := len(e.readAll(t, TopicName(app, "direct"))); n != 13 {
		t.Fatalf("direct changelog has %d records, want 13 (every write)", n)
	}
	if v, ok, _ := task.Store("cached").Get([]byte("a")); !ok || string(v) != "11" {
		t.Fatalf("cached a = %q", v)
	}
}

// TestCommitOrder checks that input offsets are committed only after the batch and checkpoint were applied, and that output records are acknowledged by then.
func TestCommitOrder(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 2, StoreSpec{Name: "kv"})
	_ = task.Store("kv").Put([]byte("k"), []byte("v"))
	if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: 2, Key: []byte("out"), Value: []byte("put")}); err != nil {
		t.Fatal(err)
	}
	called := false
	err := task.Commit(ctx, func(context.Context) error {
		called = true
		cp, ok, _ := task.StoreTask().Partition("kv").Checkpoint()
		if !ok || cp.Offset != 0 {
			t.Errorf("offsets committed before the checkpoint was applied: %v %v", cp, ok)
		}
		if rs := e.readAll(t, "output"); len(rs) != 1 || rs[0].Key != "out" || rs[0].Partition != 2 {
			t.Errorf("output record not acknowledged before the offset commit: %v", show(rs))
		}
		return nil
	})
	if err != nil || !called {
		t.Fatalf("commit: %v, called %v", err, called)
	}
	// A failing offset commit is reported after the apply and leaves the task usable.
	boom := errors.New("boom")
	err = task.Commit(ctx, func(context.Context) error { return boom })
	var oce *OffsetCommitError
	if !errors.As(err, &oce) || !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if err := task.Store("kv").Put([]byte("k2"), []byte("v")); err != nil {
		t.Fatalf("task unusable after an offset-commit failure: %v", err)
	}
}

// TestFailedProduceFailsCommit makes the broker reject produce requests and checks that the commit fails, applies nothing, never commits offsets, and leaves the task failed; reopened, the task has its last committed state.
func TestFailedProduceFailsCommit(t *testing.T) {
	for _, target := range []string{"changelog", "output"} {
		t.Run(target, func(t *testing.T) {
			e := newEnv(t, 3)
			task := e.open(t, 0, StoreSpec{Name: "kv"})
			_ = task.Store("kv").Put([]byte("committed"), []byte("v"))
			if err := task.Commit(ctx, nil); err != nil {
				t.Fatal(err)
			}
			md, err := e.adm.Metadata(ctx, "output")
			if err != nil {
				t.Fatal(err)
			}
			outputID := [16]byte(md.Topics["output"].ID) // produce v13+ names topics by ID
			var rejected atomic.Int32
			e.c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				e.c.KeepControl()
				req := kreq.(*kmsg.ProduceRequest)
				fail := false
				for _, rt := range req.Topics {
					isOutput := rt.Topic == "output" || rt.TopicID == outputID
					if (target == "output") == isOutput {
						fail = true
					}
				}
				if !fail {
					return nil, nil, false
				}
				rejected.Add(1)
				resp := req.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewProduceResponseTopic()
					st.Topic, st.TopicID = rt.Topic, rt.TopicID
					for _, rp := range rt.Partitions {
						sp := kmsg.NewProduceResponseTopicPartition()
						sp.Partition = rp.Partition
						sp.ErrorCode = kerr.MessageTooLarge.Code
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
			_ = task.Store("kv").Put([]byte("lost"), []byte("v"))
			if target == "output" {
				_ = task.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Value: []byte("x")})
			}
			called := false
			err = task.Commit(ctx, func(context.Context) error { called = true; return nil })
			var pe *ProduceError
			if !errors.Is(err, ErrTaskFailed) || !errors.As(err, &pe) || !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("commit err = %v (rejected %d)", err, rejected.Load())
			}
			if called {
				t.Fatal("input offsets committed after a failed produce")
			}
			if rejected.Load() == 0 {
				t.Fatal("the broker rejected nothing: the test did not exercise a failure")
			}
			if err := task.Store("kv").Put([]byte("x"), nil); !errors.Is(err, store.ErrTaskFailed) {
				t.Fatalf("put on failed task: %v", err)
			}
			if err := task.Commit(ctx, nil); !errors.Is(err, ErrTaskFailed) {
				t.Fatalf("second commit: %v", err)
			}
			if err := task.Close(ctx); err != nil {
				t.Fatal(err)
			}
			task = e.open(t, 0, StoreSpec{Name: "kv"})
			if _, ok, _ := task.Store("kv").Get([]byte("lost")); ok {
				t.Fatal("a write of the failed commit was applied")
			}
			if _, ok, _ := task.Store("kv").Get([]byte("committed")); !ok {
				t.Fatal("the last committed write is missing")
			}
			if cp, _, _ := task.StoreTask().Partition("kv").Checkpoint(); cp.Offset != 0 {
				t.Fatalf("checkpoint moved to %d", cp.Offset)
			}
		})
	}
}

// TestProducerNeedsManualPartitioner checks the producer client validation.
func TestProducerNeedsManualPartitioner(t *testing.T) {
	e := newEnv(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := NewProducer(cl); err == nil || !strings.Contains(err.Error(), "ManualPartitioner") {
		t.Fatalf("err = %v", err)
	}
	_ = kadm.StringPtr
}

// TestWindowTopicConfigs checks the changelog topics of window and session stores:
// cleanup.policy=compact,delete, retention.ms = retention + additional retention,
// CreateTime timestamps, the store's topic_config on top; and a warning when an existing
// topic's retention.ms no longer fits its store.
func TestWindowTopicConfigs(t *testing.T) {
	e := newEnv(t, 2)
	var logs strings.Builder
	tm, err := NewTopicManager(e.adm, TopicSettings{AppID: app, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	specs := func(retention int64) []TopicSpec {
		return TopicSpecs([]StoreSpec{
			{Name: "win", Options: store.Options{Kind: store.Window, Window: store.WindowSpec{Size: 60_000, Grace: 5_000, Retention: retention}},
				AdditionalRetention: time.Hour, TopicConfigs: map[string]string{"segment.ms": "600000"}},
			{Name: "sess", TopicConfigs: map[string]string{"retention.ms": "-1"}, Options: store.Options{Kind: store.Session, Window: store.WindowSpec{Gap: 30_000}}},
		})
	}
	if err := tm.Ensure(ctx, 2, specs(120_000)); err != nil {
		t.Fatal(err)
	}
	rcs, err := e.adm.DescribeTopicConfigs(ctx, TopicName(app, "win"), TopicName(app, "sess"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		TopicName(app, "win"): {"cleanup.policy": "compact,delete", "retention.ms": "3720000", "segment.ms": "600000",
			"message.timestamp.type": "CreateTime"},
		TopicName(app, "sess"): {"cleanup.policy": "compact,delete", "retention.ms": "-1"}, // the user's config wins
	}
	for _, rc := range rcs {
		got := map[string]string{}
		for _, c := range rc.Configs {
			got[c.Key] = c.MaybeValue()
		}
		for k, v := range want[rc.Name] {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", rc.Name, k, got[k], v)
			}
		}
	}
	if strings.Contains(logs.String(), "another config") {
		t.Fatalf("warned about topics it just created:\n%s", logs.String())
	}
	// The window store's retention grew: the existing topic is left alone, with a warning.
	if err := tm.Ensure(ctx, 2, specs(600_000)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "changelog topic exists with another config") || !strings.Contains(logs.String(), "wants=4200000") {
		t.Errorf("no warning about the stale retention.ms:\n%s", logs.String())
	}
}
