package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
)

// scaleSpec is what a child of the scale profile needs beyond its spec.
type scaleSpec struct {
	Partitions   int32  // of each of the two input topics: the tasks are twice as many
	Standbys     int    // standby_replicas
	WindowModule string // the windowcount module's path (spec.Module is count's)
	Events       string // the file the child appends its runtime events to, one JSON object a line
}

// scaleTopics are the topics of the scale profile's application app: count reads inA and
// writes outA, windowcount reads inB and writes outB.
func scaleTopics(app string) (inA, inB, outA, outB string) {
	return app + "-a", app + "-b", app + "-a-out", app + "-b-out"
}

// scaleAcceptableLag is the scale profile's acceptable_recovery_lag: high enough that every
// task whose desired owner is the new instance moves to it in the first rebalance, and is
// restored there before it runs (a cold move: a new instance has no standby to promote). With the default of 10,000,
// tasks with more changelog records than that (at 8 tasks about 19,000 each at the default
// rate) would stay where they run and start warmups, at most two per rebalance (maxWarmups in
// host/runtime/assign.go), and move at a probing rebalance 10 minutes later: the measure
// would time the probing interval.
const scaleAcceptableLag = 1 << 40

// scaleHCL is, after headerHCL, the application of the scale profile: two stateful Go
// processors, count (a key-value store) and windowcount (a window store of 10-second
// tumbling windows, and a
// stream-time punctuation every second that emits and deletes the closed ones), each on an
// input topic of its own with Partitions partitions, so 2 x Partitions tasks, their stores
// logged. Everything else has its default, but for the settings the bench passes to every
// statehost contender (commit interval, state_memory, memory_limit), acceptable_recovery_lag
// and standby_replicas (-scale-standbys). The windows are short so that every rate phase meets window
// closes evenly, whatever the size.
const scaleHCL = `
acceptable_recovery_lag = %d
standby_replicas        = %d
topic %q { partitions = %d }
topic %q { partitions = %d }
processor "count" {
  module  = %q
  inputs  = [%q]
  outputs = [%q]
  store "counts" {
    type    = "keyvalue"
    backend = "pebble"
    logging { enabled = true }
  }
}
processor "windowcount" {
  module  = %q
  inputs  = [%q]
  outputs = [%q]
  store "windows" {
    type        = "window"
    window_size = "10s"
    logging { enabled = true }
  }
}
`

// runScaleChild runs the scale profile's application until ctx ends, and writes every
// runtime event to s.Scale.Events as it happens: the parent reads the tasks that run from it.
func runScaleChild(ctx context.Context, s spec) (childReport, error) {
	var rep childReport
	if s.Scale == nil {
		return rep, errors.New("scale: no scale spec")
	}
	inA, inB, outA, outB := scaleTopics(s.App)
	p := s.Scale.Partitions
	src := s.headerHCL() + fmt.Sprintf(scaleHCL, int64(scaleAcceptableLag), s.Scale.Standbys,
		inA, p, inB, p, s.Module, inA, outA, s.Scale.WindowModule, inB, outB)
	cfg, diags := config.Parse([]byte(src), "scale.hcl", config.Options{})
	if diags.HasErrors() {
		return rep, fmt.Errorf("config: %s", diags.Error())
	}
	f, err := os.Create(s.Scale.Events)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	ev := &eventWriter{f: f}
	log := hclog.New(&hclog.LoggerOptions{Name: "statehost", Level: hclog.Warn, Output: os.Stderr})
	rt, err := runtime.New(ctx, runtime.Options{Config: cfg, Brokers: s.Brokers, Logger: log, OnEvent: ev.write, NoWatch: true})
	if err != nil {
		return rep, err
	}
	defer rt.Close()
	err = rt.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err == nil {
		err = ev.failed()
	}
	return rep, err
}

// eventWriter appends events to a file, one JSON object a line, each written whole with one
// write (the parent reads the file as it grows). OnEvent calls come from several goroutines.
type eventWriter struct {
	mu  sync.Mutex
	f   *os.File
	err error
}

func (w *eventWriter) write(e runtime.Event) {
	b, err := json.Marshal(e)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		_, err = w.f.Write(append(b, '\n'))
	}
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("scale: events: %w", err)
	}
}

func (w *eventWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
