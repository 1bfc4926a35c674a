package changelog

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProducerNeedsAllAcks checks that a producer client without acks=all is refused: a
// checkpoint must never name a record that a leader failover can lose.
func TestProducerNeedsAllAcks(t *testing.T) {
	e := newEnv(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := NewProducer(cl); err == nil || !strings.Contains(err.Error(), "AllISRAcks") {
		t.Fatalf("err = %v", err)
	}
}

// TestStoreBelongsToOneProcessor checks that two processors cannot log a store of the same
// name: they would write the same changelog partitions and restore each other's records.
func TestStoreBelongsToOneProcessor(t *testing.T) {
	e := newEnv(t, 3)
	if err := e.tm.Ensure(ctx, 3, []TopicSpec{{Store: "kv"}}); err != nil {
		t.Fatal(err)
	}
	a, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "a", Partition: 0, Stores: []StoreSpec{{Name: "kv"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	_, err = OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "b", Partition: 1, Stores: []StoreSpec{{Name: "kv"}}})
	if err == nil || !strings.Contains(err.Error(), `store "kv" of processor "b" is already the store of processor "a"`) {
		t.Fatalf("second owner: err = %v", err)
	}
	// The same task cannot be open twice.
	if _, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "a", Partition: 0, Stores: []StoreSpec{{Name: "kv"}}}); err == nil || !strings.Contains(err.Error(), "already open") {
		t.Fatalf("second open of a_0: err = %v", err)
	}
	// The same processor on another partition, and an unlogged store of the same name
	// elsewhere (it has no topic), are fine.
	a1, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "a", Partition: 1, Stores: []StoreSpec{{Name: "kv"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a1.Close(ctx)
	c, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "c", Partition: 0, Stores: []StoreSpec{{Name: "kv", LoggingDisabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
}

// TestInFlightRecordsOfClosedTask holds the broker's answer to a produce, so that a commit
// fails while a changelog record is in flight, and checks that the task cannot be reopened
// (whose restore would capture an end offset before the record lands, and whose next
// checkpoint would jump over it) until the record has landed.
func TestInFlightRecordsOfClosedTask(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 0, StoreSpec{Name: "kv"})
	_ = task.Store("kv").Put([]byte("k0"), []byte("committed"))
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	var once sync.Once
	e.c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		held := false
		once.Do(func() { held = true })
		if held {
			e.c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	_ = task.Store("kv").Put([]byte("x"), []byte("in flight"))
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := task.Commit(short, nil)
	cancel()
	if !errors.Is(err, ErrTaskFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("commit with the produce held: %v", err)
	}
	short, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	err = task.Close(short)
	cancel()
	if !errors.Is(err, ErrInFlight) {
		t.Fatalf("Close with a record in flight: %v", err)
	}
	_, err = OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "proc", Partition: 0, Stores: []StoreSpec{{Name: "kv"}}})
	var ife *InFlightError
	if !errors.As(err, &ife) || ife.Records != 1 || !errors.Is(err, ErrInFlight) {
		t.Fatalf("reopen with a record in flight: %v", err)
	}

	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		task, err = OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "proc", Partition: 0, Stores: []StoreSpec{{Name: "kv"}}})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrInFlight) || time.Now().After(deadline) {
			t.Fatalf("reopen after the release: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer task.Close(ctx)
	// When the task opens again, the record of its previous incarnation is in the log, so a
	// restore starting now replays it.
	got := e.readAll(t, TopicName(app, "kv"))
	if len(got) != 2 || got[1].Key != "x" || got[1].Offset != 1 {
		t.Fatalf("changelog when the task reopened: %+v", got)
	}
}

// TestHoldHandOvers checks that a task's queued records reach the client only while the
// producer's hand-overs are not held, and that HandOvers counts the flushes that handed
// records over.
func TestHoldHandOvers(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 0, StoreSpec{Name: "kv"})
	if err := task.Store("kv").Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if n := task.HandOvers(); n != 0 {
		t.Fatalf("HandOvers before any flush: %d", n)
	}
	release := e.prod.HoldHandOvers()
	flushed := make(chan struct{})
	go func() {
		task.Flush()
		close(flushed)
	}()
	// The flush waits for the release; nothing can tell "not yet" from "never" but the
	// release below, after which it must finish.
	select {
	case <-flushed:
		t.Fatal("Flush handed records over while hand-overs were held")
	case <-time.After(50 * time.Millisecond):
	}
	if n := task.HandOvers(); n != 0 {
		t.Fatalf("HandOvers while the flush waits: %d", n)
	}
	release()
	<-flushed
	if n := task.HandOvers(); n != 1 {
		t.Fatalf("HandOvers after the flush: %d, want 1", n)
	}
	task.Flush() // nothing queued: nothing handed over
	if _, err := task.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if n := task.HandOvers(); n != 1 {
		t.Fatalf("HandOvers after an empty flush and a Prepare with nothing queued: %d, want 1", n)
	}
}
