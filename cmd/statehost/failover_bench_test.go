package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
)

// failoverKeys is how many distinct words BenchmarkFailover counts before the kill: one
// changelog record each, spread over the 3 count tasks.
var failoverKeys = flag.Int("failover.keys", 300_000, "BenchmarkFailover: distinct words counted before the kill")

// BenchmarkFailover measures a failover of the word count without and with a standby, and
// without and with the removal of dead members (remove_dead_members): two instances
// (session_timeout 6s) count failover.keys distinct words, then the instance whose count tasks
// hold the most state is SIGKILLed. The failover lasts from the kill until a marker word sent
// to every task after the kill comes out of the survivor: the detection (the session timeout,
// or the survivor's judgement and removal), the rebalance, the restores of the killed
// instance's stores, the processing. Each iteration sets everything up anew; only the metrics
// matter (ns/op is 0):
//
//	failover-ms         kill to the last marker's count in the output
//	assigned-ms         kill to the survivor's assignment (the detection and the rebalance)
//	recovery-ms         the survivor's assignment to the last marker's count: failover-ms - assigned-ms
//	restored-records    records the survivor restored for the tasks it took over
//	session-timeout-ms  the instances' session_timeout, the same in both variants
//
//	go test ./cmd/statehost -run '^$' -bench BenchmarkFailover -benchtime 1x
//	STATEHOST_TEST_KAFKA=1 go test ./cmd/statehost -run '^$' -bench BenchmarkFailover -benchtime 3x
func BenchmarkFailover(b *testing.B) {
	for _, removal := range []bool{false, true} {
		for _, standbys := range []int{0, 1} {
			b.Run(fmt.Sprintf("removal=%v/standby=%d", removal, standbys), func(b *testing.B) {
				benchFailover(b, standbys, removal)
			})
		}
	}
}

// benchFailover runs a variant of BenchmarkFailover.
func benchFailover(b *testing.B, standbys int, removal bool) {
	var failover, assigned time.Duration
	var restored int64
	for i := range b.N {
		f := failoverOnce(b, standbys, removal, i)
		failover += f.failover
		assigned += f.assigned
		restored += f.restored
		b.Logf("standby_replicas=%d, remove_dead_members=%v, session_timeout %v: failover %v (assigned after %v), %d records restored of a changelog of %d: %s",
			standbys, removal, failoverSession, f.failover.Round(time.Millisecond), f.assigned.Round(time.Millisecond),
			f.restored, f.changelog, strings.Join(f.restores, ", "))
	}
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(failover.Milliseconds())/n, "failover-ms")
	b.ReportMetric(float64(assigned.Milliseconds())/n, "assigned-ms")
	b.ReportMetric(float64((failover-assigned).Milliseconds())/n, "recovery-ms")
	b.ReportMetric(float64(restored)/n, "restored-records")
	b.ReportMetric(float64(failoverSession.Milliseconds()), "session-timeout-ms")
}

// failoverResult is one failover of BenchmarkFailover.
type failoverResult struct {
	failover, assigned time.Duration
	restored           int64 // from the survivor's status
	changelog          int64 // records in the changelog partitions of the killed instance's count tasks
	restores           []string
}

// failoverOnce runs one failover of BenchmarkFailover with standbys standby replicas, and the
// removal of dead members or not.
func failoverOnce(b *testing.B, standbys int, removal bool, run int) failoverResult {
	b.Helper()
	bin := buildBinary(b)
	buildModules(b)
	dir := b.TempDir()
	broker := startBroker(b, brokerOptions{})
	defer broker.stop(b)
	addr := broker.addr
	opts := appOptions{commitInterval: e2eCommit, sessionTimeout: failoverSession, standbyReplicas: standbys, keepDead: !removal}

	// Both instances run before the words arrive: neither holds state of the other's tasks
	// but through its standbys.
	x := startInstance(b, bin, addr, filepath.Join(dir, "x"), "instance x", opts)
	x.waitTasks(b, 60*time.Second)
	y := startInstance(b, bin, addr, filepath.Join(dir, "y"), "instance y", opts)
	two := []*instance{x, y}
	waitPlacement(b, 60*time.Second, "the tasks shared by both instances", func(pl placement) bool {
		active, _ := countOwners(pl)
		return pl.settled() && pl.balanced() && (standbys == 0 || len(active) == crashPartition)
	}, two...)

	began := time.Now()
	cl := testClient(b, addr, kgo.DefaultProduceTopic("sentences"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	defer cl.Close()
	const perSentence = 10
	var recs []*kgo.Record
	for k := 0; k < *failoverKeys; k += perSentence {
		var s strings.Builder
		for j := k; j < min(k+perSentence, *failoverKeys); j++ {
			fmt.Fprintf(&s, "key%07d ", j)
		}
		recs = append(recs, &kgo.Record{Value: []byte(s.String())})
	}
	if err := cl.ProduceSync(b.Context(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	crashWaitProcessed(b, addr, e2eApp, 10*time.Minute, "sentences", e2eRepart)
	ends := topicEnds(b, addr, e2eChangelog)
	pl := waitPlacement(b, 5*time.Minute, "every task running, and the standbys caught up", func(pl placement) bool {
		return pl.settled() && (standbys == 0 || standbysCaughtUp(pl, ends, 0))
	}, two...)
	b.Logf("%d words counted in %v; changelog ends %v; %s", *failoverKeys, time.Since(began).Round(time.Millisecond), ends, pl)
	victim, survivor, parts := victimOf(pl, ends, two...)
	f := failoverResult{}
	for _, p := range parts {
		f.changelog += ends[p]
	}

	// One marker sentence for each partition of sentences, with a word for each count task:
	// the last one out has been through every task of the killed instance.
	out := testClient(b, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"word-counts": offsetsAt(topicEnds(b, addr, "word-counts"))}),
		kgo.FetchMaxWait(50*time.Millisecond))
	defer out.Close()
	markers := map[string]bool{}
	var markerRecs []*kgo.Record
	for s := range int32(4) {
		var words []string
		for q := range int32(crashPartition) {
			for n := 0; ; n++ {
				w := fmt.Sprintf("marker%d-s%d-c%d-%d", run, s, q, n)
				if runtime.KeyPartition([]byte(w), crashPartition, 0) == q {
					words = append(words, w)
					markers[w] = true
					break
				}
			}
		}
		markerRecs = append(markerRecs, &kgo.Record{Topic: "sentences", Partition: s, Value: []byte(strings.Join(words, " "))})
	}
	manual := testClient(b, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer manual.Close()

	killAt := time.Now()
	victim.killNow(b)
	if err := manual.ProduceSync(b.Context(), markerRecs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	for len(markers) > 0 {
		fs := out.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("markers %v not counted within 5 minutes of the kill", slices.Sorted(maps.Keys(markers)))
		}
		fs.EachRecord(func(r *kgo.Record) { delete(markers, string(r.Key)) })
	}
	f.failover = time.Since(killAt)
	to := takeoverOf(b, survivor, victim, parts)
	f.assigned, f.restored, f.restores = to.assigned+victim.killedAt.Sub(killAt), to.status, to.restores
	if to.events != to.status {
		b.Logf("%s: the status says the takeover restored %d records, the events %d (a restore begun again?)", survivor.name, to.status, to.events)
	}
	survivor.killNow(b)
	return f
}

// offsetsAt returns kgo offsets at the given ones.
func offsetsAt(offs map[int32]int64) map[int32]kgo.Offset {
	out := make(map[int32]kgo.Offset, len(offs))
	for p, o := range offs {
		out[p] = kgo.NewOffset().At(o)
	}
	return out
}
