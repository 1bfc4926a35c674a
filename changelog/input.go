package changelog

import "context"

// Input names an input record: the one whose processing produced a changelog or output
// record. A zero Input (Topic "") names none.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Source tells a task which input record its store writes and outputs belong to. The runtime
// passes the task's engine.HostWaits, which knows the record of the plugin call in progress.
//
// InputRecord is called on the goroutine that writes or outputs, once per record the task
// produces (the hot path: it must be cheap and must not allocate).
type Source interface {
	// InputRecord returns the input record being processed, or false when there is none (a
	// plugin's init, a punctuation, a coalescing store's flush at a commit).
	InputRecord() (Input, bool)
}

// SetSource sets the Source that names the input record of each record the task produces,
// so that a record the broker refuses fails the commit with a *ProduceError naming it; nil
// removes it. Call it before the task writes or outputs.
func (t *Task) SetSource(s Source) { t.tr.source = s }

// inputMark is what a produced record carries as its kgo.Record.Context: the input record it
// belongs to, which the promise of a record that failed reads back (tracker.done). A record
// carries no field of its own for it, and franz-go hands a record's Context back untouched;
// it reads it only to see whether the record is canceled (Done, Err), which the embedded
// context.Background answers: never. Consecutive records of one input record share one mark
// (slab.mark), so a mark costs nothing per produced record, and a chunk of marks per 64 input
// records that produce.
type inputMark struct {
	context.Context
	in Input
}
