package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// poisonHCL runs testdata/poison (module %[2]s) under the guarantee %[1]s as two processors:
// "skip" (on_error = "skip") reads the topic skip, and "dl" (on_error = "dead_letter") reads
// dl; each counts in stores of its own and emits to out-<topic>.
const poisonHCL = `
application_id       = "pz"
processing_guarantee = "%[1]s"
commit_interval      = "100ms"
admin { listen = "" }
topic "skip" {
  partitions = 1
}
topic "dl" {
  partitions = 1
}
processor "skip" {
  module   = "%[2]s"
  inputs   = ["skip"]
  outputs  = ["out-skip"]
  on_error = "skip"
  store "counts-skip" {}
  store "windows-skip" {
    type        = "window"
    window_size = "1h"
  }
  store "sessions-skip" {
    type           = "session"
    inactivity_gap = "1h"
  }
}
processor "dl" {
  module   = "%[2]s"
  inputs   = ["dl"]
  outputs  = ["out-dl"]
  on_error = "dead_letter"
  store "counts-dl" {}
  store "windows-dl" {
    type        = "window"
    window_size = "1h"
  }
  store "sessions-dl" {
    type           = "session"
    inactivity_gap = "1h"
  }
}
`

// poisonFailHCL runs testdata/poison (module %[2]s) under the guarantee %[1]s with the default
// on_error, "fail".
const poisonFailHCL = `
application_id       = "pz"
processing_guarantee = "%[1]s"
commit_interval      = "100ms"
admin { listen = "" }
topic "pf" {
  partitions = 1
}
processor "pf" {
  module  = "%[2]s"
  inputs  = ["pf"]
  outputs = ["out-pf"]
  store "counts-pf" {}
  store "windows-pf" {
    type        = "window"
    window_size = "1h"
  }
  store "sessions-pf" {
    type           = "session"
    inactivity_gap = "1h"
  }
}
`

// poisonInput is what the tests produce: key and value (the poison plugin's command).
type poisonInput struct{ key, value string }

// produceAt writes the records to partition 0 of topic, all with the timestamp ts (one window
// and one session per key) and the header src=test.
func produceAt(t *testing.T, cl *kgo.Client, topic string, ts time.Time, recs ...poisonInput) {
	t.Helper()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Topic: topic, Partition: 0, Timestamp: ts, Key: []byte(r.key), Value: []byte(r.value),
			Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("test")}}}
	}
	if err := cl.ProduceSync(context.Background(), krs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// waitHistories waits until topic holds want: per key, its values in order (read_committed).
func waitHistories(t *testing.T, brokers []string, topic string, want map[string][]string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := topictest.Histories(t, brokers, topic)
		if reflect.DeepEqual(got, want) {
			return
		}
		n, w := 0, 0
		for k := range want {
			n, w = n+len(got[k]), w+len(want[k])
		}
		if n >= w || time.Now().After(deadline) {
			t.Fatalf("%s holds %v, want %v", topic, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// buildPoison builds testdata/poison into dir and returns the module's path.
func buildPoison(t *testing.T, dir string) string { return buildTestdata(t, dir, "poison") }

// buildTestdata builds the Go guest testdata/<name> into dir/<name>.wasm and returns its path.
func buildTestdata(t *testing.T, dir, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := filepath.Join(dir, name+".wasm")
	if err := wasmbuild.Go(ctx, "testdata/"+name, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOnError runs the on_error policies under both guarantees, over one state directory
// (its compilation cache saves compiling the module again) and a new broker each time.
//
// skip and dead_letter: the poison records (an error, a panic or an exit after the plugin
// counted and emitted; an error after it deleted; an error before anything) leave no trace in
// the outputs nor in the state (the counts the next records emit, and the changelog), the
// records after them are processed once, the counters move, and the dead-letter topic holds
// exactly the poison records with their headers. A restart whose state is gone restores the
// same counts from the changelogs. fail: the application stops with an error that names the
// topic, the partition and the offset.
func TestOnError(t *testing.T) {
	base := t.TempDir()
	mod := buildPoison(t, base)
	for _, guarantee := range []string{"at_least_once", "exactly_once"} {
		t.Run(guarantee, func(t *testing.T) { testPoisonPolicies(t, base, mod, guarantee) })
		t.Run(guarantee+"/fail", func(t *testing.T) { testPoisonFail(t, base, mod, guarantee) })
	}
}

// wipeState deletes the instance's state but its compilation cache.
func wipeState(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "wasm-cache" {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func testPoisonPolicies(t *testing.T, base, mod, guarantee string) {
	brokers := cluster(t)
	cfg := loadConfig(t, base, fmt.Sprintf(poisonHCL, guarantee, mod))
	t.Cleanup(func() { wipeState(t, StateDir(cfg)) })
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	cl, _ := client(t, brokers)
	ts := time.Now().Truncate(time.Millisecond)
	input := []poisonInput{
		{"a", "x"},          // 0
		{"a", "fail"},       // 1: counted and emitted, then an error
		{"a", "x"},          // 2
		{"b", "panic"},      // 3
		{"b", "x"},          // 4
		{"a", "clear-fail"}, // 5: deleted a and #total, then an error
		{"a", "x"},          // 6
		{"b", "early-fail"}, // 7: an error before anything
		{"b", "exit"},       // 8
		{"b", "x"},          // 9
		{"c", "fail"},       // 10: the only record of c
	}
	poison := map[int64]string{1: "poison on purpose", 3: "poison panic", 5: "poison after clearing", 7: "poison before anything", 8: "exit"}
	wantOut := map[string][]string{"a": {"1 1 1", "2 2 2", "3 3 3"}, "b": {"1 1 1", "2 2 2"}}
	for _, topic := range []string{"skip", "dl"} {
		produceAt(t, cl, topic, ts, input...)
	}
	for _, topic := range []string{"skip", "dl"} {
		waitHistories(t, brokers, "out-"+topic, wantOut)
	}

	m := in.rt.metrics
	for reason, want := range map[string]float64{"error": 4, "panic": 1, "exit": 1} {
		if got := counterValue(t, m.skips.WithLabelValues("skip", reason)); got != want {
			t.Errorf("statehost_records_skipped_total{processor=skip,reason=%s} = %v, want %v", reason, got, want)
		}
		if got := counterValue(t, m.skips.WithLabelValues("dl", reason)); got != 0 {
			t.Errorf("statehost_records_skipped_total{processor=dl,reason=%s} = %v, want 0 (dead-lettered)", reason, got)
		}
	}
	if got := counterValue(t, m.deadLetters.WithLabelValues("dl")); got != 6 {
		t.Errorf("statehost_records_dead_lettered_total{processor=dl} = %v, want 6", got)
	}
	if got := counterValue(t, m.proc("skip").processed); got != 5 {
		t.Errorf("statehost_records_processed_total{processor=skip} = %v, want the 5 good records", got)
	}
	if got := counterValue(t, m.deadLetters.WithLabelValues("skip")); got != 0 {
		t.Errorf("statehost_records_dead_lettered_total{processor=skip} = %v, want 0", got)
	}

	// Out of memory: a record that the heap the instance kept from the records before it
	// makes fail is tried again alone, on a new instance, and counted; one that runs out of
	// memory alone is poison.
	for _, topic := range []string{"skip", "dl"} {
		produceAt(t, cl, topic, ts, poisonInput{"d", "hoard 24"}, poisonInput{"d", "hoard 24"}, poisonInput{"d", "hoard 24"},
			poisonInput{"d", "hoard 24"}, poisonInput{"e", "oom"}, poisonInput{"d", "x"})
	}
	wantOut["d"] = []string{"1 1 1", "2 2 2", "3 3 3", "4 4 4", "5 5 5"}
	for _, topic := range []string{"skip", "dl"} {
		waitHistories(t, brokers, "out-"+topic, wantOut)
	}
	if got := counterValue(t, m.skips.WithLabelValues("skip", "out_of_memory")); got != 1 {
		t.Errorf("statehost_records_skipped_total{processor=skip,reason=out_of_memory} = %v, want 1 (the oom record only)", got)
	}
	input = append(input, poisonInput{"d", "hoard 24"}, poisonInput{"d", "hoard 24"}, poisonInput{"d", "hoard 24"},
		poisonInput{"d", "hoard 24"}, poisonInput{"e", "oom"})
	poison[15] = "out of memory"

	// The dead-letter topic: the poison records, as they came, with the headers.
	poison[10] = "poison on purpose"
	var dead []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for len(dead) < len(poison) && time.Now().Before(deadline) {
		dead = topictest.Read(t, brokers, "pz-dl-dlq", true)
		time.Sleep(100 * time.Millisecond)
	}
	if len(dead) != len(poison) {
		t.Fatalf("the dead-letter topic holds %d records, want %d", len(dead), len(poison))
	}
	for i, r := range dead {
		h := map[string]string{}
		for _, kh := range r.Headers {
			h[kh.Key] = string(kh.Value)
		}
		off, _ := strconv.ParseInt(h[HeaderOffset], 10, 64)
		src := input[min(int(off), len(input)-1)]
		switch {
		case poison[off] == "" || string(r.Key) != src.key || string(r.Value) != src.value || !r.Timestamp.Equal(ts) || r.Partition != 0:
			t.Errorf("dead letter %d: %s=%s at %v in partition %d (offset header %q), want a poison record of dl as it came",
				i, r.Key, r.Value, r.Timestamp, r.Partition, h[HeaderOffset])
		case h["src"] != "test" || h[HeaderTopic] != "dl" || h[HeaderPartition] != "0" || h[HeaderProcessor] != "dl" ||
			!strings.Contains(h[HeaderError], poison[off]) || !strings.Contains(h[HeaderError], fmt.Sprintf(`offset %d (topic "dl"`, off)):
			t.Errorf("dead letter %d (offset %d): headers %v", i, off, h)
		}
		delete(poison, off)
	}

	// The state: the counts in the changelog have none of the poison records (c only ever
	// came in a poison record). Then a restart without the local state restores it from the
	// changelogs (key-value, window and session stores), and counts on from there.
	for _, topic := range []string{"skip", "dl"} {
		got, _ := topictest.LatestCommitted(t, brokers, "pz-counts-"+topic+"-changelog")
		if want := map[string]string{"a": "3", "b": "2", "d": "5", "#total": "10"}; !reflect.DeepEqual(got, want) {
			t.Errorf("the changelog of counts-%s holds %v, want %v", topic, got, want)
		}
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wipeState(t, StateDir(cfg))
	in = start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	for _, topic := range []string{"skip", "dl"} {
		produceAt(t, cl, topic, ts, poisonInput{"a", "x"}, poisonInput{"c", "x"})
	}
	wantOut["a"] = append(wantOut["a"], "4 4 4")
	wantOut["c"] = []string{"1 1 1"}
	for _, topic := range []string{"skip", "dl"} {
		waitHistories(t, brokers, "out-"+topic, wantOut)
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run after the restore: %v", err)
	}
	if n := len(topictest.Read(t, brokers, "pz-dl-dlq", true)); n != 7 {
		t.Errorf("the dead-letter topic holds %d records after the restart, want 7", n)
	}
}

// testPoisonFail: with on_error = "fail", a poison record stops the application with an error
// that names the topic, the partition and the offset, and its offset is not committed.
func testPoisonFail(t *testing.T, base, mod, guarantee string) {
	brokers := cluster(t)
	cfg := loadConfig(t, base, fmt.Sprintf(poisonFailHCL, guarantee, mod))
	t.Cleanup(func() { wipeState(t, StateDir(cfg)) })
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	cl, _ := client(t, brokers)
	produceAt(t, cl, "pf", time.Now(), poisonInput{"a", "x"}, poisonInput{"a", "x"}, poisonInput{"a", "fail"}, poisonInput{"a", "x"})
	var err error
	select {
	case err = <-in.done:
		in.done <- err // for stop
	case <-time.After(60 * time.Second):
		t.Fatal("the application did not stop on the poison record")
	}
	for _, want := range []string{`processor "pf"`, `offset 2 (topic "pf"`, "partition 0", "poison on purpose"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want an error with %q", err, want)
		}
	}
	_ = in.stop(t)
	if off, ok := committed(t, brokers, "pz", "pf")[0]; ok && off > 2 {
		t.Errorf("committed offset %d: the poison record at offset 2 was committed", off)
	}
	if got := topictest.Histories(t, brokers, "out-pf")["a"]; len(got) > 3 || !slices.Equal(got[:min(2, len(got))], []string{"1 1 1", "2 2 2"}[:min(2, len(got))]) {
		t.Errorf("out-pf holds %v", got)
	}
}

// TestPoisonReasonEmitTimeout: a batch that timed out because an emit waited for the
// producer (engine.ErrEmit in the chain, as the engine reports it) does not make its record
// poison; one that ran out of time in guest code does.
func TestPoisonReasonEmitTimeout(t *testing.T) {
	slow := &engine.GuestError{Kind: engine.ErrTimeout, Offset: 7, Err: errors.New("stopped at the batch time limit")}
	if _, reason, ok := PoisonReason(slow); !ok || reason != "timeout" {
		t.Errorf("a guest past its time limit: reason %q, poison %v; want timeout, poison", reason, ok)
	}
	waited := &engine.GuestError{Kind: engine.ErrTimeout, Offset: 7,
		Err: fmt.Errorf("%w: output %q: %w", engine.ErrEmit, "out", context.DeadlineExceeded)}
	if _, _, ok := PoisonReason(waited); ok {
		t.Errorf("an emit that waited for the producer until the deadline made its record poison")
	}
}
