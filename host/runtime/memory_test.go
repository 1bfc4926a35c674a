package runtime

import (
	"fmt"
	"runtime/debug"
	"testing"
)

// TestMemorySettings: state_memory bounds the instance's stores, and memory_limit becomes the
// process's soft memory limit; the word count runs under both.
func TestMemorySettings(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), `state_memory = "16MiB"
memory_limit = "2GiB"
`+fmt.Sprintf(wordcountHCL, "pebble", true))
	cl, _ := client(t, brokers)

	in := start(t, cfg, brokers)
	if got := in.rt.stores.Settings().MemoryBytes; got != 16<<20 {
		t.Errorf("store memory %d, want state_memory's 16 MiB", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 2<<30 {
		t.Errorf("memory limit %d, want memory_limit's 2 GiB", got)
	}
	produce(t, cl, "sentences", "a a b")
	waitCounts(t, brokers, "word-counts", map[string]string{"a": "2", "b": "1"})
}
