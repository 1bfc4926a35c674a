package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
)

// Zombie fencing (exactly-once): an instance that has lost its partitions cannot commit for
// them. Two instances A and B of the word count share the tasks; A is frozen with SIGSTOP
// while input flows, in the middle of a transaction open on the broker; B takes its tasks over once
// A's session times out; A, resumed, finds out that it lost them and must not commit what it
// had begun. The output and the changelog, read committed, must then hold every count exactly
// once.
//
// Two pause durations, both past the session timeout (subtests of TestFencingPausedInstance):
//   - shorter than the transaction timeout: A comes back with its transaction still open on
//     the broker and tries to finish it; its commit carries a stale group generation.
//   - longer than the transaction timeout: the broker aborts A's open transaction and bumps
//     its producer epoch while A is frozen, so that A's producer comes back fenced
//     (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH); A must reset it (a new transactional
//     producer) or handle the abort as an ordinary one, rejoin the group and run tasks again.

const (
	// fencingSession is the session timeout of the instances: how long the group waits for
	// the frozen A before it gives its tasks to B.
	fencingSession = 2 * time.Second
	// fencingTxnTimeout is the transaction timeout of the instances: transactionTimeout in
	// host/runtime/txn.go, max(10s, 3*commit_interval), with the default commit interval of
	// exactly_once (100ms). The test checks it against the broker's description of A's
	// transaction.
	fencingTxnTimeout = 10 * time.Second
	// The background producer writes fencingBatch sentences every fencingEvery, round robin
	// over the 4 partitions of sentences: every task of A has records to process in every
	// commit interval (100ms), so A is practically always inside a transaction with records.
	fencingBatch = 8
	fencingEvery = 25 * time.Millisecond
	// fencingFreezeAttempts is how many times the test tries to freeze A inside a transaction
	// open on the broker; a miss resumes A at once (a freeze of a few milliseconds, far below
	// the session timeout), and the next attempt comes after a random delay within a commit
	// interval.
	fencingFreezeAttempts = 1000
)

// fencingCase is a subtest of TestFencingPausedInstance: how long A stays frozen.
type fencingCase struct {
	name  string
	pause time.Duration
}

// timesOut reports whether the broker aborts A's transaction on its timeout while A is
// frozen.
func (c fencingCase) timesOut() bool { return c.pause > fencingTxnTimeout }

// fenceRunning returns the tasks ("tokenize_0") that run according to events: a task_running
// and no task_closed since.
func fenceRunning(events []runtime.Event) map[string]bool {
	running := map[string]bool{}
	for _, e := range events {
		id := taskName(e.Processor, e.Partition)
		switch e.Kind {
		case runtime.EventTaskRunning:
			running[id] = true
		case runtime.EventTaskClosed:
			delete(running, id)
		}
	}
	return running
}

// fenceTaskInput returns the input partition of a task of the word count.
func fenceTaskInput(task string) string {
	proc, part, _ := strings.Cut(task, "_")
	if proc == "tokenize" {
		return "sentences/" + part
	}
	return e2eRepart + "/" + part
}

// fenceAssigned returns the partitions ("sentences/0") of the partitions_assigned events.
func fenceAssigned(events []runtime.Event) map[string]bool {
	out := map[string]bool{}
	for _, e := range ofKinds(events, runtime.EventPartitionsAssigned) {
		for topic, ps := range e.Partitions {
			for _, p := range ps {
				out[fmt.Sprintf("%s/%d", topic, p)] = true
			}
		}
	}
	return out
}

// startFencingApp starts `statehost run` as startApp does, with --log-level
// $STATEHOST_FENCING_LOG_LEVEL when set (debug shows the client's transaction and group
// steps); then a failed test writes each instance's logs to a file instead of the test log.
func startFencingApp(t *testing.T, bin, cfg, name string) *appProcess {
	t.Helper()
	level := os.Getenv("STATEHOST_FENCING_LOG_LEVEL")
	if level == "" {
		return startApp(t, bin, cfg, name)
	}
	p := startApp(t, bin, cfg, name, "--log-level", level)
	p.logFile = filepath.Join(os.TempDir(), strings.NewReplacer("/", "_", " ", "-").Replace(t.Name()+"-"+name)+".log")
	return p
}

// TestFencingPausedInstance freezes an instance with SIGSTOP in the middle of a transaction,
// lets the other take over its tasks, resumes it, and checks that the resumed zombie could
// not commit for the partitions it lost: it reports the aborted transaction or the lost
// partitions, and the output and the changelog, read committed, hold every count exactly
// once. It does so for a pause shorter than the transaction timeout (A's transaction is still
// open when A resumes) and for one longer (the broker aborted it and fenced A's producer).
func TestFencingPausedInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin := buildBinary(t)
	buildModules(t)
	for _, c := range []fencingCase{
		{name: "pause_8s_within_txn_timeout", pause: 8 * time.Second},
		{name: "pause_13s_past_txn_timeout", pause: 13 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) { testFencingPause(t, bin, c) })
	}
}

// fenceDescribeTxn returns the broker's description of the transaction of the transactional
// id.
func fenceDescribeTxn(t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("describe the transaction of %s: %v", id, err)
	}
	d, ok := ds[id]
	switch {
	case !ok:
		t.Fatalf("describe the transaction of %s: not in the response", id)
	case d.Err != nil:
		t.Fatalf("describe the transaction of %s: %v", id, d.Err)
	}
	return d
}

// fenceTxnString describes a transaction in a line: its state, producer and epoch, age and
// partitions.
func fenceTxnString(d kadm.DescribedTransaction) string {
	var parts []string
	d.Topics.Each(func(topic string, p int32) { parts = append(parts, fmt.Sprintf("%s/%d", topic, p)) })
	slices.Sort(parts)
	s := fmt.Sprintf("%s, producer %d epoch %d", d.State, d.ProducerID, d.ProducerEpoch)
	if d.StartTimestamp >= 0 {
		s += fmt.Sprintf(", began %v ago", time.Since(time.UnixMilli(d.StartTimestamp)).Round(time.Millisecond))
	}
	if len(parts) > 0 {
		s += fmt.Sprintf(", partitions %v", parts)
	}
	return s
}

// testFencingPause runs one case of TestFencingPausedInstance on a broker of its own.
func testFencingPause(t *testing.T, bin string, c fencingCase) {
	if c.pause <= fencingSession {
		t.Fatalf("a pause of %v does not outlast the session timeout %v", c.pause, fencingSession)
	}
	dir := t.TempDir()
	broker := startBroker(t, brokerOptions{})
	addr := broker.addr
	// No commit_interval: exactly_once commits every 100ms by default.
	fencing := appOptions{guarantee: "exactly_once", sessionTimeout: fencingSession}
	cfgA := writeAppConfigWith(t, filepath.Join(dir, "a"), addr, fencing)
	cfgB := writeAppConfigWith(t, filepath.Join(dir, "b"), addr, fencing)
	admCl := testClient(t, addr)
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	t0 := time.Now()
	mark := func(format string, args ...any) {
		t.Helper()
		t.Logf("%7.2fs  %s", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	if c.timesOut() {
		mark("A frozen %v, longer than the transaction timeout %v: the broker aborts its transaction and fences its producer", c.pause, fencingTxnTimeout)
	} else {
		mark("A frozen %v, shorter than the transaction timeout %v: its transaction is still open when it resumes", c.pause, fencingTxnTimeout)
	}

	a := startFencingApp(t, bin, cfgA, "instance A")
	a.waitTasks(t, 60*time.Second)
	mark("A runs the %d tasks", e2eTasks)
	t.Cleanup(func() { syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT) }) // before the kill
	var txnA string
	for _, e := range a.events(runtime.EventProducerReady) {
		if e.TransactionalID != "" {
			txnA = e.TransactionalID
			break
		}
	}
	if txnA == "" {
		t.Fatal("A wrote no producer_ready event with its transactional id")
	}

	all, _ := wordgen.Sentences(200000, 13)
	prod := startProducer(t, addr, producerOptions{every: fencingEvery, timeout: 30 * time.Second, opts: []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}},
		batchesOf(sentenceRecords(all), fencingBatch))
	time.Sleep(2 * time.Second)
	mark("A processed alone; %d sentences produced", len(prod.records()))

	b := startFencingApp(t, bin, cfgB, "instance B")
	mark("B started")
	var ownedA, ownedB map[string]bool
	a.waitFor(t, 90*time.Second, "the tasks shared by A and B", func() bool {
		if b.exited() {
			t.Fatalf("B exited %d", b.code)
		}
		ownedA, ownedB = fenceRunning(a.events()), fenceRunning(b.events())
		if len(ownedA) == 0 || len(ownedB) == 0 || len(ownedA)+len(ownedB) != e2eTasks {
			return false
		}
		for id := range ownedB {
			if ownedA[id] {
				return false
			}
		}
		return true
	})
	mark("tasks shared: A runs %v, B runs %v", slices.Sorted(maps.Keys(ownedA)), slices.Sorted(maps.Keys(ownedB)))
	time.Sleep(2 * time.Second)

	// Freeze A at a random moment of a commit interval; the broker tells whether A froze
	// inside a transaction it had begun there (partitions added: A was committing); if not, A
	// is resumed at once and frozen again.
	var (
		nB, nA int // events of B and A so far
		logsA  int // log lines of A so far
		paused time.Time
		frozen kadm.DescribedTransaction
		misses int
	)
	for attempt := 1; ; attempt++ {
		if len(fenceRunning(a.events())) == 0 {
			// A froze past its transaction's timeout in a missed attempt (on a loaded machine
			// the broker's answer can take that long), or its commit failed otherwise: its
			// producer is replaced and it revives its tasks. The case needs them running.
			mark("A runs no task (its transaction failed after freeze %d); waiting for it to run them again", attempt-1)
			a.waitFor(t, 60*time.Second, "A running its tasks again", func() bool { return len(fenceRunning(a.events())) > 0 })
		}
		time.Sleep(time.Duration(rand.Int64N(int64(100 * time.Millisecond))))
		nB = len(b.events())
		if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		paused = time.Now()
		frozen = fenceDescribeTxn(t, adm, txnA)
		if got := time.Duration(frozen.TimeoutMillis) * time.Millisecond; got != fencingTxnTimeout {
			t.Fatalf("A's transaction timeout is %v on the broker, want %v: the pauses of the subtests no longer fall on either side of it", got, fencingTxnTimeout)
		}
		// Inside a transaction, and one that expires on the intended side of the pause's end
		// (it began at most a commit interval or so before the freeze).
		inside := frozen.State == "Ongoing" && len(frozen.Topics) > 0 && frozen.StartTimestamp >= 0
		if inside {
			expires := time.UnixMilli(frozen.StartTimestamp).Add(fencingTxnTimeout)
			inside = c.timesOut() == expires.Before(paused.Add(c.pause))
		}
		if inside {
			time.Sleep(200 * time.Millisecond) // what A wrote before it froze reaches its files
			nA, logsA = len(a.events()), len(a.logLines())
			break
		}
		if attempt == fencingFreezeAttempts {
			t.Fatalf("A was not frozen inside a suitable transaction in %d attempts, the last: %s", attempt, fenceTxnString(frozen))
		}
		if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		misses++
	}
	mark("A frozen inside its transaction after %d freezes outside one", misses)
	ownedA = fenceRunning(a.events())
	if len(ownedA) == 0 {
		t.Fatal("A runs no task any more before the pause")
	}
	lostParts := map[string]bool{}
	for id := range ownedA {
		lostParts[fenceTaskInput(id)] = true
	}
	mark("SIGSTOP A (running %v, input partitions %v); %d sentences produced",
		slices.Sorted(maps.Keys(ownedA)), slices.Sorted(maps.Keys(lostParts)), len(prod.records()))
	mark("A's transaction on the broker: %s; it expires %v after the pause", fenceTxnString(frozen),
		time.UnixMilli(frozen.StartTimestamp).Add(fencingTxnTimeout).Sub(paused).Round(time.Millisecond))

	var assignedAt, takenAt, abortedAt time.Duration
	for {
		eventsB := b.events()[nB:]
		if assignedAt == 0 {
			got := fenceAssigned(eventsB)
			covered := true
			for tp := range lostParts {
				covered = covered && got[tp]
			}
			if covered {
				assignedAt = time.Since(paused)
				mark("B was assigned A's partitions %v after %v", slices.Sorted(maps.Keys(lostParts)), assignedAt.Round(time.Millisecond))
			}
		}
		if takenAt == 0 && len(fenceRunning(b.events())) == e2eTasks {
			takenAt = time.Since(paused)
			mark("B runs the %d tasks, %v after the pause", e2eTasks, takenAt.Round(time.Millisecond))
		}
		if abortedAt == 0 {
			if d := fenceDescribeTxn(t, adm, txnA); d.ProducerEpoch != frozen.ProducerEpoch || d.State != "Ongoing" {
				abortedAt = time.Since(paused)
				mark("the broker ended A's transaction %v after the pause: %s", abortedAt.Round(time.Millisecond), fenceTxnString(d))
			}
		}
		if b.exited() {
			t.Fatalf("B exited %d while A was frozen", b.code)
		}
		if assignedAt != 0 && time.Since(paused) >= c.pause {
			break
		}
		if time.Since(paused) > 60*time.Second {
			t.Fatalf("B was not assigned A's partitions %v within 60s of the pause", slices.Sorted(maps.Keys(lostParts)))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The premise of the case, on the broker: A's transaction is open still, or it was
	// aborted on its timeout and A's producer epoch bumped.
	before := fenceDescribeTxn(t, adm, txnA)
	mark("A's transaction on the broker before SIGCONT: %s", fenceTxnString(before))
	timedOut := strings.Contains(broker.log.String(), "txn timeout abort: txn_id="+txnA+" ")
	if c.timesOut() {
		if before.ProducerEpoch <= frozen.ProducerEpoch || before.State == "Ongoing" {
			t.Errorf("the broker did not abort A's transaction on its timeout and bump its epoch while A was frozen: %s (frozen at epoch %d)",
				fenceTxnString(before), frozen.ProducerEpoch)
		}
		if !timedOut && broker.cluster == nil { // kfake's log line; Kafka's logs are its own
			t.Errorf("the broker logged no \"txn timeout abort\" for A's transactional id %s", txnA)
		}
	} else if before.State != "Ongoing" || before.ProducerEpoch != frozen.ProducerEpoch {
		t.Errorf("A's transaction did not stay open while A was frozen: %s (frozen at epoch %d)", fenceTxnString(before), frozen.ProducerEpoch)
	}

	if n := len(a.events()) - nA; n != 0 {
		t.Errorf("A wrote %d events while frozen", n)
	}
	if n := len(a.logLines()) - logsA; n != 0 {
		t.Errorf("A logged %d lines while frozen", n)
	}
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	mark("SIGCONT A after %v frozen; %d sentences produced", resumed.Sub(paused).Round(time.Millisecond), len(prod.records()))

	// The zombie finds out: its commit is refused (transaction_aborted), or the group tells it
	// that its partitions are gone (partitions_lost).
	fenced := func() []runtime.Event {
		return ofKinds(a.events()[nA:], runtime.EventTransactionAborted, runtime.EventPartitionsLost)
	}
	// Past the timeout, A must report the aborted transaction (checked below), which may come
	// some time after partitions_lost: wait for that event itself.
	reported := func(found []runtime.Event) bool {
		if !c.timesOut() {
			return len(found) > 0
		}
		return len(ofKinds(found, runtime.EventTransactionAborted)) > 0
	}
	deadline := time.Now().Add(60 * time.Second)
	for !reported(fenced()) && !a.exited() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // both events come when both do (shown below, not checked)
	found := fenced()
	for _, e := range found {
		mark("A: %s: reason=%v error=%v partitions=%v producer_reset=%v", e.Kind, e.Reason, e.Error, e.Partitions, e.ProducerReset)
	}
	if len(found) == 0 {
		t.Errorf("A wrote neither transaction_aborted nor partitions_lost after SIGCONT (within %v, or before it exited)",
			time.Since(resumed).Round(time.Millisecond))
	}

	// Informational: whether the broker aborted A's transaction on its timeout (A was
	// frozen inside it and did not end it in time itself).
	if timedOut {
		mark("the broker aborted a transaction of A (%s) on its timeout", txnA)
	}

	// A rejoins the group and gets tasks again, or (within the transaction timeout only)
	// exits cleanly.
	deadline = time.Now().Add(90 * time.Second)
	rejoined := false
	for !a.exited() {
		if len(ofKinds(a.events()[nA:], runtime.EventTaskRunning)) > 0 {
			rejoined = true
			mark("A runs tasks again: %v", slices.Sorted(maps.Keys(fenceRunning(a.events()))))
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("A runs no task within 90s of SIGCONT")
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.exited() {
		mark("A exited %d after SIGCONT: %s", a.code, lastError(a))
		if a.code != 0 {
			t.Errorf("A exited %d after SIGCONT, want it to go on or exit 0: %s", a.code, lastError(a))
		} else if c.timesOut() {
			t.Errorf("A exited 0 after SIGCONT, want it to rejoin the group with a new transactional producer and run tasks again")
		}
	}
	fenceLogResumed(t, a, logsA, resumed)

	if c.timesOut() {
		// A's producer was fenced: it must have found out through an aborted transaction,
		// reset (a new transactional producer) or ordinary.
		aborted := ofKinds(found, runtime.EventTransactionAborted)
		switch {
		case len(aborted) == 0:
			t.Errorf("A's producer was fenced, but A wrote no transaction_aborted after SIGCONT")
		case slices.ContainsFunc(aborted, func(e runtime.Event) bool { return e.ProducerReset }):
			mark("A reset its fenced transactional producer (transaction_aborted with producer_reset)")
		default:
			mark("A handled its fenced producer as an ordinary abort")
		}
		if rejoined {
			ready := len(ofKinds(a.events()[nA:], runtime.EventProducerReady))
			mark("A wrote producer_ready %d times after SIGCONT; its transactional id on the broker: %s",
				ready, fenceTxnString(fenceDescribeTxn(t, adm, txnA)))
		}
	}

	time.Sleep(2 * time.Second)
	lines := values(prod.finish(t, 60*time.Second))
	mark("producer stopped after %d sentences", len(lines))
	if b.exited() {
		t.Fatalf("B exited %d: %s", b.code, lastError(b))
	}
	crashWaitProcessed(t, addr, e2eApp, 120*time.Second, "sentences", e2eRepart)
	mark("the group processed all its input: A runs %v, B runs %v",
		slices.Sorted(maps.Keys(fenceRunning(a.events()))), slices.Sorted(maps.Keys(fenceRunning(b.events()))))

	for _, p := range []*appProcess{a, b} {
		warns := map[string]int{}
		for _, l := range p.logLines() {
			if l.Level == "warn" || l.Level == "error" {
				if warns[l.Message]++; warns[l.Message] <= 3 {
					t.Logf("%s: %s", p.name, l.raw)
				}
			}
		}
		for msg, n := range warns {
			if n > 3 {
				t.Logf("%s: %d more lines %q", p.name, n-3, msg)
			}
		}
	}
	for _, p := range []*appProcess{a, b} {
		if p.exited() {
			continue
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0: %s", p.name, code, lastError(p))
		} else {
			mark("%s stopped with exit 0", p.name)
		}
	}

	ref := map[string]int{}
	for _, s := range lines {
		for _, w := range strings.Fields(s) {
			ref[w]++
		}
	}
	checkWordCountTopics(t, addr, ref, true)
	mark("output and changelog checked: %d sentences, %d words", len(lines), len(ref))
}

// fenceLogResumed logs what A logged from SIGCONT on (from its line from), debug lines
// left out, each with its time since resumed.
func fenceLogResumed(t *testing.T, a *appProcess, from int, resumed time.Time) {
	t.Helper()
	const most = 60
	shown, skipped := 0, 0
	for _, l := range a.logLines()[from:] {
		if l.Level == "debug" || l.Level == "trace" {
			continue
		}
		if shown == most {
			skipped++
			continue
		}
		shown++
		at := "?"
		if !l.Time.IsZero() {
			at = fmt.Sprintf("%+.3fs", l.Time.Sub(resumed).Seconds())
		}
		t.Logf("A after SIGCONT %s: %s", at, l.raw)
	}
	if skipped > 0 {
		t.Logf("A after SIGCONT: %d more lines", skipped)
	}
}
