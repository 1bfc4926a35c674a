package changelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProducedRecordsAreCopies checks what the produce path sends: the records' keys,
// values and headers as they were at the call, although the caller reuses its buffers at
// once (the records are copied into shared chunks, or alone when large); empty values stay
// values and nil ones tombstones; the output records keep a nil key, their partition and
// timestamp.
func TestProducedRecordsAreCopies(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 1, StoreSpec{Name: "kv"})
	defer task.Close(ctx)
	big := bytes.Repeat([]byte("v"), 3*slabMaxCopy)
	kbuf, vbuf := make([]byte, 0, 64), make([]byte, 0, 4*slabMaxCopy) // the caller's buffers
	key, val := func(b []byte) []byte { return append(kbuf[:0], b...) }, func(b []byte) []byte { return append(vbuf[:0], b...) }
	scribble := func() { clear(kbuf[:cap(kbuf)]); clear(vbuf[:cap(vbuf)]) } // the caller reuses them
	var wantLog []rec
	var wantOut []string
	for i := range 3000 { // several chunks of records and of bytes
		k := fmt.Sprintf("key%04d", i)
		var err error
		switch i % 4 {
		case 0:
			err = task.Store("kv").Put(key([]byte(k)), val([]byte(fmt.Sprint(i))))
			wantLog = append(wantLog, rec{1, int64(len(wantLog)), k, sp(fmt.Sprint(i))})
		case 1:
			err = task.Store("kv").Put(key([]byte(k)), val(nil)) // empty, not a tombstone
			wantLog = append(wantLog, rec{1, int64(len(wantLog)), k, sp("")})
		case 2:
			err = task.Store("kv").Delete(key([]byte(k)))
			wantLog = append(wantLog, rec{1, int64(len(wantLog)), k, nil})
		case 3:
			err = task.Store("kv").Put(key([]byte(k)), val(big))
			wantLog = append(wantLog, rec{1, int64(len(wantLog)), k, sp(string(big))})
		}
		if err != nil {
			t.Fatal(err)
		}
		scribble()
		if i%10 != 0 {
			continue
		}
		out := OutputRecord{Topic: "output", Partition: int32(i % 3), Timestamp: time.UnixMilli(int64(1000 + i))}
		switch i % 3 {
		case 0:
			out.Key, out.Value = key([]byte(k)), val([]byte("out"))
		case 1:
			out.Value = val([]byte("nokey")) // a nil key stays nil
		case 2:
			out.Key = key([]byte(k)) // a nil value is a tombstone
			out.Headers = []Header{{Key: "h", Value: val([]byte(k))}}
		}
		if err := task.Output(ctx, out); err != nil {
			t.Fatal(err)
		}
		scribble()
		wantOut = append(wantOut, fmt.Sprintf("p%d %d %q %q", out.Partition, 1000+i, keyOf(i), valueOf(i)))
	}
	if !task.HasWork() {
		t.Fatal("HasWork = false with records produced")
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if task.HasWork() {
		t.Fatal("HasWork = true after the commit")
	}
	if got := e.readAll(t, TopicName(app, "kv")); !reflect.DeepEqual(got, wantLog) {
		t.Fatalf("changelog: %d records, want %d; first difference at %d", len(got), len(wantLog), firstDiff(got, wantLog))
	}
	var gotOut []string
	for _, r := range e.readRecords(t, "output") {
		k, v := "<nil>", "<nil>"
		if r.Key != nil {
			k = string(r.Key)
		}
		if r.Value != nil {
			v = string(r.Value)
		}
		if r.Partition == 2 && (len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != k) {
			t.Fatalf("output %s: headers %v", k, r.Headers)
		}
		gotOut = append(gotOut, fmt.Sprintf("p%d %d %q %q", r.Partition, r.Timestamp.UnixMilli(), k, v))
	}
	if len(gotOut) != len(wantOut) {
		t.Fatalf("output: %d records, want %d", len(gotOut), len(wantOut))
	}
	// Per partition in order; across partitions readRecords may interleave.
	for p := range 3 {
		var g, w []string
		for _, s := range gotOut {
			if strings.HasPrefix(s, fmt.Sprintf("p%d ", p)) {
				g = append(g, s)
			}
		}
		for _, s := range wantOut {
			if strings.HasPrefix(s, fmt.Sprintf("p%d ", p)) {
				w = append(w, s)
			}
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("output partition %d:\n got %v\nwant %v", p, g, w)
		}
	}
}

// keyOf and valueOf are what TestProducedRecordsAreCopies emits for its record i.
func keyOf(i int) string {
	if i%3 == 1 {
		return "<nil>"
	}
	return fmt.Sprintf("key%04d", i)
}

func valueOf(i int) string {
	switch i % 3 {
	case 0:
		return "out"
	case 1:
		return "nokey"
	}
	return "<nil>"
}

func firstDiff(a, b []rec) int {
	for i := range min(len(a), len(b)) {
		if !reflect.DeepEqual(a[i], b[i]) {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestCheckpointsPerStore checks that each logged store's checkpoint is the offset of its own
// last acknowledged record, with output records and another store's records produced in
// between, and that a store without writes since the last commit keeps its checkpoint.
func TestCheckpointsPerStore(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 2, StoreSpec{Name: "a"}, StoreSpec{Name: "b"}, StoreSpec{Name: "quiet"}, StoreSpec{Name: "off", LoggingDisabled: true})
	defer task.Close(ctx)
	checkpoints := func() map[string]int64 {
		t.Helper()
		got := map[string]int64{}
		for _, s := range []string{"a", "b", "quiet"} {
			cp, ok, err := task.StoreTask().Partition(s).Checkpoint()
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				got[s] = cp.Offset
			}
		}
		return got
	}
	write := func(store string, n int) {
		t.Helper()
		for i := range n {
			if err := task.Store(store).Put(fmt.Appendf(nil, "%s%d", store, i), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := task.Store("off").Put([]byte("x"), []byte("y")); err != nil {
				t.Fatal(err)
			}
			if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: int32(i % 3), Value: []byte("o")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("a", 7)
	write("b", 3)
	write("a", 2)
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpoints(), map[string]int64{"a": 8, "b": 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoints after the first commit: %v, want %v", got, want)
	}
	write("b", 4)
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpoints(), map[string]int64{"a": 8, "b": 6}; !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoints after the second commit: %v, want %v", got, want)
	}
}

// holdProduces makes the broker hold every produce request until the returned function is
// called (at the end of the test at the latest).
func holdProduces(t *testing.T, e *env) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	e.c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		e.c.SleepControl(func() { <-ch })
		return nil, nil, false
	})
	return release
}

// TestOutputWaitsForRoom fills the producer (kgo.MaxBufferedRecords 4: 3 records in flight)
// while the broker holds every produce, and checks that an output then waits for room until
// its context ends, with an error that names the record's topic and partition and without
// producing it; that a store write waits too; and that both go through once the broker
// answers.
func TestOutputWaitsForRoom(t *testing.T) {
	e := newEnv(t, 3, kgo.MaxBufferedRecords(4))
	a := e.open(t, 0, StoreSpec{Name: "kv"})
	b := e.open(t, 1, StoreSpec{Name: "kv"})
	c := e.open(t, 2, StoreSpec{Name: "kv"})
	defer a.Close(ctx)
	defer b.Close(ctx)
	defer c.Close(ctx)
	release := holdProduces(t, e)
	defer release() // before the tasks close, which wait for their records

	for _, k := range []string{"a1", "a2"} {
		if err := a.Store("kv").Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	refused := make(chan error, 1)
	go func() {
		refused <- a.Output(short, OutputRecord{Topic: "output", Partition: 1, Value: []byte("refused")})
	}()
	var err error
	select {
	case err = <-refused:
	case <-time.After(5 * time.Second):
		t.Fatal("an output into a full producer did not return at its deadline")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "output partition 1") {
		t.Fatalf("output into a full producer: %v", err)
	}
	if waited := time.Since(began); waited < 250*time.Millisecond {
		t.Fatalf("the output gave up after %v, before its deadline", waited)
	}

	// Another task's output and store write wait for room.
	outDone, putDone := make(chan error, 1), make(chan error, 1)
	go func() { outDone <- b.Output(ctx, OutputRecord{Topic: "output", Partition: 2, Value: []byte("waited")}) }()
	go func() { putDone <- c.Store("kv").Put([]byte("c1"), []byte("waited")) }()
	select {
	case err := <-outDone:
		t.Fatalf("an output did not wait for room: %v", err)
	case err := <-putDone:
		t.Fatalf("a store write did not wait for room: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	for _, ch := range []chan error{outDone, putDone} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting record was not let through after the broker answered")
		}
	}
	for _, task := range []*Task{a, b, c} {
		if err := task.Commit(ctx, nil); err != nil { // the refused output did not fail its task
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range e.readRecords(t, "output") {
		got = append(got, fmt.Sprintf("p%d %s", r.Partition, r.Value))
	}
	slices.Sort(got)
	if want := []string{"p0 first", "p2 waited"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("output: %v, want %v", got, want)
	}
	if got := e.readAll(t, TopicName(app, "kv")); len(got) != 3 {
		t.Fatalf("changelog: %s, want a1, a2 and c1", show(got))
	}
}

// TestCloseDropsQueuedRecords checks that the records a task queued since its last Flush
// never reach the broker when it closes (under exactly-once they belong to an aborted
// transaction, and must not land in the next one), while the flushed ones do, and that the
// task opens again at once.
func TestCloseDropsQueuedRecords(t *testing.T) {
	e := newEnv(t, 3)
	task := e.open(t, 0, StoreSpec{Name: "kv"})
	if err := task.Store("kv").Put([]byte("flushed"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Value: []byte("flushed")}); err != nil {
		t.Fatal(err)
	}
	task.Flush()
	if err := task.Store("kv").Put([]byte("queued"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Value: []byte("queued")}); err != nil {
		t.Fatal(err)
	}
	if err := task.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "proc", Partition: 0, Stores: []StoreSpec{{Name: "kv"}}})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer again.Close(ctx)
	// A record produced now lands after anything of the closed task that could still come.
	if err := again.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Value: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if err := again.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.readAll(t, TopicName(app, "kv")); len(got) != 1 || got[0].Key != "flushed" {
		t.Fatalf("changelog: %s, want only the flushed record", show(got))
	}
	var got []string
	for _, r := range e.readRecords(t, "output") {
		got = append(got, string(r.Value))
	}
	if want := []string{"flushed", "after"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("output: %v, want %v", got, want)
	}
}
