package testdriver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/host/runtime"
)

const countApp = `application_id = "app"
topic "words" {
  partitions = 4
}
processor "count" {
  module  = "count_c.wasm"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
`

// TestRecordsGoToTheRuntimesPartitions checks that records, input and emitted, go to the
// partition the runtime's producer gives them, so that each store partition holds what it
// holds in a run; and that an input line may name its partition.
func TestRecordsGoToTheRuntimesPartitions(t *testing.T) {
	d := start(t, Options{Config: loadConfig(t, countApp)})
	var input strings.Builder
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "the", "fox"}
	for i, k := range keys {
		fmt.Fprintf(&input, `{"key":%q,"value":"x","timestamp":%d}`+"\n", k, i)
	}
	input.WriteString(`{"topic":"words","key":"pinned","value":"x","partition":3}` + "\n")
	if err := pipe(t, d, input.String()); err != nil {
		t.Fatal(err)
	}
	want := func(key string) int32 {
		if key == "pinned" {
			return 3
		}
		return runtime.KeyPartition([]byte(key), 4, 0)
	}
	entries, err := d.Stores()
	if err != nil {
		t.Fatal(err)
	}
	used := map[int32]bool{}
	for _, e := range entries {
		used[e.Partition] = true
		if e.Partition != want(string(e.Key)) || string(e.Value) != "1" {
			t.Errorf("store entry %s: want partition %d, value 1", e.AppendJSON(nil), want(string(e.Key)))
		}
	}
	if len(entries) != len(keys)+1 || len(used) < 3 {
		t.Errorf("%d store entries over partitions %v, want %d over most of the 4", len(entries), used, len(keys)+1)
	}
	// count emits under the record's key: word-counts (undeclared) has the processor's 4
	// partitions, and the partition of the key.
	for i, o := range d.Outputs() {
		if o.Topic != "word-counts" || o.Partition != runtime.KeyPartition(o.Key, 4, 0) {
			t.Errorf("output %d: %s, want topic word-counts, partition %d", i, o.AppendJSON(nil), runtime.KeyPartition(o.Key, 4, 0))
		}
		if i < len(keys) && o.Timestamp != int64(i) {
			t.Errorf("output %d: timestamp %d, want the record's, %d", i, o.Timestamp, i)
		}
	}
}

// TestProcessorsChain runs the word count split in two: what tokenize emits to the
// repartition topic is processed by count, and both show in the outputs.
func TestProcessorsChain(t *testing.T) {
	cfg := loadConfig(t, `application_id = "wordcount"
topic "sentences" {
  partitions = 2
}
repartition "words" {
  partitions = 3
}
processor "tokenize" {
  module  = "tokenize.wasm"
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = "count_c.wasm"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
`)
	d := start(t, Options{Config: cfg})
	// The input topic is the only one no processor writes; "words" names the repartition.
	err := pipe(t, d, `{"value":"the quick fox","timestamp":5}
{"topic":"sentences","value":"the lazy dog","timestamp":6}
{"topic":"words","key":"fox","value":"x","timestamp":7}
`)
	if err != nil {
		t.Fatal(err)
	}
	outs, stores := lines(t, d)
	rp := "wordcount-words-repartition"
	wantOuts := []string{
		out(rp, "the", "1", 5), out(rp, "quick", "1", 5), out(rp, "fox", "1", 5),
		out("word-counts", "the", "1", 5), out("word-counts", "quick", "1", 5), out("word-counts", "fox", "1", 5),
		out(rp, "the", "1", 6), out(rp, "lazy", "1", 6), out(rp, "dog", "1", 6),
		out("word-counts", "the", "2", 6), out("word-counts", "lazy", "1", 6), out("word-counts", "dog", "1", 6),
		out("word-counts", "fox", "2", 7),
	}
	if !slices.Equal(outs, wantOuts) {
		t.Errorf("outputs:\n%s", Diff("want", "got", wantOuts, outs))
	}
	var wantStores []string
	for _, w := range []struct{ k, v string }{{"dog", "1"}, {"fox", "2"}, {"lazy", "1"}, {"quick", "1"}, {"the", "2"}} {
		wantStores = append(wantStores, string(StoreEntry{Store: "counts", Partition: runtime.KeyPartition([]byte(w.k), 3, 0),
			Key: []byte(w.k), Value: []byte(w.v)}.AppendJSON(nil)))
	}
	slices.SortFunc(wantStores, func(a, b string) int { return strings.Compare(a, b) }) // partition then key: the digits sort first
	if !slices.Equal(stores, wantStores) {
		t.Errorf("stores:\n%s", Diff("want", "got", wantStores, stores))
	}
}

// out returns the output line of a record emitted under key, partitioned as by the runtime
// among 3 partitions (the repartition topic's, and word-counts' as count's).
func out(topic, key, value string, ts int64) string {
	return string(Output{Topic: topic, Partition: runtime.KeyPartition([]byte(key), 3, 0), Key: []byte(key),
		Value: []byte(value), Timestamp: ts}.AppendJSON(nil))
}

// TestWallClockPunctuations moves the wall clock of goprobe, whose wall-clock punctuation
// (every 50ms) counts its runs in the store "ticks" of each task and emits the count.
func TestWallClockPunctuations(t *testing.T) {
	cfg := loadConfig(t, `application_id = "app"
processor "probe" {
  module  = "goprobe.wasm"
  inputs  = ["in"]
  outputs = ["out"]
  store "ticks" {}
}
`)
	start0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	d := start(t, Options{Config: cfg, Partitions: 2, WallClock: start0})
	ticks := func() []string {
		var vs []string
		for _, o := range d.Outputs() {
			vs = append(vs, fmt.Sprintf("%s@%d", o.Value, o.Timestamp-start0.UnixMilli()))
		}
		return vs
	}
	steps := []struct {
		input string
		want  []string // the ticks so far, value@ms after the start, one per task
	}{
		{`{"advance_wall_clock":"49ms"}`, nil},
		{`{"advance_wall_clock":"1ms"}`, []string{"1@50", "1@50"}},
		// A record without a timestamp gets the wall clock's time; no punctuation is due.
		{`{"key":"k","value":"log"}`, []string{"1@50", "1@50"}},
		// A long step runs each punctuation once, as a run after a pause.
		{`{"advance_wall_clock":"1s"}`, []string{"1@50", "1@50", "2@1050", "2@1050"}},
	}
	for _, s := range steps {
		if err := pipe(t, d, s.input); err != nil {
			t.Fatal(err)
		}
		if got := ticks(); !slices.Equal(got, s.want) {
			t.Fatalf("after %s: ticks %v, want %v", s.input, got, s.want)
		}
	}
	if got := d.WallClock().Sub(start0); got != 1050*time.Millisecond {
		t.Errorf("wall clock at %v after the start, want 1.05s", got)
	}
	_, stores := lines(t, d)
	want := []string{`{"store":"ticks","partition":0,"key":"n","value":"2"}`, `{"store":"ticks","partition":1,"key":"n","value":"2"}`}
	if !slices.Equal(stores, want) {
		t.Errorf("stores:\n%s", Diff("want", "got", want, stores))
	}
}

const poisonApp = `application_id = "app"
processor "p" {
  module   = "poison.wasm"
  inputs   = ["in"]
  outputs  = ["out"]
  on_error = %q
  store "counts-in" {}
  store "windows-in" {
    type        = "window"
    window_size = "1m"
  }
  store "sessions-in" {
    type           = "session"
    inactivity_gap = "1m"
  }
}
`

// TestPoisonRecords checks that a plugin failure follows the processor's on_error, as in the
// runtime: "fail" stops the run naming the input line, "skip" and "dead_letter" leave the
// stores and outputs as if the record never came (writes undone, emits dropped), the dead
// letter going to the dead-letter topic with the runtime's headers.
func TestPoisonRecords(t *testing.T) {
	healthy := `{"key":"k","value":"ok","timestamp":1000}
{"key":"k","value":"ok","timestamp":2000}
{"key":"j","value":"ok","timestamp":2500}
`
	poisoned := `{"key":"k","value":"ok","timestamp":1000}
{"key":"k","value":"fail","timestamp":1500}
{"key":"k","value":"ok","timestamp":2000}
{"key":"k","value":"clear-fail","timestamp":2100}
{"key":"j","value":"oom","timestamp":2200}
{"key":"j","value":"ok","timestamp":2500}
`
	clean := start(t, Options{Config: loadConfig(t, fmt.Sprintf(poisonApp, "skip"))})
	if err := pipe(t, clean, healthy); err != nil {
		t.Fatal(err)
	}
	wantOuts, wantStores := lines(t, clean)

	for _, policy := range []string{"skip", "dead_letter"} {
		t.Run(policy, func(t *testing.T) {
			d := start(t, Options{Config: loadConfig(t, fmt.Sprintf(poisonApp, policy))})
			if err := pipe(t, d, poisoned); err != nil {
				t.Fatal(err)
			}
			outs, stores := lines(t, d)
			if !slices.Equal(stores, wantStores) {
				t.Errorf("stores differ from a run without the poison records:\n%s", Diff("without", "with", wantStores, stores))
			}
			var dead []Output
			outs = outs[:0]
			for _, o := range d.Outputs() {
				if o.Topic == "app-p-dlq" {
					dead = append(dead, o)
				} else {
					outs = append(outs, string(o.AppendJSON(nil)))
				}
			}
			if !slices.Equal(outs, wantOuts) {
				t.Errorf("outputs differ from a run without the poison records:\n%s", Diff("without", "with", wantOuts, outs))
			}
			var got []string
			for _, p := range d.Poisoned() {
				got = append(got, fmt.Sprintf("%s %s %d %s %v", p.Pos, p.Topic, p.Offset, p.Reason, p.DeadLettered))
			}
			dl := policy == "dead_letter"
			want := []string{
				fmt.Sprintf("input:2 in 1 error %v", dl), fmt.Sprintf("input:4 in 3 error %v", dl),
				fmt.Sprintf("input:5 in 4 out_of_memory %v", dl),
			}
			if !slices.Equal(got, want) {
				t.Errorf("poisoned %q, want %q", got, want)
			}
			if !dl {
				if len(dead) > 0 {
					t.Errorf("skip dead-lettered %d records", len(dead))
				}
				return
			}
			if len(dead) != 3 || string(dead[0].Value) != "fail" || dead[0].Timestamp != 1500 || string(dead[2].Value) != "oom" {
				t.Fatalf("dead letters %v, want the 3 poison records", dead)
			}
			hs := map[string]string{}
			for _, h := range dead[0].Headers {
				hs[h.Key] = string(h.Value)
			}
			if hs[runtime.HeaderProcessor] != "p" || hs[runtime.HeaderTopic] != "in" || hs[runtime.HeaderPartition] != "0" ||
				hs[runtime.HeaderOffset] != "1" || !strings.Contains(hs[runtime.HeaderError], "poison on purpose") {
				t.Errorf("dead letter headers %v", hs)
			}
		})
	}

	t.Run("fail", func(t *testing.T) {
		d := start(t, Options{Config: loadConfig(t, fmt.Sprintf(poisonApp, "fail"))})
		err := pipe(t, d, poisoned)
		ge, ok := errors.AsType[*engine.GuestError](err)
		if !ok || !strings.HasPrefix(err.Error(), "input:2: ") || ge.Offset != 1 || ge.Kind != engine.ErrGuestFailed {
			t.Fatalf("error %v, want the guest's error on offset 1 at input:2", err)
		}
	})
}

// TestInputsThatCannotBeProduced checks the errors of records the driver cannot produce: to
// a topic no processor reads, to a partition the topic lacks, without a topic among several.
func TestInputsThatCannotBeProduced(t *testing.T) {
	d := start(t, Options{Config: loadConfig(t, countApp)})
	for _, tc := range []struct{ input, want string }{
		{`{"topic":"nope","key":"a"}`, `input:1: no processor reads topic "nope": they read words`},
		{`{"key":"a","partition":4}`, `input:1: partition 4 of topic "words": it has 4 partitions`},
	} {
		if err := pipe(t, d, tc.input); err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %s", tc.input, err, tc.want)
		}
	}
	two := start(t, Options{Config: loadConfig(t, `application_id = "app"
processor "count" {
  module  = "count_c.wasm"
  inputs  = ["a", "b"]
  store "counts" {}
}
`)})
	if err := pipe(t, two, `{"key":"a"}`); err == nil || err.Error() != "input:1: topic is required: the processors read a, b" {
		t.Errorf("error %v, want topic is required", err)
	}
}

// TestStoreTTL runs count over a store with a ttl, as the runtime opens it: in stream time,
// a key written more than a minute of stream time ago is gone for the plugin (its count
// starts again) and from the final store; in wall-clock time, the input's own clock
// (advance_wall_clock) expires it.
func TestStoreTTL(t *testing.T) {
	app := func(clock string) string {
		return strings.NewReplacer("partitions = 4", "partitions = 1",
			`store "counts" {}`, fmt.Sprintf(`store "counts" {
    ttl       = "1m"
    ttl_clock = %q
  }`, clock)).Replace(countApp)
	}
	for _, tc := range []struct{ clock, input string }{
		{"stream_time", `{"key":"a","value":"x","timestamp":0}
{"key":"b","value":"x","timestamp":10000}
{"key":"c","value":"x","timestamp":120000}
{"key":"a","value":"x","timestamp":130000}
`},
		{"wall_clock", `{"key":"a","value":"x","timestamp":0}
{"key":"b","value":"x","timestamp":0}
{"advance_wall_clock":"2m"}
{"key":"c","value":"x","timestamp":0}
{"key":"a","value":"x","timestamp":0}
`},
	} {
		t.Run(tc.clock, func(t *testing.T) {
			d := start(t, Options{Config: loadConfig(t, app(tc.clock))})
			if err := pipe(t, d, tc.input); err != nil {
				t.Fatal(err)
			}
			var counts []string
			for _, o := range d.Outputs() {
				counts = append(counts, string(o.Key)+"="+string(o.Value))
			}
			if want := []string{"a=1", "b=1", "c=1", "a=1"}; !slices.Equal(counts, want) {
				t.Errorf("outputs %v, want %v: the second a counts from 1, its first write expired", counts, want)
			}
			entries, err := d.Stores()
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, e := range entries {
				kept = append(kept, string(e.Key)+"="+string(e.Value))
			}
			if want := []string{"a=1", "c=1"}; !slices.Equal(kept, want) {
				t.Errorf("final store %v, want %v: b expired", kept, want)
			}
		})
	}
}
