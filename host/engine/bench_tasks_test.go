package engine

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/store"
)

// BenchmarkManyTasks measures what N tasks of the Go count plugin cost in memory and start
// time: every task gets its own stores and runs one batch of 10 records, on an instance of
// its own (per-task, as a module that exports abi.ExportInstancePerTask runs) or on an
// instance borrowed from a Pool of 2 (pool, a runtime with 2 workers). It reports
// MiB-rss/task and MiB-heap/task (the growth of the process's RSS and of the Go heap in use,
// wazero's guest memories included, over the tasks, divided by N) and ms-start/task (the time
// from the first task's start until every task ran its batch, divided by N):
//
//	go test ./host/engine -run '^$' -bench ManyTasks/per-task -benchtime 1x
//	go test ./host/engine -run '^$' -bench ManyTasks/pool -benchtime 1x
//
// (one process each: the RSS of one run would include what the other left)
func BenchmarkManyTasks(b *testing.B) {
	for _, n := range []int{256} {
		for _, pooled := range []bool{false, true} {
			name := "per-task"
			if pooled {
				name = "pool"
			}
			b.Run(fmt.Sprintf("%s/tasks=%d", name, n), func(b *testing.B) {
				for range b.N {
					manyTasks(b, n, pooled)
				}
			})
		}
	}
}

func manyTasks(b *testing.B, n int, pooled bool) {
	ctx := context.Background()
	e, _ := testEngine(b, Config{})
	m := compile(b, e, "count")
	sm, err := store.Open(store.Settings{Dir: b.TempDir(), MemoryBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer sm.Close()
	tasks := make([]Task, n)
	for i := range tasks {
		st, err := sm.OpenTask("count", int32(i))
		if err != nil {
			b.Fatal(err)
		}
		kv, err := st.Open("counts", store.Options{Backend: store.Memory})
		if err != nil {
			b.Fatal(err)
		}
		tasks[i] = Task{Processor: "count", Partition: int32(i), Stores: map[string]Store{"counts": kv},
			Clock: st, Outputs: []string{"out"}, Emitter: &discard{}, State: &TaskState{}, LogLimiter: &LogLimiter{}}
	}
	batch := recs("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	heap0, rss0 := memNow()
	b.ResetTimer()
	start := time.Now()
	pools := make([]*Pool, n) // per task
	if pooled {
		p := NewPool(m, 2)
		for i := range pools {
			pools[i] = p
		}
	} else {
		for i := range pools {
			pools[i] = NewPool(m, 1)
		}
	}
	for i := range tasks {
		in, err := pools[i].Get(ctx, tasks[i])
		if err != nil {
			b.Fatal(err)
		}
		err = in.ProcessBatch(ctx, batch)
		pools[i].Put(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
	}
	took := time.Since(start)
	b.StopTimer()
	heap1, rss1 := memNow()
	for _, p := range pools {
		_ = p.Close(ctx)
	}
	b.ReportMetric(float64(heap1-heap0)/float64(n)/(1<<20), "MiB-heap/task")
	b.ReportMetric(float64(rss1-rss0)/float64(n)/(1<<20), "MiB-rss/task")
	b.ReportMetric(float64(took.Milliseconds())/float64(n), "ms-start/task")
	b.ReportMetric(0, "ns/op")
}

// memNow returns the Go heap in use after a collection, and the process's resident set size
// (0 where /proc is not there), in bytes.
func memNow() (heap, rss int64) {
	debug.FreeOSMemory() // a collection, and the freed memory back to the OS
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = int64(ms.HeapInuse)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return heap, rss
}
