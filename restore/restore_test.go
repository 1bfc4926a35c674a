package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/store"
)

var kv = changelog.StoreSpec{Name: "kv"}

// writeState makes a task write a mix of puts, overwrites, deletes and empty values over several commits, and returns the resulting state.
func writeState(t *testing.T, task *changelog.Task, name string) []string {
	t.Helper()
	s := task.Store(name)
	for round := range 4 {
		for i := range 100 {
			k := fmt.Appendf(nil, "k%03d", i)
			switch {
			case i%7 == round:
				_ = s.Delete(k)
			case i%11 == 0:
				_ = s.Put(k, nil)
			default:
				_ = s.Put(k, fmt.Appendf(nil, "r%d-%d", round, i))
			}
		}
		if err := task.Commit(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	return dump(t, s)
}

// coldPaths are the two ways of a cold restore, by the Settings.ColdLoadMin that picks each
// for the tests' short changelogs: a store.Loader's ingested runs, and batches.
var coldPaths = []struct {
	name string
	min  int64
}{{"loader", 1}, {"batches", 1 << 40}}

// TestColdRestore restores a task into an empty state directory and checks that the state is
// reproduced exactly, tombstones and empty values included, through a Loader and in batches.
func TestColdRestore(t *testing.T) {
	for _, b := range []store.Backend{store.Pebble, store.Memory} {
		for _, path := range coldPaths {
			t.Run(b.String()+"/"+path.name, func(t *testing.T) { testColdRestore(t, b, path.min) })
		}
	}
}

func testColdRestore(t *testing.T, b store.Backend, coldLoadMin int64) {
	e := newEnv(t)
	spec := changelog.StoreSpec{Name: "kv", Options: store.Options{Backend: b}}
	task := e.task(t, 1, spec)
	want := writeState(t, task, "kv")
	if len(want) < 50 {
		t.Fatalf("state too small: %d", len(want))
	}
	_ = task.Close(ctx)
	e.manager(t, t.TempDir()) // a new, empty disk
	task = e.task(t, 1, spec)
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{ColdLoadMin: coldLoadMin}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %v\nwant %v", got, want)
	}
	if len(rec.starts) != 1 || rec.starts[0].StartOffset != 0 || rec.starts[0].EndOffset != 400 {
		t.Fatalf("start events %+v", rec.starts)
	}
	if n := rec.restored(); n != 400 {
		t.Fatalf("restored %d records, want all 400", n)
	}
	if b == store.Pebble {
		raw, err := os.ReadFile(filepath.Join(task.Dir(), store.CheckpointFileName))
		if err != nil || string(raw) != "0\n1\napp-kv-changelog 1 399\n" {
			t.Fatalf(".checkpoint after restore = %q, %v", raw, err)
		}
	}
}

// TestColdRestoreOfTasks restores three tasks of two stores each in one Restore, as the
// runtime restores the tasks a rebalance gave it. Every store must come back exactly, with
// its checkpoint.
func TestColdRestoreOfTasks(t *testing.T) {
	for _, path := range coldPaths {
		t.Run(path.name, func(t *testing.T) { testColdRestoreOfTasks(t, path.min) })
	}
}

func testColdRestoreOfTasks(t *testing.T, coldLoadMin int64) {
	e := newEnv(t)
	specs := []changelog.StoreSpec{{Name: "kv"}, {Name: "kv2"}}
	want := map[string][]string{}
	for p := range int32(3) {
		task := e.task(t, p, specs...)
		for _, name := range []string{"kv", "kv2"} {
			want[fmt.Sprintf("%s/%d", name, p)] = writeState(t, task, name)
		}
		_ = task.Close(ctx)
	}
	e.manager(t, t.TempDir()) // a new, empty disk
	var tasks []*changelog.Task
	for p := range int32(3) {
		tasks = append(tasks, e.task(t, p, specs...))
	}
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{ColdLoadMin: coldLoadMin}).Restore(timeout(t), tasks...); err != nil {
		t.Fatal(err)
	}
	for p, task := range tasks {
		for _, name := range []string{"kv", "kv2"} {
			k := fmt.Sprintf("%s/%d", name, p)
			if got := dump(t, task.Store(name)); !reflect.DeepEqual(got, want[k]) {
				t.Fatalf("store %s: restored state differs:\n got %v\nwant %v", k, got, want[k])
			}
		}
		raw, err := os.ReadFile(filepath.Join(task.Dir(), store.CheckpointFileName))
		wantFile := fmt.Sprintf("0\n2\napp-kv-changelog %d 399\napp-kv2-changelog %d 399\n", p, p)
		if err != nil || string(raw) != wantFile {
			t.Fatalf("task %d: .checkpoint after restore = %q, %v; want %q", p, raw, err, wantFile)
		}
	}
	if n := rec.restored(); n != 3*2*400 {
		t.Fatalf("restored %d records, want all %d", n, 3*2*400)
	}
	if len(rec.ends) != 6 {
		t.Fatalf("%d end events, want one per store partition: 6", len(rec.ends))
	}
}

// TestWarmRestart checks that a task reopened on its own disk replays exactly the changelog records after its checkpoint.
func TestWarmRestart(t *testing.T) {
	e := newEnv(t)
	task := e.task(t, 0, kv)
	for i := range 100 {
		_ = task.Store("kv").Put(fmt.Appendf(nil, "key%06d", i), fmt.Appendf(nil, "val%06d", i))
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = task.Close(ctx)
	// Another instance ran the task for a while.
	e.produce(t, changelog.TopicName(app, "kv"), 0, 100, 37, 10)

	task = e.task(t, 0, kv)
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if n := rec.restored(); n != 37 {
		t.Fatalf("replayed %d records, want exactly the 37 after the checkpoint", n)
	}
	if rec.starts[0].StartOffset != 100 || rec.starts[0].EndOffset != 137 {
		t.Fatalf("start event %+v", rec.starts[0])
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, 137)) {
		t.Fatalf("state has %d keys, want 137", len(got))
	}
	// Nothing new: a second restore replays nothing.
	rec2 := &recorder{}
	if err := e.restorer(t, rec2, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if n := rec2.restored(); n != 0 || len(rec2.ends) != 1 {
		t.Fatalf("second restore: %d records, %d end events", n, len(rec2.ends))
	}
}

// TestInterruptedRestoreResumes cancels a restore after a few batches, as a rebalance would, and checks that the next restore resumes from the checkpoint of the last applied batch.
func TestInterruptedRestoreResumes(t *testing.T) {
	for _, how := range []string{"cancel", "close-client"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			topic := changelog.TopicName(app, "kv")
			task := e.task(t, 2, kv)
			e.produce(t, topic, 2, 0, 3000, 100) // 30 batches

			// Small fetches: about one batch per fetch.
			cl := e.client(t, kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchMaxPartitionBytes(512), kgo.FetchMaxBytes(512))
			rctx, cancel := context.WithCancel(timeout(t))
			rec := &recorder{}
			rec.onBatch = func(n int) {
				if n == 3 {
					if how == "cancel" {
						cancel()
					} else {
						// Closed before the applier goes on: the restore cannot have read
						// to the end before the close took effect.
						cl.Close()
					}
				}
			}
			r, err := New(cl, kadm.NewClient(e.cl), Settings{Listener: rec})
			if err != nil {
				t.Fatal(err)
			}
			err = r.Restore(rctx, task)
			cancel()
			if err == nil {
				t.Fatal("interrupted restore returned nil")
			}
			if how == "cancel" && !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			cp, ok, _ := task.StoreTask().Partition("kv").Checkpoint()
			last := rec.batches[len(rec.batches)-1].Offset
			if !ok || cp.Offset != last || last >= 2999 {
				t.Fatalf("checkpoint %d (%v) after batches up to %d", cp.Offset, ok, last)
			}
			applied := len(dump(t, task.Store("kv")))
			if int64(applied) != last+1 {
				t.Fatalf("%d keys applied but checkpoint %d", applied, last)
			}
			_ = task.Close(ctx)

			task = e.task(t, 2, kv)
			rec2 := &recorder{}
			if err := e.restorer(t, rec2, Settings{}).Restore(timeout(t), task); err != nil {
				t.Fatal(err)
			}
			if rec2.starts[0].StartOffset != last+1 {
				t.Fatalf("resumed at %d, want %d", rec2.starts[0].StartOffset, last+1)
			}
			if n := rec2.restored(); n != 3000-(last+1) {
				t.Fatalf("replayed %d records, want %d", n, 3000-(last+1))
			}
			if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, 3000)) {
				t.Fatalf("state has %d keys, want 3000", len(got))
			}
		})
	}
}

// TestTruncatedChangelog truncates the changelog past a task's checkpoint (DeleteRecords) and checks that the store is wiped and restored from the new log start, with a "before start" warning.
func TestTruncatedChangelog(t *testing.T) {
	e := newEnv(t)
	topic := changelog.TopicName(app, "kv")
	task := e.task(t, 0, kv)
	for i := range 100 {
		_ = task.Store("kv").Put(fmt.Appendf(nil, "key%06d", i), fmt.Appendf(nil, "val%06d", i))
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = task.Close(ctx)
	e.produce(t, topic, 0, 100, 100, 25)
	e.truncate(t, topic, 150)
	if t.Failed() {
		t.FailNow()
	}

	task = e.task(t, 0, kv)
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if len(rec.discarded) != 1 || rec.discarded[0].Reason != BeforeStart || rec.discarded[0].Checkpoint != 99 || rec.discarded[0].LogStart != 150 {
		t.Fatalf("discarded = %+v", rec.discarded)
	}
	if !strings.Contains(rec.discarded[0].Error(), "before the changelog start") {
		t.Fatalf("warning %q", rec.discarded[0])
	}
	if rec.starts[0].StartOffset != 150 || rec.restored() != 50 {
		t.Fatalf("start %+v, restored %d", rec.starts[0], rec.restored())
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(150, 50)) {
		t.Fatalf("state = %d keys from %v, want exactly offsets 150..199", len(got), got[:1])
	}
}

// TestRecreatedChangelog deletes and recreates the changelog and checks that the store is wiped and fully restored: with fewer records than the checkpoint (beyond the end) and with more (the topic ID changed).
func TestRecreatedChangelog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		reason Reason
	}{{"fewer", 10, BeyondEnd}, {"more", 250, Recreated}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			topic := changelog.TopicName(app, "kv")
			task := e.task(t, 0, kv)
			// As the runtime does: restore before processing (this records the topic ID).
			if err := e.restorer(t, nil, Settings{}).Restore(timeout(t), task); err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				_ = task.Store("kv").Put(fmt.Appendf(nil, "old%06d", i), []byte("v"))
			}
			if err := task.Commit(ctx, nil); err != nil {
				t.Fatal(err)
			}
			_ = task.Close(ctx)
			if _, err := e.adm.DeleteTopic(ctx, topic); err != nil {
				t.Fatal(err)
			}
			awaitTopicGone(t, e.adm, topic)
			// Fresh clients: the old ones hold the old topic's metadata.
			e.cl = e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			e.adm = kadm.NewClient(e.cl)
			e.tm, _ = changelog.NewTopicManager(e.adm, changelog.TopicSettings{AppID: app})
			e.prod, _ = changelog.NewProducer(e.cl)
			if err := e.tm.Ensure(ctx, 3, []changelog.TopicSpec{{Store: "kv"}}); err != nil {
				t.Fatal(err)
			}
			e.produce(t, topic, 0, 0, tc.n, 50)

			task = e.task(t, 0, kv)
			rec := &recorder{}
			if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
				t.Fatal(err)
			}
			if len(rec.discarded) != 1 || rec.discarded[0].Reason != tc.reason {
				t.Fatalf("discarded = %+v, want reason %v", rec.discarded, tc.reason)
			}
			if rec.restored() != int64(tc.n) {
				t.Fatalf("restored %d, want %d", rec.restored(), tc.n)
			}
			if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, tc.n)) {
				t.Fatalf("state has %d keys, want the %d of the new topic only", len(got), tc.n)
			}
		})
	}
}

// TestMemoryStoreRestoresFully checks that a memory store restores its whole changelog at
// every open of its task, and that a second restore of the same open task (a standby task
// promoted in place) resumes from what it applied: nothing to do, the state intact.
func TestMemoryStoreRestoresFully(t *testing.T) {
	e := newEnv(t)
	spec := changelog.StoreSpec{Name: "mem", Options: store.Options{Backend: store.Memory}}
	task := e.task(t, 0, spec)
	want := writeState(t, task, "mem")
	_ = task.Close(ctx)
	for range 2 {
		task = e.task(t, 0, spec)
		if got := dump(t, task.Store("mem")); len(got) != 0 {
			t.Fatalf("memory store kept %d keys across a close", len(got))
		}
		for i := range 2 {
			rec := &recorder{}
			if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
				t.Fatal(err)
			}
			wantStart, wantN := int64(0), int64(400)
			if i == 1 {
				wantStart, wantN = 400, 0
			}
			if rec.starts[0].StartOffset != wantStart || rec.restored() != wantN {
				t.Fatalf("restore %d: start %+v restored %d, want %d and %d", i, rec.starts[0], rec.restored(), wantStart, wantN)
			}
			if got := dump(t, task.Store("mem")); !reflect.DeepEqual(got, want) {
				t.Fatalf("memory store state differs")
			}
		}
		_ = task.Close(ctx)
	}
}

// TestLoggingDisabledRestoresNothing checks that a store without changelog is not restored and needs no topic.
func TestLoggingDisabledRestoresNothing(t *testing.T) {
	e := newEnv(t)
	task := e.task(t, 0, changelog.StoreSpec{Name: "nolog", LoggingDisabled: true})
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if len(rec.starts) != 0 {
		t.Fatalf("events for an unlogged store: %+v", rec.starts)
	}
}

// TestTrailingTransactionMarker writes the changelog in transactions, so that the last offset is a commit (or abort) marker the consumer never returns, and checks that the restore finishes with exactly the committed data.
func TestTrailingTransactionMarker(t *testing.T) {
	for _, tc := range []struct {
		name          string
		readCommitted bool
		keepControl   bool
		abortLast     bool
	}{
		{"uncommitted", false, false, false},
		{"uncommitted-keep-control", false, true, false},
		{"read-committed-abort", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			topic := changelog.TopicName(app, "kv")
			task := e.task(t, 0, kv)
			txn := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("tx-"+tc.name))
			for round := range 3 {
				if err := txn.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				for i := range 20 {
					k := round*20 + i
					if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "key%06d", k), Value: fmt.Appendf(nil, "val%06d", k)}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
				commit := kgo.TryCommit
				if tc.abortLast && round == 2 {
					commit = kgo.TryAbort
				}
				if err := txn.EndTransaction(ctx, commit); err != nil {
					t.Fatal(err)
				}
			}
			var opts []kgo.Opt
			if tc.readCommitted {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
			if tc.keepControl {
				opts = append(opts, kgo.KeepControlRecords())
			}
			rec := &recorder{}
			r := e.restorer(t, rec, Settings{ReadCommitted: tc.readCommitted, ProbeInterval: 100 * time.Millisecond}, opts...)
			if err := r.Restore(timeout(t), task); err != nil {
				t.Fatalf("restore did not finish: %v", err)
			}
			wantN := 60
			if tc.abortLast {
				wantN = 40
			}
			if rec.starts[0].EndOffset != 63 {
				t.Fatalf("end offset %d, want 63 (60 records + 3 markers)", rec.starts[0].EndOffset)
			}
			if rec.restored() != int64(wantN) {
				t.Fatalf("restored %d records, want %d", rec.restored(), wantN)
			}
			if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, wantN)) {
				t.Fatalf("state has %d keys, want %d", len(got), wantN)
			}
		})
	}
}

// TestNewValidatesClient checks that a restore client that would silently skip truncated records is refused.
func TestNewValidatesClient(t *testing.T) {
	e := newEnv(t)
	cl := e.client(t)
	if _, err := New(cl, kadm.NewClient(cl), Settings{}); err == nil || !strings.Contains(err.Error(), "NoResetOffset") {
		t.Fatalf("err = %v", err)
	}
	cl = e.client(t, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	if _, err := New(cl, kadm.NewClient(cl), Settings{}); err == nil || !strings.Contains(err.Error(), "FetchMaxWait") {
		t.Fatalf("err = %v", err)
	}
	cl = e.client(t, kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(time.Second))
	if _, err := New(cl, kadm.NewClient(cl), Settings{ReadCommitted: true}); err == nil || !strings.Contains(err.Error(), "isolation") {
		t.Fatalf("err = %v", err)
	}
}

// TestColdRestoreInRuns restores a changelog far larger than the store's load budget (the
// minimum memory setting gives its loaders 1 MiB in all) into an empty state directory: the
// load spills sorted runs, ingested one after the other, and the newest write of every key
// wins across them, deletes included. A warm restart then replays nothing.
func TestColdRestoreInRuns(t *testing.T) {
	e := newEnv(t)
	topic := changelog.TopicName(app, "kv")
	task := e.task(t, 0, kv)
	_ = task.Close(ctx)
	want := map[string]string{}
	const n, keys = 60_000, 15_000
	for i := range n {
		k := fmt.Sprintf("key%06d", (i*7919)%keys)
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(k), Value: fmt.Appendf(nil, "v%d-with-some-padding", i)}
		if i%13 == 0 {
			r.Value = nil
			delete(want, k)
		} else {
			want[k] = string(r.Value)
		}
		e.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := e.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var wantLines []string
	for k, v := range want {
		wantLines = append(wantLines, k+"="+v)
	}
	slices.Sort(wantLines)

	e.manager(t, t.TempDir()) // a new, empty disk
	task = e.task(t, 0, kv)
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, wantLines) {
		t.Fatalf("restored %d keys, want %d", len(got), len(wantLines))
	}
	if got := rec.restored(); got != n {
		t.Fatalf("restored %d records, want %d", got, n)
	}
	if len(rec.ends) != 1 || rec.ends[0].Runs < 4 {
		t.Fatalf("end events %+v: want one, of a load in several runs", rec.ends)
	}
	cp, ok, _ := task.StoreTask().Partition("kv").Checkpoint()
	if !ok || cp.Offset != n-1 {
		t.Fatalf("checkpoint %d (%v), want %d", cp.Offset, ok, n-1)
	}
	_ = task.Close(ctx)
	task = e.task(t, 0, kv)
	rec = &recorder{}
	if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if got := rec.restored(); got != 0 {
		t.Fatalf("the warm restart replayed %d records", got)
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, wantLines) {
		t.Fatalf("after the restart %d keys, want %d", len(got), len(wantLines))
	}
}

// TestColdRestoreOfLargeBatches restores three partitions whose changelogs hold batches of
// about 870 KiB, beyond the 256 KiB a load's fetch asks of a partition: Kafka returns such a
// batch cut short unless its partition comes first in the response, and the load then asks
// for the batch's size. Every store must come back whole.
func TestColdRestoreOfLargeBatches(t *testing.T) {
	e := newEnv(t)
	topic := changelog.TopicName(app, "kv")
	var tasks []*changelog.Task
	for p := range int32(3) {
		tasks = append(tasks, e.task(t, p, kv))
	}
	pcl := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond), kgo.ProducerBatchMaxBytes(900<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // compressed, the batches would be small
	value := bytes.Repeat([]byte("v"), 30<<10)
	want := map[int32][]string{}
	for p := range int32(3) {
		for i := range 100 {
			k := fmt.Sprintf("key%d-%03d", p, i)
			pcl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
			want[p] = append(want[p], k+"="+string(value))
		}
		if err := pcl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), tasks...); err != nil {
		t.Fatal(err)
	}
	for p, task := range tasks {
		if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, want[int32(p)]) {
			t.Fatalf("partition %d: restored %d keys, want %d", p, len(got), len(want[int32(p)]))
		}
	}
}
