package restore

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// StartEvent reports that the restore of a store partition begins.
type StartEvent struct {
	Processor string
	Store     string
	Topic     string
	Partition int32
	// StartOffset is the first offset the restore reads (checkpoint + 1, or the log start).
	StartOffset int64
	// EndOffset is the log end offset captured when the restore began; the restore is done when its position reaches it.
	EndOffset int64
}

// BatchEvent reports one fetch applied to a store partition as one batch.
type BatchEvent struct {
	Processor string
	Store     string
	Topic     string
	Partition int32
	// Records is the number of records in the batch.
	Records int
	// Offset is the offset of the batch's last record: the store's new checkpoint.
	Offset int64
	// HighWatermark is the changelog partition's high watermark in the fetch that carried
	// the batch: Offset+1 when the store has caught up (transaction markers aside).
	HighWatermark int64
}

// EndEvent reports that a store partition is restored.
type EndEvent struct {
	Processor string
	Store     string
	Topic     string
	Partition int32
	// Records is the number of records applied.
	Records int64
	// Duration is the time from the start event.
	Duration time.Duration
	// Runs is the number of sorted sstable runs the restore ingested (a cold restore, or a long
	// tail, through a store.Loader); 0 when it applied its batches through the memtable.
	Runs int
}

// Listener receives the progress of restores, for logs, metrics and progress bars.
// Calls come from the goroutine that runs Restore and from the ones that apply what it
// fetched, one call at a time; keep them short.
type Listener interface {
	OnRestoreStart(StartEvent)
	OnBatchRestored(BatchEvent)
	OnRestoreEnd(EndEvent)
}

// CheckpointListener is implemented by listeners that want to know when a
// local copy is discarded because its checkpoint does not match the changelog.
type CheckpointListener interface {
	OnCheckpointDiscarded(*CheckpointError)
}

// Reason says why a checkpoint was not trusted.
type Reason int

// Reasons for discarding a checkpoint.
const (
	// BeyondEnd: the checkpoint is at or past the changelog's end offset (the topic was deleted and recreated, or the broker lost data).
	BeyondEnd Reason = iota + 1
	// BeforeStart: the record after the checkpoint is before the changelog's start offset (the log was truncated past it).
	BeforeStart
	// Recreated: the changelog's topic ID differs from the one the checkpoint was written for (the topic was deleted and recreated).
	Recreated
)

func (r Reason) String() string {
	switch r {
	case BeyondEnd:
		return "checkpoint beyond the changelog end (topic recreated?)"
	case BeforeStart:
		return "checkpoint before the changelog start (changelog truncated)"
	case Recreated:
		return "changelog topic ID changed (topic recreated)"
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// CheckpointError describes a checkpoint that cannot be trusted; the restore
// wipes the store partition and restores it from the start of its changelog.
type CheckpointError struct {
	Processor  string
	Store      string
	Topic      string
	Partition  int32
	Checkpoint int64 // offset of the last record the store had applied
	LogStart   int64 // first offset of the changelog partition
	LogEnd     int64 // high watermark of the changelog partition
	Reason     Reason
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("restore: processor %s store %s: %s: checkpoint %d, %s partition %d spans [%d, %d)",
		e.Processor, e.Store, e.Reason, e.Checkpoint, e.Topic, e.Partition, e.LogStart, e.LogEnd)
}

// OutOfRangeError reports that the changelog was truncated past the restore's position while it ran.
// Restore again: the checkpoint will be found before the log start and the store restored from scratch.
type OutOfRangeError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("restore: %s partition %d: offset %d out of range: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *OutOfRangeError) Unwrap() error { return e.Err }

// logListener logs restore events with hclog: start and end at info, batches at trace.
type logListener struct{ Logger hclog.Logger }

func (l logListener) OnRestoreStart(e StartEvent) {
	l.Logger.Info("restore started", "processor", e.Processor, "store", e.Store, "partition", e.Partition,
		"offset", e.StartOffset, "end_offset", e.EndOffset, "topic", e.Topic)
}

func (l logListener) OnBatchRestored(e BatchEvent) {
	l.Logger.Trace("restore batch", "processor", e.Processor, "store", e.Store, "partition", e.Partition,
		"offset", e.Offset, "records", e.Records)
}

func (l logListener) OnRestoreEnd(e EndEvent) {
	l.Logger.Info("restore done", "processor", e.Processor, "store", e.Store, "partition", e.Partition,
		"records", e.Records, "duration", e.Duration, "runs", e.Runs)
}

// multiListener calls several listeners in order.
type multiListener []Listener

func (m multiListener) OnRestoreStart(e StartEvent) {
	for _, l := range m {
		l.OnRestoreStart(e)
	}
}

func (m multiListener) OnBatchRestored(e BatchEvent) {
	for _, l := range m {
		l.OnBatchRestored(e)
	}
}

func (m multiListener) OnRestoreEnd(e EndEvent) {
	for _, l := range m {
		l.OnRestoreEnd(e)
	}
}

func (m multiListener) OnCheckpointDiscarded(e *CheckpointError) {
	for _, l := range m {
		if cl, ok := l.(CheckpointListener); ok {
			cl.OnCheckpointDiscarded(e)
		}
	}
}
