package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/abi"
)

// schedule is a punctuation schedule of an instance (abi schedule).
type schedule struct {
	kind     int32 // abi.ScheduleStreamTime or abi.ScheduleWallClock
	interval int64 // ms
	next     int64 // the time it fires next; abi.NoTime for a stream-time schedule not fired yet
}

// punctuation is a statehost_punctuate call in progress.
type punctuation struct {
	id   int32
	kind int32
	time int64
}

func (p *punctuation) String() string {
	clock := "stream time"
	if p.kind == abi.ScheduleWallClock {
		clock = "wall-clock time"
	}
	return fmt.Sprintf("punctuation %d at %s %d", p.id, clock, p.time)
}

// addTime returns t + d, saturated at math.MaxInt64 (a schedule of a huge interval then
// never fires again instead of firing on every check).
func addTime(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// now returns the engine's clock (Config.Now).
func (in *Instance) now() time.Time { return in.mod.eng.now() }

// now returns the clock of wall-clock punctuations: Config.Now, or time.Now.
func (e *Engine) now() time.Time {
	if f := e.cfg.Now; f != nil {
		return f()
	}
	return time.Now()
}

// Punctuate runs the punctuations that are due: stream-time schedules against the task's
// stream time (Task.Clock), wall-clock schedules against the engine's clock. Call it between
// batches. It returns how many ran. A failure is a *GuestError whose Punctuation names the
// punctuation; the instance is dead after it, as after a failed batch.
func (in *Instance) Punctuate(ctx context.Context) (int, error) {
	if len(in.defs) == 0 {
		return 0, nil
	}
	if !in.busy.CompareAndSwap(false, true) {
		return 0, ErrInstanceBusy
	}
	defer in.busy.Store(false)
	if err := in.ready(); err != nil {
		return 0, err
	}
	fn := in.guest.ExportedFunction(abi.ExportPunctuate)
	ran := 0
	for id := range in.st.schedules {
		s := &in.st.schedules[id]
		var now int64
		if s.kind == abi.ScheduleStreamTime {
			now = in.task.Clock.StreamTime()
			if now == abi.NoTime || (s.next != abi.NoTime && now < s.next) {
				continue
			}
		} else {
			now = in.now().UnixMilli()
			if now < s.next {
				continue
			}
		}
		s.next = addTime(now, s.interval)
		p := &punctuation{id: int32(id), kind: s.kind, time: now}
		in.punct = p
		stack := [2]uint64{api.EncodeI32(int32(id)), uint64(now)}
		err := in.call(ctx, fn, stack[:])
		in.punct = nil
		if err != nil {
			var ge *GuestError
			if errors.As(err, &ge) {
				ge.Punctuation = p.String()
			}
			return ran, err
		}
		ran++
	}
	return ran, nil
}

// PunctuationDue reports whether a punctuation of the bound task is due: a stream-time one
// at the task's stream time, or a wall-clock one at the engine's clock (TaskState).
func (in *Instance) PunctuationDue() bool { return in.st != nil && in.st.PunctuationDue() }

// NextWallPunctuation returns when the bound task's next wall-clock punctuation is due, and
// false when it has none (TaskState).
func (in *Instance) NextWallPunctuation() (time.Time, bool) {
	if in.st == nil {
		return time.Time{}, false
	}
	return in.st.NextWallPunctuation()
}
