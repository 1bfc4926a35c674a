package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

// TestReloadAddsProcessor reloads, under continuous input and exactly-once, a configuration
// that adds a processor with three stores reading the sentences the word count reads, and
// another one reading a new topic: their topics (outputs, changelogs, the new input) are
// created, the group enables them (one instance: at once) and their tasks run; the first
// one's outputs are exact from its start on each partition, the second one's from the start
// of its topic, and the word count's stay exact across the reload.
func TestReloadAddsProcessor(t *testing.T) {
	u := startUnderLoad(t, reloadHCL)
	poison := buildPoison(t, t.TempDir())
	clicks := strings.NewReplacer(`processor "tally"`, `processor "clickcount"`, `["sentences"]`, `["clicks"]`,
		`-sentences"`, `-clicks"`, `"sentence-tallies"`, `"click-tallies"`).Replace(fmt.Sprintf(tallyHCL, poison))
	res := mustReload(t, u.in, u.dir, reloadHCL+fmt.Sprintf(tallyHCL, poison)+"topic \"clicks\" {\n  partitions = 2\n}\n"+clicks)
	if want := []string{`topic "clicks" added`, `processor "tally" added`, `processor "clickcount" added`}; !slices.Equal(res.Changes, want) {
		t.Fatalf("reload changes %q, want %q", res.Changes, want)
	}
	if rs := u.ev.of(EventConfigReloaded); len(rs) != 1 || rs[0].Reason != "api" || !slices.Equal(rs[0].Changes, res.Changes) {
		t.Fatalf("config_reloaded events %+v, want one with the changes", rs)
	}
	waitFor(t, 60*time.Second, "tally and clickcount enabled, their tasks running", func() bool {
		return len(u.ev.of(EventProcessorEnabled)) == 2 && len(u.ev.tasksRunning("tally")) == 4 && len(u.ev.tasksRunning("clickcount")) == 2
	})
	want := map[string]int{}
	for i := range 60 {
		key := "c" + strconv.Itoa(i%7)
		produceKeyedValue(t, u.cl, "clicks", key, "click")
		want[key]++
	}
	waitFor(t, 60*time.Second, "every click counted", func() bool {
		h := topictest.Histories(t, u.brokers, "click-tallies")
		for k, n := range want {
			if len(h[k]) < n {
				return false
			}
		}
		return true
	})
	for k, vals := range topictest.Histories(t, u.brokers, "click-tallies") {
		for i, v := range vals {
			if kv, _, _ := strings.Cut(v, " "); kv != strconv.Itoa(i+1) || len(vals) != want[k] {
				t.Fatalf("clickcount of key %q: %v, want 1..%d", k, vals, want[k])
			}
		}
	}
	_, adm := client(t, u.brokers)
	topics, err := adm.ListTopics(t.Context(), "sentence-tallies", "wc-counts-sentences-changelog", "wc-windows-sentences-changelog", "wc-sessions-sentences-changelog")
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range topics {
		if d.Err != nil || len(d.Partitions) != 4 {
			t.Errorf("topic %s: %v, %d partitions; want it created with 4", name, d.Err, len(d.Partitions))
		}
	}
	time.Sleep(1500 * time.Millisecond) // tally under load
	u.finish(t, nil)
	n, _ := checkTallies(t, u.brokers, "sentence-tallies")
	t.Logf("tally counted %d sentences", n)
}

// guardHCL is tallyHCL as the processor "guard" with on_error %[2]s, output "guarded".
func guardHCL(module, onError string) string {
	src := strings.Replace(fmt.Sprintf(tallyHCL, module), `processor "tally" {`, `processor "guard" {
  on_error = "`+onError+`"`, 1)
	return strings.Replace(src, `"sentence-tallies"`, `"guarded"`, 1)
}

// commits returns how many commits the instance made so far (statehost_commit_seconds).
func commits(t *testing.T, in *instance) uint64 {
	t.Helper()
	var m dto.Metric
	if err := in.rt.metrics.commit.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestReloadPolicyAndInterval changes, under continuous input and exactly-once, a processor's
// on_error (skip, then dead_letter: a poison record after the reload goes to the dead-letter
// topic the reload created) and commit_interval (100ms, then 3s by writing the watched file:
// the commits thin out), and checks that every output stays exact.
func TestReloadPolicyAndInterval(t *testing.T) {
	poison := buildPoison(t, t.TempDir())
	base := reloadHCL + guardHCL(poison, "skip")
	u := startUnderLoad(t, base, func(o *Options) { o.NoWatch = false })
	in, ev, dir, brokers, cl := u.in, u.ev, u.dir, u.brokers, u.cl
	waitFor(t, 60*time.Second, "guard running", func() bool { return len(ev.tasksRunning("guard")) == 4 })

	poisonRecord := func(key string) {
		produceKeyedValue(t, cl, "sentences", key, "fail")
	}
	poisonRecord("p1")
	skipped := func() float64 { return counterValue(t, in.rt.metrics.skips.WithLabelValues("guard", "error")) }
	waitFor(t, 60*time.Second, "the poison record skipped", func() bool { return skipped() == 1 })

	// commit_interval, by the file watch: 100ms, then 3s.
	before := commits(t, in)
	time.Sleep(3 * time.Second)
	if n := commits(t, in) - before; n < 5 {
		t.Fatalf("%d commits in 3s at commit_interval 100ms under load, want many", n)
	}
	loadConfig(t, dir, strings.Replace(base, `processing_guarantee = "exactly_once"`, `processing_guarantee = "exactly_once"
commit_interval      = "3s"`, 1))
	waitFor(t, 30*time.Second, "the watched file reloaded", func() bool { return len(ev.of(EventConfigReloaded)) == 1 })
	if r := ev.of(EventConfigReloaded)[0]; r.Reason != "watch" || !slices.Equal(r.Changes, []string{"commit_interval 100ms -> 3s"}) {
		t.Fatalf("config_reloaded %+v, want commit_interval 100ms -> 3s from the watch", r)
	}
	before = commits(t, in)
	time.Sleep(9 * time.Second)
	if n := commits(t, in) - before; n > 8 {
		t.Fatalf("%d commits in 9s at commit_interval 3s, want at most 3 and a few owed", n)
	}

	// on_error: skip, then dead_letter.
	src := strings.Replace(base, `processing_guarantee = "exactly_once"`, `processing_guarantee = "exactly_once"
commit_interval      = "3s"`, 1)
	res := mustReload(t, in, dir, strings.Replace(src, `on_error = "skip"`, `on_error = "dead_letter"`, 1))
	if !slices.Equal(res.Changes, []string{`processor "guard" on_error skip -> dead_letter`}) {
		t.Fatalf("changes %q, want guard's on_error", res.Changes)
	}
	poisonRecord("p2")
	waitFor(t, 60*time.Second, "the poison record dead-lettered", func() bool {
		recs := topictest.Read(t, brokers, "wc-guard-dlq", true)
		return len(recs) == 1 && string(recs[0].Key) == "p2"
	})
	if n := skipped(); n != 1 {
		t.Errorf("%v poison records skipped, want 1: the second was dead-lettered", n)
	}
	u.finish(t, map[string]int{"fail": 2}) // the poison records' value is a word too
	if counted, all := checkTallies(t, brokers, "guarded", "p1", "p2"); counted != all {
		t.Errorf("guard counted %d of %d sentences, want all: it ran from the start", counted, all)
	}
}

// TestReloadStores adds a store to a running processor (its changelog is created, its tasks
// restore again with it), changes a changelog's topic_config (altered on the broker), then
// removes the store, whose changelog is empty; under continuous input and exactly-once, with
// the counts exact.
func TestReloadStores(t *testing.T) {
	u := startUnderLoad(t, reloadHCL)
	in, ev, dir := u.in, u.ev, u.dir
	_, adm := client(t, u.brokers)

	src := strings.Replace(reloadHCL, `"min.compaction.lag.ms" = "0"`, `"min.compaction.lag.ms" = "0", "segment.ms" = "3600000"`, 1)
	src = strings.Replace(src, `  store "counts" {`, "  store \"seen\" {}\n  store \"counts\" {", 1)
	res := mustReload(t, in, dir, src)
	want := []string{`store "seen" added to processor "count"`, `store "counts" changelog topic_config changed`}
	if !slices.Equal(res.Changes, want) {
		t.Fatalf("changes %q, want %q", res.Changes, want)
	}
	topics, err := adm.ListTopics(t.Context(), "wc-seen-changelog")
	if err != nil || topics["wc-seen-changelog"].Err != nil || len(topics["wc-seen-changelog"].Partitions) != 3 {
		t.Fatalf("the changelog of the new store: %+v, %v; want 3 partitions", topics, err)
	}
	rcs, err := adm.DescribeTopicConfigs(t.Context(), "wc-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rcs.On("wc-counts-changelog", nil); err != nil || !hasConfig(c.Configs, "segment.ms", "3600000") || !hasConfig(c.Configs, "min.compaction.lag.ms", "0") {
		t.Fatalf("wc-counts-changelog configs %+v (%v), want segment.ms=3600000 beside min.compaction.lag.ms=0", c.Configs, err)
	}
	closed := func() int {
		n := 0
		for _, e := range ev.of(EventTaskClosed) {
			if e.Processor == "count" {
				n++
			}
		}
		return n
	}
	if closed() < 3 {
		t.Fatalf("%d count tasks closed, want its 3: they restore again with the new store", closed())
	}
	waitFor(t, 30*time.Second, "count's tasks running again", func() bool {
		last := map[int32]EventKind{} // partition -> count's last task event
		for _, e := range ev.all() {
			if e.Processor == "count" && (e.Kind == EventTaskRunning || e.Kind == EventTaskClosed) {
				last[e.Partition] = e.Kind
			}
		}
		return len(last) == 3 && last[0] == EventTaskRunning && last[1] == EventTaskRunning && last[2] == EventTaskRunning
	})
	time.Sleep(time.Second)

	res = mustReload(t, in, dir, strings.Replace(src, "  store \"seen\" {}\n", "", 1))
	if !slices.Equal(res.Changes, []string{`store "seen" removed from processor "count"`}) {
		t.Fatalf("changes %q, want seen removed", res.Changes)
	}
	time.Sleep(time.Second)
	u.finish(t, nil)
}

// produceKeyedValue writes one record.
func produceKeyedValue(t *testing.T, cl *kgo.Client, topic, key, value string) {
	t.Helper()
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestReloadRefused reloads, under continuous input and exactly-once, files that change what
// cannot change while the application runs: each is refused with a diagnostic at the file and
// line of the change and a config_refused event, and the application runs on with its
// configuration: a reload after them compares with it, and the counts stay exact.
func TestReloadRefused(t *testing.T) {
	u := startUnderLoad(t, reloadHCL)
	in, ev, dir := u.in, u.ev, u.dir

	for i, tc := range []struct {
		name, old, new string
		line           string // the line of the new file the diagnostic points at ("": line 1)
		summary        string
	}{
		{"guarantee", `processing_guarantee = "exactly_once"`, `processing_guarantee = "at_least_once"`, `processing_guarantee = "at_least_once"`, "Cannot change processing_guarantee without a restart"},
		{"application_id", `application_id  = "wc"`, `application_id  = "wc2"`, `application_id  = "wc2"`, "Cannot change application_id without a restart"},
		{"partitions", "  partitions = 4", "  partitions = 8", "  partitions = 8", "Cannot change a topic's partitions without a restart"},
		{"store type", `  store "counts" {`, "  store \"counts\" {\n    type        = \"window\"\n    window_size = \"1m\"", `    type        = "window"`, "Cannot change a store's type without a restart"},
		{"store backend", `    backend = "pebble"`, `    backend = "memory"`, `    backend = "memory"`, "Cannot change a store's backend without a restart"},
		{"store with data removed", `  store "counts" {
    backend = "pebble"
    logging {
      enabled      = true
      topic_config = { "min.compaction.lag.ms" = "0" }
    }
  }
`, "", `processor "count" {`, "Cannot remove a store that holds data"},
		{"commit_interval past the transaction timeout", `processing_guarantee = "exactly_once"`, "processing_guarantee = \"exactly_once\"\ncommit_interval = \"5s\"", `commit_interval = "5s"`, "Cannot change commit_interval without a restart"},
		{"processor removed", `processor "tokenize" {
  module  = "{{tokenize}}"
  inputs  = ["sentences"]
  outputs = ["words"]
}
`, "", "", "Cannot change the processors without a restart"},
		{"syntax", `topic "sentences" {`, `topic "sentences" {{`, `topic "sentences" {{`, ""},
	} {
		src := strings.Replace(reloadHCL, tc.old, tc.new, 1)
		if src == reloadHCL {
			t.Fatalf("%s: the edit changed nothing", tc.name)
		}
		path := writeConfig(t, dir, src)
		_, err := in.rt.ReloadFile(t.Context(), "api")
		re, ok := err.(*ReloadError)
		if !ok || !errors.Is(err, ErrReloadRefused) || len(re.Diags) == 0 {
			t.Fatalf("%s: ReloadFile: %v, want a refusal", tc.name, err)
		}
		d := re.Diags[0]
		line := 1
		if tc.line != "" {
			line = lineOf(t, src, tc.line)
		}
		if d.Subject == nil || d.Subject.Filename != path || d.Subject.Start.Line != line || tc.summary != "" && d.Summary != tc.summary {
			t.Errorf("%s: %s at %v, want %q at %s:%d", tc.name, d.Summary, d.Subject, tc.summary, path, line)
		}
		refused := ev.of(EventConfigRefused)
		if len(refused) != i+1 || len(refused[i].Diagnostics) == 0 || refused[i].Diagnostics[0].File != path || refused[i].Diagnostics[0].Line != line {
			t.Errorf("%s: config_refused events %+v, want one more with the diagnostic at line %d", tc.name, refused, line)
		}
	}
	// The running configuration stayed: a reload compares with it.
	res := mustReload(t, in, dir, strings.Replace(reloadHCL, `processing_guarantee = "exactly_once"`, "processing_guarantee = \"exactly_once\"\ncommit_interval = \"200ms\"", 1))
	if !slices.Equal(res.Changes, []string{"commit_interval 100ms -> 200ms"}) {
		t.Errorf("changes %q after the refusals, want only commit_interval against the running configuration", res.Changes)
	}
	u.finish(t, nil)
}

// lineOf returns the 1-based number of the first line of src that is line.
func lineOf(t *testing.T, src, line string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if l == line {
			return i + 1
		}
	}
	t.Fatalf("no line %q in %s", line, src)
	return 0
}

// TestReloadTwoInstances runs two instances of the word count under continuous input and
// exactly-once, and reloads a processor into each one's own file in turn: the first one's
// waits (no task of it runs anywhere) until the second has it too, then the group enables it
// on both and its tasks spread over them; its outputs are exact from its start on each
// partition, and the word count's stay exact.
func TestReloadTwoInstances(t *testing.T) {
	u := startUnderLoad(t, reloadHCL)
	a, evA, dirA, dirB := u.in, u.ev, u.dir, t.TempDir()
	b, evB := startRecorded(t, reloadHCL, dirB, u.brokers)
	poison := buildPoison(t, t.TempDir())
	waitFor(t, 60*time.Second, "both instances running tasks", func() bool {
		return len(evA.tasksRunning("tokenize")) > 0 && len(evB.tasksRunning("tokenize")) > 0
	})

	next := reloadHCL + fmt.Sprintf(tallyHCL, poison)
	res := mustReload(t, a, dirA, next)
	if !slices.Equal(res.Pending, []string{"tally"}) {
		t.Fatalf("first reload: pending %q, want tally waiting for the other instance", res.Pending)
	}
	time.Sleep(3 * time.Second) // the group rebalances with a's new processor
	if len(evA.of(EventProcessorEnabled)) > 0 || len(evA.tasksRunning("tally")) > 0 || len(evB.tasksRunning("tally")) > 0 {
		t.Fatal("tally enabled or running before every instance has it")
	}
	second := time.Now()
	mustReload(t, b, dirB, next)
	waitFor(t, 60*time.Second, "tally enabled on both and its 4 tasks running", func() bool {
		running := append(evA.tasksRunning("tally"), evB.tasksRunning("tally")...)
		slices.Sort(running)
		return len(evA.of(EventProcessorEnabled)) == 1 && len(evB.of(EventProcessorEnabled)) == 1 && len(slices.Compact(running)) == 4
	})
	if len(evA.tasksRunning("tally")) == 0 || len(evB.tasksRunning("tally")) == 0 {
		t.Errorf("tally's tasks ran on %v and %v, want some on each instance", evA.tasksRunning("tally"), evB.tasksRunning("tally"))
	}
	if at := evA.of(EventProcessorEnabled)[0].Time; at.Before(second) {
		t.Errorf("the first instance enabled tally at %v, before the second reloaded (%v)", at, second)
	}
	time.Sleep(1500 * time.Millisecond)
	u.finish(t, nil)
	if err := b.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	n, _ := checkTallies(t, u.brokers, "sentence-tallies")
	t.Logf("tally counted %d sentences", n)
}
