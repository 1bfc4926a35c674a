package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statehost/statehost/store"
)

// failCase is a guest failure: the batch, the cause it must be reported as, and text the
// error must contain.
type failCase struct {
	name   string
	guest  string
	values []string // the batch; the failing command is at index at
	at     int
	kind   error
	says   string
}

// TestGuestFailures makes guests fail in every way the ABI names and checks that each comes
// back as a *GuestError of the right kind, naming processor, partition and the offset of
// the record being processed; that the instance is dead afterwards; and that the engine
// still runs other instances.
func TestGuestFailures(t *testing.T) {
	e, _ := testEngine(t, Config{MemoryLimit: 32 << 20, BatchTimeout: time.Second})
	for _, tc := range []failCase{
		{"C trap", "probe", []string{"put", "trap", "put"}, 1, ErrTrap, "unreachable"},
		{"C infinite loop", "probe", []string{"put", "loop"}, 1, ErrTimeout, "stopped after running past the batch time limit of 1s"},
		{"C memory bomb", "probe", []string{"bomb"}, 0, ErrOutOfMemory, "unreachable"},
		{"C exit", "probe", []string{"put", "put", "exit"}, 2, ErrExit, "exit_code(7)"},
		{"C error code", "probe", []string{"fail", "put"}, 0, ErrGuestFailed, "-12: guest said: probe failed on purpose"},
		{"C positive code", "probe", []string{"stop"}, 0, ErrGuestFailed, "returned an error 1"},
		{"C skips records", "probe", []string{"put", "skip", "put"}, 1, ErrProtocol, "after taking 2 of 3 records"},
		{"Go panic", "goprobe", []string{"x", "panic"}, 1, ErrPanic, "panic: boom on purpose"},
		{"Go infinite loop", "goprobe", []string{"loop"}, 0, ErrTimeout, "stopped after running past the batch time limit of 1s"},
		{"Go memory bomb", "goprobe", []string{"x", "x", "oom"}, 2, ErrOutOfMemory, "out of memory"},
		{"Go os.Exit", "goprobe", []string{"exit"}, 0, ErrExit, "exit_code(3)"},
		{"Go error", "goprobe", []string{"x", "fail", "x"}, 1, ErrGuestFailed, "guest said: failed on purpose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "s")
			task := r.task(tc.guest, "out")
			task.Partition = 9
			in := instantiate(t, e, tc.guest, task)
			batch := recs(tc.values...)
			start := time.Now()
			err := in.ProcessBatch(context.Background(), batch)
			ge := guestError(t, err, tc.kind)
			if ge.Processor != tc.guest || ge.Partition != 9 || ge.Offset != batch[tc.at].Offset || ge.Topic != "in" {
				t.Errorf("error names %s/%d offset %d topic %q, want %s/9 offset %d topic in",
					ge.Processor, ge.Partition, ge.Offset, ge.Topic, tc.guest, batch[tc.at].Offset)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))

			err = in.ProcessBatch(context.Background(), recs("put"))
			if !errors.Is(err, ErrInstanceDead) || errors.Is(err, tc.kind) {
				t.Errorf("second call = %v, want ErrInstanceDead only", err)
			}
			if in.Err() == nil {
				t.Errorf("Err() = nil after a failure")
			}
			if err := in.Close(context.Background()); err != nil {
				t.Errorf("Close after failure: %v", err)
			}

			// The engine is unharmed: a fresh instance of the same module works.
			fresh := instantiate(t, e, tc.guest, newRig(t, "s").task(tc.guest, "out"))
			if err := fresh.ProcessBatch(context.Background(), recs("x")); err != nil {
				t.Errorf("a new instance after the failure: %v", err)
			}
		})
	}
}

// TestHostFailures checks that a store or emitter failure fails the batch even when the
// guest ignores the code it got (the C probe ignores the results of state_put and emit),
// and that the failure is attributed to the record being processed when the host call
// failed, not to the last record taken before the guest returned.
func TestHostFailures(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		guest  string
		values []string
		store  bool // the store fails, else the emitter
		at     int64
		says   string
	}{
		{"store, last record", "probe", []string{"x", "put"}, true, 101, `store "s": put: `},
		{"store, ignored, then more records", "probe", []string{"put", "x"}, true, 100, `store "s": put: `},
		{"emit, ignored, then more records", "probe", []string{"nulls", "x", "x"}, false, 100, `output "out": producer closed`},
		{"emit, returned by the guest", "count", []string{"1", "2"}, false, 100, `output "out": producer closed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "s", "counts")
			if tc.store {
				r.st.Fail(errors.New("disk on fire")) // every operation of the task's stores now fails
			} else {
				r.emitted.err = errors.New("producer closed")
			}
			in := instantiate(t, e, tc.guest, r.task(tc.guest, "out"))
			err := in.ProcessBatch(ctx, recs(tc.values...))
			kind := ErrEmit
			if tc.store {
				kind = ErrStore
			}
			ge := guestError(t, err, kind)
			if ge.Offset != tc.at || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v: want offset %d and %q", err, tc.at, tc.says)
			}
			if tc.store && (!errors.Is(err, store.ErrTaskFailed) || !strings.Contains(err.Error(), "disk on fire")) {
				t.Errorf("store failure: %v", err)
			}
			if last := int64(100 + len(tc.values) - 1); ge.FirstOffset != 100 || ge.LastOffset != last {
				t.Errorf("batch %d..%d, want 100..%d", ge.FirstOffset, ge.LastOffset, last)
			}
		})
	}
}

// TestOversizedRecord checks which record a guest that dies growing its record buffer is
// blamed for: record_next answered CodeBufferTooSmall for it, so the cursor had not moved
// to it yet. The 40 MiB value cannot fit under a 32 MiB memory limit: the Go SDK runs out
// of memory, count_c's realloc fails and it returns an error.
func TestOversizedRecord(t *testing.T) {
	e, _ := testEngine(t, Config{MemoryLimit: 32 << 20})
	big := make([]byte, 40<<20)
	for _, guest := range []struct {
		name string
		kind error
	}{{"count", ErrOutOfMemory}, {"count_c", ErrGuestFailed}} {
		for _, tc := range []struct {
			name    string
			offsets []int64
			big     int // index of the oversized record
		}{
			{"first and only", []int64{500}, 0},
			{"second", []int64{600, 601}, 1},
			{"second of three", []int64{700, 701, 702}, 1},
		} {
			t.Run(guest.name+"/"+tc.name, func(t *testing.T) {
				batch := make([]Record, len(tc.offsets))
				for i, off := range tc.offsets {
					batch[i] = Record{Topic: "in", Offset: off, Key: []byte("k"), Value: []byte("1")}
				}
				batch[tc.big].Value = big
				in := instantiate(t, e, guest.name, newRig(t, "counts").task(guest.name, "out"))
				err := in.ProcessBatch(context.Background(), batch)
				ge := guestError(t, err, guest.kind)
				if want := tc.offsets[tc.big]; ge.Offset != want || ge.Topic != "in" {
					t.Errorf("error %v: offset %d topic %q, want offset %d topic in", err, ge.Offset, ge.Topic, want)
				}
				if ge.FirstOffset != tc.offsets[0] || ge.LastOffset != tc.offsets[len(tc.offsets)-1] {
					t.Errorf("batch %d..%d, want %d..%d", ge.FirstOffset, ge.LastOffset, tc.offsets[0], tc.offsets[len(tc.offsets)-1])
				}
			})
		}
	}
}

// TestInstantiateExit checks that a guest that exits with code 0 while it starts (from a C
// constructor run by _initialize, which wazero reports as success, or from statehost_init)
// is refused, not returned as a dead instance.
func TestInstantiateExit(t *testing.T) {
	e, _ := testEngine(t, Config{})
	for _, guest := range []string{"ctorexit", "initexit"} {
		t.Run(guest, func(t *testing.T) {
			in, err := compile(t, e, guest).Instantiate(context.Background(), newRig(t).task(guest, "out"))
			if err == nil {
				err = in.ProcessBatch(context.Background(), recs("x"))
				t.Fatalf("Instantiate succeeded; ProcessBatch then said %v", err)
			}
			ge := guestError(t, err, ErrExit)
			if ge.Offset != -1 || !strings.Contains(err.Error(), "exit_code(0)") {
				t.Errorf("error %v: want offset -1 and exit_code(0)", err)
			}
		})
	}
}

// TestPanicNearMemoryLimit checks that a Go panic is reported as a panic even when the
// guest's memory is close to the limit, where a trap without a Go marker counts as out of
// memory.
func TestPanicNearMemoryLimit(t *testing.T) {
	e, _ := testEngine(t, Config{MemoryLimit: 32 << 20})
	in := instantiate(t, e, "goprobe", newRig(t, "s").task("goprobe", "out"))
	err := in.ProcessBatch(context.Background(), recs("hoardpanic 26"))
	guestError(t, err, ErrPanic)
	if !strings.Contains(err.Error(), "boom near the limit") {
		t.Errorf("error %v does not carry the panic message", err)
	}
	t.Logf("memory %d of %d bytes: %v", in.mem.Size(), 32<<20, err)
	if !in.nearMemoryLimit() {
		t.Fatalf("the guest did not get near the memory limit (%d bytes): the test proves nothing", in.mem.Size())
	}
}

// blockingEmitter blocks every Emit until its context is done, as a producer under
// backpressure does. entered, when set, is called once, as the first Emit begins to block.
type blockingEmitter struct {
	calls   atomic.Int32
	entered func()
}

func (b *blockingEmitter) Emit(ctx context.Context, _ OutputRecord) error {
	if b.calls.Add(1) == 1 && b.entered != nil {
		b.entered()
	}
	<-ctx.Done()
	return fmt.Errorf("producer buffer full: %w", ctx.Err())
}

// TestEmitterContext checks that an Emitter gets the batch call's context, so that a
// blocking Emit is released by the batch time limit and by cancellation, also with the
// time limit off.
func TestEmitterContext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		kind    error
	}{
		{"time limit", 200 * time.Millisecond, false, ErrTimeout},
		{"canceled", time.Minute, true, ErrCanceled},
		{"canceled without time limit", -1, true, ErrCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := testEngine(t, Config{BatchTimeout: tc.timeout})
			for _, guest := range []string{"count_c", "probe"} {
				r := newRig(t, "counts")
				task := r.task(guest, "out")
				emitter := &blockingEmitter{}
				task.Emitter = emitter
				in := instantiate(t, e, guest, task)
				ctx, cancel := context.WithCancel(context.Background())
				if tc.cancel {
					emitter.entered = cancel // cancels the call while it is known to wait in the emit
				}
				start := time.Now()
				err := in.ProcessBatch(ctx, recs("nulls", "x"))
				cancel()
				ge := guestError(t, err, tc.kind)
				if ge.Offset != 100 || emitter.calls.Load() == 0 || time.Since(start) > 5*time.Second {
					t.Errorf("%s: %v after %v and %d emits: want offset 100", guest, err, time.Since(start), emitter.calls.Load())
				}
				if !errors.Is(err, ErrEmit) {
					t.Errorf("%s: %v does not say the emit waited (ErrEmit)", guest, err)
				}
			}
		})
	}
}

// TestCanceled checks that canceling the caller's context stops a running guest, C or Go,
// with the time limit on or off, while the process collects garbage (which waits for every
// goroutine, the guest's too).
func TestCanceled(t *testing.T) {
	for _, timeout := range []time.Duration{time.Minute, -1} {
		e, _ := testEngine(t, Config{BatchTimeout: timeout})
		for _, guest := range []string{"probe", "goprobe"} {
			in := instantiate(t, e, guest, newRig(t).task(guest, "out"))
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, func() {
				runtime.GC()
				cancel()
			})
			err := in.ProcessBatch(ctx, recs("loop"))
			guestError(t, err, ErrCanceled)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s, time limit %v: error %v does not wrap context.Canceled", guest, timeout, err)
			}
		}
	}
}

// TestInstantiateTimeout checks that a guest that never finishes starting (a C constructor
// looping in _initialize) is stopped at the time limit and refused.
func TestInstantiateTimeout(t *testing.T) {
	e, _ := testEngine(t, Config{BatchTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := compile(t, e, "ctorloop").Instantiate(context.Background(), newRig(t).task("ctorloop", "out"))
	ge := guestError(t, err, ErrTimeout)
	if ge.Offset != -1 || time.Since(start) > 10*time.Second {
		t.Errorf("error %v after %v: want offset -1, soon after the limit", err, time.Since(start))
	}
}

// TestInstanceMisuse checks calls on a closed instance and concurrent calls. The concurrent
// calls are made while the first call is known to run: its guest waits in an emit until the
// test cancels the call (the time limit is off, so only that ends it).
func TestInstanceMisuse(t *testing.T) {
	e, _ := testEngine(t, Config{BatchTimeout: -1})
	ctx := context.Background()
	task := newRig(t, "s").task("probe", "out")
	blocked := make(chan struct{})
	task.Emitter = &blockingEmitter{entered: func() { close(blocked) }}
	in := instantiate(t, e, "probe", task)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in.ProcessBatch(bctx, recs("nulls")) }()
	select {
	case <-blocked:
	case err := <-done:
		t.Fatalf("the batch ended (%v) before its guest emitted", err)
	case <-time.After(time.Minute):
		t.Fatal("the guest did not emit within a minute")
	}
	if err := in.ProcessBatch(ctx, recs("put")); !errors.Is(err, ErrInstanceBusy) {
		t.Errorf("concurrent ProcessBatch = %v, want ErrInstanceBusy", err)
	}
	if err := in.Close(ctx); !errors.Is(err, ErrInstanceBusy) {
		t.Errorf("Close during ProcessBatch = %v, want ErrInstanceBusy", err)
	}
	cancel()
	select {
	case err := <-done:
		guestError(t, err, ErrCanceled)
	case <-time.After(time.Minute):
		t.Fatal("the canceled batch did not return within a minute")
	}
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := in.ProcessBatch(ctx, recs("put")); !errors.Is(err, ErrClosed) {
		t.Errorf("ProcessBatch after Close = %v, want ErrClosed", err)
	}
	if err := in.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := in.ProcessBatch(ctx, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("empty batch after Close = %v", err)
	}
	if _, err := compile(t, e, "probe").Instantiate(ctx, Task{}); err == nil {
		t.Errorf("Instantiate without a processor name succeeded")
	}
	if _, err := compile(t, e, "probe").Instantiate(ctx, Task{Processor: "p", Outputs: []string{"o"}}); err == nil {
		t.Errorf("Instantiate with outputs and no emitter succeeded")
	}
}
