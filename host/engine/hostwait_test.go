package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// roomEmitter is an Emitter that waits as the runtime's producer does when it has no room for
// a record: through the task's HostWaits, until room comes (a timer of wait, or never when
// wait is 0) or the call's context ends. Each emit after the first skip ones waits.
type roomEmitter struct {
	waits *HostWaits
	wait  time.Duration
	skip  int
	out   collector

	calls  atomic.Int32
	waited time.Duration // the time spent waiting, over every emit
}

func (e *roomEmitter) Emit(ctx context.Context, rec OutputRecord) error {
	if int(e.calls.Add(1)) > e.skip {
		began := time.Now()
		wctx := e.waits.BeginWait()
		if wctx != ctx {
			e.waits.EndWait()
			return fmt.Errorf("BeginWait returned %v, not the call's context", wctx)
		}
		var room <-chan time.Time // nil: no room ever comes
		if e.wait > 0 {
			room = time.After(e.wait)
		}
		var err error
		select {
		case <-room:
		case <-wctx.Done():
			err = fmt.Errorf("waiting for room: %w", context.Cause(wctx))
		case <-time.After(10 * time.Second): // the test fails rather than hangs
			err = errors.New("the call's context never ended the wait")
		}
		e.waits.EndWait()
		e.waited += time.Since(began)
		if err != nil {
			return err
		}
	}
	return e.out.Emit(ctx, rec)
}

// TestHostWaitsNotCharged checks that the time a guest call's host functions wait through
// HostWaits is not charged to the call's time limit: emits that wait 3 times the limit in
// all (C and Go guests, a batch and a guest's start) succeed, and so do later calls of the
// same instance, whose limit starts afresh.
func TestHostWaitsNotCharged(t *testing.T) {
	const limit = 150 * time.Millisecond
	e, _ := testEngine(t, Config{BatchTimeout: limit})
	for _, guest := range []string{"count_c", "count"} {
		r := newRig(t, "counts")
		task := r.task(guest, "out")
		em := &roomEmitter{waits: &HostWaits{}, wait: limit}
		task.Emitter, task.Waits = em, em.waits
		in := instantiate(t, e, guest, task)
		batch := []Record{kv([]byte("a"), []byte("1")), kv([]byte("b"), []byte("1")), kv([]byte("a"), []byte("1"))}
		for i := range batch {
			batch[i].Offset = int64(100 + i)
		}
		for round := range 2 {
			em.waited = 0
			if err := in.ProcessBatch(context.Background(), batch); err != nil {
				t.Fatalf("%s, round %d: a batch whose emits waited %v for room, under a limit of %v: %v", guest, round, em.waited, limit, err)
			}
			if em.waited < 3*limit {
				t.Fatalf("%s: the emits waited %v in all, not longer than the limit: the test shows nothing", guest, em.waited)
			}
		}
		if got := em.out.values(); got["a"] != "4" || got["b"] != "2" {
			t.Errorf("%s: emitted %v, want a=4 b=2", guest, got)
		}
	}
}

// TestHostWaitsLoopStillStopped checks that a guest that loops after its host functions
// waited longer than the limit is still stopped, the limit's length of its own time after
// the wait (the wait was not charged, and the limit did not vanish with it); and that it
// is an ErrTimeout of the looping record, without ErrEmit.
func TestHostWaitsLoopStillStopped(t *testing.T) {
	const limit = 300 * time.Millisecond
	e, _ := testEngine(t, Config{BatchTimeout: limit})
	r := newRig(t, "s")
	task := r.task("probe", "out")
	em := &roomEmitter{waits: &HostWaits{}, wait: 700 * time.Millisecond, skip: 2}
	task.Emitter, task.Waits = em, em.waits
	in := instantiate(t, e, "probe", task)
	batch := recs("nulls", "loop") // nulls emits 3 records: the last one waits
	// Past the limit and the wait: the test fails rather than hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	err := in.ProcessBatch(ctx, batch)
	took := time.Since(began)
	ge := guestError(t, err, ErrTimeout)
	if ge.Offset != batch[1].Offset || errors.Is(err, ErrEmit) {
		t.Errorf("error %v: want a timeout of offset %d without ErrEmit", err, batch[1].Offset)
	}
	if em.waited < em.wait {
		t.Fatalf("the emit waited %v, want %v", em.waited, em.wait)
	}
	// The upper bound is loose for a busy machine; a limit that vanished with the wait would
	// run to the context's 10s.
	if took < em.waited+limit*8/10 || took > em.waited+limit+5*time.Second {
		t.Errorf("stopped after %v: want about the wait (%v) plus the limit (%v)", took, em.waited, limit)
	}
}

// TestHostWaitsCanceled checks that canceling the caller's context ends a wait that paused
// the limit at once, and the call with ErrCanceled (ErrEmit in the chain), for C and Go
// guests. The cancellation comes after the limit would have run out, had the wait counted.
func TestHostWaitsCanceled(t *testing.T) {
	e, _ := testEngine(t, Config{BatchTimeout: 200 * time.Millisecond})
	for _, guest := range []string{"count_c", "count"} {
		r := newRig(t, "counts")
		task := r.task(guest, "out")
		em := &roomEmitter{waits: &HostWaits{}} // room never comes
		task.Emitter, task.Waits = em, em.waits
		in := instantiate(t, e, guest, task)
		ctx, cancel := context.WithCancel(context.Background())
		const after = 600 * time.Millisecond // past the limit: the wait did not use it up
		time.AfterFunc(after, cancel)
		began := time.Now()
		err := in.ProcessBatch(ctx, []Record{kv([]byte("a"), []byte("1"))})
		took := time.Since(began)
		cancel()
		guestError(t, err, ErrCanceled)
		if !errors.Is(err, ErrEmit) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v: want ErrEmit and context.Canceled in the chain", guest, err)
		}
		// Loose for a busy machine; a wait the cancellation did not end runs to the emitter's 10s.
		if took < after || took > after+5*time.Second {
			t.Errorf("%s: the call ended %v after it began, want soon after the cancellation at %v", guest, took, after)
		}
	}
}

// TestHostFailureKeptAfterGuestDies checks that a guest that dies after a host function
// failed (the C probe ignores a failed emit, then traps) fails as the guest's failure (a
// trap) with the host's failure in the chain (ErrEmit and the Emitter's error), so that the
// runtime can tell a producer that had no room.
func TestHostFailureKeptAfterGuestDies(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "s")
	noRoom := errors.New("no room in the producer")
	r.emitted.err = noRoom
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	err := in.ProcessBatch(context.Background(), recs("nulls", "trap"))
	ge := guestError(t, err, ErrTrap)
	if ge.Offset != 101 || !errors.Is(err, ErrEmit) || !errors.Is(err, noRoom) {
		t.Errorf("error %v: want a trap of offset 101 with ErrEmit and the emitter's error in the chain", err)
	}
}
