package engine

import (
	"context"
	"maps"
	"slices"
	"testing"
)

// keeper is an Emitter that keeps what it is given as it is, views included, against the
// contract, to show what the views become; it also notes each emit's key as it was during
// Emit, and the first emit's key as it read at each later Emit.
type keeper struct {
	raw    []OutputRecord
	during []string // each emit's key, read during its Emit
	first  []string // the first emit's key, read during each later Emit
}

func (k *keeper) Emit(_ context.Context, r OutputRecord) error {
	if len(k.raw) > 0 {
		k.first = append(k.first, string(k.raw[0].Key))
	}
	k.raw = append(k.raw, r)
	k.during = append(k.during, string(r.Key))
	return nil
}

// TestEmitKeyValueAreViews pins the contract of the package doc ("Copies and views of guest
// memory"): an emitted key is a view of guest memory, right during Emit and rewritten by the
// guest once the host function has returned, before the batch ends. tokenize emits its words
// as sub-slices of the record the SDK keeps in one reused buffer, so the view of the first
// record's word reads the second record's once record_next has written it there.
func TestEmitKeyValueAreViews(t *testing.T) {
	e, _ := testEngine(t, Config{})
	k := &keeper{}
	in := instantiate(t, e, "tokenize", Task{Processor: "tokenize", Outputs: []string{"words"}, Emitter: k})
	if err := in.ProcessBatch(context.Background(), recs("aa", "bb")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"aa", "bb"}; !slices.Equal(k.during, want) {
		t.Fatalf("keys during Emit = %q, want %q", k.during, want)
	}
	// In the same batch, at the next emit: the view is no longer the first word.
	if want := []string{"bb"}; !slices.Equal(k.first, want) {
		t.Fatalf("the first key read at the second Emit = %q, want %q (the guest's buffer, rewritten)", k.first, want)
	}
	if got := string(k.raw[0].Key); got != "bb" {
		t.Fatalf("the first key read after the batch = %q, want %q", got, "bb")
	}
}

// TestStateWritesAreCopiedByTheStore pins the other side of the same views: count writes each
// record's key, a view of the SDK's reused record buffer, and the store holds every key as it
// was, while the emitted keys, kept as they were passed, all read the last record's key.
func TestStateWritesAreCopiedByTheStore(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "counts")
	k := &keeper{}
	in := instantiate(t, e, "count", Task{Processor: "count", Stores: r.stores, Outputs: []string{"out"}, Emitter: k})
	if err := in.ProcessBatch(context.Background(), recs("x", "y", "z")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k0": "1", "k1": "1", "k2": "1"}
	if got := dump(t, r.stores["counts"]); !maps.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	for i, rec := range k.raw {
		if got := string(rec.Key); got != "k2" {
			t.Errorf("emit %d: kept key reads %q after the batch, want %q (a view of the guest's buffer)", i, got, "k2")
		}
	}
}

// TestEmittedHeadersAreCopies pins that an emit's headers are the Emitter's: goprobe sends the
// current record's headers, which the SDK decodes into one reused buffer, and the headers kept
// from the first record still hold its values after the second record's were read.
func TestEmittedHeadersAreCopies(t *testing.T) {
	e, _ := testEngine(t, Config{})
	k := &keeper{}
	in := instantiate(t, e, "goprobe", Task{Processor: "goprobe", Outputs: []string{"out"}, Emitter: k})
	batch := recs("headers", "headers")
	batch[0].Headers = []Header{{Key: "h", Value: []byte("v0")}}
	batch[1].Headers = []Header{{Key: "h", Value: []byte("v1")}}
	if err := in.ProcessBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if len(k.raw) != 2 {
		t.Fatalf("%d emits, want 2", len(k.raw))
	}
	for i, rec := range k.raw {
		want := []Header{{Key: "h", Value: batch[i].Headers[0].Value}}
		if !slices.EqualFunc(rec.Headers, want, func(a, b Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
			t.Errorf("emit %d: kept headers %q after the batch, want %q", i, rec.Headers, want)
		}
	}
}
