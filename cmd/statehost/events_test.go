package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/host/runtime"
)

// The events file (--events): one JSON object a line, whole lines from concurrent writers,
// appended to what the file held, the exited event last.
func TestEventFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(`{"time":"2026-12-03T10:00:00Z","kind":"exited"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := openEventFile(path, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 10, 15, 2, 5, time.UTC)
	w.write(runtime.Event{Time: at, Kind: runtime.EventTaskRunning, Processor: "count", Partition: 0})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				w.write(runtime.Event{Kind: runtime.EventPartitionsAssigned, Partitions: map[string][]int32{fmt.Sprintf("t%d", g): {int32(i)}}})
			}
		})
	}
	wg.Wait()
	w.exited(errors.New("boom"))
	var nilFile *eventFile // no --events
	nilFile.write(runtime.Event{Kind: runtime.EventRunning})
	nilFile.exited(nil)

	lines, events := readEventFile(t, path)
	if len(lines) != 1+1+800+1 {
		t.Fatalf("%d lines, want the one that was there, 801 events and exited", len(lines))
	}
	if want := `{"time":"2026-12-03T10:15:02.000000005Z","kind":"task_running","processor":"count","partition":0}`; lines[1] != want {
		t.Errorf("line %s\nwant %s", lines[1], want)
	}
	next := map[string]int32{}
	for _, e := range events[2 : len(events)-1] {
		if e.Kind != runtime.EventPartitionsAssigned || e.Time.IsZero() || len(e.Partitions) != 1 {
			t.Fatalf("event %+v, want partitions_assigned of one topic, with a time", e)
		}
		for topic, ps := range e.Partitions {
			if len(ps) != 1 || ps[0] != next[topic] {
				t.Fatalf("event %+v of %s, want partition %d: the events of a writer are in order", e, topic, next[topic])
			}
			next[topic]++
		}
	}
	if last := events[len(events)-1]; last.Kind != eventExited || last.Error != "boom" || last.Time.IsZero() {
		t.Errorf("last event %+v, want exited with the error boom", last)
	}
}

// readEventFile returns the lines of the events file at path and their events; it fails the
// test on a line that is not a whole event.
func readEventFile(t *testing.T, path string) ([]string, []runtime.Event) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end with a whole line: %q", path, b)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	events := make([]runtime.Event, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &events[i]); err != nil || events[i].Kind == "" {
			t.Fatalf("line %d of %s is not an event (%v): %s", i+1, path, err, l)
		}
	}
	return lines, events
}

// run --events on a configuration that does not load writes one event, exited with the
// error; an events file that cannot be opened is an error before anything runs.
func TestRunEventsExited(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	cfg := filepath.Join(dir, "nosuch.hcl")
	if r := runCLI(t.Context(), "", "run", "--config", cfg, "--events", path); r.code != exitFailure {
		t.Fatalf("run with a missing configuration: %v", r)
	}
	if _, es := readEventFile(t, path); len(es) != 1 || es[0].Kind != eventExited || !strings.Contains(es[0].Error, cfg) {
		t.Errorf("events %+v, want one exited with an error naming %s", es, cfg)
	}

	bad := filepath.Join(dir, "no", "such", "dir", "events.jsonl")
	if r := runCLI(t.Context(), "", "run", "--config", cfg, "--events", bad); r.code != exitFailure || !strings.Contains(r.stderr, "events file") {
		t.Errorf("run with an events file in a missing directory: %v", r)
	}
}

// The README's reference of the events names the kinds that the commands write themselves
// (the runtime's are checked by host/runtime's TestEventKindsDocumented).
func TestCommandEventKindsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []runtime.EventKind{eventExited, eventBrokerListening} {
		if !strings.Contains(string(readme), "`"+string(kind)+"`") {
			t.Errorf("the README does not name the event kind `%s`", kind)
		}
	}
}
