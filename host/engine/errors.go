package engine

import (
	"errors"
	"fmt"
	"strings"
)

// Causes of a *GuestError; test them with errors.Is.
var (
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, division by zero, stack
	// overflow, ...), or a host function panicked.
	ErrTrap = errors.New("engine: guest trapped")
	// ErrPanic: a Go guest panicked (its runtime printed "panic:" and exited).
	ErrPanic = errors.New("engine: guest panicked")
	// ErrOutOfMemory: the guest ran out of memory under the memory limit.
	ErrOutOfMemory = errors.New("engine: guest out of memory")
	// ErrTimeout: the guest call ran past Config.BatchTimeout and was stopped.
	ErrTimeout = errors.New("engine: guest call timed out")
	// ErrCanceled: the context of the call was canceled and the guest was stopped.
	ErrCanceled = errors.New("engine: guest call canceled")
	// ErrExit: the guest exited (proc_exit, a Go fatal error) in the middle of a call.
	ErrExit = errors.New("engine: guest exited")
	// ErrGuestFailed: the guest returned a non-zero code (GuestError.Code).
	ErrGuestFailed = errors.New("engine: guest returned an error")
	// ErrProtocol: the guest broke the call sequence of the ABI: it returned success before
	// it had taken every record of the batch.
	ErrProtocol = errors.New("engine: guest broke the ABI call sequence")
	// ErrStore: a store failed during the call.
	ErrStore = errors.New("engine: store failed")
	// ErrEmit: the Emitter refused an output record during the call.
	ErrEmit = errors.New("engine: emit failed")
)

var (
	// ErrInvalidModule is wrapped by the *ModuleError that Compile returns for a module that
	// breaks the ABI's module requirements.
	ErrInvalidModule = errors.New("engine: invalid module")
	// ErrInstanceDead is returned by ProcessBatch on an instance that failed before.
	ErrInstanceDead = errors.New("engine: instance is dead")
	// ErrInstanceBusy is returned by ProcessBatch when another call on the same instance is in
	// progress (instances are not safe for concurrent use).
	ErrInstanceBusy = errors.New("engine: instance is busy")
	// ErrClosed is returned when the engine, module or instance was closed.
	ErrClosed = errors.New("engine: closed")
)

// GuestError reports a failed guest call: which processor, partition and record, and why.
//
// Offset names the record the failure is attributed to: the record that was current when
// it happened (a store or emit failure: when the host call failed, even if the guest went
// on); the record record_next was fetching, if it had answered CodeBufferTooSmall and no
// record was taken since (the guest died growing its buffer for it); the batch's first
// record if none had been taken yet. During start-up (Instantiate) there is no batch and
// Offset, FirstOffset and LastOffset are -1.
//
// Kind is one of the causes above (ErrTrap, ErrTimeout, ...); Err is the underlying error
// (wazero's, the store's or the emitter's) and may be nil. errors.Is matches both. After a
// GuestError the instance is dead.
type GuestError struct {
	Module      string // the module's name (its file)
	Processor   string
	Partition   int32
	Topic       string // topic of the record at Offset, "" if none
	Offset      int64  // offset of the record the failure is attributed to, -1 if none
	FirstOffset int64  // offset of the batch's first record, -1 if none
	LastOffset  int64  // offset of the batch's last record, -1 if none
	Kind        error
	Code        int32  // the guest's non-zero result, for ErrGuestFailed
	Detail      string // what the guest said: its set_error message, or the start of its stderr
	Punctuation string // the punctuation that failed ("punctuation 0 at stream time 1234"), "" for a batch or init
	Call        string // another call that failed ("statehost_migrate of store \"counts\" from version 1"), "" for the above
	Err         error
}

// Error implements error.
func (e *GuestError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: processor %q partition %d", e.Processor, e.Partition)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " offset %d (topic %q, batch %d..%d)", e.Offset, e.Topic, e.FirstOffset, e.LastOffset)
	} else if e.Punctuation != "" {
		fmt.Fprintf(&b, " (%s)", e.Punctuation)
	} else if e.Call != "" {
		fmt.Fprintf(&b, " (%s)", e.Call)
	} else {
		b.WriteString(" (no current record)")
	}
	fmt.Fprintf(&b, " module %s: %s", e.Module, strings.TrimPrefix(e.Kind.Error(), "engine: "))
	if e.Kind == ErrGuestFailed {
		fmt.Fprintf(&b, " %d", e.Code)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": guest said: %s", e.Detail)
	}
	return b.String()
}

// Unwrap returns the cause and the underlying error.
func (e *GuestError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// ModuleError reports a module that Compile refuses, with every problem found.
type ModuleError struct {
	Module   string
	Problems []string
}

// Error implements error.
func (e *ModuleError) Error() string {
	return fmt.Sprintf("engine: %s: invalid module: %s", e.Module, strings.Join(e.Problems, "; "))
}

// Unwrap returns ErrInvalidModule.
func (e *ModuleError) Unwrap() error { return ErrInvalidModule }

// stopError is the error of a guest call the host stopped (at the time limit, or when the
// call was canceled): its text says why, and its chain keeps the cause and the trap by which
// the guest stopped, whose text is left out.
type stopError struct {
	text string
	errs []error
}

// Error implements error.
func (e *stopError) Error() string { return e.text }

// Unwrap returns the cause and the guest's trap.
func (e *stopError) Unwrap() []error { return e.errs }
