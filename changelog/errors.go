package changelog

import (
	"errors"
	"fmt"
)

// ErrTaskFailed is returned by a task whose commit failed; close it and reopen it (its stores then restore the tail of their changelogs).
var ErrTaskFailed = errors.New("changelog: task failed, close and reopen it")

// PartitionMismatchError reports an existing changelog topic whose partition count differs from the source topics'.
type PartitionMismatchError struct {
	Topic    string
	Expected int32
	Actual   int32
}

func (e *PartitionMismatchError) Error() string {
	return fmt.Sprintf("changelog: existing topic %s has %d partitions, expected %d (the source topics' partition count)", e.Topic, e.Actual, e.Expected)
}

// ProduceError reports a record that the broker did not acknowledge: the first of a task's
// records that failed (the broker refuses a batch whole, so the first record of a refused
// batch, which may be a smaller one than the one that did not fit).
type ProduceError struct {
	Topic     string
	Partition int32
	// Input is the input record the record belongs to (see Task.SetSource); zero when none
	// is known (a record of a plugin's init or a punctuation, a coalesced write).
	Input Input
	Err   error
}

func (e *ProduceError) Error() string {
	if e.Input.Topic == "" {
		return fmt.Sprintf("changelog: produce to %s partition %d: %v", e.Topic, e.Partition, e.Err)
	}
	return fmt.Sprintf("changelog: produce to %s partition %d, a record of input record %q partition %d offset %d: %v",
		e.Topic, e.Partition, e.Input.Topic, e.Input.Partition, e.Input.Offset, e.Err)
}

func (e *ProduceError) Unwrap() error { return e.Err }

// ErrInFlight is matched by an *InFlightError.
var ErrInFlight = errors.New("changelog: records of a closed task are still in flight")

// InFlightError refuses to open a task while records produced by its previous
// incarnation are neither acknowledged nor failed: a restore started now would
// miss them (its end offset is captured before they land) and the next
// checkpoint would jump over them. Retry when they have landed.
type InFlightError struct {
	Processor string
	Partition int32
	Records   int
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("changelog: task %s_%d: %d records produced before it was closed are still in flight; retry when they are acknowledged", e.Processor, e.Partition, e.Records)
}

func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// OffsetCommitError wraps the error of the input-offset commit that follows a successful apply; the task stays usable and the next commit retries.
type OffsetCommitError struct{ Err error }

func (e *OffsetCommitError) Error() string {
	return fmt.Sprintf("changelog: state applied, but committing input offsets failed: %v", e.Err)
}

func (e *OffsetCommitError) Unwrap() error { return e.Err }
