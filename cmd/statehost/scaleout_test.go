package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestScaleOutAndIn runs the word count on one instance while sentences arrive, scales it out
// to three instances and back in to one (SIGTERM), and checks:
//   - with three instances, every task runs on exactly one instance and the instances run 3, 2
//     and 2 tasks; the group's assignment on the broker gives each instance the input
//     partitions of exactly the tasks it runs; the count tasks, whose changelogs are beyond
//     acceptable_recovery_lag, moved only after warmups on the newcomers;
//   - from the logs, no task was ever owned by two instances at once;
//   - after the scale-in the remaining instance runs every task (and is assigned every input
//     partition), and once the input stopped and was processed, its stores, the changelog and
//     the output topic hold exactly the reference counts of the sentences produced, each count
//     once and in order (at_least_once, but every handover was a revocation or a clean stop,
//     both of which commit first: nothing is processed twice).
func TestScaleOutAndIn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program, three instances of it")
	}
	began := time.Now()
	bin := buildBinary(t)
	buildModules(t)
	dir := t.TempDir()
	broker := startBroker(t, brokerOptions{})
	addr := broker.addr
	opts := appOptions{commitInterval: e2eCommit, recoveryLag: scaleRecoveryLag}

	a := startInstance(t, bin, addr, filepath.Join(dir, "a"), "instance a", opts)
	a.waitTasks(t, 60*time.Second)
	// A first burst makes every changelog partition longer than acceptable_recovery_lag (the
	// words are skewed: the smallest partition gets about a tenth of them); then the sentences
	// keep coming until the end of the scale-in.
	preload, _ := wordgen.Sentences(2000, 21)
	produceLines(t, bin, addr, "sentences", preload)
	lines, _ := wordgen.Sentences(20000, 22)
	prod := startProducer(t, addr, producerOptions{every: scaleEvery, timeout: 30 * time.Second, opts: []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}},
		batchesOf(sentenceRecords(lines), scaleBatch))
	deadline := time.Now().Add(60 * time.Second)
	for {
		ends := topicEnds(t, addr, e2eChangelog)
		if len(ends) == crashPartition && slices.Min(slices.Collect(maps.Values(ends))) > scaleRecoveryLag+100 {
			t.Logf("instance a alone: changelog ends %v after %v", ends, time.Since(began).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the changelog partitions did not grow beyond %d records within 60s: %v", scaleRecoveryLag+100, ends)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Scale out.
	outAt := time.Now()
	b := startInstance(t, bin, addr, filepath.Join(dir, "b"), "instance b", opts)
	c := startInstance(t, bin, addr, filepath.Join(dir, "c"), "instance c", opts)
	three := []*instance{a, b, c}
	pl := waitPlacement(t, 90*time.Second, "the tasks shared by the three instances, balanced",
		func(pl placement) bool { return pl.settled() && pl.balanced() && len(pl.standby) == 0 }, three...)
	t.Logf("scaled out in %v: %s", time.Since(outAt).Round(time.Millisecond), pl)
	checkGroupAssignment(t, addr, pl)
	for name, n := range pl.load() {
		if n < 2 || n > 3 {
			t.Errorf("%s runs %d tasks, want 2 or 3 of the 7", name, n)
		}
	}
	var warmups []string
	for _, in := range []*instance{b, c} {
		for _, e := range in.events(runtime.EventWarmupsAssigned) {
			warmups = append(warmups, fmt.Sprintf("%s: %v", in.name, e.Tasks))
		}
	}
	if len(warmups) == 0 {
		t.Error("no newcomer was assigned warmups: the count tasks moved with changelogs beyond acceptable_recovery_lag")
	}
	t.Logf("warmups: %v; records restored by instance b: %d, by c: %d", warmups, b.restoredRecords(), c.restoredRecords())
	// Some input on three instances.
	time.Sleep(2 * time.Second)

	// Scale in, one instance at a time.
	inAt := time.Now()
	stopClean(t, b.appProcess)
	pl = waitPlacement(t, 60*time.Second, "every task running on instances a and c",
		func(pl placement) bool { return pl.settled() && pl.balanced() }, a, c)
	t.Logf("instance b stopped; after %v: %s", time.Since(inAt).Round(time.Millisecond), pl)
	stopClean(t, c.appProcess)
	pl = waitPlacement(t, 60*time.Second, "every task running on instance a",
		func(pl placement) bool { return pl.settled() }, a)
	t.Logf("instance c stopped; scaled in after %v: %s", time.Since(inAt).Round(time.Millisecond), pl)
	checkGroupAssignment(t, addr, pl)

	// Some input on one instance, then the end.
	time.Sleep(time.Second)
	produced := values(prod.finish(t, 40*time.Second))
	ref := countWords(preload, produced)
	t.Logf("produced %d sentences (%d words, %d distinct)", len(preload)+len(produced), wordCount(ref), len(ref))
	crashWaitProcessed(t, addr, e2eApp, 2*time.Minute, "sentences", e2eRepart)
	stopClean(t, a.appProcess)
	checkExclusive(t, three...)

	crashCompareCounts(t, "store counts of instance a", crashStoreCounts(t, appStateDir(a.dir), []int32{0, 1, 2}), ref, true)
	checkWordCountTopics(t, addr, ref, true)
	t.Logf("TestScaleOutAndIn took %v", time.Since(began).Round(time.Millisecond))
}

// standbyPosition returns the next changelog offset that the standby of a count task on st
// applies (at_least_once: the changelog has no control records, so the restore's start plus
// the records it applied), and whether st has that standby.
func standbyPosition(st runtime.Status, part int32) (int64, bool) {
	ts, s, ok := storeStatus(st, "count", part)
	if !ok || ts.State != "standby" {
		return 0, false
	}
	return s.StartOffset + s.Restored, true
}

// countOwners returns, for each count task, the instance that runs it and the one that keeps
// its standby; a task without both is absent.
func countOwners(pl placement) (active, standby map[int32]string) {
	active, standby = map[int32]string{}, map[int32]string{}
	for p := range int32(crashPartition) {
		id := taskName("count", p)
		if len(pl.running[id]) == 1 && len(pl.standby[id]) == 1 && pl.running[id][0] != pl.standby[id][0] {
			active[p], standby[p] = pl.running[id][0], pl.standby[id][0]
		}
	}
	return active, standby
}

// standbysCaughtUp reports whether the standby of every count task has applied its changelog
// up to lag records before the ends.
func standbysCaughtUp(pl placement, ends map[int32]int64, lag int64) bool {
	active, standby := countOwners(pl)
	if len(active) != crashPartition {
		return false
	}
	for p, name := range standby {
		pos, ok := standbyPosition(pl.statuses[name], p)
		if !ok || pos < ends[p]-lag {
			return false
		}
	}
	return true
}

// victimOf returns the instance (of two) whose count tasks have the most changelog records,
// the other one, and the partitions of the count tasks that the first runs.
func victimOf(pl placement, ends map[int32]int64, ins ...*instance) (victim, survivor *instance, parts []int32) {
	held := map[string]int64{}
	for p := range int32(crashPartition) {
		if run := pl.running[taskName("count", p)]; len(run) == 1 {
			held[run[0]] += ends[p] + 1 // +1: a task with an empty changelog counts too
		}
	}
	victim, survivor = ins[0], ins[1]
	if held[ins[1].name] > held[ins[0].name] {
		victim, survivor = ins[1], ins[0]
	}
	for p := range int32(crashPartition) {
		if run := pl.running[taskName("count", p)]; len(run) == 1 && run[0] == victim.name {
			parts = append(parts, p)
		}
	}
	return victim, survivor, parts
}

// takeover is what a survivor restored for the count tasks it took over, after a kill.
type takeover struct {
	status   int64         // records restored by the tasks' active restores, from /v1/status
	events   int64         // from the restore_done events after the kill
	restores []string      // each restore, for the log
	assigned time.Duration // from the kill to the survivor's first assignment after it
}

// takeoverOf reads, from the survivor's status and logs, the active restores of the count
// tasks of parts since the victim died; every one must be done and its task running.
func takeoverOf(t testing.TB, survivor, victim *instance, parts []int32) takeover {
	t.Helper()
	var to takeover
	st := survivor.status(t)
	for _, p := range parts {
		ts, s, ok := storeStatus(st, "count", p)
		switch {
		case !ok:
			t.Errorf("%s: count_%d has no restore of its store counts in the status: %+v", survivor.name, p, ts)
		case ts.State != "running" || !s.Done:
			t.Errorf("%s: count_%d is %s, its restore %+v: want it running after a complete restore", survivor.name, p, ts.State, s)
		default:
			to.status += s.Restored
			to.restores = append(to.restores, fmt.Sprintf("count_%d: %d records from %d", p, s.Restored, s.StartOffset))
		}
	}
	for _, e := range survivor.events() {
		switch {
		case e.Time.Before(victim.killedAt):
		case e.Kind == runtime.EventPartitionsAssigned && to.assigned == 0:
			to.assigned = e.Time.Sub(victim.killedAt)
		case e.Kind == runtime.EventRestoreDone && !e.Standby && e.Store == "counts" && slices.Contains(parts, e.Partition):
			to.events += e.Records
		}
	}
	return to
}

// TestStandbyFailoverKill: with standby_replicas = 1 two instances share the word count, every
// count task running on one of them and followed by a standby on the other. Once the standbys
// have caught up with changelogs of thousands of records, the instance that runs the count
// tasks is SIGKILLed while sentences keep arriving. It checks that:
//   - after the session timeout the survivor runs every task (and the group assigns it every
//     input partition), and its restores of the count tasks it took over applied under a tenth
//     of their changelogs: the standbys had the rest (from /v1/status, and from the
//     restore_done events after the kill);
//   - from the events, no task was ever owned by both instances at once;
//   - once the input stopped and was processed, no word is under-counted in the survivor's
//     stores, in the changelog or in the output (at_least_once: what the killed instance
//     processed after its last commit is processed again, and may be counted twice).
func TestStandbyFailoverKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program, and kills it")
	}
	began := time.Now()
	bin := buildBinary(t)
	buildModules(t)
	dir := t.TempDir()
	broker := startBroker(t, brokerOptions{})
	addr := broker.addr
	opts := appOptions{commitInterval: e2eCommit, sessionTimeout: failoverSession, standbyReplicas: 1}

	a := startInstance(t, bin, addr, filepath.Join(dir, "a"), "instance a", opts)
	a.waitTasks(t, 60*time.Second)
	b := startInstance(t, bin, addr, filepath.Join(dir, "b"), "instance b", opts)
	two := []*instance{a, b}
	pl := waitPlacement(t, 60*time.Second, "the tasks shared by both instances, every count task with a standby on the other",
		func(pl placement) bool {
			active, _ := countOwners(pl)
			return pl.settled() && pl.balanced() && len(active) == crashPartition
		}, two...)
	t.Logf("two instances after %v: %s", time.Since(began).Round(time.Millisecond), pl)
	checkGroupAssignment(t, addr, pl)

	preload, _ := wordgen.Sentences(3000, 31)
	produceLines(t, bin, addr, "sentences", preload)
	preloadWords := wordCount(countWords(preload))
	lines, _ := wordgen.Sentences(20000, 32)
	prod := startProducer(t, addr, producerOptions{every: scaleEvery, timeout: 30 * time.Second, opts: []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}},
		batchesOf(sentenceRecords(lines), scaleBatch))
	// The standbys follow while sentences arrive: they count as caught up within a second of
	// input (about 150 records on the busiest partition) of the end.
	var ends map[int32]int64
	pl = waitPlacement(t, 60*time.Second, "the burst processed and the standbys caught up", func(pl placement) bool {
		ends = topicEnds(t, addr, e2eChangelog)
		return sum(ends) >= int64(preloadWords) && pl.settled() && standbysCaughtUp(pl, ends, 200)
	}, two...)
	victim, survivor, parts := victimOf(pl, ends, two...)
	time.Sleep(time.Second) // the input goes on a little

	ends = topicEnds(t, addr, e2eChangelog)
	var changelog int64
	for _, p := range parts {
		changelog += ends[p]
	}
	victim.killNow(t)
	pl = waitPlacement(t, 60*time.Second, "the survivor running every task", placement.settled, survivor)
	tookOver := time.Since(victim.killedAt)
	checkGroupAssignment(t, addr, pl)
	to := takeoverOf(t, survivor, victim, parts)
	t.Logf("%s killed (it ran count tasks %v, changelog %d records); %s assigned its partitions after %v and ran every task after %v; restored %d records (events: %d): %s",
		victim.name, parts, changelog, survivor.name, to.assigned.Round(time.Millisecond), tookOver.Round(time.Millisecond),
		to.status, to.events, strings.Join(to.restores, ", "))
	if len(parts) == 0 || changelog < 3000 {
		t.Fatalf("the killed instance ran count tasks %v with %d changelog records: the test wants thousands", parts, changelog)
	}
	if to.status*10 >= changelog || to.events*10 >= changelog {
		t.Errorf("the takeover restored %d records (status) and %d (events) of changelogs of %d: not under a tenth, the standbys did not save the restore",
			to.status, to.events, changelog)
	}

	time.Sleep(time.Second) // some input on the survivor alone
	produced := values(prod.finish(t, 40*time.Second))
	ref := countWords(preload, produced)
	t.Logf("produced %d sentences (%d words, %d distinct)", len(preload)+len(produced), wordCount(ref), len(ref))
	crashWaitProcessed(t, addr, e2eApp, 2*time.Minute, "sentences", e2eRepart)
	stopClean(t, survivor.appProcess)
	checkExclusive(t, two...)

	crashCompareCounts(t, "store counts of "+survivor.name, crashStoreCounts(t, appStateDir(survivor.dir), []int32{0, 1, 2}), ref, false)
	checkWordCountTopics(t, addr, ref, false)
	t.Logf("TestStandbyFailoverKill took %v", time.Since(began).Round(time.Millisecond))
}
