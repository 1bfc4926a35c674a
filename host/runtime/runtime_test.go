package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

const wordcountHCL = `
application_id  = "wc"
state_dir       = "state"
commit_interval = "200ms"
admin { listen = "" }
topic "sentences" {
  partitions = 4
}
repartition "words" {
  partitions = 3
}
processor "tokenize" {
  module  = "{{tokenize}}"
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {
    backend = "%s"
    logging {
      enabled      = %t
      topic_config = { "min.compaction.lag.ms" = "0" }
    }
  }
}
`

// waitCounts waits until the output topic's latest counts equal want.
func waitCounts(t testing.TB, brokers []string, topic string, want map[string]string) {
	t.Helper()
	topictest.WaitLatest(t, brokers, topic, want, 60*time.Second)
}

// TestWordCount runs the two-processor word count, checks the counts in the output topic and
// the changelog, the committed offsets, and that the repartition topic is purged.
func TestWordCount(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(wordcountHCL, "pebble", true))
	in := start(t, cfg, brokers)
	cl, adm := client(t, brokers)

	lines, ref := wordgen.Sentences(3000, 1)
	produce(t, cl, "sentences", lines...)
	want := wordgen.Strings(ref)
	waitCounts(t, brokers, "word-counts", want)
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	if got, _ := latest(t, brokers, "wc-counts-changelog"); !maps.Equal(got, want) {
		t.Errorf("changelog differs from the reference: %d keys, want %d", len(got), len(want))
	}
	ends, err := adm.ListEndOffsets(context.Background(), "sentences", "wc-words-repartition")
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"sentences", "wc-words-repartition"} {
		got := committed(t, brokers, "wc", topic)
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == topic && got[o.Partition] != o.Offset {
				t.Errorf("%s partition %d: committed %d, end %d", topic, o.Partition, got[o.Partition], o.Offset)
			}
		})
	}
	// The repartition topic was created as configured and purged below the committed offsets.
	details, err := adm.ListTopics(context.Background(), "wc-words-repartition")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details["wc-words-repartition"].Partitions); n != 3 {
		t.Errorf("repartition topic has %d partitions, want 3", n)
	}
	rc, err := adm.DescribeTopicConfigs(context.Background(), "wc-words-repartition")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On("wc-words-repartition", nil); err != nil || !hasConfig(c.Configs, "cleanup.policy", "delete") {
		t.Errorf("repartition topic configs: %+v, %v; want cleanup.policy=delete", c.Configs, err)
	}
	waitFor(t, 20*time.Second, "the repartition topic to be purged", func() bool {
		starts, err := adm.ListStartOffsets(context.Background(), "wc-words-repartition")
		if err != nil {
			t.Fatal(err)
		}
		purged := true
		starts.Each(func(o kadm.ListedOffset) {
			purged = purged && o.Offset > 0
		})
		return purged
	})
}

func hasConfig(cs []kadm.Config, key, value string) bool {
	for _, c := range cs {
		if c.Key == key && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// TestRestartAndRestore checks that a clean restart replays nothing of the changelog, that a
// deleted state directory is restored from the changelog, and that counting continues
// exactly in both cases.
func TestRestartAndRestore(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(wordcountHCL, "pebble", true))
	cl, _ := client(t, brokers)

	in := start(t, cfg, brokers)
	lines, ref := wordgen.Sentences(1000, 2)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}

	// A clean restart: the checkpoints are at the changelog's end.
	in = start(t, cfg, brokers)
	feed(t, cl, ref, 500, 3)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if got := in.events.restored()["counts"]; got != 0 {
		t.Errorf("clean restart restored %d records, want 0", got)
	}
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}

	// The state directory is gone: everything comes back from the changelog.
	_, changelogRecords := latest(t, brokers, "wc-counts-changelog")
	if err := os.RemoveAll(StateDir(cfg)); err != nil {
		t.Fatal(err)
	}
	in = start(t, cfg, brokers)
	feed(t, cl, ref, 500, 4)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if got := in.events.restored()["counts"]; got != int64(changelogRecords) {
		t.Errorf("restore after deleting the state restored %d records, want the changelog's %d", got, changelogRecords)
	}
}

// TestLoggingDisabled checks that a store without a changelog comes back empty once its state
// directory is deleted, as documented, and that no changelog topic exists for it.
func TestLoggingDisabled(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(wordcountHCL, "pebble", false))
	cl, adm := client(t, brokers)

	in := start(t, cfg, brokers)
	produce(t, cl, "sentences", "a a a b")
	waitCounts(t, brokers, "word-counts", map[string]string{"a": "3", "b": "1"})
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	// A restart with the state kept continues from the local store.
	in = start(t, cfg, brokers)
	produce(t, cl, "sentences", "a")
	waitCounts(t, brokers, "word-counts", map[string]string{"a": "4", "b": "1"})
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(StateDir(cfg)); err != nil {
		t.Fatal(err)
	}
	in = start(t, cfg, brokers)
	produce(t, cl, "sentences", "a")
	waitCounts(t, brokers, "word-counts", map[string]string{"a": "1", "b": "1"})
	details, err := adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if details.Has("wc-counts-changelog") {
		t.Error("a store with logging disabled has a changelog topic")
	}
}

// TestTwoStatefulProcessors runs count and, on its output, leaderboard: the latest scores
// leaderboard keeps must equal the word counts.
func TestTwoStatefulProcessors(t *testing.T) {
	brokers := cluster(t)
	cl, _ := client(t, brokers)
	cfg := loadConfig(t, t.TempDir(), `
application_id  = "board"
commit_interval = "300ms"
admin { listen = "" }
topic "words" {
  partitions = 2
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
processor "leaderboard" {
  module  = "{{leaderboard}}"
  inputs  = ["word-counts"]
  outputs = ["leaders"]
  store "latest" {}
  store "ranking" {
    backend = "memory"
  }
}
`)
	// word-counts does not exist yet: count creates it as an output topic when the runtime
	// starts, but leaderboard reads it, so it must exist first: the runtime says so.
	_, err := New(context.Background(), Options{Config: cfg, Brokers: brokers})
	var de *DiagnosticsError
	if !errors.As(err, &de) || !strings.Contains(de.Error(), `"word-counts"`) {
		t.Fatalf("New with a missing input: %v, want a diagnostic naming word-counts", err)
	}
	_, adm := client(t, brokers)
	if _, err := adm.CreateTopic(context.Background(), 2, -1, nil, "word-counts"); err != nil {
		t.Fatal(err)
	}

	start(t, cfg, brokers)
	var words []string
	ref := map[string]int{}
	for i := range 600 {
		w := fmt.Sprintf("user%d", i%37)
		words = append(words, w)
		ref[w]++
	}
	produceKeyed(t, cl, "words", words)
	want := wordgen.Strings(ref)
	waitCounts(t, brokers, "word-counts", want)
	waitCounts(t, brokers, "board-latest-changelog", want)
	if got, _ := latest(t, brokers, "board-ranking-changelog"); len(got) != len(want) {
		t.Errorf("ranking changelog has %d keys, want %d", len(got), len(want))
	}
}

// TestConfigAgainstBroker checks the diagnostics that need the broker: co-partitioning and a
// declared partition count that differs from the topic's.
func TestConfigAgainstBroker(t *testing.T) {
	brokers := cluster(t)
	_, adm := client(t, brokers)
	for name, n := range map[string]int32{"a": 2, "b": 3, "c": 5} {
		if _, err := adm.CreateTopic(context.Background(), n, -1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	cfg := loadConfig(t, t.TempDir(), `
application_id = "diag"
admin { listen = "" }
topic "c" {
  partitions = 4
}
processor "join" {
  module = "{{count}}"
  inputs = ["a", "b"]
  store "s" {}
}
processor "other" {
  module = "{{count}}"
  inputs = ["missing"]
}
`)
	diags, out := newDiagnostics(t, cfg, brokers)
	for _, want := range []string{"app.hcl line 5", "Partition count mismatch", "app.hcl line 9", "Inputs not co-partitioned", "a: 2; b: 3", "app.hcl line 14", `"missing"`} {
		if !strings.Contains(out, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, out)
			break
		}
	}
	if len(diags) != 3 {
		t.Errorf("got %d diagnostics, want 3:\n%s", len(diags), out)
	}
}

// TestRebalance starts a second instance while the first processes: partitions move to it
// by cooperative rebalancing (the first commits and closes the revoked tasks, the second
// restores them), then the second stops and its tasks move back. The counts stay exact: a
// revocation commits before it hands a task over.
func TestRebalance(t *testing.T) {
	brokers := cluster(t)
	src := fmt.Sprintf(wordcountHCL, "pebble", true)
	cfgA := loadConfig(t, t.TempDir(), src)
	cfgB := loadConfig(t, t.TempDir(), src)
	cl, _ := client(t, brokers)

	a := start(t, cfgA, brokers)
	lines, ref := wordgen.Sentences(1000, 5)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))

	b := start(t, cfgB, brokers)
	waitFor(t, 60*time.Second, "the second instance to run tasks", func() bool {
		return running(b.rt) > 0
	})
	for i := range 4 {
		feed(t, cl, ref, 300, 10+i)
	}
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if ra, rb := running(a.rt), running(b.rt); ra+rb != 7 || ra == 0 || rb == 0 {
		t.Errorf("running tasks: %d and %d, want the 7 tasks shared", ra, rb)
	}
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the first instance to take all tasks back", func() bool {
		return running(a.rt) == 7
	})
	feed(t, cl, ref, 300, 20)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
}

// running counts the running tasks of rt.
func running(rt *Runtime) int {
	n := 0
	for _, ts := range rt.Status().Tasks {
		if ts.State == "running" {
			n++
		}
	}
	return n
}

// TestPluginFailureStops checks the failure path: a plugin that panics on a record stops the
// runtime with an error naming the processor, the partition and the offset; the healthy tasks
// commit their work; the failed partition's offset stays before the poisoned record, so the
// next run sees it again.
func TestPluginFailureStops(t *testing.T) {
	brokers := cluster(t)
	cl, adm := client(t, brokers)
	cfg := loadConfig(t, t.TempDir(), `
application_id  = "fail"
commit_interval = "100ms"
admin { listen = "" }
topic "words" {
  partitions = 2
}
topic "cmds" {
  partitions = 2
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["counts"]
  store "counts" {}
}
processor "probe" {
  module = "{{probe}}"
  inputs = ["cmds"]
}
`)
	in := start(t, cfg, brokers)
	produceKeyed(t, cl, "words", []string{"a", "b", "a"})
	waitCounts(t, brokers, "counts", map[string]string{"a": "2", "b": "1"})
	ctx := context.Background()
	manual, _ := client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := manual.ProduceSync(ctx, &kgo.Record{Topic: "cmds", Partition: 1, Value: []byte("log fine")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the first command to be committed", func() bool {
		return committed(t, brokers, "fail", "cmds")[1] == 1
	})
	produceKeyed(t, cl, "words", []string{"b"})
	if err := manual.ProduceSync(ctx,
		&kgo.Record{Topic: "cmds", Partition: 1, Value: []byte("log fine")},
		&kgo.Record{Topic: "cmds", Partition: 1, Value: []byte("panic")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-in.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the runtime did not stop on a plugin panic")
	}
	in.done <- err // for the cleanup's stop
	for _, want := range []string{`processor "probe"`, "partition 1", "offset 2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run returned %v; want an error with %q", err, want)
		}
	}
	// The healthy task committed its last record; the failed one did not.
	waitCounts(t, brokers, "counts", map[string]string{"a": "2", "b": "2"})
	if got := committed(t, brokers, "fail", "cmds")[1]; got != 1 {
		t.Errorf("cmds partition 1: committed offset %d, want 1 (before the failed batch)", got)
	}
	ends, lerr := adm.ListEndOffsets(ctx, "words")
	if lerr != nil {
		t.Fatal(lerr)
	}
	got := committed(t, brokers, "fail", "words")
	ends.Each(func(o kadm.ListedOffset) {
		if got[o.Partition] != o.Offset {
			t.Errorf("words partition %d: committed %d, want the end %d", o.Partition, got[o.Partition], o.Offset)
		}
	})
}
