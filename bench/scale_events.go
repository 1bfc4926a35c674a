package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/statehost/statehost/host/runtime"
)

// eventTail follows the events file a scale child writes (eventWriter), and keeps the set of
// its tasks that run: a task_running adds a task, a task_closed removes it. The times are the
// events' own, taken in the child as they happened, not when the parent read them.
type eventTail struct {
	path    string
	off     int64
	partial []byte          // an unfinished last line
	running map[string]bool // "processor/partition"
	// standbys is the stores of standby tasks whose restore began: "processor/partition/store".
	standbys map[string]bool
	joined   time.Time // the first "running" event: the group join begins
	// assigned is the first partitions_assigned, restored the last restore_done of an active
	// task so far: with joined and reached, the phases of a start.
	assigned, restored time.Time
	want               int       // the size of running that reached sets reached
	reached            time.Time // the time of the task_running that made running hold want tasks
}

// poll reads what was appended since the last poll.
func (t *eventTail) poll() error {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the child has not created it yet
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	t.off += int64(len(data))
	data = append(t.partial, data...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		var e runtime.Event
		if err := json.Unmarshal(data[:i], &e); err != nil {
			return fmt.Errorf("bench: %s: %w", t.path, err)
		}
		t.apply(e)
		data = data[i+1:]
	}
	t.partial = append([]byte(nil), data...)
	return nil
}

func (t *eventTail) apply(e runtime.Event) {
	task := fmt.Sprintf("%s/%d", e.Processor, e.Partition)
	switch e.Kind {
	case runtime.EventRunning:
		if t.joined.IsZero() {
			t.joined = e.Time
		}
	case runtime.EventRestoreStarted:
		if e.Standby {
			if t.standbys == nil {
				t.standbys = map[string]bool{}
			}
			t.standbys[task+"/"+e.Store] = true
		}
	case runtime.EventPartitionsAssigned:
		if t.assigned.IsZero() {
			t.assigned = e.Time
		}
	case runtime.EventRestoreDone:
		if !e.Standby {
			t.restored = e.Time
		}
	case runtime.EventTaskRunning:
		t.running[task] = true
		if t.reached.IsZero() && t.want > 0 && len(t.running) >= t.want {
			t.reached = e.Time
		}
	case runtime.EventTaskClosed:
		delete(t.running, task)
	}
}

// waitRunning waits until want tasks run at once in the child ch, and returns the time of the
// task_running that made them want, and the child's group join. It prints progress every 10
// seconds, and gives up after scaleStartTimeout.
func (t *eventTail) waitRunning(ctx context.Context, ch *child, want int, what string) (at, joined time.Time, err error) {
	t.want, t.reached = want, time.Time{}
	begin := time.Now()
	next := begin.Add(10 * time.Second)
	for {
		if err := t.poll(); err != nil {
			return at, joined, err
		}
		if !t.reached.IsZero() {
			return t.reached, t.joined, nil
		}
		now := time.Now()
		if now.After(begin.Add(scaleStartTimeout)) {
			return at, joined, fmt.Errorf("bench: %s: %d of %d tasks running after %s (log: %s)", what, len(t.running), want, scaleStartTimeout, ch.log)
		}
		if now.After(next) {
			fmt.Printf("  %s: %d of %d tasks running after %s\n", what, len(t.running), want, now.Sub(begin).Round(time.Second))
			next = next.Add(10 * time.Second)
		}
		select {
		case <-ch.exited:
			_, _, err := ch.result()
			return at, joined, fmt.Errorf("bench: %s exited early: %v (log: %s)", what, err, ch.log)
		case <-ctx.Done():
			return at, joined, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startPhases are the steps of an instance's start, each from the end of the one before:
// from the spawn to the group join (the process, the config and the modules), to the first
// assignment (the join and the rebalances), to the last restore done (the tasks opened and
// restored), to the last task running (their plugins started).
type startPhases struct{ join, assign, restore, run time.Duration }

// phases returns the steps of the start of the child spawned at spawn, once reached is set.
func (t *eventTail) phases(spawn time.Time) startPhases {
	restored := t.restored
	if restored.IsZero() || restored.Before(t.assigned) {
		restored = t.assigned // nothing to restore
	}
	return startPhases{join: t.joined.Sub(spawn), assign: t.assigned.Sub(t.joined), restore: restored.Sub(t.assigned), run: t.reached.Sub(restored)}
}

func (p startPhases) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("spawn-join %s, join-assigned %s, assigned-restored %s, restored-running %s", r(p.join), r(p.assign), r(p.restore), r(p.run))
}
