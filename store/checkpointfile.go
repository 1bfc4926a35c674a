package store

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	es := append([]CheckpointEntry(nil), entries...)
	sort.Slice(es, func(i, j int) bool {
		if es[i].Topic != es[j].Topic {
			return es[i].Topic < es[j].Topic
		}
		return es[i].Partition < es[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for _, e := range es {
		if strings.ContainsAny(e.Topic, " \n") || e.Topic == "" {
			return fmt.Errorf("store: checkpoint file %s: invalid topic name %q", path, e.Topic)
		}
		fmt.Fprintf(&b, "%s %d %d\n", e.Topic, e.Partition, e.Offset)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("store: checkpoint file: %w", err)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
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

// ReadCheckpointFile reads a checkpoint file written by WriteCheckpointFile or by Kafka Streams.
func ReadCheckpointFile(path string) ([]CheckpointEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("store: checkpoint file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	next := func() (string, bool) {
		for sc.Scan() {
			line++
			if s := strings.TrimSpace(sc.Text()); s != "" {
				return s, true
			}
		}
		return "", false
	}
	bad := func(why string) error { return fmt.Errorf("store: checkpoint file %s line %d: %s", path, line, why) }
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
	out := make([]CheckpointEntry, 0, n)
	for range n {
		s, ok := next()
		if !ok {
			return nil, bad(fmt.Sprintf("expected %d entries, found %d", n, len(out)))
		}
		fs := strings.Fields(s)
		if len(fs) != 3 {
			return nil, bad(fmt.Sprintf("malformed entry %q", s))
		}
		p, err1 := strconv.ParseInt(fs[1], 10, 32)
		o, err2 := strconv.ParseInt(fs[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, bad(fmt.Sprintf("malformed entry %q", s))
		}
		out = append(out, CheckpointEntry{Topic: fs[0], Partition: int32(p), Offset: o})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("store: checkpoint file %s: %w", path, err)
	}
	return out, nil
}
