package changelog

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statehost/statehost/store"
)

// fileOffset returns the offset of the task's .checkpoint file for its store's changelog, -1
// when the file is missing or has none.
func fileOffset(t testing.TB, task *Task) int64 {
	t.Helper()
	entries, err := store.ReadCheckpointFile(filepath.Join(task.Dir(), store.CheckpointFileName))
	if err != nil || len(entries) == 0 {
		return -1
	}
	return entries[0].Offset
}

// putAndCommit writes n keys to the task's store "kv" and commits.
func putAndCommit(t testing.TB, task *Task, n int) {
	t.Helper()
	for i := range n {
		if err := task.Store("kv").Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := task.Commit(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointFileExportedWhenDue checks that a commit rewrites the .checkpoint file only
// when it is due (its first checkpoint, or the offsets moved past ExportRecords), that the
// file is never ahead of the store's checkpoint, and that Close brings it up to the store.
func TestCheckpointFileExportedWhenDue(t *testing.T) {
	e := newEnv(t, 1)
	spec := StoreSpec{Name: "kv"}
	if err := e.tm.Ensure(ctx, 1, TopicSpecs([]StoreSpec{spec})); err != nil {
		t.Fatal(err)
	}
	task, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "proc", Partition: 0, Stores: []StoreSpec{spec},
		ExportRecords: 5, ExportInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		writes   int
		file     int64 // the offset the file must name after the commit
		storeOff int64
	}{
		{1, 0, 0}, // the first checkpoint: exported
		{3, 0, 3}, // moved by 3: not due
		{2, 0, 5}, // by 5: not due (more than 5 is)
		{1, 6, 6}, // by 6: exported
		{2, 6, 8},
	}
	for i, s := range steps {
		putAndCommit(t, task, s.writes)
		cp, _, err := task.StoreTask().Partition("kv").Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if got := fileOffset(t, task); got != s.file || cp.Offset != s.storeOff {
			t.Fatalf("commit %d: file at %d, store at %d; want %d and %d", i, got, cp.Offset, s.file, s.storeOff)
		}
	}
	if err := task.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fileOffset(t, task); got != 8 {
		t.Fatalf("after Close: file at %d, want the store's 8", got)
	}

	// A negative ExportRecords exports at every commit.
	task, err = OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "proc", Partition: 0, Stores: []StoreSpec{spec}, ExportRecords: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close(ctx)
	putAndCommit(t, task, 1)
	if got := fileOffset(t, task); got != 9 {
		t.Fatalf("ExportRecords -1: file at %d, want 9", got)
	}
}

// BenchmarkCheckpointExports measures the .checkpoint files a commit of 4,096 tasks writes
// (each with a fsync of the file and of its directory) when every task commits one record:
// "every-commit" is ExportRecords -1, the behaviour before exports were made due.
//
//	go test ./changelog -run '^$' -bench CheckpointExports -benchtime 20x
func BenchmarkCheckpointExports(b *testing.B) {
	const tasks = 4096
	for _, mode := range []struct {
		name    string
		records int64
	}{{"every-commit", -1}, {"due", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			e := newEnv(b, 1)
			spec := StoreSpec{Name: "kv"}
			if err := e.tm.Ensure(ctx, tasks, TopicSpecs([]StoreSpec{spec})); err != nil {
				b.Fatal(err)
			}
			ts := make([]*Task, tasks)
			for p := range ts {
				task, err := OpenTask(e.m, e.prod, TaskConfig{AppID: app, Processor: "proc", Partition: int32(p),
					Stores: []StoreSpec{spec}, ExportRecords: mode.records})
				if err != nil {
					b.Fatal(err)
				}
				ts[p] = task
				putAndCommit(b, task, 1) // the first checkpoint, exported in both modes
			}
			last := make([]int64, tasks)
			exports := 0
			b.ResetTimer()
			for range b.N {
				for _, task := range ts {
					putAndCommit(b, task, 1)
				}
				b.StopTimer()
				for p, task := range ts {
					if o := fileOffset(b, task); o != last[p] {
						exports, last[p] = exports+1, o
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(exports)/float64(b.N), "exports/commit")
			b.ReportMetric(2*float64(exports)/float64(b.N), "fsyncs/commit")
			b.StopTimer()
			for _, task := range ts {
				_ = task.Close(ctx)
			}
		})
	}
}
