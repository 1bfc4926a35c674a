package store

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// CheckpointFileName is the name of the checkpoint file exported in each task directory.
const CheckpointFileName = ".checkpoint"

// CheckpointEntry is one line of a checkpoint file: the offset of the last
// record applied from a changelog partition.
type CheckpointEntry struct {
	Topic     string
	Partition int32
	Offset    int64
}

// WriteCheckpointFile writes entries to path in Kafka Streams' text format
// (a version line "0", a count line, then "topic partition offset" lines),
// through a temporary file that is fsynced and renamed over path.
//
// The file is an export for operators and tools; the authoritative
// checkpoint lives in the store, written atomically with the data.
func WriteCheckpointFile(path string, entries []CheckpointEntry) error {
	b, err := encodeCheckpointFile(entries)
	if err != nil {
		return fmt.Errorf("store: checkpoint file %s: %w", path, err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("store: checkpoint file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("store: checkpoint file %s: write: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("store: checkpoint file %s: fsync: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: checkpoint file %s: close: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("store: checkpoint file: rename: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// CheckpointFile is one checkpoint file to write: its path and its entries.
type CheckpointFile struct {
	Path    string
	Entries []CheckpointEntry
}

// WriteCheckpointFiles writes many checkpoint files as WriteCheckpointFile writes one, with
// the same guarantee (each path holds its old text or its whole new one, whenever the machine
// stops), in two syncs of the file system in all rather than two fsyncs a file: every
// temporary file is written, then synced at once, renamed, and the renames synced. A restore
// of thousands of tasks exports as many files. Where the file system cannot be synced at once
// (not Linux), each file is written by WriteCheckpointFile. On an error the files written so
// far stay written.
func WriteCheckpointFiles(files []CheckpointFile) error {
	if len(files) == 0 {
		return nil
	}
	if len(files) == 1 || !canSyncFS {
		for _, f := range files {
			if err := WriteCheckpointFile(f.Path, f.Entries); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range files {
		b, err := encodeCheckpointFile(f.Entries)
		if err != nil {
			return fmt.Errorf("store: checkpoint file %s: %w", f.Path, err)
		}
		if err := os.WriteFile(f.Path+".tmp", b, 0o644); err != nil {
			return fmt.Errorf("store: checkpoint file: %w", err)
		}
	}
	dir := filepath.Dir(files[0].Path)
	if err := syncFS(dir); err != nil {
		return fmt.Errorf("store: checkpoint files: sync the file system of %s: %w", dir, err)
	}
	for _, f := range files {
		if err := os.Rename(f.Path+".tmp", f.Path); err != nil {
			return fmt.Errorf("store: checkpoint file: rename: %w", err)
		}
	}
	if err := syncFS(dir); err != nil {
		return fmt.Errorf("store: checkpoint files: sync the file system of %s: %w", dir, err)
	}
	return nil
}

// maxCheckpointTopic is the longest topic name a checkpoint file holds: Kafka's limit, far
// below the 64 KiB line the reader's scanner takes.
const maxCheckpointTopic = 249

// encodeCheckpointFile returns the text of a checkpoint file of entries, sorted by topic and
// partition. It refuses what ReadCheckpointFile would not read back, or Kafka would not name:
// an empty topic, one with white space or longer than maxCheckpointTopic, a negative
// partition, two entries for one topic partition.
func encodeCheckpointFile(entries []CheckpointEntry) ([]byte, error) {
	es := append([]CheckpointEntry(nil), entries...)
	sort.Slice(es, func(i, j int) bool {
		if es[i].Topic != es[j].Topic {
			return es[i].Topic < es[j].Topic
		}
		return es[i].Partition < es[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for i, e := range es {
		if e.Topic == "" || strings.IndexFunc(e.Topic, unicode.IsSpace) >= 0 {
			return nil, fmt.Errorf("invalid topic name %q", e.Topic)
		}
		if len(e.Topic) > maxCheckpointTopic {
			return nil, fmt.Errorf("topic name of %d bytes (%.20q...): longer than Kafka's %d", len(e.Topic), e.Topic, maxCheckpointTopic)
		}
		if e.Partition < 0 {
			return nil, fmt.Errorf("topic %s: negative partition %d", e.Topic, e.Partition)
		}
		if i > 0 && es[i-1].Topic == e.Topic && es[i-1].Partition == e.Partition {
			return nil, fmt.Errorf("topic %s partition %d: two entries", e.Topic, e.Partition)
		}
		fmt.Fprintf(&b, "%s %d %d\n", e.Topic, e.Partition, e.Offset)
	}
	return b.Bytes(), nil
}

// ReadCheckpointFile reads a checkpoint file written by WriteCheckpointFile or by Kafka Streams.
func ReadCheckpointFile(path string) ([]CheckpointEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("store: checkpoint file: %w", err)
	}
	defer f.Close()
	return readCheckpointFile(f, path)
}

// maxCheckpointPrealloc bounds the entries allocated ahead from a file's count line, which
// may be corrupt: more are appended as they are read.
const maxCheckpointPrealloc = 1024

// readCheckpointFile parses a checkpoint file read from r; path names it in errors. Blank
// lines are skipped. It refuses, naming the line: another version than 0, a count that is
// not a number >= 0, fewer or more entries than the count, an entry that is not "topic
// partition offset" with a topic of at most maxCheckpointTopic bytes (what the writer
// writes), a 32-bit partition >= 0 and a 64-bit offset, two entries for one
// topic partition, and a line longer than the scanner's buffer (64 KiB).
func readCheckpointFile(r io.Reader, path string) ([]CheckpointEntry, error) {
	sc := bufio.NewScanner(r)
	line := 0
	var scanErr error
	next := func() (string, bool) {
		for sc.Scan() {
			line++
			if s := strings.TrimSpace(sc.Text()); s != "" {
				return s, true
			}
		}
		scanErr = sc.Err()
		return "", false
	}
	bad := func(why string) error {
		if scanErr != nil {
			return fmt.Errorf("store: checkpoint file %s after line %d: %w", path, line, scanErr)
		}
		return fmt.Errorf("store: checkpoint file %s line %d: %s", path, line, why)
	}
	v, ok := next()
	if !ok {
		return nil, bad("missing version")
	}
	if v != "0" {
		return nil, bad(fmt.Sprintf("unsupported version %q", v))
	}
	c, ok := next()
	if !ok {
		return nil, bad("missing count")
	}
	n, err := strconv.Atoi(c)
	if err != nil || n < 0 {
		return nil, bad(fmt.Sprintf("bad count %q", c))
	}
	out := make([]CheckpointEntry, 0, min(n, maxCheckpointPrealloc))
	seen := make(map[CheckpointEntry]bool, min(n, maxCheckpointPrealloc))
	for range n {
		s, ok := next()
		if !ok {
			return nil, bad(fmt.Sprintf("expected %d entries, found %d", n, len(out)))
		}
		fs := strings.Fields(s)
		if len(fs) != 3 {
			return nil, bad(fmt.Sprintf("malformed entry %q: want \"topic partition offset\"", s))
		}
		if len(fs[0]) > maxCheckpointTopic {
			return nil, bad(fmt.Sprintf("topic name of %d bytes (%.20q...): longer than Kafka's %d", len(fs[0]), fs[0], maxCheckpointTopic))
		}
		p, err := strconv.ParseInt(fs[1], 10, 32)
		if err != nil || p < 0 {
			return nil, bad(fmt.Sprintf("malformed entry %q: bad partition %q", s, fs[1]))
		}
		o, err := strconv.ParseInt(fs[2], 10, 64)
		if err != nil {
			return nil, bad(fmt.Sprintf("malformed entry %q: bad offset %q", s, fs[2]))
		}
		tp := CheckpointEntry{Topic: fs[0], Partition: int32(p)}
		if seen[tp] {
			return nil, bad(fmt.Sprintf("second entry for topic %s partition %d", tp.Topic, tp.Partition))
		}
		seen[tp] = true
		out = append(out, CheckpointEntry{Topic: tp.Topic, Partition: tp.Partition, Offset: o})
	}
	if s, ok := next(); ok {
		return nil, bad(fmt.Sprintf("expected %d entries, found more: %q", n, s))
	}
	if scanErr != nil {
		return nil, bad("")
	}
	return out, nil
}
