package restore

import (
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
)

// TestOpenTransactionIsNotCorruption leaves a transaction of another producer open on the
// changelog, which holds the last stable offset below records the store has applied, and
// checks that a read_committed restore waits for it to end (the broker aborts it after its
// timeout), then sees an up-to-date store, not a corrupt one: nothing is wiped, nothing is
// lost.
func TestOpenTransactionIsNotCorruption(t *testing.T) {
	e := newEnv(t)
	topic := changelog.TopicName(app, "kv")
	task := e.task(t, 0, kv)
	for i := range 10 {
		_ = task.Store("kv").Put(fmt.Appendf(nil, "key%06d", i), fmt.Appendf(nil, "val%06d", i))
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	const txnTimeout = 1500 * time.Millisecond
	zombie := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("zombie"), kgo.TransactionTimeout(txnTimeout))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("zombie"), Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	_ = task.Store("kv").Put([]byte("key000010"), []byte("val000010"))
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if cp, _, _ := task.StoreTask().Partition("kv").Checkpoint(); cp.Offset != 11 {
		t.Fatalf("checkpoint %d, want 11 (10 records, the zombie's, ours)", cp.Offset)
	}
	_ = task.Close(ctx)

	task = e.task(t, 0, kv)
	rec := &recorder{}
	r := e.restorer(t, rec, Settings{ReadCommitted: true}, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err := r.Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if lso := e.lastStable(t, topic, 0); lso < 13 {
		t.Fatalf("restore ended while the zombie's transaction was open (last stable offset %d)", lso)
	}
	if len(rec.discarded) != 0 {
		t.Fatalf("checkpoint discarded: %v", rec.discarded[0])
	}
	if n := rec.restored(); n != 0 {
		t.Fatalf("restored %d records, want 0", n)
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, 11)) {
		t.Fatalf("state after restore: %v", got)
	}
}

// TestRestoreWaitsForOpenTransaction: a previous owner's transaction is open on the
// changelog when the restore begins, and commits while it runs (its input offsets were
// committed in it before the owner lost the task). The restore must include its records: an
// end at the last stable offset seen at the start would lose them for good.
func TestRestoreWaitsForOpenTransaction(t *testing.T) {
	e := newEnv(t)
	topic := changelog.TopicName(app, "kv")
	task := e.task(t, 0, kv) // creates the changelog
	e.produce(t, topic, 0, 0, 5, 5)
	prev := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("previous-owner"))
	if err := prev.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 8; i++ {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "key%06d", i), Value: fmt.Appendf(nil, "val%06d", i)}
		if err := prev.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	r := e.restorer(t, rec, Settings{ReadCommitted: true}, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	done := make(chan error, 1)
	go func() { done <- r.Restore(timeout(t), task) }()
	select {
	case err := <-done:
		t.Fatalf("the restore ended (%v) while a transaction was open on the changelog", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := prev.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, 8)) {
		t.Fatalf("state after restore: %v, want the 5 records and the 3 of the committed transaction", got)
	}
}

// TestLongAbortedTail ends the changelog with an aborted transaction far larger than what
// one probe reads (16 fetches of 1 MiB), and checks that a read_committed restore without
// control records crosses it and finishes with exactly the committed records.
func TestLongAbortedTail(t *testing.T) {
	e := newEnv(t)
	topic := changelog.TopicName(app, "kv")
	task := e.task(t, 0, kv)
	e.produce(t, topic, 0, 0, 10, 10)
	txn := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("aborter"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 24_000 {
		value := make([]byte, 1<<10)
		_, _ = rand.Read(value) // incompressible: 24 MiB in the log
		txn.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "aborted%06d", i), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := txn.Flush(ctx); err != nil { // every record in the log before the abort marker
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	// A probe's fetches queue behind the consumer's long polls on the same connection: a
	// short FetchMaxWait keeps this test quick.
	r := e.restorer(t, rec, Settings{ReadCommitted: true, ProbeInterval: 100 * time.Millisecond},
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	if err := r.Restore(timeout(t), task); err != nil {
		t.Fatalf("restore did not finish: %v", err)
	}
	if rec.starts[0].EndOffset != 24_011 || rec.restored() != 10 {
		t.Fatalf("end offset %d, restored %d; want 24011 and 10", rec.starts[0].EndOffset, rec.restored())
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, 10)) {
		t.Fatalf("state has %d keys, want the 10 committed ones", len(got))
	}
}

// TestDataWithoutCheckpointIsWiped writes a Pebble store with logging disabled, then turns
// logging on: the local data was never logged, so the changelog cannot vouch for it, and
// the restore replaces it with exactly the changelog's state.
func TestDataWithoutCheckpointIsWiped(t *testing.T) {
	e := newEnv(t)
	task := e.task(t, 0, changelog.StoreSpec{Name: "kv", LoggingDisabled: true})
	_ = task.Store("kv").Put([]byte("never-logged"), []byte("x"))
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = task.Close(ctx)

	task = e.task(t, 0, kv)
	e.produce(t, changelog.TopicName(app, "kv"), 0, 0, 10, 10)
	rec := &recorder{}
	if err := e.restorer(t, rec, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, 10)) {
		t.Fatalf("state after restore: %v", got)
	}
}

// TestTruncatedDuringRestore truncates the changelog while a restore reads it: the restore
// fails with an *OutOfRangeError (it never skips records silently), and the next restore
// finds its checkpoint before the log start, wipes the store and restores from there.
func TestTruncatedDuringRestore(t *testing.T) {
	e := newEnv(t)
	topic := changelog.TopicName(app, "kv")
	task := e.task(t, 0, kv)
	e.produce(t, topic, 0, 0, 3000, 100)

	cl := e.client(t, kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchMaxPartitionBytes(512), kgo.FetchMaxBytes(512))
	rec := &recorder{}
	rec.onBatch = func(n int) {
		if n == 2 {
			e.truncate(t, topic, 2500)
		}
	}
	r, err := New(cl, kadm.NewClient(e.cl), Settings{Listener: rec})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Restore(timeout(t), task)
	var oor *OutOfRangeError
	if !errors.As(err, &oor) || oor.Topic != topic || oor.Partition != 0 {
		t.Fatalf("restore of a changelog truncated under it: %v", err)
	}

	rec2 := &recorder{}
	if err := e.restorer(t, rec2, Settings{}).Restore(timeout(t), task); err != nil {
		t.Fatal(err)
	}
	if len(rec2.discarded) != 1 || rec2.discarded[0].Reason != BeforeStart {
		t.Fatalf("discarded checkpoints: %v", rec2.discarded)
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(2500, 500)) {
		t.Fatalf("state has %d keys, want the 500 after the truncation", len(got))
	}
}
