package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/internal/recordbatch"
	"github.com/statehost/statehost/store"
)

// TestChangelogKeyExtra checks what the engine adds to a key for the changelog record of a
// window or session store against the store's own changelog keys.
func TestChangelogKeyExtra(t *testing.T) {
	key := []byte("key")
	for kind, sk := range map[int32]store.Kind{abi.StoreWindow: store.Window, abi.StoreSession: store.Session} {
		if got, want := changelogKeyExtra(kind), len(store.ChangelogKey(sk, key, 2, 1))-len(key); got != want {
			t.Errorf("store type %d: extra %d, the store's changelog key adds %d", kind, got, want)
		}
	}
	if n := changelogKeyExtra(abi.StoreKeyValue); n != 0 {
		t.Errorf("a key-value store's extra is %d", n)
	}
}

// TestWindowWriteLimits runs the C probe's window and session writes (window_put of "k" ->
// "v1", session_put of "u" -> "sv") against limits at their changelog records' sizes: a
// limit one byte short answers CodeLimit and stores nothing, the exact size passes.
func TestWindowWriteLimits(t *testing.T) {
	e, _ := testEngine(t, Config{})
	window, session := recordbatch.Size(1+8, 2, 0, 0), recordbatch.Size(1+16, 2, 0, 0)
	for _, c := range []struct {
		w, ss        int
		wput, sput   int32
		wgot, sgot   bool
		wname, sname string
	}{
		{w: window - 1, ss: session, wput: abi.CodeLimit, sput: 0, sgot: true},
		{w: window, ss: session - 1, wput: 0, sput: abi.CodeLimit, wgot: true},
	} {
		r, task := probeRig(t)
		task.StoreLimits = map[string]int{"w": c.w, "ss": c.ss}
		codes := runWindows(t, e, r, task)
		if codes["wput_ok"] != strconv.Itoa(int(c.wput)) || codes["sput_ok"] != strconv.Itoa(int(c.sput)) {
			t.Errorf("limits %d, %d: window_put %s, session_put %s; want %d, %d", c.w, c.ss, codes["wput_ok"], codes["sput_ok"], c.wput, c.sput)
		}
		_, wgot, _ := task.Windows["w"].Get([]byte("k"), 1000)
		_, sgot, _ := task.Sessions["ss"].Get([]byte("u"), 1400, 1500)
		if wgot != c.wgot || sgot != c.sgot {
			t.Errorf("limits %d, %d: stored window %v, session %v; want %v, %v", c.w, c.ss, wgot, sgot, c.wgot, c.sgot)
		}
	}
}

// TestStateWriteLimit runs the Go probe's put of a value of n bytes under "key" against a
// limit of the changelog record of a 1000-byte value: 1000 bytes go, 1001 answer CodeLimit,
// the store keeps the previous value, and the guest's failure carries the refusal (what, the
// size, the limit) and names the record. A store without a limit takes anything.
func TestStateWriteLimit(t *testing.T) {
	e, _ := testEngine(t, Config{})
	limit := recordbatch.Size(3, 1000, 0, 0)
	r := newRig(t, "s")
	task := r.task("goprobe", "out")
	task.StoreLimits = map[string]int{"s": limit}
	in := instantiate(t, e, "goprobe", task)
	ctx := context.Background()
	if err := in.ProcessBatch(ctx, recs("big 1000")); err != nil {
		t.Fatal(err)
	}
	err := in.ProcessBatch(ctx, recs("big 1001"))
	var le *LimitError
	if ge := guestError(t, err, ErrGuestFailed); ge.Offset != 100 || !errors.As(err, &le) ||
		le.Size != int64(recordbatch.Size(3, 1001, 0, 0)) || le.Limit != int64(limit) || !le.Changelog || le.Budget ||
		!strings.Contains(err.Error(), `store "s": state_put refused (CodeLimit)`) {
		t.Fatalf("a put past the limit: %v; want a guest failure of offset 100 carrying the refusal", err)
	}
	if v, _, _ := r.stores["s"].Get([]byte("key")); len(v) != 1000 {
		t.Fatalf("the store holds a value of %d bytes, want the 1000 of before", len(v))
	}

	unbounded := newRig(t, "s")
	in = instantiate(t, e, "goprobe", unbounded.task("goprobe", "out"))
	if err := in.ProcessBatch(ctx, recs("big 2000000")); err != nil {
		t.Fatal(err)
	}
}

// TestEmitLimitsOfOutput runs the C probe's emits at abi.MaxEmitBytes against an output
// limit one byte short of the record of a value of MaxEmitBytes-1 under a one-byte key: that
// one and the null-keyed value of MaxEmitBytes (the same size) answer CodeLimit, the smaller
// ones still go.
func TestEmitLimitsOfOutput(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t)
	task := r.task("probe", "out")
	task.OutputLimits = []int{recordbatch.Size(1, abi.MaxEmitBytes-1, 0, 0) - 1}
	in := instantiate(t, e, "probe", task)
	if err := in.ProcessBatch(context.Background(), recs("limits")); err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, rec := range r.emitted.recs {
		if strings.HasPrefix(string(rec.Key), "emit_") {
			codes[string(rec.Key)] = string(rec.Value)
		}
	}
	for name, want := range map[string]int32{"emit_value_max": abi.CodeLimit, "emit_null_key_value_max": abi.CodeLimit,
		"emit_all_max": 0, "emit_hdr_count_max": 0} {
		if got := codes[name]; got != strconv.Itoa(int(want)) {
			t.Errorf("%s = %s, want %d", name, got, want)
		}
	}
}

// TestEmitBudget checks the budget of the bytes emitted per record: a budget of exactly what
// the probe's "limits" command emits (emits near abi.MaxEmitBytes, and its reports of their
// codes) passes, for each of two records (it counts per record); one byte less fails the
// call with ErrEmitBudget, attributed to the record, carrying the refusal.
func TestEmitBudget(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	r := newRig(t)
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	if err := in.ProcessBatch(ctx, recs("limits")); err != nil {
		t.Fatal(err)
	}
	var emitted int64
	for _, rec := range r.emitted.recs {
		emitted += int64(len(rec.Key) + len(rec.Value))
		for _, h := range rec.Headers {
			emitted += int64(len(h.Key) + len(h.Value))
		}
	}
	if emitted < 3*abi.MaxEmitBytes-16 {
		t.Fatalf("the probe emitted %d bytes, want about 3 MiB", emitted)
	}

	task := r.task("probe", "out")
	task.EmitBudget = emitted
	in = instantiate(t, e, "probe", task)
	if err := in.ProcessBatch(ctx, recs("limits", "limits")); err != nil {
		t.Fatal(err)
	}
	task.EmitBudget = emitted - 1
	in = instantiate(t, e, "probe", task)
	err := in.ProcessBatch(ctx, recs("put", "limits"))
	var le *LimitError
	if ge := guestError(t, err, ErrEmitBudget); ge.Offset != 101 || !errors.As(err, &le) || !le.Budget ||
		le.Limit != emitted-1 || le.Size <= emitted-1 || strings.Count(err.Error(), "emit budget of") != 1 {
		t.Fatalf("emits past the budget: %v; want ErrEmitBudget at offset 101 carrying the refusal once", err)
	}
}
