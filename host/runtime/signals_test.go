package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSignalsInbox(t *testing.T) {
	var s signals
	s.post(groupEvent{partitions: map[string][]int32{"in": {0}}})
	if s.revocationPending() {
		t.Fatal("an assignment is not a revocation")
	}
	s.post(groupEvent{partitions: map[string][]int32{"in": {0}}, revoked: true})
	if !s.revocationPending() {
		t.Fatal("the revocation waits in the inbox")
	}
	// The posts woke the loop: its next poll returns at once, once.
	if _, _, ok := s.pollWait(context.Background(), time.Hour); ok {
		t.Fatal("pollWait after a post: want no poll")
	}
	if got := s.takeInbox(); len(got) != 2 || got[0].revoked || !got[1].revoked {
		t.Fatalf("takeInbox = %+v, want the two events in order", got)
	}
	if len(s.takeInbox()) != 0 || s.revocationPending() {
		t.Fatal("the inbox is empty after a take")
	}
	ctx, done, ok := s.pollWait(context.Background(), time.Hour)
	if !ok {
		t.Fatal("pollWait without a wake: want a poll")
	}
	defer done()
	s.post(groupEvent{})
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a post did not wake the poll")
	}
}

func TestSignalsRevocationHoldsRestores(t *testing.T) {
	var s signals
	stopped := false
	if !s.restoring(func() { stopped = true }) {
		t.Fatal("restoring without a revocation: want true")
	}
	s.beginRevocation()
	if !stopped {
		t.Fatal("beginRevocation did not stop the restore")
	}
	if s.restoring(func() {}) {
		t.Fatal("restoring while a revocation waits: want false")
	}
	s.endRevocation()
	if !s.restoring(func() {}) {
		t.Fatal("restoring after the revocation: want true")
	}
	s.restoring(nil)
	if _, _, ok := s.pollWait(context.Background(), time.Hour); ok {
		t.Fatal("endRevocation wakes the loop: want no poll")
	}
}

func TestSignalsJobsAndFailures(t *testing.T) {
	var s signals
	a := &task{id: taskID{Processor: "count", Partition: 0}}
	s.jobEnded(a)
	sctx, done := s.sleepWait(context.Background(), time.Hour)
	if sctx.Err() == nil {
		t.Fatal("sleepWait with an ended job: want no sleep")
	}
	done()
	if got := s.takeEnded(); len(got) != 1 || got[0] != a {
		t.Fatalf("takeEnded = %v", got)
	}
	first, second := errors.New("first"), errors.New("second")
	s.setFatal(first)
	s.setFatal(second)
	if err := s.takeFatal(); err != first {
		t.Fatalf("takeFatal = %v, want the first error", err)
	}
	if _, _, ok := s.pollWait(context.Background(), time.Hour); ok {
		t.Fatal("pollWait after a failure: want no poll")
	}
}
