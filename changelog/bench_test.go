package changelog

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkPutLoggingOnVsOff measures put throughput into a Pebble store with
// its changelog on and off, in the same run, commits included (every 10,000
// puts and at the end: with logging on a commit waits for the broker's acks).
// It reports both rates and their ratio (on / off). b.N is the number of puts
// per mode.
//
//	go test -run '^$' -bench PutLoggingOnVsOff -benchtime 200000x ./changelog/
func BenchmarkPutLoggingOnVsOff(b *testing.B) {
	e := newEnv(b, 3)
	on := e.open(b, 0, StoreSpec{Name: "logged"})
	off := e.open(b, 1, StoreSpec{Name: "unlogged", LoggingDisabled: true})
	val := make([]byte, 100)
	run := func(task *Task, name string) time.Duration {
		s := task.Store(name)
		t0 := time.Now()
		for i := range b.N {
			if err := s.Put(fmt.Appendf(nil, "key%08d", i%100_000), val); err != nil {
				b.Fatal(err)
			}
			if i%10_000 == 9_999 {
				if err := task.Commit(ctx, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := task.Commit(ctx, nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	offTime := run(off, "unlogged")
	onTime := run(on, "logged")
	onRate := float64(b.N) / onTime.Seconds()
	offRate := float64(b.N) / offTime.Seconds()
	b.ReportMetric(onRate, "logged-puts/s")
	b.ReportMetric(offRate, "unlogged-puts/s")
	b.ReportMetric(onRate/offRate, "on/off")
}

// BenchmarkProducePath measures the per-record cost of the produce path as the word count
// uses it: per op one Put to a logged Pebble store (one changelog record) and one Output
// record, both of one input record (Task.SetSource), with a Flush every 100 ops (as after a
// plugin call) and a commit every 10,000 ops (it waits for their acknowledgements). Besides
// ns/op and allocs/op (the process's: the in-process broker's included), it reports on Linux
// the CPU time per op of the process (cpu-ns/op, the broker's included) and of the thread
// that produces (producer-cpu-ns/op: the task's side of the path, without the promises and
// the broker), which are steadier than ns/op on a shared machine.
//
//	go test -run '^$' -bench ProducePath -benchmem -benchtime 200000x -count 5 ./changelog/
func BenchmarkProducePath(b *testing.B) {
	e := newEnv(b, 3)
	task := e.open(b, 0, StoreSpec{Name: "kv"})
	s := task.Store("kv")
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "word%04d", i)
	}
	val := []byte("12345")
	// Each op is one input record, named as the runtime names them (Task.SetSource).
	src := &fixedSource{in: Input{Topic: "input"}}
	task.SetSource(src)
	runtime.LockOSThread() // the thread's CPU time is this goroutine's
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	p0, t0, cpuOK := cpuTimes()
	for i := range b.N {
		k := keys[i%len(keys)]
		src.in.Offset = int64(i)
		if err := s.Put(k, val); err != nil {
			b.Fatal(err)
		}
		if err := task.Output(ctx, OutputRecord{Topic: "output", Partition: 0, Key: k, Value: val}); err != nil {
			b.Fatal(err)
		}
		if i%100 == 99 {
			task.Flush()
		}
		if i%10_000 == 9_999 {
			if err := task.Commit(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := task.Commit(ctx, nil); err != nil {
		b.Fatal(err)
	}
	if p1, t1, ok := cpuTimes(); ok && cpuOK {
		b.ReportMetric(float64(p1-p0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(t1-t0)/float64(b.N), "producer-cpu-ns/op")
	}
}
