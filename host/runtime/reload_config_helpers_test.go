package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

// reloadHCL is the word count under exactly-once, which the reload tests change while it runs.
var reloadHCL = eosHCL()

// tallyHCL is a processor that a reload adds: testdata/poison (module %s) over the sentences,
// counting each sentence under its key in three stores of its own, and emitting "<count>
// <window count> <session count>" under the key.
const tallyHCL = `
processor "tally" {
  module  = "%s"
  inputs  = ["sentences"]
  outputs = ["sentence-tallies"]
  store "counts-sentences" {}
  store "windows-sentences" {
    type        = "window"
    window_size = "1h"
  }
  store "sessions-sentences" {
    type           = "session"
    inactivity_gap = "1h"
  }
}
`

// of returns the events of kind, in order.
func (r *eventRecorder) of(kind EventKind) []Event {
	var out []Event
	for _, ev := range r.all() {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// tasksRunning returns the partitions of processor's task_running events, sorted.
func (r *eventRecorder) tasksRunning(processor string) []int32 {
	var out []int32
	for _, ev := range r.of(EventTaskRunning) {
		if ev.Processor == processor && !slices.Contains(out, ev.Partition) {
			out = append(out, ev.Partition)
		}
	}
	slices.Sort(out)
	return out
}

// startRecorded starts cfg (with {{name}} module paths) in dir as start does, without the
// file watch, recording its events.
func startRecorded(t *testing.T, cfg string, dir string, brokers []string, mods ...func(*Options)) (*instance, *eventRecorder) {
	t.Helper()
	rec := &eventRecorder{}
	in := start(t, loadConfig(t, dir, cfg), brokers, append([]func(*Options){func(o *Options) {
		o.NoWatch, o.OnEvent = true, rec.add
	}}, mods...)...)
	return in, rec
}

// underLoad is an instance of reloadHCL that counts keyed sentences produced continuously.
type underLoad struct {
	in      *instance
	ev      *eventRecorder
	dir     string
	brokers []string
	cl      *kgo.Client
	stop    func() map[string]int // stops the input, and returns its word counts
}

// startUnderLoad starts src (reloadHCL, changed) on a new broker, feeds it 20 sentences every
// 50ms, each under one of 29 keys, and waits for its first counts.
func startUnderLoad(t *testing.T, src string, mods ...func(*Options)) *underLoad {
	t.Helper()
	u := &underLoad{dir: t.TempDir(), brokers: cluster(t)}
	u.in, u.ev = startRecorded(t, src, u.dir, u.brokers, mods...)
	u.cl, _ = client(t, u.brokers)
	u.stop = produceKeyedContinuously(t, u.cl, 20, 50*time.Millisecond, func(i int) []byte { return []byte("s" + strconv.Itoa(i%29)) })
	waitFor(t, 60*time.Second, "counts under load", func() bool { return len(topictest.Read(t, u.brokers, "word-counts", true)) > 300 })
	return u
}

// finish stops the input (adding more to its word counts: the words of records produced
// besides), waits until everything is processed, checks the word count's outputs and
// changelog for exactly-once, and stops the instance.
func (u *underLoad) finish(t *testing.T, more map[string]int) {
	t.Helper()
	ref := u.stop()
	for w, n := range more {
		ref[w] += n
	}
	drained(t, u.brokers, ref)
	checkExactlyOnce(t, u.brokers, ref)
	if err := u.in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// drained waits until the group has committed every sentence (each processor that reads them
// processed it) and the word counts reached ref.
func drained(t *testing.T, brokers []string, ref map[string]int) {
	t.Helper()
	_, adm := client(t, brokers)
	waitFor(t, 90*time.Second, "every sentence committed and counted", func() bool {
		ends, err := adm.ListEndOffsets(context.Background(), "sentences")
		if err != nil {
			return false
		}
		done, err := adm.FetchOffsets(context.Background(), "wc")
		if err != nil {
			return false
		}
		all := true
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := done.Lookup(o.Topic, o.Partition)
			all = all && ok && c.At >= o.Offset
		})
		if !all {
			return false
		}
		h := topictest.Histories(t, brokers, "word-counts")
		for w, n := range ref {
			if len(h[w]) < n {
				return false
			}
		}
		return true
	})
}

// checkTallies checks the outputs (in the topic output) of a processor running testdata/poison
// over the sentences, which started on each partition at some offset: per key, its counts go
// 1, 2, ..., m without a gap or a duplicate; and per partition they are exactly the counts of
// its last records (the ones from the processor's start on), every record from the start
// counted once. The records of the keys in poison (each a poison record, skipped or
// dead-lettered) are left out. It returns the records counted and the records there are.
func checkTallies(t *testing.T, brokers []string, output string, poison ...string) (counted, all int) {
	t.Helper()
	keyPart := map[string]int32{}
	byPart := map[int32][]string{} // partition -> the keys of its records, in offset order
	for _, r := range topictest.Read(t, brokers, "sentences", false) {
		if slices.Contains(poison, string(r.Key)) {
			continue
		}
		keyPart[string(r.Key)] = r.Partition
		byPart[r.Partition] = append(byPart[r.Partition], string(r.Key))
		all++
	}
	perKey := map[string]int{}
	for key, vals := range topictest.Histories(t, brokers, output) {
		for i, v := range vals {
			kv, _, _ := strings.Cut(v, " ")
			if kv != strconv.Itoa(i+1) {
				t.Fatalf("%s of key %q: counts %v, want 1, 2, ...: a sentence counted twice or not at all", output, key, vals)
			}
		}
		perKey[key] = len(vals)
	}
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		keys := byPart[p]
		sum := 0
		for k, n := range perKey {
			if keyPart[k] == p {
				sum += n
			}
		}
		if sum == 0 || sum > len(keys) {
			t.Fatalf("partition %d: %s counted %d of its %d sentences, want the last ones from its start", p, output, sum, len(keys))
		}
		want := map[string]int{}
		for _, k := range keys[len(keys)-sum:] {
			want[k]++
		}
		for k, n := range want {
			if perKey[k] != n {
				t.Fatalf("partition %d: key %q counted %d times in %s, but %d of its sentences are after the start (offset %d of %d): a sentence missed",
					p, k, perKey[k], output, n, len(keys)-sum, len(keys))
			}
		}
		counted += sum
	}
	return counted, all
}

// reloadFile writes src (with {{name}} module paths) over the instance's configuration file
// and reloads it; it fails t on an error other than a refusal.
func reloadFile(t *testing.T, in *instance, dir, src string) (ReloadResult, *ReloadError) {
	t.Helper()
	loadConfig(t, dir, src)
	res, err := in.rt.ReloadFile(context.Background(), "api")
	if err == nil {
		return res, nil
	}
	re, ok := err.(*ReloadError)
	if !ok {
		t.Fatalf("ReloadFile: %v", err)
	}
	return res, re
}

// mustReload is reloadFile that must apply.
func mustReload(t *testing.T, in *instance, dir, src string) ReloadResult {
	t.Helper()
	res, re := reloadFile(t, in, dir, src)
	if re != nil {
		t.Fatalf("reload refused: %v", describeDiags(re))
	}
	return res
}

func describeDiags(re *ReloadError) string {
	var b strings.Builder
	for _, d := range re.Diags {
		fmt.Fprintf(&b, "\n  %s: %s: %s", d.Subject, d.Summary, d.Detail)
	}
	return b.String()
}
