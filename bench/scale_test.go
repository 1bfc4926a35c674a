package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/statehost/statehost/host/runtime"
)

func TestParseScaleTasks(t *testing.T) {
	got, err := parseScaleTasks("8, 256,4096")
	if err != nil || !slices.Equal(got, []int{8, 256, 4096}) {
		t.Fatalf("parseScaleTasks = %v, %v", got, err)
	}
	for _, bad := range []string{"", "7", "0", "8,x"} {
		if _, err := parseScaleTasks(bad); err == nil {
			t.Errorf("parseScaleTasks(%q): no error", bad)
		}
	}
}

// TestEventTail writes events as a scale child does, a line cut in two by a poll included,
// and checks the running set and the time of the task that made it whole.
func TestEventTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &eventWriter{f: f}
	tail := &eventTail{path: path, running: map[string]bool{}, want: 2}
	if err := tail.poll(); err != nil { // nothing written yet
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)
	w.write(runtime.Event{Time: t0, Kind: runtime.EventRunning})
	w.write(runtime.Event{Time: t0.Add(1 * time.Second), Kind: runtime.EventTaskRunning, Processor: "count", Partition: 0})
	w.write(runtime.Event{Time: t0.Add(2 * time.Second), Kind: runtime.EventTaskClosed, Processor: "count", Partition: 0})
	w.write(runtime.Event{Time: t0.Add(3 * time.Second), Kind: runtime.EventTaskRunning, Processor: "windowcount", Partition: 0})
	if _, err := f.WriteString(`{"time":"2026-12-04T23:00:04Z","kind":"task_running",`); err != nil {
		t.Fatal(err)
	}
	if err := tail.poll(); err != nil {
		t.Fatal(err)
	}
	if len(tail.running) != 1 || !tail.reached.IsZero() || !tail.joined.Equal(t0) {
		t.Fatalf("after the first poll: running %v, reached %v, joined %v", tail.running, tail.reached, tail.joined)
	}
	if _, err := f.WriteString(`"processor":"count","partition":0}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := tail.poll(); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(4 * time.Second); len(tail.running) != 2 || !tail.reached.Equal(want) {
		t.Fatalf("after the second poll: running %v, reached %v, want %v", tail.running, tail.reached, want)
	}
	if err := w.failed(); err != nil {
		t.Fatal(err)
	}
}
