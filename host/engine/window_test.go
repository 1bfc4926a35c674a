package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
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

// probeRig is a rig for the C probe with a key-value store "s", a window store "w" (10s
// windows) and a session store "ss" (100ms gap).
func probeRig(t *testing.T) (*rig, Task) {
	t.Helper()
	r := newRig(t, "s")
	w, err := r.st.OpenWindow("w", store.Options{Kind: store.Window, Window: store.WindowSpec{Size: 10000}})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := r.st.OpenSession("ss", store.Options{Kind: store.Session, Window: store.WindowSpec{Gap: 100}})
	if err != nil {
		t.Fatal(err)
	}
	task := r.task("probe", "out")
	task.Windows = map[string]store.WindowStore{"w": w}
	task.Sessions = map[string]store.SessionStore{"ss": ss}
	task.Clock = r.st
	return r, task
}

// runWindows runs the C probe's "windows" command, at stream time 1500, on an instance for
// task, and returns the codes it reported.
func runWindows(t *testing.T, e *Engine, r *rig, task Task) map[string]string {
	t.Helper()
	in := instantiate(t, e, "probe", task)
	rec := timed(0, "k", 1500)
	rec.Value = []byte("windows")
	if err := in.ProcessBatch(context.Background(), []Record{rec}); err != nil {
		t.Fatal(err)
	}
	return r.emitted.values()
}

// TestWindowABIFromC has a C guest call the window, session, store_info, stream_time and
// schedule functions with bad and good arguments: each answers its code, never traps, and a
// function of one store type on another type answers CodeWrongStoreType.
func TestWindowABIFromC(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r, task := probeRig(t)
	codes := runWindows(t, e, r, task)
	wrong := abi.CodeWrongStoreType
	entry := int32(abi.WindowEntryHeaderSize + 1 + 2) // key "k", value "v1"
	want := map[string]int32{
		"wput_on_kv": wrong, "get_on_window": wrong, "range_on_session": wrong, "sput_on_window": wrong,
		"wput_ok": 0, "wput_key_oob": abi.CodeOutOfBounds, "wput_val_neg": abi.CodeBadArgument,
		"wput_bad_handle": abi.CodeBadHandle, "wget_ok": 2, "wget_small": abi.CodeBufferTooSmall,
		"wget_missing": abi.CodeNotFound, "wget_buf_oob": abi.CodeOutOfBounds,
		"wfetch_small": abi.CodeBufferTooSmall, "wfetch_needed": entry, "wfetch_bytes": entry,
		"wfetch_start": 1000, "wfetch_end": 11000, "wfetch_done": 0, "wfetch_close": 0,
		"wfetch_key_oob": abi.CodeOutOfBounds, "wfetch_all_on_kv": wrong,
		"sput_inverted": abi.CodeBadArgument, "sput_ok": 0, "sget_ok": 2, "sfind_on_kv": wrong,
		"sfind_bytes": abi.WindowEntryHeaderSize + 1 + 2, "sfind_start": 1400, "sfind_end": 1500,
		"sfind_all_bytes": abi.WindowEntryHeaderSize + 1 + 2,
		"info_small":      abi.CodeBufferTooSmall, "info_ok": abi.StoreInfoSize, "info_type": abi.StoreWindow,
		"info_size": 10000, "info_gap": 100, "info_kv_type": abi.StoreKeyValue,
		"time_oob": abi.CodeOutOfBounds, "time_ok": 0, "time": 1500,
		"schedule_bad_kind": abi.CodeBadArgument, "schedule_zero": abi.CodeBadArgument,
	}
	checkCodes(t, codes, want)
}

// TestPunctuation checks the schedules' rules: a stream-time punctuation first fires once the
// stream time is known, then once per interval however far the time jumps; a wall-clock one
// fires an interval after it was scheduled and follows the engine's clock; both run with no
// current record and emit with the punctuation's time; schedules are made in init only, at
// most abi.MaxSchedules; an interval that would overflow never fires; a failing punctuation
// kills the instance with an error that names it.
func TestPunctuation(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	e, _ := testEngine(t, Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	r, task := probeRig(t)
	in := instantiate(t, e, "probe", task)
	cmd := func(ts int64, cmds ...string) {
		t.Helper()
		recs := make([]Record, len(cmds))
		for i, c := range cmds {
			recs[i] = timed(int64(i), "k", ts)
			recs[i].Value = []byte(c)
		}
		if err := in.ProcessBatch(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	punct := func(want ...string) {
		t.Helper()
		r.emitted.recs = nil
		if _, err := in.Punctuate(ctx); err != nil {
			t.Fatal(err)
		}
		if got := r.emitted.strings(); !slices.Equal(got, want) {
			t.Fatalf("punctuations emitted %q, want %q", got, want)
		}
	}
	// The probe's init scheduled a wall-clock punctuation every 100ms, a stream-time one
	// every second, then wall-clock ones of an interval that never ends until refused.
	cmd(5000, "schedules")
	got := r.emitted.values()
	if got["wall"] != "0" || got["stream"] != "1" {
		t.Fatalf("schedule ids %v, want wall 0 and stream 1", got)
	}
	if got["schedules_opened"] != strconv.Itoa(abi.MaxSchedules-2) || got["schedules_refused"] != strconv.Itoa(int(abi.CodeLimit)) {
		t.Errorf("schedules: %v, want %d more, then %d", got, abi.MaxSchedules-2, abi.CodeLimit)
	}
	if got["schedule_in_batch"] != strconv.Itoa(int(abi.CodeBadArgument)) {
		t.Errorf("schedule in a batch = %s, want %d", got["schedule_in_batch"], abi.CodeBadArgument)
	}
	if at, ok := in.NextWallPunctuation(); !ok || !at.Equal(now.Add(100*time.Millisecond)) {
		t.Fatalf("next wall punctuation %v %v, want %v", at, ok, now.Add(100*time.Millisecond))
	}
	noRecord := "record_next=" + strconv.Itoa(int(abi.CodeNoRecord))
	punct("out:punct1=5000 " + noRecord) // stream time known: fires at once
	if ts := r.emitted.recs[0].Timestamp.UnixMilli(); ts != 5000 {
		t.Errorf("punctuation emitted with timestamp %d, want 5000", ts)
	}
	cmd(5900, "meta")
	punct() // 5900 < 5000 + 1000
	now = now.Add(100 * time.Millisecond)
	punct("out:punct0=1000100 " + noRecord)
	cmd(9000, "meta")
	punct("out:punct1=9000 " + noRecord) // once, not once per missed interval
	cmd(9500, "meta")
	punct()
	// The schedules of an interval that never ends do not fire, however late it gets.
	now = now.Add(1000 * time.Hour)
	punct("out:punct0=" + strconv.FormatInt(now.UnixMilli(), 10) + " " + noRecord)

	if in.PunctuationDue() {
		t.Error("a punctuation is due right after the punctuations ran")
	}
	// A new instance over the same stores (a restart whose stream time was restored): its
	// stream-time punctuation is due before any batch.
	in2 := instantiate(t, e, "probe", task)
	if !in2.PunctuationDue() {
		t.Fatal("no punctuation due for a new instance with a known stream time")
	}
	// A task bound with one TaskState (as the runtime binds its tasks) keeps its punctuation
	// times across instances: a new instance made for it later (a restart after a poison
	// record, a pool with none idle) leaves the wall-clock time where it was.
	shared := task
	shared.State = &TaskState{}
	in3 := instantiate(t, e, "probe", shared)
	wantWall, ok := in3.NextWallPunctuation()
	if !ok {
		t.Fatal("no wall-clock punctuation scheduled")
	}
	now = now.Add(10 * time.Millisecond)
	in4 := instantiate(t, e, "probe", shared)
	if at, ok := in4.NextWallPunctuation(); !ok || !at.Equal(wantWall) {
		t.Errorf("next wall punctuation after a new instance: %v %v, want the task's %v", at, ok, wantWall)
	}
	r.emitted.recs = nil
	if n, err := in2.Punctuate(ctx); err != nil || n != 1 {
		t.Fatalf("Punctuate of the new instance = %d, %v; want its stream-time punctuation", n, err)
	}
	if got := r.emitted.strings(); !slices.Equal(got, []string{"out:punct1=9500 " + noRecord}) {
		t.Fatalf("new instance punctuated %q", got)
	}

	cmd(20000, "punctfail")
	_, err := in.Punctuate(ctx)
	ge := guestError(t, err, ErrGuestFailed)
	if ge.Punctuation != "punctuation 1 at stream time 20000" || !strings.Contains(ge.Error(), ge.Punctuation) ||
		ge.Detail != "punctuation failed on purpose" || ge.Offset != -1 {
		t.Errorf("failed punctuation: %+v (%v)", ge, ge)
	}
	if _, err := in.Punctuate(ctx); !errors.Is(err, ErrInstanceDead) {
		t.Errorf("Punctuate after a failure: %v, want ErrInstanceDead", err)
	}
}
