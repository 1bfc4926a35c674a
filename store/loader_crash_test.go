package store

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

const loadCrashEnv = "STATEHOST_STORE_LOAD_CRASH_DIR"

// The changelog of the load crash tests: 200,000 records over 20,000 keys with deletes, in
// batches of 500, loaded with a 256 KiB budget (a run every few batches).
func loadCrashLog() [][]Write { return loadLog(5, 200_000, 20_000, 500, false) }

// TestLoaderSIGKILL kills a process with SIGKILL while it loads a changelog through a Loader,
// at several points: before its first run is ingested, while its runs are written and
// ingested one after the other (after the first, the third and the tenth), and while its
// last run is ingested by Finish. Whenever it dies, the reopened partition holds exactly the
// changelog's state up to its checkpoint (or nothing, without a checkpoint), the load
// directory is emptied, and a new load from the checkpoint on ends in the state of the whole
// changelog, as ApplyRestore's batches give it.
func TestLoaderSIGKILL(t *testing.T) {
	if dir := os.Getenv(loadCrashEnv); dir != "" {
		loadCrashHelper(dir)
		return
	}
	log := loadCrashLog()
	// want[i] is the state after the batches up to and including log[i].
	ref := openManager(t, t.TempDir())
	defer ref.Close()
	for _, point := range []struct {
		name  string
		after string // the helper's line after which it is killed
		delay time.Duration
	}{
		{"before-the-first-run", "loading", 0},
		{"after-the-first-run", "run 1", 0},
		{"while-runs-are-written", "run 3", 3 * time.Millisecond},
		{"after-many-runs", "run 10", time.Millisecond},
		{"during-finish", "finishing", 0},
	} {
		t.Run(point.name, func(t *testing.T) {
			dir := t.TempDir()
			killLoadHelper(t, dir, point.after, point.delay)
			ents, err := os.ReadDir(dir + "/load")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the killed load left %d files in the load directory", len(ents))
			m := openManager(t, dir)
			defer m.Close()
			if ents, err := os.ReadDir(m.loadDir()); err != nil || len(ents) != 0 {
				t.Fatalf("Open left %d files in the load directory (%v)", len(ents), err)
			}
			task := openLoadTask(t, m, "p", false)
			p := task.Partition("s")
			cp, has, err := p.Checkpoint()
			if err != nil {
				t.Fatal(err)
			}
			// The reference: the batches up to the checkpoint.
			rt := openLoadTask(t, ref, point.name, false)
			var rest [][]Write
			for _, ws := range log {
				if !has || ws[len(ws)-1].Offset > cp.Offset {
					rest = append(rest, ws)
					continue
				}
				if err := rt.Partition("s").ApplyRestore(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
					t.Fatal(err)
				}
			}
			got, want := partitionState(t, p), partitionState(t, rt.Partition("s"))
			if !has {
				if len(got) != 1 {
					t.Fatalf("no checkpoint, but %d keys survived the kill", len(got)-1)
				}
			} else if !slices.Equal(got, want) {
				t.Fatalf("after the kill the partition holds %d keys with checkpoint %d, not the changelog's %d keys up to that offset",
					len(got)-1, cp.Offset, len(want)-1)
			}
			t.Logf("killed with checkpoint %d (%v), %d keys", cp.Offset, has, len(got)-1)
			if point.after == "finishing" && !has {
				t.Fatal("killed during Finish without any run ingested")
			}
			// Resume: the rest of the changelog through a new loader.
			l, err := p.NewLoader()
			if err != nil {
				t.Fatal(err)
			}
			for _, ws := range rest {
				if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
					t.Fatal(err)
				}
				if err := rt.Partition("s").ApplyRestore(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Finish(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(partitionState(t, p), partitionState(t, rt.Partition("s"))) {
				t.Fatal("the resumed load does not end in the changelog's state")
			}
		})
	}
}

// killLoadHelper starts the helper on dir and kills it with SIGKILL delay after it prints
// the line after.
func killLoadHelper(t *testing.T, dir, after string, delay time.Duration) {
	t.Helper()
	cmd := startHelper(t, "TestLoaderSIGKILL", after, loadCrashEnv+"="+dir)
	time.Sleep(delay)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// loadCrashHelper loads loadCrashLog into dir, printing "loading" when it begins, "run N"
// when its Nth run is in Pebble, and "finishing" when it calls Finish; then it waits to be
// killed.
func loadCrashHelper(dir string) {
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	m.loads.budget = 512 << 10
	task, err := m.OpenTask("p", 0)
	if err == nil {
		_, err = task.Open("s", Options{Backend: Pebble})
	}
	var l *Loader
	if err == nil {
		l, err = task.Partition("s").NewLoader()
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("loading")
	runs := 0
	for _, ws := range loadCrashLog() {
		if err := l.Add(ws, Checkpoint{Offset: ws[len(ws)-1].Offset}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		if l.runs > runs {
			runs = l.runs
			fmt.Println("run " + strconv.Itoa(runs))
		}
	}
	fmt.Println("finishing")
	if _, err := l.Finish(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("done")
	time.Sleep(time.Hour)
}
