package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// replaceFile writes data to a new file next to path and renames it over path, as deploy
// tools do.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestWatchDeploys runs count on a module file in a directory of its own and replaces the file
// by write-then-rename: garbage is refused and changes nothing; a file that disappears is
// ignored; another valid module, when it comes back, becomes the processor's version; the
// same content again is a no-op.
func TestWatchDeploys(t *testing.T) {
	brokers := cluster(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "plugins", "count.wasm")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	v1 := mustRead(t, modules["count"])
	if err := os.WriteFile(path, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logCapture{t: t}
	in := start(t, loadConfig(t, dir, fmt.Sprintf(adminHCL, path)), brokers, func(o *Options) { o.Logger = logs.logger() })
	v1Hash := sha256Hex(v1)
	current := func() ProcessorStatus { return in.rt.Processors()[0] }
	waitFor(t, 30*time.Second, "the 2 tasks of count", func() bool { return current().Tasks == 2 })

	replaceFile(t, path, []byte("garbage, not a module"))
	waitFor(t, 10*time.Second, `"module refused"`, func() bool { return logs.count("module refused") == 1 })
	if p := current(); p.Current.Hash != v1Hash || p.Previous != nil || p.Switched != 2 {
		t.Fatalf("after a broken module: %+v, want %s on both tasks, no previous", p, v1Hash)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * watchDebounce)
	if n := logs.count("module refused"); n != 1 {
		t.Errorf("a missing module file was refused: %d refusals, want still 1", n)
	}

	v2 := wasmWithCustomSection(v1, "statehost-test", []byte("v2"))
	v2Hash := sha256Hex(v2)
	replaceFile(t, path, v2)
	waitFor(t, 30*time.Second, "the new module on every task", func() bool {
		p := current()
		return p.Current.Hash == v2Hash && p.Switched == 2
	})
	p := current()
	if p.Current.Source != path || p.Previous == nil || p.Previous.Hash != v1Hash || p.Tasks != 2 {
		t.Errorf("after a valid module: %+v, want %s from %s, previous %s, 2 tasks", p, v2Hash, path, v1Hash)
	}
	waitFor(t, 10*time.Second, `"module deployed"`, func() bool { return logs.count("module deployed") == 1 })

	// The same content again, written in place: nothing changes.
	if err := os.WriteFile(path, v2, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, `"module unchanged"`, func() bool { return logs.count("module unchanged") == 1 })
	if p := current(); p.Current.Hash != v2Hash || p.Previous == nil || p.Previous.Hash != v1Hash {
		t.Errorf("after the same module again: %+v, want %s, previous %s", p, v2Hash, v1Hash)
	}
	if n := logs.count("module refused"); n != 1 {
		t.Errorf("%d refusals, want 1", n)
	}
}

// TestWatchOff checks that Options.NoWatch leaves a changed module file alone.
func TestWatchOff(t *testing.T) {
	brokers := cluster(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "count.wasm")
	v1 := mustRead(t, modules["count"])
	if err := os.WriteFile(path, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logCapture{t: t}
	in := start(t, loadConfig(t, dir, fmt.Sprintf(adminHCL, path)), brokers, func(o *Options) {
		o.Logger = logs.logger()
		o.NoWatch = true
	})
	waitFor(t, 30*time.Second, "the 2 tasks of count", func() bool { return in.rt.Processors()[0].Tasks == 2 })
	replaceFile(t, path, wasmWithCustomSection(v1, "statehost-test", []byte("v2")))
	time.Sleep(4 * watchDebounce)
	if p := in.rt.Processors()[0]; p.Current.Hash != sha256Hex(v1) || p.Previous != nil {
		t.Errorf("with NoWatch, a changed file was deployed: %+v", p)
	}
	if n := logs.count("watching module files"); n != 0 {
		t.Errorf("with NoWatch, the runtime watches the module files")
	}
}
