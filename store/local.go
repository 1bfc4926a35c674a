package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// ErrTaskOpen is returned by DeleteTask for a task that is open.
var ErrTaskOpen = errors.New("store: task is open")

// LocalTask is a task that has local state in the instance's database.
type LocalTask struct {
	ID TaskID
	// Stores are the task's store partitions that hold a checkpoint or data, sorted by name.
	Stores []LocalStore
}

// LocalStore is the local state of one store partition of a task.
type LocalStore struct {
	Name string
	// Checkpoint is the offset of the last changelog record applied to the store, when HasCheckpoint.
	Checkpoint int64
	// HasCheckpoint is false for a store that holds data without a checkpoint (a store
	// without a changelog, or one whose restore never committed).
	HasCheckpoint bool
}

// LocalTasks returns every task that has local state in the database, open or not, sorted
// by processor then partition: the tasks with at least one Pebble store partition that holds
// a checkpoint or data. A store opened but never written is not listed. Memory stores keep
// nothing locally and are never listed.
//
// The runtime reports it for task assignment: a task's checkpoints tell how much of its
// changelogs the instance would not have to restore. It reads one snapshot of the database
// and is safe to call while open tasks commit; a task committing meanwhile is seen as before
// or after its commit.
func (m *Manager) LocalTasks() ([]LocalTask, error) {
	done, err := m.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()

	snap := m.db.NewSnapshot()
	defer snap.Close()
	entries, err := readRegistry(snap, []byte{nsMeta, 'i'})
	if err != nil {
		return nil, err
	}
	var out []LocalTask
	for _, e := range entries {
		ls, ok, err := localStore(snap, e)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if n := len(out); n == 0 || out[n-1].ID != e.task {
			out = append(out, LocalTask{ID: e.task})
		}
		out[len(out)-1].Stores = append(out[len(out)-1].Stores, ls)
	}
	// The registry orders tasks by the length of the processor name first, and the
	// entries of one task are contiguous: sort the tasks, and their stores to be plain.
	slices.SortFunc(out, func(a, b LocalTask) int {
		return cmp.Or(cmp.Compare(a.ID.Processor, b.ID.Processor), cmp.Compare(a.ID.Partition, b.ID.Partition))
	})
	for _, t := range out {
		slices.SortFunc(t.Stores, func(a, b LocalStore) int { return cmp.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// localStore reads the checkpoint of registry entry e in r and, without one, whether it
// holds data; ok is false when it holds neither.
func localStore(r pebble.Reader, e registryEntry) (ls LocalStore, ok bool, err error) {
	ls.Name = e.store
	v, c, err := r.Get(checkpointKey(e.id))
	switch {
	case err == nil:
		cp, err := decodeCheckpoint(v)
		c.Close()
		if err != nil {
			return ls, false, fmt.Errorf("store: task %s store %q: %w", e.task, e.store, err)
		}
		ls.Checkpoint, ls.HasCheckpoint = cp.Offset, true
		return ls, true, nil
	case !errors.Is(err, pebble.ErrNotFound):
		return ls, false, fmt.Errorf("store: task %s store %q: read checkpoint: %w", e.task, e.store, err)
	}
	ok, err = anyKey(r, dataPrefix(e.id), dataPrefix(e.id+1))
	if err != nil {
		return ls, false, fmt.Errorf("store: task %s store %q: read data: %w", e.task, e.store, err)
	}
	return ls, ok, nil
}

// DeleteTask deletes the local state of task id, which must not be open: the data,
// checkpoint, stream time, layout and registry entry of each of its store partitions, in one
// synced batch, then its directory <Dir>/tasks/<processor>_<partition> with the exported
// checkpoint file. A task without local state is not an error.
//
// It fails with an error wrapping ErrTaskOpen when the task is open. It holds the manager's
// lock throughout, so OpenTask cannot open the task halfway through (and other tasks wait
// one fsync to open or to open a new store). The store partition ids are not reused: a task
// opened again gets new ids and starts empty. Pebble reclaims the deleted data's space at
// its next compactions.
//
// The batch goes first: a crash before the directory is removed leaves a stale exported
// checkpoint file beside no state, which DeleteTask run again removes.
func (m *Manager) DeleteTask(id TaskID) error {
	if err := checkName(id.Processor); err != nil {
		return fmt.Errorf("store: delete task %s: processor name: %w", id, err)
	}
	if id.Partition < 0 {
		return fmt.Errorf("store: delete task %s: negative partition", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.tasks[id]; ok {
		return fmt.Errorf("store: delete task %s: %w", id, ErrTaskOpen)
	}
	entries, err := readRegistry(m.db, registryKey(id, ""))
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		b := m.db.NewBatch()
		defer b.Close()
		for _, e := range entries {
			wipeKeys(b, e.id)
			_ = b.Delete(layoutKey(e.id), nil)
			_ = b.Delete(registryKey(id, e.store), nil)
		}
		if err := m.commit(b, pebble.Sync); err != nil {
			return fmt.Errorf("store: delete task %s in %s: %w", id, m.dbDir(), err)
		}
	}
	if err := os.RemoveAll(filepath.Join(m.set.Dir, "tasks", id.String())); err != nil {
		return fmt.Errorf("store: delete task %s: remove directory: %w", id, err)
	}
	m.log.Info("deleted local state", "processor", id.Processor, "partition", id.Partition, "stores", len(entries))
	return nil
}

// registryEntry is one entry of the registry: the id of a task's store partition.
type registryEntry struct {
	task  TaskID
	store string
	id    uint32
}

// readRegistry returns the registry entries of r whose keys begin with prefix, in key order.
func readRegistry(r pebble.Reader, prefix []byte) ([]registryEntry, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("store: read registry: %w", err)
	}
	var out []registryEntry
	for it.First(); it.Valid(); it.Next() {
		e, err := parseRegistryEntry(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		out = append(out, e)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("store: read registry: %w", err)
	}
	return out, nil
}

// parseRegistryEntry decodes a registry key and value, the inverse of registryKey.
func parseRegistryEntry(k, v []byte) (registryEntry, error) {
	bad := func(why string) error { return fmt.Errorf("store: corrupt registry entry %x: %s", k, why) }
	rest, ok := bytes.CutPrefix(k, []byte{nsMeta, 'i'})
	if !ok {
		return registryEntry{}, bad("not a registry key")
	}
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n+4 {
		return registryEntry{}, bad("truncated key")
	}
	rest = rest[w:]
	e := registryEntry{task: TaskID{Processor: string(rest[:n])}}
	e.task.Partition = int32(binary.BigEndian.Uint32(rest[n:]))
	e.store = string(rest[n+4:])
	if len(v) != 4 {
		return registryEntry{}, bad(fmt.Sprintf("value of %d bytes", len(v)))
	}
	e.id = binary.BigEndian.Uint32(v)
	return e, nil
}
