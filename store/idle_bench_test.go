package store

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkIdleTaskRetained reports the live heap per idle task that 1,024 tasks keep after
// each committed 64 writes of 256 bytes (Apply), above their heap before those writes: what a
// task holds between its commits, such as a write batch with its buffer.
//
//	go test ./store -run '^$' -bench IdleTaskRetained -benchtime 1x
func BenchmarkIdleTaskRetained(b *testing.B) {
	const tasks, writes = 1024, 64
	value := bytes.Repeat([]byte("v"), 256) // 16 KiB a task, 16 MiB in all: no memtable switch
	for range b.N {
		m := openManagerDefault(b, b.TempDir())
		stores := make([]Store, tasks)
		ts := make([]*Task, tasks)
		for i := range ts {
			task, err := m.OpenTask("proc", int32(i))
			if err != nil {
				b.Fatal(err)
			}
			if stores[i], err = task.Open("kv", Options{Backend: Pebble}); err != nil {
				b.Fatal(err)
			}
			ts[i] = task
		}
		before := liveHeap()
		for i, task := range ts {
			for k := range writes {
				if err := stores[i].Put(fmt.Appendf(nil, "k%d", k), value); err != nil {
					b.Fatal(err)
				}
			}
			if err := task.Apply(nil); err != nil {
				b.Fatal(err)
			}
		}
		after := liveHeap()
		b.ReportMetric(float64(after-before)/tasks, "heap-B/idle-task")
		_ = m.Close()
	}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
