package changelog

import (
	"fmt"
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
