package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/host/runtime"
)

// The kinds of the events that the commands write themselves, beside the runtime's
// (runtime.EventKind constants).
const (
	// eventExited: the command is about to exit; Error is why it failed, empty when it
	// stopped cleanly (exit 0).
	eventExited runtime.EventKind = "exited"
	// eventBrokerListening: statehost broker accepts connections on Addr.
	eventBrokerListening runtime.EventKind = "broker_listening"
)

// eventFile appends events to a file as JSON lines (--events), one write per line, from any
// goroutine. A nil *eventFile writes nothing.
type eventFile struct {
	mu     sync.Mutex
	f      *os.File
	log    hclog.Logger
	failed bool // a write failed: logged once, the next ones are tried still
}

// openEventFile opens path to append events to it, creating it if needed; "" is no file (nil).
func openEventFile(path string, log hclog.Logger) (*eventFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("the events file: %w", err)
	}
	return &eventFile{f: f, log: log}, nil
}

// write appends e as one line; a zero time is now. A failed write is logged once and does
// not stop the command.
func (w *eventFile) write(e runtime.Event) {
	if w == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	line, err := json.Marshal(e)
	if err == nil {
		line = append(line, '\n')
		w.mu.Lock()
		_, err = w.f.Write(line)
		w.mu.Unlock()
	}
	if err != nil {
		w.logOnce(err)
	}
}

func (w *eventFile) logOnce(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failed {
		w.failed = true
		w.log.Warn("cannot write to the events file; the command goes on", "file", w.f.Name(), "error", err)
	}
}

// exited writes the exited event of err (nil: a clean stop) and closes the file.
func (w *eventFile) exited(err error) {
	if w == nil {
		return
	}
	e := runtime.Event{Kind: eventExited}
	if err != nil {
		e.Error = err.Error()
	}
	w.write(e)
	if cerr := w.f.Close(); cerr != nil {
		w.logOnce(cerr)
	}
}
