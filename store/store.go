package store

import (
	"errors"
	"fmt"
)

// Store is one store partition as a task sees it: an ordered key-value map over byte strings.
//
// Keys are arbitrary byte strings, the empty key included. Reads see the
// task's uncommitted writes (read-your-writes). A Store belongs to one task
// and is used by one goroutine at a time. After its task is closed or has
// failed, every method returns an error (ErrClosed or ErrTaskFailed), never
// panics.
type Store interface {
	// Get returns key's value and whether it exists. The slice is owned by the store, must not be modified, and is valid only until the next write to this store; copy it to keep it.
	Get(key []byte) (value []byte, found bool, err error)
	// Put sets key to value. The store copies key and value before it returns (callers pass views of guest memory). A nil value is stored as an empty value, never as a delete.
	Put(key, value []byte) error
	// Delete removes key; deleting an absent key is not an error (it is still logged as a tombstone).
	Delete(key []byte) error
	// Range iterates keys in [start, end) in ascending byte order; nil start = from the first key, nil end = to the last.
	Range(start, end []byte) (Iterator, error)
	// Prefix iterates the keys that begin with prefix, ascending.
	Prefix(prefix []byte) (Iterator, error)
}

// Iterator walks a key range of a Store in ascending key order.
//
// An iterator sees the store as it was when the iterator was opened (its
// committed state and the task's uncommitted writes at that moment); writes
// made while it is open are safe and are not seen by it. A commit or the
// close of the task invalidates every open iterator of the task: Next then
// returns false and Err returns ErrIteratorInvalidated (or ErrClosed).
type Iterator interface {
	Next() bool    // advance; false at the end or on error
	Key() []byte   // valid until the next Next/Close
	Value() []byte // valid until the next Next/Close
	Err() error
	Close() error
}

// Errors returned by stores.
var (
	// ErrClosed is returned by every operation on a closed store, task or manager.
	ErrClosed = errors.New("store: closed")
	// ErrTaskFailed is returned by the stores of a task whose commit failed; the task must be closed and reopened (its uncommitted writes are lost, its committed state and checkpoints are intact).
	ErrTaskFailed = errors.New("store: task failed, close and reopen it")
	// ErrIteratorInvalidated is returned by an iterator that was open when its task committed.
	ErrIteratorInvalidated = errors.New("store: iterator invalidated by a commit")
	// ErrLocked is returned by Open when another process holds the state directory.
	ErrLocked = errors.New("store: state directory is locked by another process")
	// ErrPendingWrites is returned by restore operations on a task that has uncommitted writes.
	ErrPendingWrites = errors.New("store: task has uncommitted writes")
)

// Backend selects where a store partition keeps its committed data.
type Backend int

const (
	// Pebble keeps the data on disk in the instance's Pebble database; it survives restarts.
	Pebble Backend = iota
	// Memory keeps the data on the heap; it is lost when the task closes and is always restored from the beginning of its changelog.
	Memory
)

// String returns "pebble" or "memory".
func (b Backend) String() string {
	switch b {
	case Pebble:
		return "pebble"
	case Memory:
		return "memory"
	}
	return fmt.Sprintf("backend(%d)", int(b))
}

// ParseBackend returns the Backend named s ("pebble" or "memory").
func ParseBackend(s string) (Backend, error) {
	switch s {
	case "pebble":
		return Pebble, nil
	case "memory":
		return Memory, nil
	}
	return 0, fmt.Errorf("store: unknown backend %q (want pebble or memory)", s)
}

// ChangeLogger receives every write of a logged store, in the order the
// writes were made, for a changelog.
//
// Implementations must copy key and value if they keep them: the slices are
// only valid during the call. An error fails the write.
type ChangeLogger interface {
	// LogPut records that key was set to value (never nil).
	LogPut(key, value []byte) error
	// LogDelete records that key was deleted (a tombstone).
	LogDelete(key []byte) error
}

// Op names a store operation for metrics.
type Op int

// Store operations reported to Metrics.
const (
	OpGet Op = iota
	OpPut
	OpDelete
	OpRange
	OpPrefix
)

// String returns the operation's lower-case name.
func (o Op) String() string {
	switch o {
	case OpGet:
		return "get"
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpRange:
		return "range"
	case OpPrefix:
		return "prefix"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Options configure one store partition of a task.
type Options struct {
	// Backend is where the committed data lives. Default Pebble.
	Backend Backend
	// Changelog, when not nil, receives every write (the logging layer). Default nil: the store is not logged, is not fault-tolerant and loses its state with its disk.
	Changelog ChangeLogger
	// Coalesce, when true, keeps the writes of a commit interval in a cache so that only the last value of each key reaches the layers below (and the changelog) at the commit. Default false: every write is passed down at once. Key-value stores only: window and session stores refuse it (see planLayers).
	Coalesce bool
	// Metrics, when not nil, observes every operation (the metered layer). Default nil: no metered layer.
	Metrics Metrics
	// Kind is the store's type. Default KeyValue; Window and Session stores are opened with
	// Task.OpenWindow and Task.OpenSession.
	Kind Kind
	// Window configures a Window or Session store; ignored for KeyValue.
	Window WindowSpec
	// TTL, when enabled, makes a key-value store's entries expire (ttl.go); its Changelog, if
	// any, must be a TimedChangeLogger. Default none. Window and session stores refuse it.
	TTL TTL
}
