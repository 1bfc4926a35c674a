package testdriver

import (
	"encoding/binary"
	"fmt"

	"github.com/statehost/statehost/store"
)

// The undo of a poison record, for the processors whose on_error is "skip" or "dead_letter":
// as the runtime's poison guard (host/runtime/poison.go) does, the first write of each entry
// during a record first reads what the entry holds, and a failed record's writes are undone
// by writing that back, last first. Only the writes of a ProcessBatch call are noted (the
// driver hands the plugin one record per call); those of the plugin's init and of
// punctuations are not undone, as in the runtime. The record's emits are held by the task
// until its call ends (task.Emit), so they are dropped with no undo.

// undo keeps how to withdraw the writes of the record in progress.
type undo struct {
	active bool
	seen   map[string]bool
	steps  []func() error
}

// begin starts a record.
func (u *undo) begin() {
	u.active, u.steps = true, u.steps[:0]
	if u.seen == nil {
		u.seen = map[string]bool{}
	}
	clear(u.seen)
}

// note records, for the first write of entry id during the record, how to put back what it
// holds now: put(v) with get's value, or with nil when get finds nothing.
func (u *undo) note(id string, get func() ([]byte, bool, error), put func(v []byte) error) error {
	if !u.active || u.seen[id] {
		return nil
	}
	old, found, err := get()
	if err != nil {
		return err
	}
	var v []byte // nil: the entry is removed
	if found {
		v = append([]byte{}, old...) // an empty value stays a value
	}
	u.seen[id] = true
	u.steps = append(u.steps, func() error { return put(v) })
	return nil
}

// rollback undoes the record's writes, last first, and ends the record.
func (u *undo) rollback() error {
	u.active = false
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i](); err != nil {
			return fmt.Errorf("undoing a write of the failed record: %w", err)
		}
	}
	return nil
}

// The stores of a task whose writes can be undone. They embed their store for its reads.
type (
	undoStore struct {
		store.Store
		u    *undo
		name string
	}
	undoWindows struct {
		store.WindowStore
		u    *undo
		name string
	}
	undoSessions struct {
		store.SessionStore
		u    *undo
		name string
	}
)

func (s undoStore) note(key []byte) error {
	k := append([]byte{}, key...)
	return s.u.note(s.name+"\x00"+string(key),
		func() ([]byte, bool, error) { return s.Store.Get(k) },
		func(v []byte) error {
			if v == nil {
				return s.Store.Delete(k)
			}
			return s.Store.Put(k, v)
		})
}

func (s undoStore) Put(key, value []byte) error {
	if err := s.note(key); err != nil {
		return err
	}
	return s.Store.Put(key, value)
}

func (s undoStore) Delete(key []byte) error {
	if err := s.note(key); err != nil {
		return err
	}
	return s.Store.Delete(key)
}

// putBack is the undo of a window or session write: put, which reports whether the store
// took the write; what must stay cannot be put back into a window or session that the
// record's timestamp closed.
func putBack(what string, v []byte, put func([]byte) (bool, error)) error {
	stored, err := put(v)
	if err == nil && !stored && v != nil {
		err = fmt.Errorf("cannot undo the write of %s: it closed", what)
	}
	return err
}

func (s undoWindows) Put(key []byte, start int64, value []byte) (bool, error) {
	k := append([]byte{}, key...)
	id := s.name + "\x00" + string(binary.BigEndian.AppendUint64(nil, uint64(start))) + string(key)
	what := fmt.Sprintf("window store %q at %d", s.name, start)
	err := s.u.note(id, func() ([]byte, bool, error) { return s.WindowStore.Get(k, start) },
		func(v []byte) error {
			return putBack(what, v, func(v []byte) (bool, error) { return s.WindowStore.Put(k, start, v) })
		})
	if err != nil {
		return false, err
	}
	return s.WindowStore.Put(key, start, value)
}

func (s undoSessions) Put(key []byte, start, end int64, value []byte) (bool, error) {
	k := append([]byte{}, key...)
	b := binary.BigEndian.AppendUint64(nil, uint64(start))
	id := s.name + "\x00" + string(binary.BigEndian.AppendUint64(b, uint64(end))) + string(key)
	what := fmt.Sprintf("session store %q at [%d, %d]", s.name, start, end)
	err := s.u.note(id, func() ([]byte, bool, error) { return s.SessionStore.Get(k, start, end) },
		func(v []byte) error {
			return putBack(what, v, func(v []byte) (bool, error) { return s.SessionStore.Put(k, start, end, v) })
		})
	if err != nil {
		return false, err
	}
	return s.SessionStore.Put(key, start, end, value)
}
