package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestHostWaitsRecord checks that HostWaits names the record the guest works on while its
// stores write and its emitter emits, and none between calls.
func TestHostWaitsRecord(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "s")
	waits := &HostWaits{}
	em := &namingEmitter{w: waits}
	task := r.task("goprobe", "out")
	task.Emitter, task.Waits = em, waits
	in := instantiate(t, e, "goprobe", task)
	if err := in.ProcessBatch(context.Background(), recs("big 1", "big 2")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(em.named, " "); got != "in/0/100 in/0/101" {
		t.Errorf("emits named %q, want in/0/100 in/0/101", got)
	}
	if _, _, _, ok := waits.Record(); ok {
		t.Error("a record is named between calls")
	}
}

// namingEmitter records, for each emit, the record its HostWaits names.
type namingEmitter struct {
	w     *HostWaits
	named []string
}

func (n *namingEmitter) Emit(context.Context, OutputRecord) error {
	topic, part, off, ok := n.w.Record()
	if !ok {
		n.named = append(n.named, "none")
		return nil
	}
	n.named = append(n.named, topic+"/"+strconv.Itoa(int(part))+"/"+strconv.FormatInt(off, 10))
	return nil
}
