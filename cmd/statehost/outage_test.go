package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/internal/wordgen"
)

// The broker-outage tests run the word count on one `statehost broker` process while a
// producer writes sentences, and take the broker away twice for outageFor: first with SIGTERM
// (it writes its state and exits), then with SIGKILL (it dies mid-write; under exactly_once
// SIGTERM again, unless -outage.kill-eos); each time the broker starts again on the same
// address and data directory. On Apache Kafka (STATEHOST_TEST_KAFKA=1) the outages are of a
// 3-node cluster: first one node is SIGKILLed (the app must commit new input while it is
// away) and started again, then every node is SIGKILLed at once and the cluster started
// again (kafkaOutages). The statehost instance must live through both outages without
// exiting, get its tasks back and commit new input after each restart, and end with the
// reference counts: exactly under exactly_once, none under-counted under at_least_once.
//
// They take about 45 s each (two 10 s outages), and run only with the flag -outage:
//
//	go test ./cmd/statehost -run TestBrokerOutage -outage -v
//	STATEHOST_TEST_KAFKA=1 go test ./cmd/statehost -run TestBrokerOutage -outage -v
var outageTests = flag.Bool("outage", false, "run the broker-outage tests (about 45 s each)")

// outageKillEOS makes the second outage of TestBrokerOutageExactlyOnce a SIGKILL too. It is off
// by default because of a bug of the broker (kfake): a transaction open when it is killed is
// aborted on its restart by an index entry alone, without an abort marker, so read_committed
// consumers skip every later transaction of the same producer id, committed ones included
// (the changelog and the output then look short, while the store is right).
var outageKillEOS = flag.Bool("outage.kill-eos", false, "TestBrokerOutageExactlyOnce: SIGKILL the broker in the second outage (exposes a kfake bug)")

// outageFor is how long the broker stays away in each outage.
const outageFor = 10 * time.Second

// TestBrokerOutageAtLeastOnce: under at_least_once, after the two outages no word is
// under-counted in the store, the changelog or the output topic.
func TestBrokerOutageAtLeastOnce(t *testing.T) { brokerOutage(t, "at_least_once") }

// TestBrokerOutageExactlyOnce: under exactly_once, after the two outages the store, the
// changelog and the output topic (read_committed) hold exactly the reference counts, each
// count of each word once and in order.
func TestBrokerOutageExactlyOnce(t *testing.T) { brokerOutage(t, "exactly_once") }

func brokerOutage(t *testing.T, guarantee string) {
	if !*outageTests {
		t.Skip("a broker outage test: run with -outage (about 45 s)")
	}
	exact := guarantee == "exactly_once"
	bin := buildBinary(t)
	buildModules(t)
	began := time.Now() // the builds are shared by the tests of the package
	dir := t.TempDir()
	var addr string
	var phases []outagePhase
	if kafkacluster.Requested() {
		broker := startBroker(t, brokerOptions{})
		addr = broker.addr
		phases = kafkaOutages(t, broker.cluster, addr)
	} else {
		addr = freeAddr(t)
		phases = statehostBrokerOutages(t, filepath.Join(dir, "broker"), addr, exact)
	}
	app := startInstance(t, bin, addr, filepath.Join(dir, "app"), "app",
		appOptions{guarantee: guarantee, commitInterval: e2eCommit})
	app.waitTasks(t, 60*time.Second)

	// A batch that the broker does not acknowledge (it is away) is retried until it is: the
	// client retries as quickly as the app's, so that input flows again as soon as the broker
	// is back. Not idempotent: after a SIGKILL the broker has forgotten the producer's
	// sequence numbers, which holds an idempotent producer back for a produce timeout. A batch
	// written twice is counted twice by the reference too (read from the topic).
	lines, _ := wordgen.Sentences(20000, 31)
	prod := startProducer(t, addr, producerOptions{every: scaleEvery, timeout: 60 * time.Second, opts: []kgo.Opt{
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		kgo.DisableIdempotentWrite(),
	}}, batchesOf(sentenceRecords(lines), scaleBatch))
	for i, ph := range phases {
		// Input flows and is processed before the outage.
		waitProgress(t, app, addr, inputCommitted(t, addr), 20*time.Second)
		down := time.Now()
		what := ph.halt()
		logsAt := len(app.logLines())
		if ph.partial {
			// What is left of the cluster serves the app: it commits new input meanwhile.
			waitProgress(t, app, addr, inputCommitted(t, addr), 60*time.Second)
			t.Logf("outage %d (%s): the app committed new input %v after it, while the node was away",
				i+1, what, time.Since(down).Round(time.Millisecond))
		}
		if wait := outageFor - time.Since(down); wait > 0 {
			time.Sleep(wait)
		}
		if app.exited() {
			t.Fatalf("outage %d (%s): the app exited %d while the broker was away", i+1, what, app.code)
		}
		ph.back()
		up := time.Now()
		// The app works again: it commits input produced after the restart.
		waitProgress(t, app, addr, inputCommitted(t, addr), 40*time.Second)
		t.Logf("outage %d (%s): away %v; the app committed new input %v after the restart; it logged %d warnings and errors meanwhile",
			i+1, what, up.Sub(down).Round(time.Millisecond), time.Since(up).Round(time.Millisecond), warnings(app.logLines()[logsAt:]))
	}
	produced := values(prod.finish(t, 60*time.Second))
	if len(produced) == len(lines) {
		t.Fatal("the producer ran out of sentences")
	}
	t.Logf("input stopped after %v", time.Since(began).Round(time.Millisecond))
	// The reference is what the sentences topic holds: a produce retried across the SIGKILL
	// may have written a batch twice, and both copies are input.
	var sentences []string
	for _, rec := range readChecked(t, addr, "sentences", true) {
		sentences = append(sentences, string(rec.Value))
	}
	ref := countWords(sentences)
	crashWaitProcessed(t, addr, e2eApp, 60*time.Second, "sentences", e2eRepart)
	if app.exited() {
		t.Fatalf("the app exited %d", app.code)
	}
	stopClean(t, app.appProcess)
	t.Logf("%d sentences acknowledged to the producer, %d in the topic (%d words, %d distinct); the app started tasks %d times",
		len(produced), len(sentences), wordCount(ref), len(ref), len(app.events(runtime.EventTaskRunning)))
	if len(sentences) < len(produced) {
		t.Errorf("the broker lost sentences: %d acknowledged, %d in the topic", len(produced), len(sentences))
	}
	crashCompareCounts(t, "store counts", crashStoreCounts(t, appStateDir(app.dir), []int32{0, 1, 2}), ref, exact)
	checkWordCountTopics(t, addr, ref, exact)
	t.Logf("%s took %v", t.Name(), time.Since(began).Round(time.Millisecond))
}

// outagePhase is one outage: halt takes (part of) the broker away and says what it did, back
// brings it back; partial: what stays serves the app meanwhile.
type outagePhase struct {
	halt    func() string
	back    func()
	partial bool
}

// statehostBrokerOutages are the outages of a `statehost broker` process on addr and dir:
// SIGTERM, then SIGKILL (under exactly_once SIGTERM again, unless -outage.kill-eos); after
// each it starts again on the same address and data.
func statehostBrokerOutages(t *testing.T, dir, addr string, exact bool) []outagePhase {
	broker := startBroker(t, brokerOptions{kfake: true, dir: dir, addr: addr})
	sigs := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
	if exact && !*outageKillEOS {
		sigs[1] = syscall.SIGTERM
	}
	var phases []outagePhase
	for _, sig := range sigs {
		phases = append(phases, outagePhase{
			halt: func() string { broker.halt(t, sig); return "statehost broker " + sig.String() },
			back: func() { broker = startBroker(t, brokerOptions{kfake: true, dir: dir, addr: addr}) },
		})
	}
	return phases
}

// kafkaOutages are the outages of a Kafka cluster whose node 1 is at addr: with 3 nodes, first
// one node SIGKILLed (the app's group coordinator unless that is node 1, which every client
// of the test bootstraps from; then node 2) and started again; then every node SIGKILLed at
// once and the cluster started again.
func kafkaOutages(t *testing.T, c *kafkacluster.Cluster, addr string) []outagePhase {
	var phases []outagePhase
	if c.Nodes() == 3 {
		var node int
		phases = append(phases, outagePhase{
			partial: true,
			halt: func() string {
				node = outageNode(t, addr)
				c.Kill(t, node)
				return fmt.Sprintf("Kafka node %d of 3 SIGKILLed", node)
			},
			back: func() { c.StartNode(t, node) },
		})
	}
	phases = append(phases, outagePhase{
		halt: func() string { c.KillAll(t); return fmt.Sprintf("all %d Kafka nodes SIGKILLed", c.Nodes()) },
		back: func() { c.StartAll(t) },
	})
	return phases
}

// outageNode picks the Kafka node that the first outage kills: the coordinator of the app's
// group, unless that is node 1 (the test's bootstrap), then node 2.
func outageNode(t *testing.T, addr string) int {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	co := kadm.NewClient(cl).FindGroupCoordinators(ctx, e2eApp)[e2eApp]
	if co.Err != nil {
		t.Fatalf("the coordinator of group %s: %v", e2eApp, co.Err)
	}
	if co.NodeID != 1 {
		return int(co.NodeID)
	}
	return 2
}

// waitProgress waits until the group has committed more sentences than after, failing the test
// if the app exits first. A broker that does not answer meanwhile (part of it is away) is asked
// again.
func waitProgress(t *testing.T, app *instance, addr string, after int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		committed, produced, err := tryInputProgress(t, addr)
		if err == nil && committed > after {
			return
		}
		if app.exited() {
			t.Fatalf("the app exited %d", app.code)
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("no new input committed within %v: %v", timeout, err)
			}
			t.Fatalf("the app committed no new input within %v: %d sentences committed of %d", timeout, committed, produced)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inputCommitted returns how many sentences the group has committed, asking again for up to
// 30 s while the broker does not answer.
func inputCommitted(t *testing.T, addr string) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		committed, _, err := tryInputProgress(t, addr)
		if err == nil {
			return committed
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// warnings counts the log lines at warn or error level.
func warnings(ls []logLine) int {
	n := 0
	for _, l := range ls {
		if l.Level == "warn" || l.Level == "error" {
			n++
		}
	}
	return n
}
