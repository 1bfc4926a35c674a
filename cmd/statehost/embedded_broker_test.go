package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/wordgen"
)

// TestEmbeddedBrokerSIGKILL measures what the embedded broker keeps when its process dies of
// SIGKILL (README, "The embedded broker's durability"): the word count runs at_least_once on
// the embedded broker (no kafka block) while sentences flow in, and is SIGKILLed, broker and
// all; started again on the same state directory and broker data directory, it goes on.
// Every sentence the broker had acknowledged is still in the topic, and the changelog and the
// outputs hold no count below the sentences in the topic. With sync_writes and without: a
// killed process leaves its writes to the operating system, which keeps them; sync_writes is
// for crashes of the machine, which a test cannot make. (Under exactly_once the same kill
// loses the restarted instance's transactions to read_committed readers: the broker aborts
// the transaction the kill left open without an abort marker. config warns of it.)
func TestEmbeddedBrokerSIGKILL(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync_writes=%t", sync), func(t *testing.T) { testEmbeddedBrokerSIGKILL(t, sync) })
	}
}

func testEmbeddedBrokerSIGKILL(t *testing.T, sync bool) {
	bin := buildBinary(t)
	dir, addr := t.TempDir(), freeAddr(t)
	cfg := writeAppConfigWith(t, dir, addr, appOptions{commitInterval: e2eCommit, embedded: true, syncWrites: sync})
	app := startApp(t, bin, cfg, "app")
	app.waitTasks(t, 60*time.Second)

	lines, _ := wordgen.Sentences(3000, 29)
	prod := startProducer(t, addr, producerOptions{every: 10 * time.Millisecond, timeout: 5 * time.Second, retry: true},
		batchesOf(sentenceRecords(lines), 20))
	for len(prod.records()) < 1000 {
		time.Sleep(20 * time.Millisecond)
	}
	kill(t, app)
	before := len(prod.records())
	restarted := startApp(t, bin, cfg, "restarted")
	acked := values(prod.wait(t, 2*time.Minute))
	restarted.waitTasks(t, 60*time.Second)
	crashWaitProcessed(t, addr, e2eApp, 2*time.Minute, "sentences", e2eRepart)

	// Every acknowledged sentence is in the topic; a batch that was tried again after the
	// kill may be there twice.
	inTopic := values(readChecked(t, addr, "sentences", false))
	missing := countWords(acked)
	for w, n := range countWords(inTopic) {
		missing[w] -= n
	}
	for w, n := range missing {
		if n > 0 {
			t.Errorf("%d acknowledged occurrences of %q are not in the topic sentences", n, w)
		}
	}
	t.Logf("%d sentences acknowledged before the kill, %d in all; %d in the topic", before, len(acked), len(inTopic))
	checkWordCountTopics(t, addr, countWords(inTopic), false)
	stopClean(t, restarted)
}
