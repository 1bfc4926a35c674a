package runtime

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// syncBuffer collects log lines for the test to read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// withLogs has the runtime log at warn level to the test log and to buf.
func withLogs(t testing.TB, buf *syncBuffer) func(*Options) {
	return func(o *Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Warn, Output: io.MultiWriter(buf, testWriter{t})})
	}
}

// pebbleFiles returns the files of the instance's database whose names end with suffix.
func pebbleFiles(t testing.TB, stateDir, suffix string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(stateDir, "pebble"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, filepath.Join(stateDir, "pebble", e.Name()))
		}
	}
	return out
}

// garble overwrites 32 bytes of path at off with garbage, keeping its size.
func garble(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 32), off); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptStateRestoredFromChangelog corrupts the word count's Pebble files between runs:
// a MANIFEST overwritten: the next start wipes the database, logs a warning naming each store,
// partition and the database's path, restores every store from the whole changelog, and counts
// on exactly. (TestCorruptBlockFoundByAPlugin covers corruption found by a read.)
func TestCorruptStateRestoredFromChangelog(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(wordcountHCL, "pebble", true))
	cl, _ := client(t, brokers)
	dir := StateDir(cfg)

	in := start(t, cfg, brokers)
	lines, ref := wordgen.Sentences(1000, 11)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}

	// A MANIFEST overwritten.
	manifests := pebbleFiles(t, dir, "")
	for _, f := range manifests {
		if strings.HasPrefix(filepath.Base(f), "MANIFEST-") {
			garble(t, f, 0)
		}
	}
	_, changelogRecords := latest(t, brokers, "wc-counts-changelog")
	logs := &syncBuffer{}
	in = start(t, cfg, brokers, withLogs(t, logs))
	feed(t, cl, ref, 300, 12)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if got := in.events.restored()["counts"]; got != int64(changelogRecords) {
		t.Errorf("after the wipe, the stores restored %d records, want the whole changelog's %d", got, changelogRecords)
	}
	for part := range 3 {
		want := fmt.Sprintf("store wiped with the corrupt state database: it restores from its changelog from the start: processor=count partition=%d store=counts path=%s", part, filepath.Join(dir, "pebble"))
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning %q", want)
		}
	}
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptBlockFoundByAPlugin overwrites a data block of the table that holds a store, which
// no open reads. The plugin's read that meets it fails, and the run stops with an error naming
// the task (the process does not crash); under exactly_once its transaction aborts. The next
// start wipes the database and restores the store from its changelog: every count is exact.
func TestCorruptBlockFoundByAPlugin(t *testing.T) {
	brokers := cluster(t)
	cl, _ := client(t, brokers)
	cfg := loadConfig(t, t.TempDir(), `
application_id       = "corrupt"
processing_guarantee = "exactly_once"
commit_interval      = "100ms"
admin { listen = "" }
topic "words" {
  partitions = 1
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["counts"]
  store "counts" {}
}
`)
	dir := StateDir(cfg)
	keys := make([]string, 20000)
	want := map[string]string{}
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%05d", i)
		want[keys[i]] = "1"
	}
	in := start(t, cfg, brokers)
	produceKeyed(t, cl, "words", keys)
	waitCounts(t, brokers, "counts", want)
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	// Opening the database again flushes the log it replays to a table.
	in = start(t, cfg, brokers)
	waitFor(t, 30*time.Second, "the store restored", func() bool { return in.events.restoredOnce() })
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	var table string
	var size int64
	for _, f := range pebbleFiles(t, dir, ".sst") {
		if st, err := os.Stat(f); err == nil && st.Size() > size {
			table, size = f, st.Size()
		}
	}
	if size < 32<<10 {
		t.Fatalf("no table holds the counts: %v", pebbleFiles(t, dir, ""))
	}
	t.Logf("table %s: %d bytes", filepath.Base(table), size)
	garble(t, table, size/2)

	in = start(t, cfg, brokers)
	produceKeyed(t, cl, "words", keys)
	var err error
	select {
	case err = <-in.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run that reads the corrupt block did not stop")
	}
	in.done <- err // for stop
	if err == nil || !strings.Contains(err.Error(), `processor "count"`) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Run: %v; want an error naming the processor and the corrupt block", err)
	}
	t.Logf("the run stopped with: %v", err)
	_ = in.stop(t)
	if b, serr := os.ReadFile(filepath.Join(dir, "pebble-corrupt")); serr != nil || !strings.Contains(string(b), table) {
		t.Fatalf("the corruption was not marked for the next start: %q, %v", b, serr)
	}

	logs := &syncBuffer{}
	in = start(t, cfg, brokers, withLogs(t, logs))
	for k := range want {
		want[k] = "2"
	}
	waitFor(t, 60*time.Second, "every key counted twice, read_committed", func() bool {
		got, _ := topictest.LatestCommitted(t, brokers, "counts")
		return maps.Equal(got, want)
	})
	if got := in.events.restored()["counts"]; got < int64(len(keys)) {
		t.Errorf("the store restored %d records, want the whole changelog (at least %d)", got, len(keys))
	}
	if !strings.Contains(logs.String(), "store wiped with the corrupt state database: it restores from its changelog from the start: processor=count partition=0 store=counts") {
		t.Error("the start after the corrupt read did not log the wipe of the store")
	}
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
}

// restoredOnce reports whether a restore has ended.
func (e *eventLog) restoredOnce() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.ends) > 0
}
