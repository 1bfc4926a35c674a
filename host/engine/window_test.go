package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/store"
)

// windowRig is a rig with a Pebble window store "windows" (10s windows every 5s, 2s grace)
// and a session store "sessions" (5s gap, 1s grace) on a real store.Task, whose stream time
// the instances use.
func windowRig(t *testing.T) (*rig, Task) {
	t.Helper()
	r := newRig(t)
	w, err := r.st.OpenWindow("windows", store.Options{Kind: store.Window, Window: store.WindowSpec{Size: 10000, Advance: 5000, Grace: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.st.OpenSession("sessions", store.Options{Kind: store.Session, Window: store.WindowSpec{Gap: 5000, Grace: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	task := r.task("wc", "out")
	task.Windows = map[string]store.WindowStore{"windows": w}
	task.Sessions = map[string]store.SessionStore{"sessions": s}
	task.Clock = r.st
	return r, task
}

// timed returns a record of key at ts (ms).
func timed(off int64, key string, ts int64) Record {
	return Record{Topic: "in", Offset: off, Key: []byte(key), Value: []byte("x"), Timestamp: time.UnixMilli(ts)}
}

// TestWindowCountPlugin runs plugins/windowcount over a real window store: hopping windows,
// stream time from record timestamps, a stream-time punctuation that emits each closed
// window once with the punctuation's time as timestamp, and late writes dropped and counted.
func TestWindowCountPlugin(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	r, task := windowRig(t)
	in := instantiate(t, e, "windowcount", task)

	// a at 1000 is in the windows starting at -5000 and 0; b at 6000 in 0 and 5000.
	batch := func(recs ...Record) {
		t.Helper()
		if err := in.ProcessBatch(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if _, err := in.Punctuate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	batch(timed(0, "a", 1000), timed(1, "b", 6000), timed(2, "a", 9000))
	if r.st.StreamTime() != 9000 {
		t.Fatalf("stream time %d, want 9000", r.st.StreamTime())
	}
	// At 9000 the window [-5000, 5000) is closed (5000 + 2000 <= 9000): emitted.
	if got, want := r.emitted.strings(), []string{"out:a=-5000,5000,1"}; !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if ts := r.emitted.recs[0].Timestamp.UnixMilli(); ts != 9000 {
		t.Errorf("emitted with timestamp %d, want the punctuation's stream time 9000", ts)
	}
	// A record at 2000 when stream time is 13000: window 0 closes at 12000 (late, dropped),
	// window -5000 long closed; b at 13000 is on time.
	batch(timed(3, "b", 13000), timed(4, "a", 2000))
	want := []string{"out:a=-5000,5000,1", "out:a=0,10000,2", "out:b=0,10000,1"}
	if got := r.emitted.strings(); !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if late, _, _ := r.st.DroppedWrites(); late != 2 {
		t.Errorf("late writes dropped: %d, want 2 (a's two windows at 2000)", late)
	}
}

// TestWrongStoreType checks that a key-value function on a window store answers
// CodeWrongStoreType: count's state_get fails its batch with that code's text.
func TestWrongStoreType(t *testing.T) {
	e, _ := testEngine(t, Config{})
	_, task := windowRig(t)
	task.Windows = map[string]store.WindowStore{"counts": task.Windows["windows"]}
	in := instantiate(t, e, "count", task)
	err := in.ProcessBatch(context.Background(), []Record{timed(0, "a", 1)})
	var ge *GuestError
	if !errors.As(err, &ge) || !strings.Contains(ge.Detail, abi.CodeText(abi.CodeWrongStoreType)) {
		t.Fatalf("err = %v, want a guest failure saying %q", err, abi.CodeText(abi.CodeWrongStoreType))
	}
}
