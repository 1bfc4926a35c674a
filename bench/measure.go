package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// contender is one way of running the keyed count.
type contender struct {
	name      string // as printed, and in RESULT names with '-' as '_'
	kind      string // spec.Kind
	guarantee string // statehost only
	coalesce  bool   // statehost: coalescing on; kstreams: its record cache on
	cGuest    bool   // statehost only: the C build of the count processor
	asGuest   bool   // statehost only: the AssemblyScript build of the count processor
	fullOnly  bool   // runs in the --full profile only
}

// restores reports whether the bench measures c's cold restore: every contender that can
// restore in the full profile, and the default setting of each system in the quick one.
func (c contender) restores(full bool) bool {
	switch {
	case c.kind != "statehost" && c.kind != "kstreams" && c.kind != "quix", c.cGuest, c.asGuest:
		return false
	case full:
		return true
	}
	return !c.coalesce && c.guarantee == "at_least_once"
}

// isGo reports whether c runs as this program's child (and can be profiled as one).
func (c contender) isGo() bool { return c.kind != "kstreams" && c.kind != "quix" }

// changelogTopic is where c's state changes go (quix-streams names it itself, and its child
// reports it).
func (c contender) changelogTopic(app string) string {
	if c.kind == "goka" {
		return app + "-table"
	}
	return app + "-counts-changelog"
}

// run is one contender's figures on one workload.
type run struct {
	c contender
	w *workload

	rate           float64       // steady-state records/s: from 5% to 100% of the output
	took           time.Duration // from the child's start to the last output record
	childCPU       float64       // the contender's CPU time per record over the same span as rate, µs
	brokerCPU      float64       // the broker's (this process's) CPU time per record over that span, µs
	changelogRecs  int64         // data records in the changelog (no transaction markers)
	changelogBytes int64         // their keys' and values' bytes
	peakRSS        int64         // the child's peak resident set, bytes
	err            error

	// Restore figures (statehost contenders with -restore).
	consumeRate float64       // a plain consume of the changelog in a new process, records/s
	consumeTook time.Duration //
	// The same consume in the bench's own process, which has consumed before (the baseline
	// until 2026-12-05).
	warmConsumeRate float64
	warmConsumeTook time.Duration
	restored        int64         // records a cold restore applied
	restoreTook     time.Duration // the cold restore, from its first store's start to its last one's end
	warmReplayed    int64         // records replayed by a restart on the state the run left
	tailRecs        int64         // records appended to the changelog after that restart (appendTail)
	tailReplayed    int64         // records the next restart replayed of them
	tailTook        time.Duration // that replay, from its first store's start to its last one's end
	hasRestore      bool
}

// bench holds what every run shares.
type bench struct {
	brokers    []string
	adm        *kadm.Client
	self       string        // this executable, run as the children
	dir        string        // the runs' state directories and logs
	module     string        // count.wasm
	cModule    string        // count_c.wasm
	interval   time.Duration // every contender's commit interval
	cpuProfile string        // a directory for the children's CPU profiles, or ""
	trace      bool          // execution traces too, beside the profiles
	// stateMemory and memoryLimit are the statehost children's state_memory and
	// memory_limit ("": none).
	stateMemory, memoryLimit string
	timeout                  time.Duration // a run's longest wait
	brokerPID                int           // the broker's process: this one (kfake), or Apache Kafka's JVM
	peers                    peers         // what runs the Kafka Streams and quix-streams contenders

	// asModule is count_as.wasm, built when its contender runs; "" when it cannot run, for
	// the reason asWhy.
	asModule, asWhy string
}

// measure runs c on w in a child process and collects its figures.
func (b *bench) measure(ctx context.Context, c contender, w *workload, withRestore bool) *run {
	r := &run{c: c, w: w}
	app := "bench-" + c.name + "-" + w.name
	s := spec{Kind: c.kind, Brokers: b.brokers, App: app, Input: w.topic, Output: app + "-out",
		Guarantee: c.guarantee, Coalesce: c.coalesce, Dir: filepath.Join(b.dir, app), Module: b.module,
		CommitInterval: b.interval, StateMemory: b.stateMemory, MemoryLimit: b.memoryLimit}
	if c.cGuest {
		s.Module = b.cModule
	}
	if c.asGuest {
		s.Module = b.asModule
	}
	if b.cpuProfile != "" && c.isGo() {
		s.CPUProfile = filepath.Join(b.cpuProfile, app+".pprof")
		s.HeapProfile = filepath.Join(b.cpuProfile, app+".heap")
		if b.trace {
			s.Trace = filepath.Join(b.cpuProfile, app+".trace")
		}
	}
	if r.err = createTopics(ctx, b.adm, nil, s.Output); r.err != nil {
		return r
	}
	ch, err := b.start(s, app+".log")
	if err != nil {
		r.err = err
		return r
	}
	r.took, r.rate, r.childCPU, r.brokerCPU, r.err = b.follow(ctx, ch, s.Output, w.n)
	if r.err == nil {
		r.err = b.waitCommitted(ctx, app, w)
	}
	// The peak before the stop: the run's own, read while the child still lives.
	if rss, err := peakRSS(ch.cmd.Process.Pid); err == nil {
		r.peakRSS = rss
	}
	rep, rss, err := ch.stop()
	if r.peakRSS == 0 {
		r.peakRSS = rss // no /proc: the rusage, which may count the parent's memory too
	}
	if r.err == nil {
		r.err = err
	}
	if r.err != nil {
		return r
	}
	topic := c.changelogTopic(app)
	if rep.Changelog != "" {
		topic = rep.Changelog // quix-streams names its changelogs itself
	}
	st, err := b.readChangelog(ctx, c, topic, w)
	if err != nil {
		r.err = err
		return r
	}
	r.changelogRecs, r.changelogBytes = st.records, st.bytes
	if !withRestore {
		return r
	}
	r.hasRestore = true
	// Plain consumes of the changelog and cold restores of the same changelog into an empty
	// state directory, taken in turns, restoreRepeats of each; then a restart on the state the
	// run left.
	if err := b.coldRestores(ctx, r, s, topic); err != nil {
		r.err = err
		return r
	}
	if c.kind != "statehost" {
		return r // the restart and the standby's tail are statehost's figures
	}
	warm := s
	warm.Mode, warm.CPUProfile, warm.HeapProfile, warm.Trace = "restore", "", "", ""
	if rep, err = b.runToEnd(warm, app+"-warm.log"); err != nil {
		r.err = fmt.Errorf("warm restart: %w", err)
		return r
	}
	r.warmReplayed = rep.Restored
	// A tail after the checkpoints: the restart replays it in batches, as a standby follows
	// its changelog.
	if r.tailRecs, err = b.appendTail(ctx, c.changelogTopic(app), tailShare); err != nil {
		r.err = fmt.Errorf("warm tail: %w", err)
		return r
	}
	if rep, err = b.runToEnd(warm, app+"-tail.log"); err != nil {
		r.err = fmt.Errorf("warm tail restore: %w", err)
		return r
	}
	r.tailReplayed, r.tailTook = rep.Restored, time.Duration(rep.RestoreNanos)
	if r.tailReplayed != r.tailRecs {
		r.err = fmt.Errorf("warm tail restore: replayed %d records of a tail of %d", r.tailReplayed, r.tailRecs)
	}
	return r
}

// restoreRepeats is how many times a run's plain consume and cold restore are measured: each
// takes well under a second, where the machine's speed moves by a third from one second to
// the next, so one of each compares noise. The medians are reported: with three, the quick
// profile's uniform restore (under 100 ms) came out at 0.72x and 1.07x its consume in two
// runs of the bench at the same commit.
const restoreRepeats = 5

// coldRestores measures the plain consume of topic, the changelog of the run of s, in a new
// process and in this one, and a cold restore of it, restoreRepeats times in turns, and sets
// r's figures to their medians.
func (b *bench) coldRestores(ctx context.Context, r *run, s spec, topic string) error {
	var consumes, warmConsumes, restores []time.Duration
	var records int64 // the changelog's, as a plain consume reads them
	for i := range restoreRepeats {
		st, err := b.consume(ctx, topic, nil)
		if err != nil {
			return err
		}
		warmConsumes, records = append(warmConsumes, st.took), st.records
		rep, err := b.runToEnd(spec{Kind: "consume", App: s.App + "-consume", Brokers: s.Brokers, Input: topic},
			fmt.Sprintf("%s-consume%d.log", s.App, i))
		if err != nil {
			return fmt.Errorf("plain consume: %w", err)
		}
		if rep.Consumed != records {
			return fmt.Errorf("plain consume: a new process read %d records of %s, this one %d", rep.Consumed, topic, records)
		}
		consumes = append(consumes, time.Duration(rep.ConsumeNanos))
		cold := s
		cold.Mode, cold.Dir, cold.CPUProfile, cold.HeapProfile, cold.Trace = "restore", fmt.Sprintf("%s-cold%d", s.Dir, i), "", "", ""
		// The cold restore has no state, but the module's compiled code, as on any machine
		// where statehost ran before: compiling it (a second of CPU) beside the restore would
		// measure the compiler, on one of the two cores the restore has.
		if s.Kind == "statehost" {
			if err := copyDir(filepath.Join(s.Dir, s.App, "wasm-cache"), filepath.Join(cold.Dir, s.App, "wasm-cache")); err != nil {
				return fmt.Errorf("cold restore: %w", err)
			}
		}
		if i == 0 && s.CPUProfile != "" {
			cold.CPUProfile = filepath.Join(b.cpuProfile, s.App+"-cold.pprof")
			if s.Trace != "" {
				cold.Trace = filepath.Join(b.cpuProfile, s.App+"-cold.trace")
			}
		}
		rep, err = b.runToEnd(cold, fmt.Sprintf("%s-cold%d.log", s.App, i))
		if err != nil {
			return fmt.Errorf("cold restore: %w", err)
		}
		if i > 0 && rep.Restored != r.restored {
			return fmt.Errorf("cold restore: restored %d records, an earlier restore of the same changelog %d", rep.Restored, r.restored)
		}
		r.restored = rep.Restored
		restores = append(restores, time.Duration(rep.RestoreNanos))
		if err := os.RemoveAll(cold.Dir); err != nil {
			return err
		}
	}
	r.consumeTook, r.warmConsumeTook, r.restoreTook = median(consumes), median(warmConsumes), median(restores)
	r.consumeRate = float64(records) / r.consumeTook.Seconds()
	r.warmConsumeRate = float64(records) / r.warmConsumeTook.Seconds()
	return nil
}

// median returns the median of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	report chan childReport // the BENCH line, when the child printed one
	exited chan struct{}
	log    string
}

func (b *bench) start(s spec, logName string) (*child, error) {
	arg, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(b.dir, logName)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := b.command(s, string(arg))
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("bench: start %s: %w", s.App, err)
	}
	ch := &child{cmd: cmd, report: make(chan childReport, 1), exited: make(chan struct{}), log: logPath}
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "BENCH "); ok {
				var rep childReport
				if json.Unmarshal([]byte(rest), &rep) == nil {
					ch.report <- rep
				}
			}
		}
		cmd.Wait()
		close(ch.exited)
	}()
	return ch, nil
}

// stop asks the child to stop (SIGTERM), waits for it, and returns its report and peak RSS.
func (ch *child) stop() (childReport, int64, error) {
	ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.exited:
	case <-time.After(60 * time.Second):
		ch.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines' stacks go to its log
		select {
		case <-ch.exited:
		case <-time.After(5 * time.Second):
			ch.cmd.Process.Kill()
			<-ch.exited
		}
		return childReport{}, 0, fmt.Errorf("bench: %s did not stop within 60s (log: %s)", ch.cmd.Args[0], ch.log)
	}
	return ch.result()
}

func (ch *child) result() (childReport, int64, error) {
	var rss int64
	if ru, ok := ch.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	var rep childReport
	select {
	case rep = <-ch.report:
	default:
	}
	switch {
	case rep.Error != "":
		return rep, rss, fmt.Errorf("bench: child failed: %s (log: %s)", rep.Error, ch.log)
	case !ch.cmd.ProcessState.Success():
		return rep, rss, fmt.Errorf("bench: child %s (log: %s)", ch.cmd.ProcessState, ch.log)
	}
	return rep, rss, nil
}

// runToEnd runs a child that stops by itself (restore mode) and returns its report.
func (b *bench) runToEnd(s spec, logName string) (childReport, error) {
	ch, err := b.start(s, logName)
	if err != nil {
		return childReport{}, err
	}
	select {
	case <-ch.exited:
	case <-time.After(b.timeout):
		ch.cmd.Process.Kill()
		<-ch.exited
		return childReport{}, fmt.Errorf("bench: %s did not finish within %s (log: %s)", s.App, b.timeout, ch.log)
	}
	rep, _, err := ch.result()
	return rep, err
}

// follow watches the output topic's end offsets until they hold n records, and returns the
// time from start to the last, the rate from 5% of n to n, and the CPU time per record the
// child and the broker spent over that span (0 where /proc is missing).
func (b *bench) follow(ctx context.Context, ch *child, topic string, n int) (took time.Duration, rate, childCPU, brokerCPU float64, err error) {
	begin := time.Now()
	deadline := begin.Add(b.timeout)
	var (
		t5   time.Time
		at5  int64
		cpu5 cpuMark
		ok5  bool
	)
	for {
		select {
		case <-ch.exited:
			_, _, err := ch.result()
			return 0, 0, 0, 0, fmt.Errorf("bench: child exited early: %v (log: %s)", err, ch.log)
		case <-ctx.Done():
			return 0, 0, 0, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		ends, err := b.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			continue
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		now := time.Now()
		if t5.IsZero() && sum >= int64(n)/20 {
			t5, at5 = now, sum
			cpu5, ok5 = markCPU(ch.cmd.Process.Pid, b.brokerPID)
		}
		if sum >= int64(n) {
			recs := float64(sum - at5)
			rate = recs / now.Sub(t5).Seconds()
			if cpu, ok := markCPU(ch.cmd.Process.Pid, b.brokerPID); ok && ok5 {
				childCPU = float64((cpu.child - cpu5.child).Microseconds()) / recs
				brokerCPU = float64((cpu.broker - cpu5.broker).Microseconds()) / recs
			}
			return now.Sub(begin), rate, childCPU, brokerCPU, nil
		}
		if now.After(deadline) {
			return 0, 0, 0, 0, fmt.Errorf("bench: %d of %d output records after %s (log: %s)", sum, n, b.timeout, ch.log)
		}
	}
}

// waitCommitted waits until the group app has committed every input offset.
func (b *bench) waitCommitted(ctx context.Context, app string, w *workload) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := b.adm.FetchOffsets(ctx, app)
		if err == nil {
			var sum int64
			resp.Each(func(o kadm.OffsetResponse) {
				if o.Topic == w.topic && o.Err == nil {
					sum += o.At
				}
			})
			if sum >= int64(w.n) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bench: group %s committed %d of %d input offsets", app, sum, w.n)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logStats is what a read of a changelog found.
type logStats struct {
	records, bytes int64
	took           time.Duration
}

// readChangelog reads topic, c's changelog, and checks that its last value of every word is
// w's count.
func (b *bench) readChangelog(ctx context.Context, c contender, topic string, w *workload) (logStats, error) {
	last := make(map[string][]byte, w.distinct)
	var undecoded error
	st, err := b.consume(ctx, topic, func(r *kgo.Record) {
		k, v, err := c.decodeChangelog(r.Key, r.Value)
		if err != nil {
			undecoded = cmp.Or(undecoded, fmt.Errorf("bench: changelog %s partition %d offset %d: %w", topic, r.Partition, r.Offset, err))
		}
		last[string(k)] = v
	})
	if err != nil {
		return st, err
	}
	if undecoded != nil {
		return st, undecoded
	}
	bad := 0
	var example string
	for i, c := range w.counts {
		if c == 0 {
			continue
		}
		k := word(i)
		if got := string(last[k]); got != strconv.Itoa(int(c)) {
			if bad++; bad == 1 {
				example = fmt.Sprintf("%s: %q, want %d", k, got, c)
			}
		}
	}
	if bad > 0 || len(last) != w.distinct {
		return st, fmt.Errorf("bench: changelog %s: %d of %d words wrong (%s), %d words in all", topic, bad, w.distinct, example, len(last))
	}
	return st, nil
}

// consume reads topic from its start to its end offsets (read_committed), passing each
// data record to fn when it is not nil, and counts the records and their bytes.
func (b *bench) consume(ctx context.Context, topic string, fn func(*kgo.Record)) (logStats, error) {
	return consumeTopic(ctx, b.adm, b.brokers, b.timeout, topic, fn)
}

// consumeTopic is consume with a client of its own: a new consumer of brokers, adm for the
// offsets, timeout the longest it reads. Its time starts once the offsets are known and the
// consumer is connected, as a cold restore's starts once its offsets are known: it covers the
// consumer's lookup of the topic's leaders and its fetches.
func consumeTopic(ctx context.Context, adm *kadm.Client, brokers []string, timeout time.Duration, topic string, fn func(*kgo.Record)) (logStats, error) {
	var st logStats
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return st, fmt.Errorf("bench: start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return st, fmt.Errorf("bench: end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(topic, o.Partition); ok && o.Offset > s.Offset {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().At(s.Offset)
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return st, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		return st, fmt.Errorf("bench: reading %s: %w", topic, err)
	}
	begin := time.Now()
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("bench: reading %s: %d partitions unfinished: %w", topic, len(want), err)
		}
		if err := fs.Err(); err != nil && !errors.Is(err, context.Canceled) {
			return st, fmt.Errorf("bench: reading %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				st.records++
				st.bytes += int64(len(r.Key) + len(r.Value))
				if fn != nil {
					fn(r)
				}
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	st.took = time.Since(begin)
	return st, nil
}

// copyDir copies the regular files of the tree src into dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
}
