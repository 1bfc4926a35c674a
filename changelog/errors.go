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

// ProduceError reports a record that the broker did not acknowledge.
type ProduceError struct {
	Topic     string
	Partition int32
	Err       error
}

func (e *ProduceError) Error() string {
	return fmt.Sprintf("changelog: produce to %s partition %d: %v", e.Topic, e.Partition, e.Err)
}

func (e *ProduceError) Unwrap() error { return e.Err }

// OffsetCommitError wraps the error of the input-offset commit that follows a successful apply; the task stays usable and the next commit retries.
type OffsetCommitError struct{ Err error }

func (e *OffsetCommitError) Error() string {
	return fmt.Sprintf("changelog: state applied, but committing input offsets failed: %v", e.Err)
}

func (e *OffsetCommitError) Unwrap() error { return e.Err }
