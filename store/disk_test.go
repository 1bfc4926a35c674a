package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
)

// Disk trouble (disk.go): a full disk fails the commit with an error naming the task, its
// stores and the database, and leaves the last durable commit whole; an unwritable directory
// fails Open and wipes nothing; a corrupt database is wiped at Open, or marked by the read that
// finds the corruption and wiped at the next Open.

const diskFullEnv = "STATEHOST_STORE_DISKFULL_DIR"

// diskKeys is how many keys each commit of fillUntilFailure writes (1000-byte values).
const diskKeys = 50

// fillUntilFailure commits, in task p_0 store "s" of m, batches of diskKeys keys with the
// checkpoint i until a commit fails, and returns the last checkpoint committed (-1: none) and
// the error.
func fillUntilFailure(m *Manager) (last int64, err error) {
	task, err := m.OpenTask("p", 0)
	if err != nil {
		return -1, err
	}
	s, err := task.Open("s", Options{Backend: Pebble})
	if err != nil {
		return -1, err
	}
	val := bytes.Repeat([]byte("v"), 1000)
	last = -1
	for i := int64(0); i < 100000; i++ {
		for j := range diskKeys {
			if err := s.Put(fmt.Appendf(nil, "k%06d-%03d", i, j), val); err != nil {
				return last, err
			}
		}
		if err := task.Apply(map[string]int64{"s": i}); err != nil {
			return last, err
		}
		last = i
	}
	return last, errors.New("the disk never filled")
}

// checkDurable opens dir and checks that store "s" of task p_0 holds exactly the keys of the
// commits up to its checkpoint, and that the checkpoint is last.
func checkDurable(t *testing.T, dir string, last int64) {
	t.Helper()
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatalf("reopening after the failure: %v", err)
	}
	defer m.Close()
	task, err := m.OpenTask("p", 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := task.Open("s", Options{Backend: Pebble})
	if err != nil {
		t.Fatal(err)
	}
	cp, ok, err := task.Partition("s").Checkpoint()
	if err != nil || !ok || cp.Offset != last {
		t.Fatalf("checkpoint after the failure: %d (%v, %v), want the last commit that succeeded, %d", cp.Offset, ok, err, last)
	}
	it, err := s.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := int64(0)
	for it.Next() {
		var i, j int64
		if _, err := fmt.Sscanf(string(it.Key()), "k%06d-%03d", &i, &j); err != nil || i > last {
			t.Fatalf("key %q is beyond the checkpoint %d: the failed commit was applied in part", it.Key(), last)
		}
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if want := (last + 1) * diskKeys; n != want {
		t.Fatalf("%d keys after the failure, want %d: the checkpoint %d claims data that is not there", n, want, last)
	}
}

// TestDiskFull fills the disk under a store while it commits: the file size limit of a child
// process (RLIMIT_FSIZE: writes past it fail with EFBIG, as they fail with ENOSPC on a full
// disk; Pebble takes both the same way, a fatal error of its write-ahead log). The commit that
// cannot be written fails with an error that names the task, the store, the database and the
// cause, and so does every later operation; reopened without the limit, the store holds every
// commit up to its checkpoint and nothing of the failed one.
//
// With root and a tmpfs, TestDiskFullTmpfs does the same on a real full file system.
func TestDiskFull(t *testing.T) {
	if dir := os.Getenv(diskFullEnv); dir != "" {
		diskFullChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFull$")
	cmd.Env = append(os.Environ(), diskFullEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	res := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok && strings.HasPrefix(k, "disk-") {
			res[k] = v
		}
	}
	last, err := strconv.ParseInt(res["disk-last"], 10, 64)
	if err != nil || last < 0 {
		t.Fatalf("child: no commit succeeded before the limit (%q):\n%s", res["disk-last"], out)
	}
	db := filepath.Join(dir, "pebble")
	for _, k := range []string{"disk-apply", "disk-again", "disk-open"} {
		for _, want := range []string{"the state database failed a write", db, "file too large"} {
			if !strings.Contains(res[k], want) {
				t.Errorf("%s: %q does not say %q", k, res[k], want)
			}
		}
	}
	for _, want := range []string{"task p_0", `stores "s"`, fmt.Sprintf(`"s" at offset %d`, last+1)} {
		if !strings.Contains(res["disk-apply"], want) {
			t.Errorf("the failed commit's error %q does not say %q", res["disk-apply"], want)
		}
	}
	t.Logf("%d commits, then: %s", last+1, res["disk-apply"])
	checkDurable(t, dir, last)
}

// diskFullChild runs in the child of TestDiskFull: it limits its files to 400 kB, fills the
// store until a commit fails, and prints what happened.
func diskFullChild(dir string) {
	lim := &syscall.Rlimit{Cur: 400_000, Max: 400_000}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, lim); err != nil {
		fmt.Println("disk-setup:", err)
		return
	}
	m, err := Open(Settings{Dir: dir, SyncCommits: true, MemoryBytes: MinMemoryBytes})
	if err != nil {
		fmt.Println("disk-setup:", err)
		return
	}
	last, err := fillUntilFailure(m)
	fmt.Println("disk-last:", last)
	fmt.Println("disk-apply:", err)
	task := m.tasks[TaskID{"p", 0}]
	fmt.Println("disk-again:", task.Apply(map[string]int64{"s": last + 2}))
	_, err = m.OpenTask("p", 1)
	fmt.Println("disk-open:", err)
	fmt.Println("disk-close:", m.Close())
}

// TestDiskFullTmpfs fills a real file system: a 4 MiB tmpfs, mounted when the test runs as
// root with the right to mount (skipped otherwise: TestDiskFull covers the same path).
func TestDiskFullTmpfs(t *testing.T) {
	dir := mountTmpfs(t, "size=4m")
	m, err := Open(Settings{Dir: filepath.Join(dir, "app"), SyncCommits: true, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	last, err := fillUntilFailure(m)
	if !errors.Is(err, ErrDatabaseFailed) || !errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("after %d commits: %v; want ErrDatabaseFailed, no space left on device", last+1, err)
	}
	if last < 0 {
		t.Fatal("no commit fitted")
	}
	t.Logf("%d commits, then: %v", last+1, err)
	if err := m.Close(); !errors.Is(err, ErrDatabaseFailed) {
		t.Errorf("Close: %v, want ErrDatabaseFailed", err)
	}
	// Space comes back (the tmpfs grows): the store reopens at its last durable commit.
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal(err)
	}
	checkDurable(t, filepath.Join(dir, "app"), last)
}

// mountTmpfs mounts a tmpfs with options on a temporary directory and unmounts it at the
// end, or skips the test when it cannot (not root, no right to mount).
func mountTmpfs(t *testing.T, options string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, options); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// makeReadOnly makes dir (and what it holds) unwritable until undo or the end of the test:
// permission bits for a user, a read-only bind mount for root (whom permission bits do not
// stop). It skips the test when neither works.
func makeReadOnly(t *testing.T, dir string) (undo func()) {
	t.Helper()
	var once sync.Once
	if os.Geteuid() != 0 {
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range dirs {
			if err := os.Chmod(d, 0o555); err != nil {
				t.Fatal(err)
			}
		}
		undo = func() {
			once.Do(func() {
				for _, d := range dirs {
					_ = os.Chmod(d, 0o755)
				}
			})
		}
		t.Cleanup(undo)
		return undo
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		t.Skipf("cannot bind-mount %s: %v", dir, err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		t.Skipf("cannot make the bind mount of %s read-only: %v", dir, err)
	}
	undo = func() {
		once.Do(func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
	t.Cleanup(undo)
	return undo
}

// fillStores writes a few keys to task p_0 store "s" and task q_1 store "t" of a new state
// directory, commits them with checkpoints 41 and 42, exports their checkpoint files, flushes
// the database to a table and closes it. It returns the directory.
func fillStores(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []TaskID{{"p", 0}, {"q", 1}} {
		name := []string{"s", "t"}[i]
		task, err := m.OpenTask(id.Processor, id.Partition)
		if err != nil {
			t.Fatal(err)
		}
		s, err := task.Open(name, Options{Backend: Pebble})
		if err != nil {
			t.Fatal(err)
		}
		for k := range 2000 {
			if err := s.Put(fmt.Appendf(nil, "key-%05d", k), bytes.Repeat([]byte("v"), 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := task.Apply(map[string]int64{name: int64(41 + i)}); err != nil {
			t.Fatal(err)
		}
		topic := "app-" + name + "-changelog"
		if err := WriteCheckpointFile(filepath.Join(task.Dir(), CheckpointFileName),
			[]CheckpointEntry{{Topic: topic, Partition: id.Partition, Offset: int64(41 + i)}}); err != nil {
			t.Fatal(err)
		}
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dbFile returns the one file of the database in dir whose name ends with suffix (or begins
// with it, for "MANIFEST-").
func dbFile(t *testing.T, dir, suffix string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "pebble"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) || strings.HasPrefix(e.Name(), suffix) {
			found = append(found, filepath.Join(dir, "pebble", e.Name()))
		}
	}
	if len(found) != 1 {
		t.Fatalf("files %s in %s: %v, want one", suffix, dir, found)
	}
	return found[0]
}

// overwrite writes garbage over n bytes of path at off (from the end when negative), without
// changing its size.
func overwrite(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += st.Size()
	}
	if off+int64(n) > st.Size() {
		t.Fatalf("%s has %d bytes: cannot overwrite %d at %d", path, st.Size(), n, off)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0x5a}, n), off); err != nil {
		t.Fatal(err)
	}
}

// logBuffer is an hclog destination that tests read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: l, Level: hclog.Warn})
}

// checkWiped checks that the state in dir, opened with m, lost every store and checkpoint, and
// that the logs say so, naming the database, the tasks and, as the stores open, each store.
func checkWiped(t *testing.T, m *Manager, dir string, logs *logBuffer) {
	t.Helper()
	if lt, err := m.LocalTasks(); err != nil || len(lt) != 0 {
		t.Errorf("after the wipe, local tasks %v (%v), want none", lt, err)
	}
	for i, id := range []TaskID{{"p", 0}, {"q", 1}} {
		name := []string{"s", "t"}[i]
		if _, err := os.Stat(filepath.Join(dir, "tasks", id.String(), CheckpointFileName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("task %s: checkpoint file after the wipe: %v, want none", id, err)
		}
		task, err := m.OpenTask(id.Processor, id.Partition)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := task.Open(name, Options{Backend: Pebble}); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := task.Partition(name).Checkpoint(); ok {
			t.Errorf("task %s store %s has a checkpoint after the wipe", id, name)
		}
		if has, err := task.Partition(name).HasData(); err != nil || has {
			t.Errorf("task %s store %s holds data after the wipe (%v)", id, name, err)
		}
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`store wiped with the corrupt state database: it restores from its changelog from the start: processor=%s partition=%d store=%s path=%s lost_checkpoint="app-%s-changelog partition %d offset %d"`,
			id.Processor, id.Partition, name, filepath.Join(dir, "pebble"), name, id.Partition, 41+i)
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning %q in the logs:\n%s", want, logs)
		}
	}
	want := "the state database is corrupt: wiping it; every store of the instance restores from its changelog from the start, and stores with logging disabled lose their data: path=" + filepath.Join(dir, "pebble")
	if !strings.Contains(logs.String(), want) {
		t.Errorf("no warning %q in the logs:\n%s", want, logs)
	}
	if _, err := os.Stat(filepath.Join(dir, "pebble"+wipeSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the wiped database is still there: %v", err)
	}
}

// TestCorruptDatabaseWipedAtOpen corrupts the files of a database between two runs: Open wipes
// it (the stores and their checkpoints, and the exported checkpoint files) and says so.
func TestCorruptDatabaseWipedAtOpen(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(t *testing.T, dir string)
	}{
		{"manifest overwritten", func(t *testing.T, dir string) { overwrite(t, dbFile(t, dir, "MANIFEST-"), 8, 16) }},
		{"manifest missing", func(t *testing.T, dir string) { mustRemove(t, dbFile(t, dir, "MANIFEST-")) }},
		{"table missing", func(t *testing.T, dir string) { mustRemove(t, dbFile(t, dir, ".sst")) }},
		{"table truncated", func(t *testing.T, dir string) {
			p := dbFile(t, dir, ".sst")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}},
		// The first block holds the registry, read at Open.
		{"table head overwritten", func(t *testing.T, dir string) { overwrite(t, dbFile(t, dir, ".sst"), 16, 16) }},
		{"table footer overwritten", func(t *testing.T, dir string) { overwrite(t, dbFile(t, dir, ".sst"), -16, 16) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fillStores(t)
			c.corrupt(t, dir)
			logs := &logBuffer{}
			m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes, Logger: logs.logger()})
			if err != nil {
				t.Fatalf("Open of a corrupt database: %v", err)
			}
			defer m.Close()
			checkWiped(t, m, dir, logs)
		})
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptionFoundByARead: a data block is overwritten, which Open does not read. The read
// that meets it fails with Pebble's corruption error (the process does not crash), marks the
// database, and the next Open wipes it.
func TestCorruptionFoundByARead(t *testing.T) {
	dir := fillStores(t)
	p := dbFile(t, dir, ".sst")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, p, st.Size()/3, 16)
	logs := &logBuffer{}
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if lt, err := m.LocalTasks(); err != nil || len(lt) != 2 {
		t.Fatalf("Open wiped or lost the database: local tasks %v (%v)", lt, err)
	}
	var readErr error
	for i, id := range []TaskID{{"p", 0}, {"q", 1}} {
		name := []string{"s", "t"}[i]
		task, err := m.OpenTask(id.Processor, id.Partition)
		if err != nil {
			t.Fatal(err)
		}
		s, err := task.Open(name, Options{Backend: Pebble})
		if err != nil {
			t.Fatal(err)
		}
		it, err := s.Range(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
		}
		readErr = errors.Join(readErr, it.Err())
		it.Close()
		task.Close()
	}
	if !pebble.IsCorruptionError(readErr) {
		t.Fatalf("reading the stores: %v, want a corruption error", readErr)
	}
	marker := filepath.Join(dir, corruptMarker)
	if b, err := os.ReadFile(marker); err != nil || !strings.Contains(string(b), p) {
		t.Errorf("marker %s: %q (%v), want the corrupt file's path", marker, b, err)
	}
	if want := "the state database is corrupt: the next start wipes it and restores every store from its changelog: path=" + p; !strings.Contains(logs.String(), want) {
		t.Errorf("no error %q in the logs:\n%s", want, logs)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	logs = &logBuffer{}
	m, err = Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	checkWiped(t, m, dir, logs)
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker after the wipe: %v, want none", err)
	}
}

// TestUnwritableStateDirectory: a state directory that cannot be written fails Open, and the
// error names the file; the database is neither wiped nor marked. Once writable again, it opens
// with its data.
func TestUnwritableStateDirectory(t *testing.T) {
	dir := fillStores(t)
	writable := makeReadOnly(t, dir)
	for _, skipLock := range []bool{false, true} { // true: the database meets the directory itself
		_, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes, SkipLock: skipLock})
		if err == nil || !strings.Contains(err.Error(), dir+"/") ||
			!errors.Is(err, syscall.EROFS) && !errors.Is(err, os.ErrPermission) {
			t.Errorf("Open of an unwritable state directory (SkipLock %v): %v; want a permission or read-only error naming a file of %s", skipLock, err, dir)
		}
		t.Logf("SkipLock %v: %v", skipLock, err)
	}
	if t.Failed() {
		return
	}
	writable()
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lt, err := m.LocalTasks()
	if err != nil || len(lt) != 2 || lt[0].Stores[0].Checkpoint != 41 || lt[1].Stores[0].Checkpoint != 42 {
		t.Errorf("after the directory became writable again: local tasks %+v (%v), want p_0 and q_1 with checkpoints 41 and 42", lt, err)
	}
	if _, err := os.Stat(filepath.Join(dir, corruptMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unwritable directory marked the database corrupt: %v", err)
	}
}

// TestUnwritableTaskDirectory: a task whose directory cannot be created fails to open, with an
// error naming the task and the directory.
func TestUnwritableTaskDirectory(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	makeReadOnly(t, filepath.Join(dir, "tasks"))
	_, err = m.OpenTask("p", 3)
	if want := filepath.Join(dir, "tasks", "p_3"); err == nil || !strings.Contains(err.Error(), "task p_3") || !strings.Contains(err.Error(), want) {
		t.Errorf("OpenTask in an unwritable directory: %v; want an error naming task p_3 and %s", err, want)
	}
}

// TestNoWipeWhenLocked: Pebble's own lock held by another open of the database (the state
// directory's lock skipped) fails Open with the lock's error; the database in use is not
// wiped. Unlike corruption, nothing about it is wrong.
func TestNoWipeWhenLocked(t *testing.T) {
	dir := fillStores(t)
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes, SkipLock: true})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "pebble")) || isCorrupt(err) {
		t.Fatalf("second Open of a database in use: %v; want the lock's error, naming the database", err)
	}
	if lt, err := m.LocalTasks(); err != nil || len(lt) != 2 {
		t.Fatalf("the database in use lost its state: %v (%v)", lt, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tasks", "p_0", CheckpointFileName)); err != nil {
		t.Errorf("the exported checkpoint file is gone: %v", err)
	}
}

// TestNoWipeWhenUnreadable: a file of the database that the process may not read (its state
// directory stays writable) fails Open with a permission error naming it; nothing is wiped.
// Permission bits do not stop root, so the test needs another user.
func TestNoWipeWhenUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their permissions (TestNoWipeWhenLocked covers an error that is not corruption)")
	}
	dir := fillStores(t)
	manifest := dbFile(t, dir, "MANIFEST-")
	if err := os.Chmod(manifest, 0); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err == nil || !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), filepath.Join(dir, "pebble")) {
		t.Fatalf("Open with an unreadable MANIFEST: %v; want a permission error naming the database", err)
	}
	if err := os.Chmod(manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(Settings{Dir: dir, MemoryBytes: MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if lt, err := m.LocalTasks(); err != nil || len(lt) != 2 {
		t.Fatalf("the database was wiped or lost its state: %v (%v)", lt, err)
	}
}
