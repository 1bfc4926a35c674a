package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// reloadHCL is the word count under exactly-once over keyed sentences, which the reload tests
// change while it runs.
const reloadHCL = `application_id       = "wc"
state_dir            = "state"
processing_guarantee = "exactly_once"
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
    logging {
      topic_config = { "min.compaction.lag.ms" = "0" }
    }
  }
}
`

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

// events records a Runtime's events (Options.OnEvent).
type events struct {
	mu  sync.Mutex
	evs []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

// of returns the events of kind, in order.
func (e *events) of(kind EventKind) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// tasksRunning returns the partitions of processor's task_running events, sorted.
func (e *events) tasksRunning(processor string) []int32 {
	var out []int32
	for _, ev := range e.of(EventTaskRunning) {
		if ev.Processor == processor && !slices.Contains(out, ev.Partition) {
			out = append(out, ev.Partition)
		}
	}
	slices.Sort(out)
	return out
}

// startRecorded starts cfg as start does, without the file watch, recording its events.
func startRecorded(t *testing.T, cfg string, dir string, brokers []string, mods ...func(*Options)) (*instance, *events) {
	t.Helper()
	ev := &events{}
	in := start(t, loadConfig(t, dir, cfg), brokers, append([]func(*Options){func(o *Options) {
		o.NoWatch, o.OnEvent = true, ev.add
	}}, mods...)...)
	return in, ev
}

// keyedLoad produces wordgen sentences to sentences, each under one of 29 keys, every
// interval from a goroutine until the returned stop; stop returns the word counts of
// everything produced.
func keyedLoad(t *testing.T, cl *kgo.Client, n int, every time.Duration) (stop func() map[string]int) {
	ref := map[string]int{}
	done, fed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(fed)
		k := 0
		for seed := 1; ; seed++ {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			lines, more := wordgen.Sentences(n, seed)
			recs := make([]*kgo.Record, len(lines))
			for i, l := range lines {
				recs[i] = &kgo.Record{Topic: "sentences", Key: []byte("s" + strconv.Itoa(k%29)), Value: []byte(l)}
				k++
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			for w, c := range more {
				ref[w] += c
			}
		}
	}()
	var once sync.Once
	stop = func() map[string]int {
		once.Do(func() { close(done) })
		<-fed
		return ref
	}
	t.Cleanup(func() { stop() })
	return stop
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
