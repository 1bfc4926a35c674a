package pluginsdk

import (
	"fmt"

	"github.com/statehost/statehost/abi"
)

// PunctuationType says what drives a punctuation (see WithPunctuation).
type PunctuationType int32

// Punctuation types, the kinds of the ABI's schedule.
const (
	// StreamTimePunctuation punctuates as the task's stream time advances: after the first
	// batch that makes the stream time known, then after each batch that brings it to at
	// least the previous punctuation's time plus the interval (once, however far it
	// jumped). PunctuationContext.Time is the stream time. Without records, stream time
	// stands still and so does this punctuation.
	StreamTimePunctuation = PunctuationType(abi.ScheduleStreamTime)
	// WallClockPunctuation punctuates as the host's clock advances: one interval after the
	// task first took the schedule (whichever instance serves it), then whenever the clock reaches the previous punctuation's time
	// plus the interval, between batches. PunctuationContext.Time is the clock's time.
	WallClockPunctuation = PunctuationType(abi.ScheduleWallClock)
)

// String returns "stream-time" or "wall-clock".
func (k PunctuationType) String() string {
	switch k {
	case StreamTimePunctuation:
		return "stream-time"
	case WallClockPunctuation:
		return "wall-clock"
	}
	return fmt.Sprintf("PunctuationType(%d)", int32(k))
}

// PunctuateFunc runs a punctuation. A non-nil error fails the task as a failed batch does:
// the host reports the error's text and discards the instance.
type PunctuateFunc func(ctx PunctuationContext) error

// PunctuationContext is what a punctuation sees. There is no current record: a punctuation
// runs between batches. It is valid only during the PunctuateFunc call.
type PunctuationContext interface {
	// Time returns the punctuation's time in milliseconds since the Unix epoch: the stream
	// time for a StreamTimePunctuation, the host's clock for a WallClockPunctuation.
	// Emitted records get this timestamp.
	Time() int64
	// StreamTime returns the task's stream time (see Context.StreamTime).
	StreamTime() int64
	// Store returns the key-value store with that name (see Context.Store).
	Store(name string) *Store
	// WindowStore returns the window store with that name (see Context.WindowStore).
	WindowStore(name string) *WindowStore
	// SessionStore returns the session store with that name (see Context.SessionStore).
	SessionStore(name string) *SessionStore
	// Emit sends a record to the processor's first output topic, with timestamp Time().
	// A nil key or value is null. The host copies both.
	Emit(key, value []byte) error
	// EmitTo sends a record to the declared output topic with that name.
	EmitTo(output string, key, value []byte) error
	// Send sends m, with headers, to m.Output ("" for the first output).
	Send(m Message) error
	// Log writes msg to the host's log, tagged with processor and partition.
	Log(level Level, msg string)
	// Logf formats and logs as fmt.Sprintf.
	Logf(level Level, format string, args ...any)
}

// punctCtx implements PunctuationContext.
type punctCtx struct {
	stateCtx
	time int64
}

func (c *punctCtx) Time() int64 { return c.time }

// punctuator is a scheduled punctuation: the host's schedule id and the function.
type punctuator struct {
	id int32
	fn PunctuateFunc
}

// schedule implements the schedules of statehost_init: it schedules every registered
// punctuation. It returns 0, or the failing code having set the error.
func schedule() int32 {
	for _, p := range registered.punctuations {
		id := hSchedule(int32(p.kind), p.interval.Milliseconds())
		if id < 0 {
			hSetError(fmt.Sprintf("pluginsdk: schedule %s punctuation every %v: %v", p.kind, p.interval, Code(id)))
			return id
		}
		g.punctuators = append(g.punctuators, punctuator{id: id, fn: p.fn})
	}
	return abi.CodeOK
}

// punctuate implements statehost_punctuate: it runs the punctuation scheduled as id.
func punctuate(id int32, timeMs int64) int32 {
	for i := range g.punctuators {
		if p := &g.punctuators[i]; p.id == id {
			g.pctx.time = timeMs
			if err := p.fn(&g.pctx); err != nil {
				hSetError(err.Error())
				return abi.CodeProcessorFailed
			}
			return abi.CodeOK
		}
	}
	hSetError(fmt.Sprintf("pluginsdk: punctuate: no punctuation scheduled with id %d", id))
	return abi.CodeProcessorFailed
}
