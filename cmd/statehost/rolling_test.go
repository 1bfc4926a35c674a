package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestRollingRestart restarts the two instances of the word count one after the other
// (SIGTERM, then at once the same state directory again) while sentences arrive, under
// exactly-once. With static membership (the group instance id of the state directory's
// process id) each restarted instance takes its own tasks back within the session timeout:
// the other instance is assigned nothing new and revokes nothing, the restarted one restores
// nothing, and the counts are exact.
func TestRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program, two instances of it, restarted")
	}
	if !kafkacluster.Requested() {
		// kfake rebalances when a static member rejoins a stable group with other join
		// metadata, and a restarted instance's always differs (it owns no partitions
		// yet); Kafka keeps the assignment (KIP-345). In kfake's rebalance a task whose
		// standby is nearer the end than the restarted instance's checkpoint moves to the
		// standby, as it should, and this test, which asserts no rebalance, fails.
		t.Skipf("static membership on Apache Kafka: set %s=1", kafkacluster.EnvVar)
	}
	bin := buildBinary(t)
	buildModules(t)
	dir := t.TempDir()
	addr := startBroker(t, brokerOptions{}).addr
	opts := appOptions{guarantee: "exactly_once", sessionTimeout: 20 * time.Second}
	a := startInstance(t, bin, addr, filepath.Join(dir, "a"), "instance a", opts)
	b := startInstance(t, bin, addr, filepath.Join(dir, "b"), "instance b", opts)
	ins := []*instance{a, b}
	pl := waitPlacement(t, 90*time.Second, "the tasks shared by the two instances",
		func(pl placement) bool { return pl.settled() && pl.balanced() }, ins...)
	t.Logf("before the restarts: %s", pl)

	lines, _ := wordgen.Sentences(20000, 31)
	prod := startProducer(t, addr, producerOptions{every: scaleEvery, timeout: 30 * time.Second,
		opts: []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}}, batchesOf(sentenceRecords(lines), scaleBatch))
	time.Sleep(2 * time.Second)

	all := slices.Clone(ins)
	for i := range ins {
		in, other := ins[i], ins[1-i]
		before := tasksOf(pl, in.name)
		otherEvents := len(moves(other))
		at := time.Now()
		stopClean(t, in.appProcess)
		again := startInstance(t, bin, addr, in.dir, in.name, opts)
		ins[i] = again
		all = append(all, again)
		pl = waitPlacement(t, 60*time.Second, in.name+" running its tasks again",
			func(pl placement) bool { return pl.settled() && slices.Equal(tasksOf(pl, in.name), before) }, ins...)
		t.Logf("%s restarted, its tasks running again after %v: %s", in.name, time.Since(at).Round(time.Millisecond), pl)
		if n := again.restoredRecords(); n != 0 {
			t.Errorf("%s restored %d records after its restart, want none", in.name, n)
		}
		if evs := moves(other); len(evs) != otherEvents {
			t.Errorf("%s saw a rebalance during the restart of %s: %v", other.name, in.name, describeEvents(evs[otherEvents:]))
		}
	}

	produced := values(prod.finish(t, 40*time.Second))
	ref := countWords(produced)
	crashWaitProcessed(t, addr, e2eApp, 2*time.Minute, "sentences", e2eRepart)
	for _, in := range ins {
		stopClean(t, in.appProcess)
	}
	checkExclusive(t, all...)
	checkWordCountTopics(t, addr, ref, true)
}

// tasksOf returns the tasks the instance name runs in pl, sorted.
func tasksOf(pl placement, name string) []string {
	var out []string
	for id, on := range pl.running {
		if slices.Contains(on, name) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// moves returns the events of p that assigned, revoked or lost partitions (a rebalance that
// changes nothing of p's assigns it none).
func moves(p *instance) []runtime.Event {
	var out []runtime.Event
	for _, e := range p.events(runtime.EventPartitionsAssigned, runtime.EventPartitionsRevoked, runtime.EventPartitionsLost) {
		if len(e.Partitions) > 0 {
			out = append(out, e)
		}
	}
	return out
}

func describeEvents(evs []runtime.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s %v", e.Kind, e.Partitions)
	}
	return out
}
