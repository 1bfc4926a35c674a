package store

import (
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkReadCacheMemory fills one partition's read cache of the default settings with
// b.N distinct words (10-byte keys, 3-byte values), in an order that keeps it evicting, and
// reports the heap it holds against what it counts: real_vs_counted is the ratio, which the
// per-entry overhead and the map's remaking under churn keep near 1.
//
//	go test ./store -run '^$' -bench BenchmarkReadCacheMemory -benchtime 1000000x
func BenchmarkReadCacheMemory(b *testing.B) {
	c := newCacheBudget(DefaultMemoryBytes).newCache()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	key := make([]byte, 0, 16)
	for i := range b.N {
		key = strconv.AppendInt(key[:0], int64(1e9+(i*7919)%b.N), 10)
		c.fill(key, []byte("123"), false, 0)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
	b.ReportMetric(held/float64(1<<20), "heap_MiB")
	b.ReportMetric(float64(c.bytes)/float64(1<<20), "counted_MiB")
	b.ReportMetric(held/float64(c.bytes), "real_vs_counted")
	b.ReportMetric(float64(len(c.m)), "entries")
	runtime.KeepAlive(c)
}
