package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
)

// The crash-loop tests run the word count as a process next to a separate broker process
// while a producer writes sentences, SIGKILL it at random moments and restart it, many times;
// then they run it once more to the end and compare the counts in the store, in the changelog
// and in the output topic with the reference. After each kill they check that the restart
// restored at most the changelog tail beyond the task's last checkpoint: no full restore.
//
// The default run is short (10 kills, a few thousand sentences). A longer run:
//
//	go test ./cmd/statehost -run TestCrashLoop -v -crashloop.kills=50 -crashloop.sentences=100000
//
// -crashloop.seed replays the same kill moments (the moments only: what the app was doing
// then depends on the machine).
var (
	crashKills     = flag.Int("crashloop.kills", 10, "crash-loop tests: how many times the app is SIGKILLed")
	crashSentences = flag.Int("crashloop.sentences", 4000, "crash-loop tests: how many sentences the producer writes")
	crashSeed      = flag.Uint64("crashloop.seed", 0, "crash-loop tests: seed of the kill moments (0: from the clock, logged)")
)

// The kill moments. A kill comes either shortly after the start, before the app has joined
// the consumer group (it is loading its plugins then: about 150 ms on a small machine), or a
// random moment after the group assigned it its partitions: while it restores, commits,
// processes. Never in between, while it waits in the group's JoinGroup: the broker (kfake)
// arms a member's session timer only when its JoinGroup response is delivered, so a member
// killed in that window stays in the group for the whole rebalance timeout (60 s) instead of
// its session timeout, and stalls the next start that long. An early kill that the app outruns
// (it writes its running event, and joins, before the kill moment) waits for the assignment
// instead; the event is read from the app's events file a moment after it is written, so a
// kill may still, rarely, land in that window (the final run then takes a minute longer,
// within its bounds).
const (
	crashMinEarly       = 20 * time.Millisecond  // a kill after the start: from
	crashMaxEarly       = 120 * time.Millisecond // to
	crashMaxAfterAssign = 2 * time.Second        // a kill after the assignment: up to
	crashPartition      = 3                      // partitions of the repartition topic, the count tasks and the changelog
)

// TestCrashLoopExactlyOnce: under exactly_once, after the kills the store, the changelog
// (read_committed) and the output topic (read_committed) hold exactly the reference counts,
// and the output has, for every word, exactly the counts 1, 2, ..., n in order.
func TestCrashLoopExactlyOnce(t *testing.T) { crashLoop(t, "exactly_once") }

// TestCrashLoopAtLeastOnce: under at_least_once, after the kills no word is under-counted in
// the store, the changelog or the output topic.
func TestCrashLoopAtLeastOnce(t *testing.T) { crashLoop(t, "at_least_once") }

// crashRun is one start of the app in the loop and what the test saw of it.
type crashRun struct {
	n          int
	tails      map[int32]crashTail // computed just before the start
	anchor     string              // what killAfter counts from; "" for the final run, stopped with SIGTERM
	anchorAt   time.Time           // when the anchor was seen
	killAfter  time.Duration       // the kill's delay after the anchor
	sinceStart time.Duration       // and after the start
	committed  int64               // sentences committed by the group after the kill
	produced   int64               // of those produced then
	phase      string              // what the app was doing when it was killed
	restored   map[int32]int64     // records of the first restore_done of each store partition
	startedAt  map[int32]int64     // offset of the first restore_started of each store partition
}

func crashLoop(t *testing.T, guarantee string) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program, and kills it many times")
	}
	began := time.Now()
	exact := guarantee == "exactly_once"
	bin := buildBinary(t)
	buildModules(t)
	dir := t.TempDir()
	broker := startBroker(t, brokerOptions{})
	addr := broker.addr
	// exactly_once keeps its default commit interval, 100ms.
	opts := appOptions{guarantee: guarantee, sessionTimeout: 2 * time.Second}
	if guarantee == "at_least_once" {
		opts.commitInterval = 200 * time.Millisecond
	}
	cfg := writeAppConfigWith(t, dir, addr, opts)
	stateDir := appStateDir(dir)

	kills, n, seed := *crashKills, *crashSentences, *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	lines, ref := wordgen.Sentences(n, 17)
	words := 0
	for _, c := range ref {
		words += c
	}
	t.Logf("%s: %d kills, %d sentences (%d words, %d distinct), seed %d (-crashloop.seed=%d replays the kill moments)",
		guarantee, kills, n, words, len(ref), seed, seed)

	// The producer does not wait for the first app to create the input topic.
	cl := testClient(t, addr)
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 4, 1, nil, "sentences"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	// The sentences arrive in small batches spread over about the time the kill loop takes
	// (2.5 s a start), so that kills hit while input arrives and is processed.
	batches := max(1, kills*25)
	prod := startProducer(t, addr, producerOptions{every: 100 * time.Millisecond, opts: []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}},
		batchesOf(sentenceRecords(lines), (n+batches-1)/batches))

	var runs []*crashRun
	for i := 1; i <= kills; i++ {
		run := &crashRun{n: i, tails: crashTails(t, addr, stateDir)}
		runs = append(runs, run)
		start := time.Now()
		app := startApp(t, bin, cfg, fmt.Sprintf("run %d", i))
		run.anchorAt = start
		switch {
		case i == 1:
			// The first start compiles the plugins (seconds on a small machine) into the
			// state directory's cache; a kill before it is written would leave every later
			// start compiling again, and killed before it runs anything. The first kill
			// comes a random moment after every task of the first run runs.
			app.waitTasks(t, 60*time.Second)
			run.anchor, run.anchorAt = "its tasks running", time.Now()
			run.killAfter = time.Duration(rng.Int64N(int64(crashMaxAfterAssign)))
		case rng.IntN(4) == 0:
			run.anchor = "the start"
			run.killAfter = crashMinEarly + time.Duration(rng.Int64N(int64(crashMaxEarly-crashMinEarly)))
			// A fast machine loads the plugins sooner than the kill moment: once the app
			// runs (its running event) it joins the group, and the kill waits for the
			// assignment instead (see crashMaxEarly).
			if crashWaitEvent(app, runtime.EventRunning, time.Until(start.Add(run.killAfter))) {
				crashWaitAssigned(t, app, run, rng)
			}
		default:
			crashWaitAssigned(t, app, run, rng)
		}
		select {
		case <-app.done:
			t.Fatalf("%s exited %d by itself, %v before its kill", app.name, app.code, run.killAfter)
		case <-time.After(time.Until(run.anchorAt.Add(run.killAfter))):
		}
		run.phase = crashPhase(app)
		run.sinceStart = time.Since(start)
		if err := app.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("%s: SIGKILL: %v", app.name, err)
		}
		if code := app.wait(t, 30*time.Second); code != -1 {
			t.Fatalf("%s exited %d after SIGKILL, want death by the signal", app.name, code)
		}
		crashCheckRestores(t, run, app)
		run.committed, run.produced = crashInputProgress(t, addr)
		t.Logf("%s", run)
	}

	// The last run processes everything and stops cleanly.
	final := &crashRun{n: kills + 1, tails: crashTails(t, addr, stateDir)}
	runs = append(runs, final)
	app := startApp(t, bin, cfg, "final run")
	prod.wait(t, 5*time.Minute)
	app.waitTasks(t, 90*time.Second)
	crashWaitProcessed(t, addr, e2eApp, 3*time.Minute, "sentences", e2eRepart)
	crashCheckRestores(t, final, app)
	stopClean(t, app)
	t.Logf("%s", final)
	crashLogSummary(t, runs)

	// The store, read from the state directory of the stopped app.
	partitions := []int32{0, 1, 2}
	crashCompareCounts(t, "store counts", crashStoreCounts(t, stateDir, partitions), ref, exact)

	// The changelog and the output topic, read_committed once no transaction is open.
	checkWordCountTopics(t, addr, ref, exact)
	t.Logf("%s with %d kills and %d sentences took %v", guarantee, kills, n, time.Since(began).Round(time.Millisecond))
}

// crashWaitAssigned waits for the app's partitions_assigned event and makes the run's kill
// come a random moment after it.
func crashWaitAssigned(t *testing.T, app *appProcess, run *crashRun, rng *rand.Rand) {
	t.Helper()
	app.waitFor(t, 90*time.Second, "partitions assigned", func() bool { return len(app.events(runtime.EventPartitionsAssigned)) > 0 })
	run.anchor, run.anchorAt = "its partitions assigned", time.Now()
	run.killAfter = time.Duration(rng.Int64N(int64(crashMaxAfterAssign)))
}

// crashWaitEvent reports whether the app writes an event of the kind within d, or has already.
func crashWaitEvent(app *appProcess, kind runtime.EventKind, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for len(app.events(kind)) == 0 {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// crashPhase says what the app was doing from its events: "starting" before running,
// "joining" until it is assigned partitions (the group waits for the session of the killed
// member to time out), "restoring" until every count task restored its store and every task
// runs, "processing" after.
func crashPhase(app *appProcess) string {
	switch {
	case len(app.events(runtime.EventRunning)) == 0:
		return "starting"
	case len(app.events(runtime.EventPartitionsAssigned)) == 0:
		return "joining"
	}
	_, done := app.restores()
	restored := map[int32]bool{}
	for _, l := range done {
		restored[l.Partition] = true
	}
	running := map[string]bool{}
	for _, l := range app.events(runtime.EventTaskRunning) {
		running[taskName(l.Processor, l.Partition)] = true
	}
	if len(restored) < crashPartition || len(running) < e2eTasks {
		return fmt.Sprintf("restoring (%d/%d stores restored, %d/%d tasks running)", len(restored), crashPartition, len(running), e2eTasks)
	}
	return "processing"
}

// crashCheckRestores reads the restores of the store counts of the run's events and checks each
// completed one against the changelog tail computed before the run started: it restored at
// most the tail, and it started after the exported checkpoint. Only the first restore of each
// partition in a run is compared: a later one would follow records processed in the run.
func crashCheckRestores(t *testing.T, run *crashRun, app *appProcess) {
	t.Helper()
	run.restored, run.startedAt = map[int32]int64{}, map[int32]int64{}
	started, done := app.restores()
	for _, l := range started {
		if _, ok := run.startedAt[l.Partition]; ok {
			t.Logf("%s: store partition %d restored again (from %d to %d)", app.name, l.Partition, l.Offset, l.EndOffset)
			continue
		}
		run.startedAt[l.Partition] = l.Offset
		if tail, ok := run.tails[l.Partition]; ok && tail.checkpoint >= 0 && l.Offset < tail.checkpoint+1 {
			t.Errorf("%s: restore of store partition %d started at offset %d, before its exported checkpoint %d: the store lost what the .checkpoint file said it held",
				app.name, l.Partition, l.Offset, tail.checkpoint)
		}
	}
	for _, l := range done {
		if _, ok := run.restored[l.Partition]; ok {
			continue
		}
		run.restored[l.Partition] = l.Records
		tail := run.tails[l.Partition] // none when the changelog did not exist yet: 0
		if l.Records > tail.tail {
			t.Errorf("%s: store partition %d restored %d records, more than the changelog tail beyond its checkpoint (%s): a full restore?",
				app.name, l.Partition, l.Records, tail)
		}
	}
}

func (r *crashRun) String() string {
	var b strings.Builder
	if r.anchor != "" {
		fmt.Fprintf(&b, "run %d: SIGKILL %v after %s (%v after the start), %s, %d of %d sentences committed;", r.n,
			r.killAfter.Round(time.Millisecond), r.anchor, r.sinceStart.Round(time.Millisecond), r.phase, r.committed, r.produced)
	} else {
		fmt.Fprintf(&b, "run %d (final, SIGTERM):", r.n)
	}
	for p := range int32(crashPartition) {
		if tail, ok := r.tails[p]; ok {
			fmt.Fprintf(&b, " p%d: %s, restored ", p, tail)
		} else {
			fmt.Fprintf(&b, " p%d: no changelog yet, restored ", p)
		}
		if n, ok := r.restored[p]; ok {
			fmt.Fprintf(&b, "%d from %d;", n, r.startedAt[p])
		} else if off, ok := r.startedAt[p]; ok {
			fmt.Fprintf(&b, "? (started at %d, not done);", off)
		} else {
			b.WriteString("? (not started);")
		}
	}
	return strings.TrimSuffix(b.String(), ";")
}

// crashLogSummary logs what the restores replayed over the loop against the tails.
func crashLogSummary(t *testing.T, runs []*crashRun) {
	t.Helper()
	var restores, restored, tails int64
	phases := map[string]int{}
	for _, r := range runs {
		if r.anchor != "" {
			phases[strings.SplitN(r.phase, " ", 2)[0]]++
		}
		for p, n := range r.restored {
			restores++
			restored += n
			tails += r.tails[p].tail
		}
	}
	t.Logf("kills by phase: %v; %d completed restores replayed %d records in all, their tails held %d", phases, restores, restored, tails)
}

// crashDiffs reports the differences of one check with a bound on the messages.
type crashDiffs struct {
	t     *testing.T
	check string
	n     int
}

func (d *crashDiffs) errorf(format string, args ...any) {
	d.t.Helper()
	if d.n < 10 {
		d.t.Errorf("%s: %s", d.check, fmt.Sprintf(format, args...))
	}
	d.n++
}

func (d *crashDiffs) done(words int) {
	d.t.Helper()
	if d.n > 0 {
		d.t.Errorf("%s: %d of %d words wrong", d.check, d.n, words)
	}
}

// crashCompareCounts checks got against the reference: equal when exact, otherwise no word
// under-counted; a word the reference lacks is wrong either way.
func crashCompareCounts(t *testing.T, check string, got, ref map[string]int, exact bool) {
	t.Helper()
	d := &crashDiffs{t: t, check: check}
	for _, w := range crashSortedKeys(ref) {
		g, ok := got[w]
		switch {
		case !ok:
			d.errorf("word %q is missing, want %d", w, ref[w])
		case exact && g != ref[w]:
			d.errorf("word %q = %d, want %d", w, g, ref[w])
		case g < ref[w]:
			d.errorf("word %q = %d, under-counted: want at least %d", w, g, ref[w])
		}
	}
	for _, w := range crashSortedKeys(got) {
		if _, ok := ref[w]; !ok {
			d.errorf("word %q = %d is not in the sentences", w, got[w])
		}
	}
	d.done(len(ref))
}

func crashSortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// crashClip shows at most the first and last few elements of a sequence.
func crashClip[V any](s []V) string {
	if len(s) <= 12 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v ... %v (%d in all)", s[:6], s[len(s)-6:], len(s))
}

// crashFirstBreak returns the index of the first value of seq that is not its predecessor plus
// one (starting at 1), or -1.
func crashFirstBreak(seq []int) int {
	for i, v := range seq {
		if v != i+1 {
			return i
		}
	}
	return -1
}

// crashAround returns the elements of s around index i.
func crashAround[V any](s []V, i int) string {
	lo, hi := max(0, i-3), min(len(s), i+4)
	return fmt.Sprintf("[%d:%d] %v", lo, hi, s[lo:hi])
}
