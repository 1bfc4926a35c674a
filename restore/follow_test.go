package restore

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/store"
)

// TestFollow: a standby follows its changelog as it grows, with a checkpoint per batch and the
// high watermark in each batch event; a cancel stops it with the context's error and exports
// the checkpoint file; following again resumes after the checkpoint.
func TestFollow(t *testing.T) {
	e := newEnv(t)
	task := e.task(t, 0, changelog.StoreSpec{Name: "kv"})
	topic := changelog.TopicName(app, "kv")
	e.produce(t, topic, 0, 0, 100, 30)

	follow := func(rec *recorder) (stop func() error) {
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		r := e.restorer(t, rec, Settings{})
		go func() { done <- r.Follow(fctx, task) }()
		return func() error { cancel(); return <-done }
	}
	waitOffset := func(rec *recorder, off int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			rec.mu.Lock()
			n := len(rec.batches)
			var last BatchEvent
			if n > 0 {
				last = rec.batches[n-1]
			}
			rec.mu.Unlock()
			if n > 0 && last.Offset == off {
				if last.HighWatermark != off+1 {
					t.Errorf("batch at offset %d reports high watermark %d, want %d", off, last.HighWatermark, off+1)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("the standby did not apply up to offset %d", off)
	}

	rec := &recorder{}
	stop := follow(rec)
	waitOffset(rec, 99)
	e.produce(t, topic, 0, 100, 50, 50) // records that arrive while it follows
	waitOffset(rec, 149)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v after a cancel, want context.Canceled", err)
	}
	if len(rec.ends) != 0 {
		t.Errorf("a standby reported %d restore ends: it never ends", len(rec.ends))
	}
	if got := dump(t, task.Store("kv")); !reflect.DeepEqual(got, expectKeys(0, 150)) {
		t.Fatalf("the standby holds %d keys, want 150", len(got))
	}
	entries, err := store.ReadCheckpointFile(filepath.Join(task.StoreTask().Dir(), store.CheckpointFileName))
	if err != nil || len(entries) != 1 || entries[0].Offset != 149 {
		t.Fatalf("checkpoint file after the cancel: %+v, %v; want offset 149", entries, err)
	}

	// Following again resumes after the checkpoint.
	e.produce(t, topic, 0, 150, 10, 10)
	rec = &recorder{}
	stop = follow(rec)
	waitOffset(rec, 159)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if rec.starts[0].StartOffset != 150 {
		t.Errorf("the second follow started at %d, want 150 (after the checkpoint)", rec.starts[0].StartOffset)
	}
	if n := rec.restoredBatches(); n != 10 {
		t.Errorf("the second follow applied %d records, want the 10 new ones", n)
	}
}
