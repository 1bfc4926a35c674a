package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/restore"
)

// headerHCL is the top of the configuration of every statehost child: the application, its
// state directory, guarantee, commit interval and memory settings, no admin listener, and
// the brokers.
func (s spec) headerHCL() string {
	limit := ""
	if s.MemoryLimit != "" {
		limit = fmt.Sprintf("memory_limit         = %q\n", s.MemoryLimit)
	}
	return fmt.Sprintf(`application_id       = %q
state_dir            = %q
processing_guarantee = %q
commit_interval      = %q
state_memory         = %q
%sadmin { listen = "" }
kafka { brokers = %q }
`, s.App, s.Dir, s.Guarantee, s.CommitInterval.String(), s.StateMemory, limit, s.Brokers)
}

// statehostHCL is, after headerHCL, the application the statehost contenders run: the count
// processor of the word count alone, over pre-tokenized words, with its store logged to its
// changelog.
const statehostHCL = `
topic %q { partitions = %d }
processor "count" {
  module  = %q
  inputs  = [%q]
  outputs = [%q]
  store "counts" {
    type     = "keyvalue"
    backend  = "pebble"
    coalesce = %t
    logging { enabled = true }
  }
}
`

// runStatehost runs the count processor under statehost's runtime, as `statehost run` does,
// until ctx ends; in restore mode, until every store partition is restored.
func runStatehost(ctx context.Context, s spec) (childReport, error) {
	var rep childReport
	src := s.headerHCL() + fmt.Sprintf(statehostHCL,
		s.Input, partitions, s.Module, s.Input, s.Output, s.Coalesce)
	cfg, diags := config.Parse([]byte(src), "bench.hcl", config.Options{})
	if diags.HasErrors() {
		return rep, fmt.Errorf("config: %s", diags.Error())
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "statehost", Level: hclog.Warn, Output: os.Stderr})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lis := &restoreWatch{want: partitions, done: make(chan struct{})}
	rt, err := runtime.New(ctx, runtime.Options{Config: cfg, Brokers: s.Brokers, Logger: log,
		RestoreListener: lis, NoWatch: true})
	if err != nil {
		return rep, err
	}
	defer rt.Close()
	if s.Mode == "restore" {
		go func() {
			select {
			case <-lis.done:
				// Every store partition is restored: stop here; Run closes the tasks, which
				// write their checkpoints, as a stopped instance does.
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	err = rt.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if s.Mode == "restore" {
		lis.mu.Lock()
		rep.Restored, rep.RestoreNanos = lis.records, int64(lis.last.Sub(lis.first))
		finished := lis.ended >= lis.want
		lis.mu.Unlock()
		if err == nil && !finished {
			err = errors.New("stopped before every store partition was restored")
		}
	}
	return rep, err
}

// restoreWatch counts restored records and times the restore of want store partitions.
type restoreWatch struct {
	mu          sync.Mutex
	want, ended int
	records     int64
	first, last time.Time
	done        chan struct{}
}

func (w *restoreWatch) OnRestoreStart(restore.StartEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() {
		w.first = time.Now()
	}
}

func (w *restoreWatch) OnBatchRestored(restore.BatchEvent) {}

func (w *restoreWatch) OnRestoreEnd(e restore.EndEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.records += e.Records
	w.last = time.Now()
	if w.ended++; w.ended == w.want {
		close(w.done)
	}
}
