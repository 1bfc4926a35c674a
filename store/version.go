package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// Store versions: the form of the entries of a key-value store partition, as the module that
// wrote them declares it (abi "Store versions and migration"). A partition records its
// version locally, in the same atomic batch as its data and checkpoint (nsVersion), and in its
// changelog, as a version record: a record under the reserved key VersionRecordKey whose value
// is the version in decimal. The version record is written after the entries of that version
// that replaced the older ones (a migration), in the same commit; a restore applies it as the
// partition's version instead of as an entry, in the same batch as the records before it, so
// that a partition restored anywhere, from any checkpoint, knows the form of what it holds.
// Under compaction the latest version record stays: its key is written by nothing else.
//
// A partition that never recorded a version is at DefaultVersion. Window and session stores
// have no versions.

// VersionRecordKey is the changelog key of a key-value store's version records. No entry may
// have it: the engine refuses writes of it (and a restore would take such an entry for a
// version record).
const VersionRecordKey = "\x00statehost.store_version"

// DefaultVersion is the version of a partition that never recorded one (abi.DefaultStoreVersion).
const DefaultVersion = 1

// versionRecordBytes is what a staged version counts in Task.UncommittedBytes: the key and a
// version of a few digits.
const versionRecordBytes int64 = int64(len(VersionRecordKey)) + 4

// IsVersionRecordKey reports whether key is VersionRecordKey.
func IsVersionRecordKey(key []byte) bool {
	return len(key) == len(VersionRecordKey) && string(key) == VersionRecordKey
}

// encodeVersion is the value of a version record and of the local version key: the version in
// decimal.
func encodeVersion(v uint32) []byte { return strconv.AppendUint(nil, uint64(v), 10) }

// decodeVersion parses encodeVersion's form.
func decodeVersion(b []byte) (uint32, error) {
	v, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil || v < DefaultVersion {
		return 0, fmt.Errorf("malformed store version %q", b)
	}
	return uint32(v), nil
}

func versionKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{nsVersion}, id)
}

// Version returns the version of the partition's committed entries: the last one a commit or
// a restore applied, DefaultVersion when none. Safe for concurrent use (a deploy reads it
// while the task runs).
func (p *Partition) Version() uint32 {
	return max(p.version.Load(), DefaultVersion)
}

// SetVersion records v as the version of the partition's entries from the task's next commit
// on (Task.Apply applies it with the uncommitted writes and the checkpoints). A logged
// partition also writes v's version record to its changelog, after the writes held by its
// task's coalescing stores (flushed first): the record follows the entries that the commit
// writes. Only key-value partitions have versions.
func (p *Partition) SetVersion(v uint32) error {
	if err := p.t.check(); err != nil {
		return err
	}
	if p.win != nil {
		return fmt.Errorf("store: task %s store %q: a %s store has no version", p.t.id, p.name, p.Kind())
	}
	if v < DefaultVersion {
		return fmt.Errorf("store: task %s store %q: version %d is below %d", p.t.id, p.name, v, DefaultVersion)
	}
	if err := p.t.Flush(); err != nil {
		return err
	}
	enc := encodeVersion(v)
	if p.clog != nil {
		if err := p.clog.LogPut([]byte(VersionRecordKey), enc); err != nil {
			return fmt.Errorf("store: task %s store %q: log version %d: %w", p.t.id, p.name, v, err)
		}
	}
	if p.backend == Pebble {
		_ = p.t.writes().Set(versionKey(p.id), enc, nil)
	}
	p.pendingVersion = v
	return nil
}

// committedVersion makes the version SetVersion staged the committed one; Task.Apply calls it
// once the commit is durable.
func (p *Partition) committedVersion() {
	if p.pendingVersion != 0 {
		p.version.Store(p.pendingVersion)
		p.pendingVersion = 0
	}
}

// loadVersion reads the version stored with the partition.
func (p *Partition) loadVersion() error {
	v, c, err := p.t.m.db.Get(versionKey(p.id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: task %s store %q: read version: %w", p.t.id, p.name, err)
	}
	defer c.Close()
	ver, err := decodeVersion(v)
	if err != nil {
		return fmt.Errorf("store: task %s store %q: %w", p.t.id, p.name, err)
	}
	p.version.Store(ver)
	return nil
}

// takeVersionRecords returns ws without its version records, and the version of the last one
// (0 when there is none). It copies ws only when it holds one.
func takeVersionRecords(ws []Write) (out []Write, version uint32, err error) {
	first := -1
	for i := range ws {
		if IsVersionRecordKey(ws[i].Key) {
			first = i
			break
		}
	}
	if first < 0 {
		return ws, 0, nil
	}
	out = append(make([]Write, 0, len(ws)-1), ws[:first]...)
	for _, w := range ws[first:] {
		if !IsVersionRecordKey(w.Key) {
			out = append(out, w)
			continue
		}
		if w.Delete {
			return nil, 0, fmt.Errorf("changelog record at offset %d: a tombstone of the version record", w.Offset)
		}
		if version, err = decodeVersion(w.Value); err != nil {
			return nil, 0, fmt.Errorf("changelog record at offset %d: %w", w.Offset, err)
		}
	}
	return out, version, nil
}
