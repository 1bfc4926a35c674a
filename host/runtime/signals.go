package runtime

import (
	"context"
	"sync"
	"time"
)

// signals is what the group's callbacks and the jobs hand to the loop without waiting for
// it (they must not wait for the task table's lock, which a restore or a commit holds), and
// what wakes the loop from its poll or stops its restore. It has its own lock, never held
// while waiting for anything.
type signals struct {
	mu            sync.Mutex
	inbox         []groupEvent       // assignments (and, under exactly-once, revocations) not yet applied to the tasks
	wake          bool               // an assignment arrived: the next poll returns at once
	revoking      int                // revocations or losses waiting for the table's lock: start no restore
	ended         []*task            // tasks whose job ended, for the loop to take in (dispatch.go)
	fatal         error              // the first error that stops the runtime
	pollCancel    context.CancelFunc // wakes a blocked poll (or the loop's sleep)
	restoreCancel context.CancelFunc // stops a restore (revocation)
}

// wakeLocked wakes the loop's poll or sleep. The caller holds s.mu.
func (s *signals) wakeLocked() {
	if s.pollCancel != nil {
		s.pollCancel()
	}
}

// post hands ev to the loop and wakes it.
func (s *signals) post(ev groupEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inbox = append(s.inbox, ev)
	s.wake = true
	s.wakeLocked()
}

// takeInbox returns the events posted since the last take, in order.
func (s *signals) takeInbox() []groupEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	inbox := s.inbox
	s.inbox = nil
	return inbox
}

// dropInbox drops the events posted so far: those of a group consumer that is gone.
func (s *signals) dropInbox() { s.takeInbox() }

// revocationPending reports whether a revocation or a loss waits in the inbox.
func (s *signals) revocationPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.inbox {
		if ev.revoked {
			return true
		}
	}
	return false
}

// stopRestore stops a restore in progress; the tasks resume from their checkpoints.
func (s *signals) stopRestore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restoreCancel != nil {
		s.restoreCancel()
	}
}

// rebalanceBlocked wakes the loop and stops its restore: a rebalance waits for it.
func (s *signals) rebalanceBlocked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wake = true
	s.wakeLocked()
	if s.restoreCancel != nil {
		s.restoreCancel()
	}
}

// beginRevocation stops a restore in progress, and keeps the loop from starting one until
// endRevocation: the callback is about to wait for the table's lock.
func (s *signals) beginRevocation() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoking++
	if s.restoreCancel != nil {
		s.restoreCancel()
	}
}

// endRevocation lets the loop restore again, at once: a restore it skipped or that was
// cancelled may still have tasks waiting.
func (s *signals) endRevocation() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoking--
	s.wake = true
	s.wakeLocked()
}

// restoring sets cancel as the stop of the restore that begins, or clears it (nil) when the
// restore ends. It reports false, and sets nothing, when a revocation waits: restore nothing
// then, and let it run.
func (s *signals) restoring(cancel context.CancelFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel != nil && s.revoking > 0 {
		return false
	}
	s.restoreCancel = cancel
	return true
}

// jobEnded hands t, whose job has ended, to the loop, and wakes its poll.
func (s *signals) jobEnded(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, t)
	s.wakeLocked()
}

// takeEnded returns the tasks whose job ended since the last take.
func (s *signals) takeEnded() []*task {
	s.mu.Lock()
	defer s.mu.Unlock()
	ended := s.ended
	s.ended = nil
	return ended
}

// setFatal records the first error that must stop the runtime; the loop returns it.
func (s *signals) setFatal(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal == nil {
		s.fatal = err
	}
	s.wakeLocked()
}

// takeFatal returns the error recorded by setFatal.
func (s *signals) takeFatal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// pollWait readies a poll that would wait for wait: it returns the context the poll waits
// on, or false when the loop must not poll now (an assignment arrived since the last round,
// or the runtime failed: it restores or stops first). While jobs have ended, the poll takes
// only what is buffered. Call the returned done when the poll returns.
func (s *signals) pollWait(ctx context.Context, wait time.Duration) (context.Context, func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake || s.fatal != nil {
		s.wake = false
		return nil, nil, false
	}
	if len(s.ended) > 0 {
		wait = time.Millisecond // take what is buffered, then the ended jobs
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	s.pollCancel = cancel
	return pctx, func() { s.clearWait(); cancel() }, true
}

// sleepWait readies a sleep of d: its context ends after d, or at once when the loop has
// something to do (an assignment, a failure, an ended job), or when one arrives. Call the
// returned done when the sleep ends.
func (s *signals) sleepWait(ctx context.Context, d time.Duration) (context.Context, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, d)
	if s.wake || s.fatal != nil || len(s.ended) > 0 {
		cancel()
	}
	s.pollCancel = cancel
	return sctx, func() { s.clearWait(); cancel() }
}

func (s *signals) clearWait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pollCancel = nil
}
