package engine

import (
	"context"
	"time"

	"github.com/statehost/statehost/store"
)

// Record is one input record handed to a guest.
//
// Key and Value are nil for null and non-nil (possibly empty) otherwise; a nil Value is a
// tombstone. The engine reads a Record only during the ProcessBatch call it is passed to, and
// the guest gets a copy (see "Copies and views of guest memory" in the package doc).
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
// Key and Value are views of guest memory, valid only during Emitter.Emit; Headers are
// copies the Emitter owns (see "Copies and views of guest memory" in the package doc). Nil
// means null. Timestamp is that of the input record being processed when it was emitted.
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
// An Emitter copies the Key and Value of rec that it keeps: they are views of guest memory,
// valid only during Emit (OutputRecord). Emit is called on the goroutine running
// ProcessBatch, from inside the guest call. ctx is that call's context: the time limit
// (Config.BatchTimeout) and the caller's cancellation end it (the limit with the cause
// context.DeadlineExceeded). wazero cannot interrupt a host function, so an Emit that blocks
// (producer backpressure) must return when ctx is done, with ctx.Err(), its cause or an error
// wrapping either; the batch then fails with ErrTimeout or ErrCanceled (ErrEmit in the
// chain). An Emit that waits for room through the task's HostWaits (Task.Waits) does not use
// up the limit meanwhile. Any other error fails the batch with ErrEmit.
type Emitter interface {
	Emit(ctx context.Context, rec OutputRecord) error
}

// Store is a task's store partition as the engine uses it: store.Store.
//
// The engine passes views of guest memory as keys and values, which store.Store copies if it
// keeps them (see "Copies and views of guest memory" in the package doc).
type Store = store.Store

// Iterator walks store entries in ascending key order: store.Iterator.
type Iterator = store.Iterator
