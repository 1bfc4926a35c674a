package restore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/store"
)

// loadMinTail is the shortest stretch of changelog, in offsets, that a store with a checkpoint
// restores through a store.Loader (a long tail after a long stop) rather than in batches
// through Pebble's memtable. Settings.ColdLoadMin is the same for a store without one.
const loadMinTail = 100_000

// applier applies what the restore loop fetched, on a goroutine of its own, so that the loop
// reads the next fetch while the current one is applied: the batches of a store with a
// checkpoint go through Partition.ApplyRestore; the records of a cold store go to its
// store.Loader, whose sorted runs are written and ingested in the background. It owns the
// stores of the targets and emits their batch and end events.
type applier struct {
	r       *Restorer
	targets []*target
	jobs    chan applyJob
	free    chan []store.Write
	// wake is sent to when a run of one of the targets' loaders ends (store.Loader.Notify):
	// a loader flushed may then be finished, or its last run started.
	wake   chan struct{}
	cancel context.CancelCauseFunc // stops the restore loop when an apply fails
	done   chan struct{}

	closing []*target     // loaders flushed, whose last run is on its way into Pebble
	decoded []store.Write // the records of a fetched job, decoded: reused job after job
	failed  bool
	emit    *sync.Mutex // held while a listener is called: the appliers of a restore share it
}

// applyJob is a fetch's records of one target to apply; or, with end, the end of its
// restore; or, with caughtUp, a standby that reached the end its changelog had at its start,
// whose loader is finished: it follows in batches from there.
type applyJob struct {
	tg       *target
	ws       []store.Write
	last     int64 // offset of the last record in ws
	hw       int64
	end      bool
	caughtUp bool

	// fetched, when not nil, is what a fetch of a load brought of tg's changelog partition
	// from offset from: the applier decodes it in place of ws.
	fetched *kmsg.FetchResponseTopicPartition
	from    int64
}

// applyQueue is how many fetched batches may wait for the applier: the loop reads ahead by
// that many.
const applyQueue = 2

func newApplier(r *Restorer, targets []*target, cancel context.CancelCauseFunc, emit *sync.Mutex) *applier {
	a := &applier{r: r, targets: targets, jobs: make(chan applyJob, applyQueue), free: make(chan []store.Write, applyQueue+2),
		wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}), emit: emit}
	for _, tg := range targets {
		if tg.loader != nil {
			tg.loader.Notify(a.wake)
		}
	}
	go a.loop()
	return a
}

// appliers are the appliers of a restore: one per processor of the machine (at most one per
// task), each applying the targets of its tasks, so that the tasks' stores are filled in
// parallel while the loop reads on.
type appliers []*applier

func newAppliers(r *Restorer, targets []*target, cancel context.CancelCauseFunc) appliers {
	tasks := 0
	for _, tg := range targets {
		tasks = max(tasks, tg.task+1)
	}
	n := max(1, min(runtime.GOMAXPROCS(0), tasks))
	shards := make([][]*target, n)
	for _, tg := range targets {
		shards[tg.task%n] = append(shards[tg.task%n], tg)
	}
	emit := new(sync.Mutex)
	as := make(appliers, n)
	for i := range as {
		as[i] = newApplier(r, shards[i], cancel, emit)
	}
	return as
}

func (as appliers) of(tg *target) *applier { return as[tg.task%len(as)] }

func (as appliers) send(ctx context.Context, j applyJob) bool { return as.of(j.tg).send(ctx, j) }

// stop ends the appliers after their queued jobs (skipped after a failure) and waits for
// them. Their loaders are finished, or aborted after a failure.
func (as appliers) stop() {
	for _, a := range as {
		close(a.jobs)
	}
	for _, a := range as {
		<-a.done
	}
}

// buffer returns an empty slice for a job's records.
func (a *applier) buffer() []store.Write {
	select {
	case ws := <-a.free:
		return ws[:0]
	default:
		return nil
	}
}

// send queues a job; it returns false when ctx ended first.
func (a *applier) send(ctx context.Context, j applyJob) bool {
	select {
	case a.jobs <- j:
		return true
	case <-ctx.Done():
		return false
	}
}

func (a *applier) loop() {
	defer close(a.done)
	for jobs := a.jobs; jobs != nil; {
		// A loader's run that ends between jobs is seen at once: the last run that its
		// Flush left pending starts, or its restore ends, without waiting for a job.
		select {
		case j, ok := <-jobs:
			if !ok {
				jobs = nil
				break
			}
			if !a.failed {
				if err := a.apply(j); err != nil {
					a.fail(err)
				}
			}
			if j.ws != nil {
				select {
				case a.free <- j.ws:
				default:
				}
			}
		case <-a.wake:
		}
		a.finishReady()
	}
	// Each loader flushed is finished as its last run ends, in whatever order they end.
	for len(a.closing) > 0 {
		<-a.wake
		a.finishReady()
	}
	a.closeLoaders()
}

func (a *applier) fail(err error) {
	a.failed = true
	a.cancel(err)
}

func (a *applier) apply(j applyJob) error {
	tg := j.tg
	if j.caughtUp {
		// Finished before the next batch: that one goes through the memtable, and must
		// not be overtaken by the last run's ingest.
		return finishLoader(tg)
	}
	if j.end {
		if tg.loader == nil {
			a.ended(tg)
			return nil
		}
		if err := tg.loader.Flush(); err != nil {
			return partError(tg, err)
		}
		a.closing = append(a.closing, tg)
		return nil
	}
	if j.fetched != nil {
		ws, last, err := a.r.decodeFetched(a.decoded[:0], tg, j.fetched, j.from)
		a.decoded = ws[:0]
		defer clear(ws) // no hold on the response after this job
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			return nil
		}
		j.ws, j.last = ws, last
	}
	cp := store.Checkpoint{Offset: j.last, LogID: tg.id}
	if tg.loader != nil {
		if err := tg.loader.Add(j.ws, cp); err != nil {
			return partError(tg, err)
		}
	} else if err := tg.ls.Part.ApplyRestore(j.ws, cp); err != nil {
		return partError(tg, err)
	}
	tg.total += int64(len(j.ws))
	a.emit.Lock()
	a.r.lis.OnBatchRestored(BatchEvent{Processor: tg.proc, Store: tg.ls.Store, Topic: tg.ls.Topic, Partition: tg.ls.Partition,
		Records: len(j.ws), Offset: j.last, HighWatermark: j.hw})
	a.emit.Unlock()
	return nil
}

// partError is err, of applying to tg's store, with its changelog partition.
func partError(tg *target, err error) error {
	return fmt.Errorf("restore: %s partition %d: %w", tg.ls.Topic, tg.ls.Partition, err)
}

// finishLoader finishes tg's loader (its last run in Pebble) and lets it go; a loader that
// failed to finish is aborted.
func finishLoader(tg *target) error {
	st, err := tg.loader.Finish()
	tg.runs += st.Runs
	tg.loader.Abort() // nothing after a Finish that succeeded
	tg.loader = nil
	if err != nil {
		return partError(tg, err)
	}
	return nil
}

// dropLoader aborts tg's loader, after a failure, and lets it go.
func dropLoader(tg *target) {
	tg.loader.Abort()
	tg.loader = nil
}

// finishReady finishes the flushed loaders whose last run is in Pebble and ends their
// restores, and starts the last runs that wait for the run before to end; after a failure it
// aborts them all.
func (a *applier) finishReady() {
	n := 0
	for _, tg := range a.closing {
		if !a.failed && !tg.loader.Ready() {
			a.closing[n] = tg
			n++
			continue
		}
		if a.failed {
			dropLoader(tg)
			continue
		}
		if err := finishLoader(tg); err != nil {
			a.fail(err)
			continue
		}
		a.ended(tg)
	}
	a.closing = a.closing[:n]
}

// closeLoaders ends the loads that did not reach their end: a stopped restore ingests what
// they hold (it is the changelog up to their last batch), a failed one drops it.
func (a *applier) closeLoaders() {
	for _, tg := range a.targets {
		if tg.loader == nil {
			continue
		}
		if a.failed {
			dropLoader(tg)
		} else if err := finishLoader(tg); err != nil {
			a.fail(err)
		}
	}
}

// ended emits the end of tg's restore, under the lock the appliers share.
func (a *applier) ended(tg *target) {
	a.emit.Lock()
	defer a.emit.Unlock()
	a.r.ended(tg)
}

// ended emits the end of tg's restore.
func (r *Restorer) ended(tg *target) {
	r.lis.OnRestoreEnd(EndEvent{Processor: tg.proc, Store: tg.ls.Store, Topic: tg.ls.Topic, Partition: tg.ls.Partition, Records: tg.total, Duration: time.Since(tg.began), Runs: tg.runs})
}

// applyFailure returns the error that stopped the restore loop: the applier's, or ctx's.
func applyFailure(ctx, actx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("restore: stopped: %w", err)
	}
	if cause := context.Cause(actx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return fmt.Errorf("restore: stopped: %w", actx.Err())
}
