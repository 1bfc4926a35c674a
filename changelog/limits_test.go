package changelog

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// waitFor polls cond until it holds; it fails the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBytesInFlightBounded checks the producer's bound on the bytes in flight: while the
// broker holds every produce, records are let in while the records in flight hold less than
// the bound (so the last one may pass it), then a store write and an output wait for room,
// telling the task's hook, until the broker answers; a record larger than the whole bound
// goes alone.
func TestBytesInFlightBounded(t *testing.T) {
	e := newEnv(t, 3)
	var err error
	if e.prod, err = NewProducer(e.cl, WithMaxBytesInFlight(1000)); err != nil {
		t.Fatal(err)
	}
	if n := e.prod.MaxBytesInFlight(); n != 1000 {
		t.Fatalf("MaxBytesInFlight() = %d, want 1000", n)
	}
	task := e.open(t, 0, StoreSpec{Name: "kv"})
	defer task.Close(ctx)
	release := holdProduces(t, e)
	defer release() // before the task closes, which waits for its records
	hook := &waitLog{}
	task.SetWaitHook(hook)

	v := bytes.Repeat([]byte("v"), 399)         // with its one-byte key: 400 bytes
	for _, k := range []string{"a", "b", "c"} { // 0, 400 and 800 bytes in flight before each
		if err := task.Store("kv").Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if b, _, _ := hook.counts(); b != 0 {
		t.Fatalf("%d waits for records that had room", b)
	}
	done := make(chan error, 2)
	go func() { done <- task.Store("kv").Put([]byte("d"), v) }()
	waitFor(t, "the write to wait for room", func() bool { _, _, active := hook.counts(); return active == 1 })
	select {
	case err := <-done:
		t.Fatalf("a write past the bound on bytes in flight did not wait: %v", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// Nothing in flight: a record larger than the bound goes.
	if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Value: make([]byte, 5000)}); err != nil {
		t.Fatal(err)
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.readAll(t, TopicName(app, "kv")); len(got) != 4 {
		t.Fatalf("changelog: %s, want a to d", show(got))
	}
}

// fixedSource is a Source that names one input record.
type fixedSource struct{ in Input }

func (s *fixedSource) InputRecord() (Input, bool) { return s.in, s.in.Topic != "" }

// TestProduceErrorNamesInput checks that a record the broker refuses fails the commit with a
// *ProduceError that names the input record it belongs to: the one the task's Source named
// when it was written or emitted, or the one its OutputRecord names.
func TestProduceErrorNamesInput(t *testing.T) {
	e := newEnv(t, 3)
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := e.adm.AlterTopicConfigs(ctx2, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("1000")}}, "output"); err != nil {
		t.Fatal(err)
	}
	for _, explicit := range []bool{false, true} {
		task := e.open(t, 0, StoreSpec{Name: "kv"})
		src := &fixedSource{}
		task.SetSource(src)
		src.in = Input{Topic: "in", Partition: 2, Offset: 6}
		if err := task.Store("kv").Put([]byte("a"), []byte("1")); err != nil {
			t.Fatal(err)
		}
		src.in = Input{Topic: "in", Partition: 2, Offset: 7}
		value := make([]byte, 2000)
		_, _ = rand.Read(value) // incompressible: the producer compresses batches
		rec := OutputRecord{Topic: "output", Partition: 1, Value: value}
		want := src.in
		if explicit {
			want = Input{Topic: "other", Partition: 0, Offset: 3}
			rec.Input = want
		}
		if err := task.Output(ctx, rec); err != nil {
			t.Fatal(err)
		}
		err := task.Commit(ctx, nil)
		var pe *ProduceError
		if !errors.As(err, &pe) || !errors.Is(err, kerr.MessageTooLarge) || pe.Topic != "output" || pe.Partition != 1 || pe.Input != want ||
			!strings.Contains(err.Error(), `input record "`+want.Topic+`"`) {
			t.Fatalf("explicit %v: commit: %v; want a *ProduceError of output partition 1 naming input %+v", explicit, err, want)
		}
		if err := task.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
