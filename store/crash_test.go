package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const crashEnv = "STATEHOST_STORE_CRASH_DIR"

// TestCrashRecovery kills a process with SIGKILL and checks what Pebble
// recovers from its WAL. With SyncCommits the last commit survives whole.
// Without it (the default), a logged store's process is killed while it
// commits in a loop, and data and checkpoint must never be torn apart: the
// number of keys is exactly the checkpoint + 1; and a commit to a store with
// logging disabled survives whole even so (nothing could restore it).
// Uncommitted writes never survive, and the LOCK dies with the process.
func TestCrashRecovery(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashHelper(dir, os.Getenv(crashEnv+"_MODE"))
		return
	}
	t.Run("sync", func(t *testing.T) {
		m := crashAndReopen(t, "sync")
		defer m.Close()
		n, cp, ok := crashState(t, m)
		if n != 1000 || !ok || cp.Offset != 999 {
			t.Fatalf("recovered %d keys, checkpoint %v %v; want 1000 keys, checkpoint 999", n, cp.Offset, ok)
		}
	})
	t.Run("unlogged-without-sync-commits", func(t *testing.T) {
		m := crashAndReopen(t, "unlogged")
		defer m.Close()
		n, cp, ok := crashState(t, m)
		if n != 1000 || !ok || cp.Offset != 999 {
			t.Fatalf("recovered %d keys, checkpoint %v %v; want 1000 keys, checkpoint 999", n, cp.Offset, ok)
		}
	})
	t.Run("restore-then-sync", func(t *testing.T) {
		// Restore batches are not fsynced; Task.Sync makes them durable before a checkpoint
		// file names them.
		m := crashAndReopen(t, "restore")
		defer m.Close()
		n, cp, ok := crashState(t, m)
		if n != 10 || !ok || cp.Offset != 9 {
			t.Fatalf("recovered %d keys, checkpoint %v %v; want the 10 restored keys, checkpoint 9", n, cp.Offset, ok)
		}
	})
	t.Run("nosync-loop", func(t *testing.T) {
		m := crashAndReopen(t, "loop")
		defer m.Close()
		n, cp, ok := crashState(t, m)
		t.Logf("recovered %d keys, checkpoint %d (%v)", n, cp.Offset, ok)
		if ok && int64(n) != cp.Offset+1 || !ok && n != 0 {
			t.Fatalf("torn commit: %d keys, checkpoint %d (%v)", n, cp.Offset, ok)
		}
	})
}

func crashAndReopen(t *testing.T, mode string) *Manager {
	dir := t.TempDir()
	cmd := startHelper(t, "TestCrashRecovery", "ready", crashEnv+"="+dir, crashEnv+"_MODE="+mode)
	if mode == "loop" {
		time.Sleep(50 * time.Millisecond) // kill it in the middle of its commits
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return openManager(t, dir) // the flock died with the process
}

// startHelper runs this test binary's test as a helper process, with env added to its
// environment, and returns once the helper has printed the line; the rest of its output is
// read and dropped. The caller kills it.
func startHelper(t *testing.T, test, line string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == line {
				seen <- nil
				for sc.Scan() { // drain: the helper must not block on a full pipe
				}
				return
			}
		}
		seen <- fmt.Errorf("the helper ended before it printed %q: %v", line, sc.Err())
	}()
	select {
	case err := <-seen:
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper did not print %q within 60s", line)
	}
	return cmd
}

func crashState(t *testing.T, m *Manager) (int, Checkpoint, bool) {
	task, _ := m.OpenTask("p", 0)
	s, _ := task.Open("s", Options{})
	n := 0
	it, _ := s.Range(nil, nil)
	for it.Next() {
		if strings.HasPrefix(string(it.Key()), "uncommitted") {
			t.Fatalf("uncommitted key %q survived", it.Key())
		}
		n++
	}
	it.Close()
	cp, ok, err := task.Partition("s").Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	return n, cp, ok
}

// discardLog is the changelog of a logged store whose records go nowhere:
// what matters here is only that the store is logged.
type discardLog struct{}

func (discardLog) LogPut(key, value []byte) error { return nil }
func (discardLog) LogDelete(key []byte) error     { return nil }

func crashHelper(dir, mode string) {
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes, SyncCommits: mode == "sync" || mode == "restore"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	task, _ := m.OpenTask("p", 0)
	var o Options
	if mode == "loop" || mode == "restore" {
		o.Changelog = discardLog{}
	}
	s, _ := task.Open("s", o)
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if mode == "restore" {
		var ws []Write
		for i := range 10 {
			ws = append(ws, Write{Key: fmt.Appendf(nil, "k%06d", i), Value: []byte("v")})
		}
		if err := task.Partition("s").ApplyRestore(ws, Checkpoint{Offset: 9}); err != nil {
			fail(err)
		}
		if err := task.Sync(); err != nil {
			fail(err)
		}
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}
	if mode == "sync" || mode == "unlogged" {
		for i := range 1000 {
			_ = s.Put(fmt.Appendf(nil, "k%06d", i), []byte("v"))
		}
		if err := task.Apply(map[string]int64{"s": 999}); err != nil {
			fail(err)
		}
		for i := range 100 {
			_ = s.Put(fmt.Appendf(nil, "uncommitted%04d", i), []byte("v"))
		}
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}
	for i := 0; ; i++ {
		for j := range 100 {
			_ = s.Put(fmt.Appendf(nil, "k%09d", i*100+j), []byte("v"))
		}
		if err := task.Apply(map[string]int64{"s": int64(i*100 + 99)}); err != nil {
			fail(err)
		}
		_ = s.Put([]byte("uncommitted"), []byte("v"))
		if i == 10 {
			fmt.Println("ready")
		}
		_ = s.Delete([]byte("uncommitted"))
	}
}
