package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/statehost/statehost/host/runtime"
)

// The reading of what the processes did, all of it: every process the tests start writes its
// events to a file of its own (--events), and the tests wait for and count those typed events
// through the functions of this file, never the text of the log lines (harness_logs_test.go
// reads those for the tests of logging itself).

// eventLog is the events file of a process, read as it grows: the one reader of events.
type eventLog struct {
	path string

	mu      sync.Mutex
	off     int64           // read up to here
	partial []byte          // the start of a line not written to its end yet
	events  []runtime.Event // in the order of the file
	bad     error           // the first line that is not an event
}

// newEventLog returns the reader of an events file in a new temporary directory of t, the
// path of which the process is given with --events.
func newEventLog(t testing.TB) *eventLog {
	return &eventLog{path: t.TempDir() + "/events.jsonl"}
}

// all returns the events written so far, in order.
func (l *eventLog) all() []runtime.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, err := os.Open(l.path); err == nil {
		if _, err := f.Seek(l.off, io.SeekStart); err == nil {
			if b, err := io.ReadAll(f); err == nil {
				l.off += int64(len(b))
				l.parse(append(l.partial, b...))
			}
		}
		f.Close()
	}
	return slices.Clip(l.events)
}

// parse appends the events of the complete lines of b and keeps the rest for later.
func (l *eventLog) parse(b []byte) {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.partial = slices.Clone(b)
			return
		}
		var e runtime.Event
		if err := json.Unmarshal(b[:i], &e); err != nil || e.Kind == "" || e.Time.IsZero() {
			if l.bad == nil {
				l.bad = fmt.Errorf("events file %s: line %q is not an event (%v)", l.path, b[:i], err)
			}
		} else {
			l.events = append(l.events, e)
		}
		b = b[i+1:]
	}
}

// check fails t if a line of the file was not an event.
func (l *eventLog) check(t testing.TB) {
	l.all()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bad != nil {
		t.Error(l.bad)
	}
}

// ofKinds returns the events among es of the kinds (every event for none), in order.
func ofKinds(es []runtime.Event, kinds ...runtime.EventKind) []runtime.Event {
	if len(kinds) == 0 {
		return es
	}
	var out []runtime.Event
	for _, e := range es {
		if slices.Contains(kinds, e.Kind) {
			out = append(out, e)
		}
	}
	return out
}

// events returns the events that the process wrote so far of the kinds (every event for
// none), in order: the one way the tests read what a process did.
func (p *appProcess) events(kinds ...runtime.EventKind) []runtime.Event {
	return ofKinds(p.evlog.all(), kinds...)
}

// waitFor polls cond until it holds; it fails the test if the process exits first.
func (p *appProcess) waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p.exited() {
			t.Fatalf("%s exited %d while waiting for %s", p.name, p.code, what)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out after %v waiting for %s", p.name, timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTasks waits until every task of the word count has had a task_running event.
func (p *appProcess) waitTasks(t testing.TB, timeout time.Duration) {
	t.Helper()
	p.waitFor(t, timeout, "all tasks running", func() bool {
		seen := map[string]bool{}
		for _, e := range p.events(runtime.EventTaskRunning) {
			seen[taskName(e.Processor, e.Partition)] = true
		}
		return len(seen) == e2eTasks
	})
}

// restores returns the restore_started and restore_done events of the store counts.
func (p *appProcess) restores() (started, done []runtime.Event) {
	for _, e := range p.events(runtime.EventRestoreStarted, runtime.EventRestoreDone) {
		switch {
		case e.Store != "counts":
		case e.Kind == runtime.EventRestoreStarted:
			started = append(started, e)
		default:
			done = append(done, e)
		}
	}
	return started, done
}

// restoredRecords sums the records of the restore_done events of the store counts.
func (p *appProcess) restoredRecords() int64 {
	_, done := p.restores()
	var n int64
	for _, e := range done {
		n += e.Records
	}
	return n
}

// adminAddr waits for the app's admin_listening event and returns its address.
func (p *appProcess) adminAddr(t testing.TB) string {
	t.Helper()
	var addr string
	p.waitFor(t, 60*time.Second, "its admin listener", func() bool {
		if es := p.events(runtime.EventAdminListening); len(es) > 0 {
			addr = es[0].Addr
		}
		return addr != ""
	})
	return addr
}

// stoppedError waits for the app to exit and returns its exit code and the error of its
// exited event ("" when it has none).
func (p *appProcess) stoppedError(t testing.TB) (int, string) {
	t.Helper()
	code := p.wait(t, 120*time.Second)
	for _, e := range p.events(eventExited) {
		return code, e.Error
	}
	return code, ""
}
