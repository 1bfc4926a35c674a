package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestDeadInstanceRemoved runs the word count on two instances under exactly-once, with a
// session timeout of a minute, while sentences arrive. SIGKILLed, instance b is judged dead by
// instance a, which removes it from the group (member_removed, naming b's group.instance.id)
// and runs every task well before b's session would have expired. b comes back; stopped with
// SIGTERM, it says goodbye: a reports peer_stopping and removes nothing. b comes back again,
// and the counts are exact. On kfake, or with STATEHOST_TEST_KAFKA=1 on Apache Kafka.
func TestDeadInstanceRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program, two instances of it, one SIGKILLed")
	}
	bin := buildBinary(t)
	buildModules(t)
	dir := t.TempDir()
	addr := startBroker(t, brokerOptions{}).addr
	const session = time.Minute
	opts := appOptions{guarantee: "exactly_once", sessionTimeout: session}
	a := startInstance(t, bin, addr, filepath.Join(dir, "a"), "instance a", opts)
	b := startInstance(t, bin, addr, filepath.Join(dir, "b"), "instance b", opts)
	shared := func(pl placement) bool { return pl.settled() && pl.balanced() }
	waitPlacement(t, 90*time.Second, "the tasks shared by the two instances", shared, a, b)
	bID := instanceIDOf(t, b.dir)

	lines, _ := wordgen.Sentences(20000, 37)
	prod := startProducer(t, addr, producerOptions{every: scaleEvery, timeout: 30 * time.Second,
		opts: []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}}, batchesOf(sentenceRecords(lines), scaleBatch))
	time.Sleep(2 * time.Second)

	b.killNow(t)
	// Half the session timeout: only a removal moves the tasks that soon.
	pl := waitPlacement(t, session/2, "instance a running every task", func(pl placement) bool {
		return pl.settled() && len(tasksOf(pl, a.name)) == e2eTasks
	}, a)
	t.Logf("%s killed; %s runs every task %v later: %s", b.name, a.name, time.Since(b.killedAt).Round(time.Millisecond), pl)
	removed := a.events(runtime.EventMemberRemoved)
	if len(removed) != 1 || removed[0].Member != bID || removed[0].Reason == "" {
		t.Fatalf("%s's member_removed events %+v, want one for %s with its reason", a.name, removed, bID)
	}
	t.Logf("%s removed %s: %s", a.name, bID, removed[0].Reason)

	b2 := startInstance(t, bin, addr, b.dir, b.name, opts)
	waitPlacement(t, 90*time.Second, "the tasks shared again", shared, a, b2)
	stopClean(t, b2.appProcess)
	a.waitFor(t, 30*time.Second, "a peer_stopping of "+bID, func() bool {
		for _, e := range a.events(runtime.EventPeerStopping) {
			if e.Member == bID {
				return true
			}
		}
		return false
	})
	// A judgement would take 200ms of refusals: none comes after a goodbye.
	time.Sleep(2 * time.Second)
	if n := len(a.events(runtime.EventMemberRemoved)); n != 1 {
		t.Fatalf("%s removed %d members, want only the killed one: a stopped instance said goodbye", a.name, n)
	}
	b3 := startInstance(t, bin, addr, b.dir, b.name, opts)
	waitPlacement(t, 90*time.Second, "the tasks shared once more", shared, a, b3)

	produced := values(prod.finish(t, 40*time.Second))
	ref := countWords(produced)
	crashWaitProcessed(t, addr, e2eApp, 2*time.Minute, "sentences", e2eRepart)
	stopClean(t, a.appProcess)
	stopClean(t, b3.appProcess)
	checkWordCountTopics(t, addr, ref, true)
}

// instanceIDOf returns the group.instance.id of the word count's instance in dir: the
// application id and the process id of its state directory.
func instanceIDOf(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(appStateDir(dir), "process-id"))
	if err != nil {
		t.Fatalf("the process id of the instance in %s: %v", dir, err)
	}
	return e2eApp + "-" + strings.TrimSpace(string(b))
}
