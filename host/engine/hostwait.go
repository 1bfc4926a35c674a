package engine

import (
	"context"
	"sync/atomic"
)

// HostWaits takes the time that a task's host-side parts wait for the outside world off the
// time limit (Config.BatchTimeout) of the guest call they serve. The runtime gives one to
// every instance of a task (Task.Waits) and to the task's producer, which calls BeginWait
// and EndWait around a wait for room among its records in flight: the limit then measures
// the guest's own running time and the host's other work, not a slow broker.
//
// Whichever instance of the task runs a guest call (a batch, a punctuation, _initialize or
// statehost_init; the instance that replaced another after a deploy or a failure) has its
// limit paused. Outside a guest call BeginWait and EndWait do nothing. Pauses are meant for
// the slow path only: each takes a lock and stops or starts a timer.
//
// The zero value is ready to use. A HostWaits serves one task, whose calls run one at a
// time; BeginWait and EndWait are called from the host functions of those calls, on the
// call's goroutine.
type HostWaits struct {
	running atomic.Pointer[callCtx] // the guest call in progress, nil between calls
}

// BeginWait pauses the time limit of the guest call in progress, if any, until EndWait, and
// returns that call's context (nil outside a call): its end (the caller's cancellation, or
// the limit, when it had run out before the pause) should end the wait too.
func (w *HostWaits) BeginWait() context.Context {
	c := w.running.Load()
	if c == nil {
		return nil
	}
	c.in.intr.pause()
	return c
}

// EndWait starts the time limit paused by BeginWait again, with the time it had left.
func (w *HostWaits) EndWait() {
	if c := w.running.Load(); c != nil {
		c.in.intr.resume()
	}
}
