package pluginsdk

import (
	"fmt"

	"github.com/statehost/statehost/abi"
)

// Code is a negative status code of the statehost ABI, returned by the host; it is an error.
// The SDK returns it wrapped with "pluginsdk: " and what was being done.
type Code int32

// Error implements error.
func (c Code) Error() string {
	return fmt.Sprintf("%s (code %d)", abi.CodeText(int32(c)), int32(c))
}

// Codes a processor may want to test with errors.Is.
var (
	ErrUnknownStore  error = Code(abi.CodeUnknownStore)
	ErrUnknownOutput error = Code(abi.CodeUnknownOutput)
	ErrBadArgument   error = Code(abi.CodeBadArgument)
	ErrNoRecord      error = Code(abi.CodeNoRecord)
	// ErrLimit: a host limit. Besides the ABI's fixed ones (open iterators, the size of one
	// emit, abi.MaxEmitBytes), a store write or an emit whose Kafka record would not fit its
	// topic (the topic's max.message.bytes, and the host producer's 1 MiB batches: a key and
	// value of up to about 1,048,500 bytes together), and an emit past the emit budget of
	// the record (the processor's emit_budget, 64 MiB by default; the record then fails
	// whatever the processor does). Nothing was written or emitted. Return the error: the
	// record is then a poison record, which the processor's on_error skips or dead-letters.
	ErrLimit       error = Code(abi.CodeLimit)
	ErrStoreFailed error = Code(abi.CodeStoreFailed)
	ErrEmitFailed  error = Code(abi.CodeEmitFailed)
	// ErrWrongStoreType: a store of another type, for example Context.WindowStore naming a
	// key-value store.
	ErrWrongStoreType error = Code(abi.CodeWrongStoreType)
)

// opError wraps a host code with what was being done.
func opError(what string, code int32) error {
	return fmt.Errorf("pluginsdk: %s: %w", what, Code(code))
}
