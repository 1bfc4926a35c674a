package runtime

import (
	"slices"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
)

// TestCheckInputs: a processor whose inputs all exist with one partition count gets that count
// and is known; one with an unknown input or inputs of different counts is not, and each
// problem is a diagnostic on the input or the inputs attribute.
func TestCheckInputs(t *testing.T) {
	at := func(line int) hcl.Range { return hcl.Range{Filename: "app.hcl", Start: hcl.Pos{Line: line}} }
	count := &processor{cfg: &config.Processor{Name: "count", Inputs: []string{"c"}, InputRanges: []hcl.Range{at(1)}}}
	join := &processor{cfg: &config.Processor{Name: "join", Inputs: []string{"a", "b"}, InputRanges: []hcl.Range{at(2), at(3)}, InputsRange: at(4)}}
	lost := &processor{cfg: &config.Processor{Name: "lost", Inputs: []string{"c", "gone"}, InputRanges: []hcl.Range{at(5), at(6)}}}
	ts := topicSetup{rt: &Runtime{procs: []*processor{count, join, lost}, opts: Options{Brokers: []string{"k:9092"}}}}

	type problem struct {
		summary string
		line    int
	}
	var got []problem
	known := ts.checkInputs(map[string]int32{"a": 3, "b": 4, "c": 2}, func(rng hcl.Range, summary, _ string, _ ...any) {
		got = append(got, problem{summary, rng.Start.Line})
	})
	if !known[count] || count.partitions != 2 {
		t.Errorf("count: known %v with %d partitions, want known with 2", known[count], count.partitions)
	}
	if known[join] || known[lost] {
		t.Errorf("known: join %v, lost %v; want neither", known[join], known[lost])
	}
	want := []problem{{"Inputs not co-partitioned", 4}, {"Unknown input topic", 6}}
	if !slices.Equal(got, want) {
		t.Errorf("diagnostics %v, want %v", got, want)
	}
}
