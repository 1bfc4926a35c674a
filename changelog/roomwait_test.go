package changelog

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// waitLog is a WaitHook that records the waits it is told of (the runtime's is the engine's
// HostWaits, which changelog may not import) and gives them a context of the test's.
type waitLog struct {
	ctx context.Context // BeginWait's answer; nil: no plugin call in progress

	mu     sync.Mutex
	began  []time.Time
	ended  []time.Time
	active int
}

func (w *waitLog) BeginWait() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.began = append(w.began, time.Now())
	w.active++
	return w.ctx
}

func (w *waitLog) EndWait() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = append(w.ended, time.Now())
	w.active--
}

// counts returns how many waits began and ended, and how many are open.
func (w *waitLog) counts() (began, ended, active int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.began), len(w.ended), w.active
}

// last returns how long the last wait lasted.
func (w *waitLog) last() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ended) == 0 || len(w.began) == 0 {
		return 0
	}
	return w.ended[len(w.ended)-1].Sub(w.began[len(w.began)-1])
}

// roomEnv is an env whose producer has 2 places for records in flight (kgo.MaxBufferedRecords
// 3), the wait limit limit, and whose broker holds every produce until release.
func roomEnv(t *testing.T, limit time.Duration) (e *env, release func()) {
	t.Helper()
	e = newEnv(t, 3, kgo.MaxBufferedRecords(3))
	var err error
	if e.prod, err = NewProducer(e.cl, WithWaitLimit(limit)); err != nil {
		t.Fatal(err)
	}
	if e.prod.WaitLimit() != limit {
		t.Fatalf("WaitLimit() = %v, want %v", e.prod.WaitLimit(), limit)
	}
	return e, holdProduces(t, e)
}

// TestWaitForRoomTellsHook checks that a store write and an output that find no room among
// the producer's records in flight tell the task's hook when their wait begins and ends, and
// that the records that find room (the fast path) do not; and that both go through once the
// broker answers.
func TestWaitForRoomTellsHook(t *testing.T) {
	e, release := roomEnv(t, time.Minute)
	defer release()
	task := e.open(t, 0, StoreSpec{Name: "kv"})
	defer task.Close(ctx)
	defer release() // before the task closes, which waits for its records
	hook := &waitLog{}
	task.SetWaitHook(hook)

	if err := task.Store("kv").Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := hook.counts(); b != 0 {
		t.Fatalf("%d waits told for records that had room", b)
	}

	const held = 400 * time.Millisecond
	putDone := make(chan error, 1)
	go func() { putDone <- task.Store("kv").Put([]byte("b"), []byte("2")) }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _, _ := hook.counts(); b > 0 {
			break
		}
		select {
		case err := <-putDone:
			t.Fatalf("a write did not wait for room: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("a write into a full producer did not tell the hook of its wait within 20s")
		}
	}
	time.Sleep(held) // the wait goes on until the broker answers, however long that takes
	if b, en, active := hook.counts(); b != 1 || en != 0 || active != 1 {
		t.Fatalf("while a write waits for room: %d waits began, %d ended, want 1 and 0", b, en)
	}
	select {
	case err := <-putDone:
		t.Fatalf("a write did not wait for room: %v", err)
	default:
	}
	release()
	select {
	case err := <-putDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting write was not let through after the broker answered")
	}
	if b, en, _ := hook.counts(); b != 1 || en != 1 || hook.last() < held {
		t.Fatalf("after the write: %d waits began, %d ended, the last for %v; want 1, 1, at least %v", b, en, hook.last(), held)
	}

	// Fill the producer again, the broker answering now: an output that waits tells the hook
	// too. The records in flight are acknowledged only once flushed (the wait flushes).
	for i := range 20 {
		if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: 1, Value: []byte{byte('0' + i%10)}}); err != nil {
			t.Fatal(err)
		}
	}
	if b, en, active := hook.counts(); b < 2 || b != en || active != 0 {
		t.Fatalf("after outputs into a full producer: %d waits began, %d ended, %d open; want more than 1, all ended", b, en, active)
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.readAll(t, TopicName(app, "kv")); len(got) != 2 {
		t.Fatalf("changelog: %s, want a and b", show(got))
	}
}

// TestWaitForRoomBounded checks the producer's wait limit: a store write and an output that
// find no room for that long fail with an error matching ErrNoRoom that names the topic, the
// partition and the producer's limit of records in flight, and the hook is told of both
// waits; the write, which is in the store but not in the changelog, fails the task's next
// commit. Without a limit of its own, a write's wait ends with the context the hook gives.
func TestWaitForRoomBounded(t *testing.T) {
	const limit = 300 * time.Millisecond
	e, release := roomEnv(t, limit)
	defer release()
	task := e.open(t, 0, StoreSpec{Name: "kv"})
	defer task.Close(ctx)
	defer release()
	// A plugin call's context that ends long after the limit: the test fails rather than hangs.
	call, cancelCall := context.WithTimeout(ctx, 20*time.Second)
	defer cancelCall()
	hook := &waitLog{ctx: call}
	task.SetWaitHook(hook)
	for _, k := range []string{"a", "b"} { // the producer's 2 places
		if err := task.Store("kv").Put([]byte(k), []byte("1")); err != nil {
			t.Fatal(err)
		}
	}

	began := time.Now()
	err := task.Output(call, OutputRecord{Topic: "output", Partition: 1, Value: []byte("x")})
	if !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "output to output partition 1") ||
		!strings.Contains(err.Error(), "2 records in flight") {
		t.Fatalf("an output without room for %v: %v; want ErrNoRoom naming output, partition 1 and the limit of 2", limit, err)
	}
	if took := time.Since(began); took < limit || took > limit+5*time.Second {
		t.Fatalf("the output gave up after %v, want the wait limit %v", took, limit)
	}
	if b, en, _ := hook.counts(); b != 1 || en != 1 || hook.last() < limit {
		t.Fatalf("after the output: %d waits began, %d ended, the last for %v", b, en, hook.last())
	}

	err = task.Store("kv").Put([]byte("c"), []byte("1"))
	topic := TopicName(app, "kv")
	if !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "write to "+topic+" partition 0") ||
		!strings.Contains(err.Error(), "2 records in flight") {
		t.Fatalf("a write without room for %v: %v; want ErrNoRoom naming %s, partition 0 and the limit of 2", limit, err, topic)
	}
	if b, en, _ := hook.counts(); b != 2 || en != 2 || hook.last() < limit {
		t.Fatalf("after the write: %d waits began, %d ended, the last for %v", b, en, hook.last())
	}

	// The hook's context (the plugin call's) ends a write's wait, long before the limit.
	e2, release2 := roomEnv(t, 10*time.Second)
	defer release2()
	other := e2.open(t, 1, StoreSpec{Name: "kv"})
	defer other.Close(ctx)
	defer release2()
	canceled, cancel := context.WithCancel(ctx)
	defer cancel()
	other.SetWaitHook(&waitLog{ctx: canceled})
	for _, k := range []string{"a", "b"} {
		if err := other.Store("kv").Put([]byte(k), []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	time.AfterFunc(200*time.Millisecond, cancel)
	began = time.Now()
	err = other.Store("kv").Delete([]byte("a"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoRoom) || time.Since(began) > 5*time.Second {
		t.Fatalf("a write whose call was canceled: %v after %v; want context.Canceled soon", err, time.Since(began))
	}

	release()
	if err := task.Commit(ctx, nil); !errors.Is(err, ErrTaskFailed) || !errors.Is(err, ErrNoRoom) {
		t.Fatalf("commit after a write that found no room: %v; want ErrTaskFailed and ErrNoRoom", err)
	}
}
