package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/host/engine/internal/loopcheck"
)

// interruptExport is the name under which Compile exports the global that stops a guest
// (package loopcheck). The dot keeps it out of the names toolchains generate; a module
// exporting it is refused.
const interruptExport = "statehost.interrupt"

// instrument adds the loop checks to wasm. A binary it cannot walk is malformed: wazero's
// error on the original then says how, else (a bug here) the instrumentation's.
func (e *Engine) instrument(ctx context.Context, name string, wasm []byte) (loopcheck.Result, error) {
	res, err := loopcheck.Instrument(wasm, interruptExport)
	if err == nil {
		return res, nil
	}
	cm, cerr := e.rt.CompileModule(ctx, wasm)
	if cerr != nil {
		return loopcheck.Result{}, fmt.Errorf("engine: %s: compile: %w", name, cerr)
	}
	_ = cm.Close(ctx)
	return loopcheck.Result{}, &ModuleError{Module: name, Problems: []string{"cannot be instrumented for the batch time limit: " + err.Error()}}
}

// interrupter stops an instance's running guest call when the call's context is done or its
// time limit runs out: it sets the instance's interrupt global, and the guest traps at its
// next loop iteration.
//
// The time limit is the interrupter's own timer, not a context deadline, so that a host
// function may take the time it waits for the outside world (a producer with no room for a
// record) off it: pause stops the timer and keeps the time left, resume starts it again with
// that time. When the timer fires it cancels the call's context, a context.WithCancelCause of
// the caller's, with the cause context.DeadlineExceeded, and sets the global; a cancellation
// of the caller's context reaches the call's context and sets the global too, paused or not.
//
// The call's goroutine arms, pauses, resumes and disarms; the timer's and the context's
// goroutines expire and interrupt. mu orders them.
type interrupter struct {
	global api.MutableGlobal

	timer *time.Timer // the time limit, made by the first call with one; runs while armed, limited and not paused
	stop  func() bool // stops the context.AfterFunc of the running call (the call's goroutine only)

	mu       sync.Mutex
	armed    bool                    // a call is running
	fired    bool                    // the global was set during this call
	limited  bool                    // the call has a time limit: timer, deadline and cancel are set
	pauses   int                     // pause calls not yet resumed
	deadline time.Time               // when the limit runs out, while it is not paused
	left     time.Duration           // the time left when it was paused
	cancel   context.CancelCauseFunc // cancels the call's context
}

// arm arms the interrupter for one guest call under ctx with the time limit limit (none when
// limit <= 0). It returns the call's context, which the limit cancels, and its cancel
// function (nil when it is ctx itself), to call once the call is over and disarmed.
func (it *interrupter) arm(ctx context.Context, limit time.Duration) (context.Context, context.CancelCauseFunc) {
	if limit <= 0 {
		if ctx.Done() == nil {
			return ctx, nil // nothing can stop the call
		}
		it.mu.Lock()
		it.armed, it.fired, it.limited = true, false, false
		it.mu.Unlock()
		it.stop = context.AfterFunc(ctx, it.interrupt)
		return ctx, nil
	}
	cctx, cancel := context.WithCancelCause(ctx)
	it.mu.Lock()
	it.armed, it.fired, it.limited, it.pauses, it.cancel = true, false, true, 0, cancel
	// The deadline is taken before the timer starts: the timer never fires before it, and
	// expire can tell a late fire of an earlier call's timer by a deadline still ahead.
	it.deadline = time.Now().Add(limit)
	if it.timer == nil {
		it.timer = time.AfterFunc(limit, it.expire)
	} else {
		it.timer.Reset(limit)
	}
	it.mu.Unlock()
	it.stop = context.AfterFunc(cctx, it.interrupt)
	return cctx, cancel
}

// disarm disarms the interrupter after the call and reports whether the guest was
// interrupted. The global is zero again afterwards.
func (it *interrupter) disarm() bool {
	if it.stop != nil {
		it.stop()
		it.stop = nil
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.armed {
		return false
	}
	if it.limited {
		it.timer.Stop()
	}
	it.armed, it.limited, it.pauses, it.cancel = false, false, 0, nil
	if it.fired {
		it.global.Set(0)
	}
	return it.fired
}

// pause stops the running call's time limit until resume; the pauses of a call may nest. It
// does nothing between calls and for a call without a limit.
func (it *interrupter) pause() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.limited {
		return
	}
	if it.pauses++; it.pauses == 1 {
		it.timer.Stop()
		it.left = time.Until(it.deadline) // <= 0: the limit ran out already (expire is due)
	}
}

// resume starts the running call's time limit again after pause, with the time it had left.
func (it *interrupter) resume() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.limited || it.pauses == 0 {
		return
	}
	if it.pauses--; it.pauses == 0 {
		left := max(it.left, 0)
		it.deadline = time.Now().Add(left)
		it.timer.Reset(left)
	}
}

// expire runs on the timer's goroutine when the time limit runs out: it sets the global and
// cancels the call's context with the cause context.DeadlineExceeded. A fire that is stale (an
// earlier call's, or one that raced with pause) finds the call paused or its deadline ahead,
// and does nothing.
func (it *interrupter) expire() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.limited || it.pauses > 0 || time.Now().Before(it.deadline) {
		return
	}
	it.global.Set(1)
	it.fired = true
	// The context's AfterFuncs run on goroutines of their own: none waits for mu here.
	it.cancel(context.DeadlineExceeded)
}

// interrupt sets the global if a call is running. It runs on the context's goroutine, while
// the guest runs: the compiled code reads the global at every loop head, and an aligned
// 8-byte store is seen there whole.
func (it *interrupter) interrupt() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.armed {
		it.global.Set(1)
		it.fired = true
	}
}
