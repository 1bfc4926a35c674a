package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStopTexts checks what the error of a guest the host stopped says: the time limit, or
// the cancellation, and not the trap by which the interrupted guest stopped (wasm's
// "unreachable" is the host's own stop); the cause stays in the chain for errors.Is.
func TestStopTexts(t *testing.T) {
	for _, guest := range []string{"probe", "goprobe"} {
		t.Run(guest, func(t *testing.T) {
			e, _ := testEngine(t, Config{BatchTimeout: 300 * time.Millisecond})
			in := instantiate(t, e, guest, newRig(t, "s").task(guest, "out"))
			err := in.ProcessBatch(context.Background(), recs("loop"))
			guestError(t, err, ErrTimeout)
			if !strings.Contains(err.Error(), "guest call timed out: stopped after running past the batch time limit of 300ms") ||
				strings.Contains(err.Error(), "unreachable") || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("timeout: %q: want the limit, no trap, and context.DeadlineExceeded in the chain", err)
			}

			e, _ = testEngine(t, Config{BatchTimeout: time.Minute})
			in = instantiate(t, e, guest, newRig(t, "s").task(guest, "out"))
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(100*time.Millisecond, func() { cancel(errors.New("task revoked")) })
			err = in.ProcessBatch(ctx, recs("loop"))
			guestError(t, err, ErrCanceled)
			if !strings.Contains(err.Error(), "guest call canceled: stopped when the call was canceled (task revoked)") ||
				strings.Contains(err.Error(), "unreachable") || !errors.Is(err, context.Canceled) {
				t.Errorf("cancellation: %q: want the cause, no trap, and context.Canceled in the chain", err)
			}
		})
	}
}
