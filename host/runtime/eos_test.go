package runtime

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// eosHCL is the word count under exactly-once.
func eosHCL() string {
	return strings.Replace(fmt.Sprintf(wordcountHCL, "pebble", true),
		`commit_interval = "200ms"`, `processing_guarantee = "exactly_once"`, 1)
}

// checkExactlyOnce checks the committed output of the word count against ref: every word's
// counts in offset order are exactly 1, 2, ..., ref[word] (no duplicate, no gap), and the
// changelog's last committed value of every word is its count.
func checkExactlyOnce(t *testing.T, brokers []string, ref map[string]int) {
	t.Helper()
	hist := topictest.Histories(t, brokers, "word-counts")
	bad := 0
	for w, n := range ref {
		got := hist[w]
		ok := len(got) == n
		for i := 0; ok && i < n; i++ {
			ok = got[i] == strconv.Itoa(i+1)
		}
		if !ok {
			if bad < 5 {
				t.Errorf("word %q: output counts %v, want 1..%d", w, got, n)
			}
			bad++
		}
	}
	if bad > 0 || len(hist) != len(ref) {
		t.Fatalf("%d of %d words differ; %d words in the output", bad, len(ref), len(hist))
	}
	if got, _ := topictest.LatestCommitted(t, brokers, "wc-counts-changelog"); !maps.Equal(got, wordgen.Strings(ref)) {
		t.Fatalf("the committed changelog differs from the reference: %d keys, want %d", len(got), len(ref))
	}
}

// TestWordCountExactlyOnce runs the word count under exactly-once, stops and restarts it,
// and checks that every count was emitted exactly once and that the restart restored only
// the changelog's tail.
func TestWordCountExactlyOnce(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), eosHCL())
	if cfg.CommitInterval != 100*time.Millisecond {
		t.Fatalf("commit_interval %v, want the exactly-once default 100ms", cfg.CommitInterval)
	}
	cl, _ := client(t, brokers)
	in := start(t, cfg, brokers)
	lines, ref := wordgen.Sentences(2000, 1)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	in = start(t, cfg, brokers)
	feed(t, cl, ref, 500, 2)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if n := in.events.restored()["counts"]; n != 0 {
		t.Errorf("the clean restart restored %d records, want 0", n)
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkExactlyOnce(t, brokers, ref)
}

// TestRebalanceExactlyOnce shares the word count between two instances and back while input
// flows: the rebalances abort open transactions and revive their tasks, and still every count
// is emitted exactly once.
func TestRebalanceExactlyOnce(t *testing.T) {
	brokers := cluster(t)
	src := eosHCL()
	cfgA := loadConfig(t, t.TempDir(), src)
	cfgB := loadConfig(t, t.TempDir(), src)
	cl, _ := client(t, brokers)

	ref := map[string]int{}
	a := start(t, cfgA, brokers)
	feed(t, cl, ref, 500, 5)
	b := start(t, cfgB, brokers)
	for i := range 10 {
		feed(t, cl, ref, 100, 10+i)
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, 60*time.Second, "the second instance to run tasks", func() bool { return running(b.rt) > 0 })
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		feed(t, cl, ref, 100, 30+i)
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, 60*time.Second, "the first instance to take all tasks back", func() bool { return running(a.rt) == 7 })
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, brokers, ref)
}
