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
	ErrLimit         error = Code(abi.CodeLimit)
	ErrStoreFailed   error = Code(abi.CodeStoreFailed)
	ErrEmitFailed    error = Code(abi.CodeEmitFailed)
	// ErrWrongStoreType: a store of another type, for example Context.WindowStore naming a
	// key-value store.
	ErrWrongStoreType error = Code(abi.CodeWrongStoreType)
)

// opError wraps a host code with what was being done.
func opError(what string, code int32) error {
	return fmt.Errorf("pluginsdk: %s: %w", what, Code(code))
}
