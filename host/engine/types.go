package engine

import "time"

// Record is one input record handed to a guest.
//
// Key and Value are nil for null and non-nil (possibly empty) otherwise; a nil Value is a
// tombstone. The engine reads a Record only during the ProcessBatch call it is passed to.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is one Kafka record header; a nil Value is null.
type Header struct {
	Key   string
	Value []byte
}

// OutputRecord is a record a guest emitted to one of its processor's output topics.
//
// Key, Value and the header values are fresh copies owned by the receiver (never views of
// guest memory), so an Emitter may keep them, as a Kafka producer does. Nil means null.
// Timestamp is that of the input record being processed when it was emitted.
type OutputRecord struct {
	Topic     string
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// Emitter takes the records a guest emits; the runtime implements it with a producer that
// partitions by key.
//
// Emit is called on the goroutine running ProcessBatch. An error fails the batch.
type Emitter interface {
	Emit(rec OutputRecord) error
}

// Store is an ordered key/value store, the method set of store.Store.
//
// The engine passes views of guest memory as keys and values; they are valid only during
// the call.
type Store interface {
	// Get returns the value stored under key. The slice is owned by the store, must not be
	// modified, and is valid only until the next write to this store.
	Get(key []byte) (value []byte, found bool, err error)
	// Put stores value under key; the store copies key and value before it returns.
	Put(key, value []byte) error
	// Delete removes key; removing an absent key is not an error.
	Delete(key []byte) error
	// Range iterates over start <= key < end in ascending order; nil means unbounded.
	Range(start, end []byte) (Iterator, error)
	// Prefix iterates in ascending order over the keys that begin with prefix.
	Prefix(prefix []byte) (Iterator, error)
}

// Iterator walks store entries in ascending key order, as store.Iterator does.
type Iterator interface {
	// Next advances to the next entry and reports whether there is one.
	Next() bool
	// Key returns the current key, valid until the next Next or Close.
	Key() []byte
	// Value returns the current value, valid until the next Next or Close.
	Value() []byte
	// Err returns the error that ended the iteration, if any.
	Err() error
	// Close releases the iterator.
	Close() error
}

// Backend is any store whose Range and Prefix return its own iterator interface type I,
// such as store.Store (whose methods return store.Iterator).
type Backend[I Iterator] interface {
	Get(key []byte) (value []byte, found bool, err error)
	Put(key, value []byte) error
	Delete(key []byte) error
	Range(start, end []byte) (I, error)
	Prefix(prefix []byte) (I, error)
}

// StoreOf adapts a Backend to Store, e.g. engine.StoreOf[store.Iterator](s).
//
// Go interfaces match methods by identical signatures, so a store whose Range returns its
// own named Iterator type does not satisfy Store directly even with the same method set;
// StoreOf bridges that without the engine importing the store package.
func StoreOf[I Iterator, S Backend[I]](s S) Store {
	return backendStore[I, S]{s}
}

type backendStore[I Iterator, S Backend[I]] struct{ s S }

func (b backendStore[I, S]) Get(key []byte) ([]byte, bool, error) { return b.s.Get(key) }
func (b backendStore[I, S]) Put(key, value []byte) error          { return b.s.Put(key, value) }
func (b backendStore[I, S]) Delete(key []byte) error              { return b.s.Delete(key) }

func (b backendStore[I, S]) Range(start, end []byte) (Iterator, error) {
	it, err := b.s.Range(start, end)
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (b backendStore[I, S]) Prefix(prefix []byte) (Iterator, error) {
	it, err := b.s.Prefix(prefix)
	if err != nil {
		return nil, err
	}
	return it, nil
}
