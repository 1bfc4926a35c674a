package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// This file is the scale profile (issue 27, part 5): one statehost instance with 8 to 4,096
// tasks of two stateful Go processors, its peak memory, its start, its rate at a fixed input
// rate, and the move of half its tasks to a second instance. It runs only with -scale.

// scaleOptions are the scale profile's flags.
type scaleOptions struct {
	tasks []int         // the sizes, in tasks (even: two processors, tasks/2 partitions each)
	rate  int           // the input rate, records/s over both input topics
	span  time.Duration // how long the rate is held for the records/s figure
	// standbys is the application's standby_replicas: with one instance there is nowhere to
	// put them, so they count from the second instance's join, the move.
	standbys int
}

// parseScaleTasks reads -scale-tasks: a comma-separated list of even task counts.
func parseScaleTasks(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 || n%2 != 0 {
			return nil, fmt.Errorf("-scale-tasks: %q is not an even task count of 2 or more", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// scaleKeys is the number of distinct keys of the scale profile's input, at every size.
const scaleKeys = 100000

// scaleStartTimeout bounds the wait for every task of a size to run, on either instance.
const scaleStartTimeout = 5 * time.Minute

// scaleRun is the figures of one size.
type scaleRun struct {
	tasks int

	startTook time.Duration // from the first instance's spawn to its last task running
	joinTook  time.Duration // from its "running" event (the group join) to the same
	phases    startPhases   // the first instance's start, step by step
	peakRSS   int64         // the first instance's VmHWM after the rate phase, bytes

	produced int64         // records produced in the rate phase
	rateTook time.Duration // from the first record produced to the group's commit of the last
	rate     float64       // produced / rateTook: records/s
	behind   int64         // records not committed when the wait gave up (0: all)
	cpu      float64       // the instance's CPU µs per record over rateTook

	moved        int           // tasks running on the second instance
	moveTook     time.Duration // from the second instance's spawn to its last moved task running
	moveJoinTook time.Duration // from its group join to the same
	movePhases   startPhases   // the second instance's start, step by step
	peakRSS2     int64         // the second instance's VmHWM, bytes
	// standbys1 and standbys2 are the standby store restores each instance had begun
	// when the last moved task ran.
	standbys1, standbys2 int

	stopTook time.Duration // the first instance's stop, from SIGTERM to its exit
	err      error
}

// scaleProfile builds the windowcount plugin beside count and runs the scale profile on the
// broker of o (-kfake: the embedded kfake).
func (b *bench) scaleProfile(ctx context.Context, o options) error {
	window := filepath.Join(b.dir, "windowcount.wasm")
	src, err := filepath.Abs(filepath.Join("..", "plugins", "windowcount"))
	if err != nil {
		return err
	}
	if err := wasmbuild.Go(ctx, src, window); err != nil {
		return fmt.Errorf("build the windowcount plugin (run the bench from the bench directory): %w", err)
	}
	brokerName := "Apache Kafka (one node)"
	if o.kfake {
		brokerName = "kfake (embedded)"
	}
	return b.runScale(ctx, scaleOptions{tasks: o.scaleTasks, rate: o.scaleRate, span: o.scaleFor, standbys: o.scaleStandbys}, window, brokerName)
}

// runScale runs the scale profile: each size in turn, on a new application and new topics.
func (b *bench) runScale(ctx context.Context, so scaleOptions, windowModule, brokerName string) error {
	fmt.Printf("statehost scale profile: tasks %v (count + windowcount, Go guests, tasks/2 partitions each), input %d records/s for %s, "+
		"standby_replicas %d, commit interval %s, state_memory %s, memory_limit %s, broker %s\n",
		so.tasks, so.rate, so.span, so.standbys, b.interval, b.stateMemory, orNone(b.memoryLimit), brokerName)
	var runs []*scaleRun
	for _, n := range so.tasks {
		r := b.scaleSize(ctx, so, n, windowModule)
		printScaleRun(r)
		runs = append(runs, r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	reportScale(os.Stdout, runs, so.standbys)
	failed := 0
	for _, r := range runs {
		if r.err != nil {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d scale runs failed", failed, len(runs))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// scaleSize measures one size: n tasks on one instance, then half of them moved to a second.
func (b *bench) scaleSize(ctx context.Context, so scaleOptions, n int, windowModule string) *scaleRun {
	r := &scaleRun{tasks: n}
	app := fmt.Sprintf("scale-%d", n)
	inA, inB, outA, outB := scaleTopics(app)
	parts := int32(n / 2)
	if r.err = b.createScaleTopics(ctx, parts, inA, inB, outA, outB); r.err != nil {
		return r
	}
	defer b.dropScaleTopics(app)
	s := spec{Kind: "scale", Brokers: b.brokers, App: app, Input: inA, Output: outA, Guarantee: "at_least_once",
		Dir: filepath.Join(b.dir, app+"-1"), Module: b.module, CommitInterval: b.interval, StateMemory: b.stateMemory,
		MemoryLimit: b.memoryLimit,
		Scale: &scaleSpec{Partitions: parts, Standbys: so.standbys, WindowModule: windowModule,
			Events: filepath.Join(b.dir, app+"-1.events")}}
	if b.cpuProfile != "" {
		s.CPUProfile = filepath.Join(b.cpuProfile, app+".pprof")
		s.HeapProfile = filepath.Join(b.cpuProfile, app+".heap")
		if b.trace {
			s.Trace = filepath.Join(b.cpuProfile, app+".trace")
		}
	}

	// Start on empty state: from the spawn to every task running.
	t0 := time.Now()
	ch, err := b.start(s, app+"-1.log")
	if err != nil {
		r.err = err
		return r
	}
	var ch2 *child
	defer func() {
		// Both instances stop at once: a static member's tasks wait for it otherwise.
		var wg sync.WaitGroup
		if ch2 != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := ch2.stop(); err != nil && r.err == nil {
					r.err = fmt.Errorf("second instance: %w", err)
				}
			}()
		}
		t := time.Now()
		_, _, err := ch.stop()
		r.stopTook = time.Since(t)
		wg.Wait()
		if err != nil && r.err == nil {
			r.err = err
		}
	}()
	ev1 := &eventTail{path: s.Scale.Events, running: map[string]bool{}}
	at, joined, err := ev1.waitRunning(ctx, ch, n, fmt.Sprintf("%s, first instance", app))
	if err != nil {
		r.err = err
		return r
	}
	r.startTook, r.joinTook = at.Sub(t0), at.Sub(joined)
	r.phases = ev1.phases(t0)

	// The same input rate at every size, until the group committed every record.
	pid := ch.cmd.Process.Pid
	cpu0, ok0 := markCPU(pid, b.brokerPID)
	tp := time.Now()
	counts, err := b.produceAtRate(ctx, []string{inA, inB}, so.rate, so.span)
	if err != nil {
		r.err = err
		return r
	}
	r.produced = counts[inA] + counts[inB]
	done, committed, err := b.waitScaleCommitted(ctx, ch, app, counts, so.span+2*time.Minute)
	if err != nil {
		r.err = err
		return r
	}
	r.rateTook = done.Sub(tp)
	r.rate = float64(committed) / r.rateTook.Seconds()
	r.behind = r.produced - committed
	if cpu1, ok1 := markCPU(pid, b.brokerPID); ok0 && ok1 && committed > 0 {
		r.cpu = float64((cpu1.child - cpu0.child).Microseconds()) / float64(committed)
	}
	r.peakRSS, _ = peakRSS(pid)

	// A second instance in the group takes half the tasks, restored from their changelogs,
	// while the input goes on at the same rate. With standbys, it also starts a standby of each
	// task that stays, and the first keeps the moved tasks' state as their standbys. It has
	// the compiled modules, as on a machine where statehost ran before.
	s2 := s
	s2.Dir, s2.CPUProfile, s2.HeapProfile, s2.Trace = filepath.Join(b.dir, app+"-2"), "", "", ""
	sc := *s.Scale
	sc.Events = filepath.Join(b.dir, app+"-2.events")
	s2.Scale = &sc
	if err := copyDir(filepath.Join(s.Dir, app, "wasm-cache"), filepath.Join(s2.Dir, app, "wasm-cache")); err != nil {
		r.err = fmt.Errorf("second instance: %w", err)
		return r
	}
	pctx, stopProducing := context.WithCancel(ctx)
	produced := make(chan error, 1)
	go func() {
		_, err := b.produceAtRate(pctx, []string{inA, inB}, so.rate, scaleStartTimeout)
		produced <- err
	}()
	t1 := time.Now()
	ch2, err = b.start(s2, app+"-2.log")
	if err == nil {
		ev2 := &eventTail{path: sc.Events, running: map[string]bool{}}
		at, joined, err = ev2.waitRunning(ctx, ch2, n/2, fmt.Sprintf("%s, second instance", app))
		if err == nil {
			r.moved, r.moveTook, r.moveJoinTook = len(ev2.running), at.Sub(t1), at.Sub(joined)
			if err = ev1.poll(); err == nil {
				r.standbys1, r.standbys2 = len(ev1.standbys), len(ev2.standbys)
			}
			r.movePhases = ev2.phases(t1)
			r.peakRSS2, _ = peakRSS(ch2.cmd.Process.Pid)
		}
	}
	stopProducing()
	if perr := <-produced; err == nil && perr != nil && !errors.Is(perr, context.Canceled) {
		err = perr
	}
	if err != nil {
		r.err = err
	}
	return r
}

// createScaleTopics creates the inputs with parts partitions and the outputs with the
// bench's usual count.
func (b *bench) createScaleTopics(ctx context.Context, parts int32, inA, inB, outA, outB string) error {
	resp, err := b.adm.CreateTopics(ctx, parts, 1, nil, inA, inB)
	if err != nil {
		return fmt.Errorf("bench: create topics %s, %s: %w", inA, inB, err)
	}
	for _, t := range resp {
		if t.Err != nil {
			return fmt.Errorf("bench: create topic %s: %w", t.Topic, t.Err)
		}
	}
	return createTopics(ctx, b.adm, nil, outA, outB)
}

// dropScaleTopics deletes the topics of app, its changelogs included, so that the broker
// (this process, with kfake) does not carry one size's partitions into the next.
func (b *bench) dropScaleTopics(app string) {
	inA, inB, outA, outB := scaleTopics(app)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = b.adm.DeleteTopics(ctx, inA, inB, outA, outB, app+"-counts-changelog", app+"-windows-changelog")
}

// waitScaleCommitted waits until the group app has committed want[topic] offsets of each
// topic (they start empty), or until limit; it returns when it stopped and what was committed.
func (b *bench) waitScaleCommitted(ctx context.Context, ch *child, app string, want map[string]int64, limit time.Duration) (time.Time, int64, error) {
	var total int64
	for _, n := range want {
		total += n
	}
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-ch.exited:
			_, _, err := ch.result()
			return time.Time{}, 0, fmt.Errorf("bench: child exited early: %v (log: %s)", err, ch.log)
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := b.adm.FetchOffsets(ctx, app)
		if err != nil {
			continue
		}
		now := time.Now()
		var sum int64
		resp.Each(func(o kadm.OffsetResponse) {
			if _, ok := want[o.Topic]; ok && o.Err == nil {
				sum += o.At
			}
		})
		if sum >= total || now.After(deadline) {
			return now, sum, nil
		}
	}
}
