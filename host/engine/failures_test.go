package engine

import (
	"context"
	"errors"
	"strings"
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
		{"C infinite loop", "probe", []string{"put", "loop"}, 1, ErrTimeout, "deadline exceeded"},
		{"C memory bomb", "probe", []string{"bomb"}, 0, ErrOutOfMemory, "unreachable"},
		{"C exit", "probe", []string{"put", "put", "exit"}, 2, ErrExit, "exit_code(7)"},
		{"C error code", "probe", []string{"fail", "put"}, 0, ErrGuestFailed, "-12: guest said: probe failed on purpose"},
		{"C positive code", "probe", []string{"stop"}, 0, ErrGuestFailed, "returned an error 1"},
		{"C skips records", "probe", []string{"put", "skip", "put"}, 1, ErrProtocol, "after taking 2 of 3 records"},
		{"Go panic", "goprobe", []string{"x", "panic"}, 1, ErrPanic, "panic: boom on purpose"},
		{"Go infinite loop", "goprobe", []string{"loop"}, 0, ErrTimeout, "deadline exceeded"},
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
// guest ignores the code it got (the C probe ignores state_put's result).
func TestHostFailures(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()

	r := newRig(t, "s")
	r.st.Fail(errors.New("disk on fire")) // every operation of the task's stores now fails
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	err := in.ProcessBatch(ctx, recs("x", "put"))
	ge := guestError(t, err, ErrStore)
	if ge.Offset != 101 || !strings.Contains(err.Error(), `store "s": put: `) || !errors.Is(err, store.ErrTaskFailed) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("store failure: %v", err)
	}

	r = newRig(t, "counts")
	r.emitted.err = errors.New("producer closed")
	in = instantiate(t, e, "count", r.task("count", "out"))
	err = in.ProcessBatch(ctx, recs("1"))
	guestError(t, err, ErrEmit)
	if !strings.Contains(err.Error(), `output "out": producer closed`) {
		t.Errorf("emit failure: %v", err)
	}
}

// TestCanceled checks that canceling the caller's context stops a running guest.
func TestCanceled(t *testing.T) {
	e, _ := testEngine(t, Config{BatchTimeout: time.Minute})
	in := instantiate(t, e, "probe", newRig(t).task("probe", "out"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := in.ProcessBatch(ctx, recs("loop"))
	guestError(t, err, ErrCanceled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
}

// TestInstanceMisuse checks calls on a closed instance and concurrent calls.
func TestInstanceMisuse(t *testing.T) {
	e, _ := testEngine(t, Config{BatchTimeout: 2 * time.Second})
	ctx := context.Background()
	in := instantiate(t, e, "probe", newRig(t, "s").task("probe", "out"))
	done := make(chan error)
	go func() { done <- in.ProcessBatch(ctx, recs("spin 300000000")) }()
	time.Sleep(50 * time.Millisecond)
	if err := in.ProcessBatch(ctx, recs("put")); !errors.Is(err, ErrInstanceBusy) {
		t.Errorf("concurrent ProcessBatch = %v, want ErrInstanceBusy", err)
	}
	if err := <-done; err != nil && !errors.Is(err, ErrTimeout) {
		t.Fatal(err)
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
