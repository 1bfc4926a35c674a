package sdktest_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk"
	"github.com/statehost/statehost/pluginsdk/internal/hostcall"
	"github.com/statehost/statehost/pluginsdk/sdktest"
)

// onPunctuate is what both registered punctuations do; nil does nothing. Tests set it.
var onPunctuate func(ctx pluginsdk.PunctuationContext) error

func punctuation(ctx pluginsdk.PunctuationContext) error {
	if onPunctuate == nil {
		return nil
	}
	return onPunctuate(ctx)
}

func setPunctuate(t *testing.T, fn func(ctx pluginsdk.PunctuationContext) error) {
	t.Helper()
	onPunctuate = fn
	t.Cleanup(func() { onPunctuate = nil })
}

// runTimed runs the window, session and time commands. Each emits key verb and a value
// that describes the result; an unknown verb does nothing.
func runTimed(ctx pluginsdk.Context, verb string, a []string) error {
	num := func(i int) int64 {
		n, _ := strconv.ParseInt(a[i], 10, 64)
		return n
	}
	val := func(i int) []byte { // "-" is nil, "big" is 10000 bytes
		switch a[i] {
		case "-":
			return nil
		case "big":
			return []byte(strings.Repeat("v", 10000))
		}
		return []byte(a[i])
	}
	out := func(v string) error { return ctx.Emit([]byte(verb), []byte(v)) }
	switch verb {
	case "wput": // wput store key start value
		stored, err := ctx.WindowStore(a[0]).Put([]byte(a[1]), num(2), val(3))
		if err != nil {
			return err
		}
		return out(strconv.FormatBool(stored))
	case "wdel": // wdel store key start
		return ctx.WindowStore(a[0]).Delete([]byte(a[1]), num(2))
	case "wget": // wget store key start
		v, found, err := ctx.WindowStore(a[0]).Get([]byte(a[1]), num(2))
		if err != nil {
			return err
		}
		return out(fmt.Sprintf("%q %v", v, found))
	case "wfetch": // wfetch store key from to
		return outIter(out, ctx.WindowStore(a[0]).Fetch([]byte(a[1]), num(2), num(3)))
	case "wfetchall": // wfetchall store from to
		return outIter(out, ctx.WindowStore(a[0]).FetchAll(num(1), num(2)))
	case "wfor": // wfor store ts
		return out(fmt.Sprint(ctx.WindowStore(a[0]).WindowsFor(num(1))))
	case "sput": // sput store key start end value
		stored, err := ctx.SessionStore(a[0]).Put([]byte(a[1]), pluginsdk.Session{Start: num(2), End: num(3)}, val(4))
		if err != nil {
			return err
		}
		return out(strconv.FormatBool(stored))
	case "sget": // sget store key start end
		v, found, err := ctx.SessionStore(a[0]).Get([]byte(a[1]), pluginsdk.Session{Start: num(2), End: num(3)})
		if err != nil {
			return err
		}
		return out(fmt.Sprintf("%q %v", v, found))
	case "sfind": // sfind store key earliestEnd latestStart
		return outIter(out, ctx.SessionStore(a[0]).Find([]byte(a[1]), num(2), num(3)))
	case "sfindall": // sfindall store earliestEnd latestEnd
		return outIter(out, ctx.SessionStore(a[0]).FindAll(num(1), num(2)))
	case "merge": // merge store key ts value: sums decimal values
		sess, v, stored, err := ctx.SessionStore(a[0]).Merge([]byte(a[1]), num(2), val(3), sum)
		if err != nil {
			return err
		}
		return out(fmt.Sprintf("[%d,%d] %s %v", sess.Start, sess.End, v, stored))
	case "open": // open window|session store: the store's Err and Info
		if a[0] == "window" {
			s := ctx.WindowStore(a[1])
			return out(fmt.Sprintf("%v %+v", s.Err(), s.Info()))
		}
		s := ctx.SessionStore(a[1])
		return out(fmt.Sprintf("%v %+v", s.Err(), s.Info()))
	case "stime":
		return out(strconv.FormatInt(ctx.StreamTime(), 10))
	}
	return nil
}

// sum merges decimal counts in acc's memory.
func sum(acc, v []byte) ([]byte, error) {
	x, err := strconv.ParseInt(string(acc), 10, 64)
	if err != nil {
		return nil, err
	}
	y, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return nil, err
	}
	return strconv.AppendInt(acc[:0], x+y, 10), nil
}

// outIter emits "key@start-end=value" for each entry of it, with "big" for long values.
func outIter(out func(string) error, it *pluginsdk.WindowIterator) error {
	defer it.Close()
	var es []string
	for it.Next() {
		v := string(it.Value())
		if len(v) > 100 {
			v = "big"
		}
		es = append(es, fmt.Sprintf("%s@%d-%d=%s", it.Key(), it.Start(), it.End(), v))
	}
	if err := it.Err(); err != nil {
		return err
	}
	return out(strings.Join(es, ","))
}

// Window store "w": tumbling 10ms windows, grace 5, retention 30. Session store "ss": gap
// 10, grace 5, retention 40.
func newTimedDriver(t *testing.T) *sdktest.Driver {
	t.Helper()
	w := sdktest.TumblingWindows(10*time.Millisecond, 5*time.Millisecond)
	w.Retention = 30
	ss := sdktest.Sessions(10*time.Millisecond, 5*time.Millisecond)
	ss.Retention = 40
	d, err := sdktest.New(sdktest.Config{Stores: []string{"s"}, Outputs: []string{"out"},
		WindowStores: map[string]abi.StoreInfo{"w": w}, SessionStores: map[string]abi.StoreInfo{"ss": ss}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// at returns a record at time ms that runs the command.
func at(ms int64, cmd string) sdktest.Record { return sdktest.KV("k", cmd).At(ms) }

// run1 processes cmds, all at time ms, and returns the emitted values.
func run1(t *testing.T, d *sdktest.Driver, ms int64, cmds ...string) []string {
	t.Helper()
	recs := make([]sdktest.Record, len(cmds))
	for i, c := range cmds {
		recs[i] = at(ms, c)
	}
	if err := d.Process(recs...); err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, e := range d.TakeEmitted() {
		vals = append(vals, show(e.Value))
	}
	return vals
}

func check(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestWindowBoundaries checks closed and expired windows at their exact boundaries: at
// stream time T, a window is closed when start + size + grace <= T and expired when start
// <= T - retention.
func TestWindowBoundaries(t *testing.T) {
	d := newTimedDriver(t)
	if d.StreamTime() != abi.NoTime {
		t.Fatalf("stream time before any record = %d", d.StreamTime())
	}
	check(t, "stream time in the first record", run1(t, d, 100, "stime"), "100")
	ws := d.WindowStore("w")
	// T = 100: 85 + 10 + 5 == 100 is closed, 86 is open; 70 == 100 - 30 is expired, 71 is not.
	ws.Put("a", 85, []byte("c"))
	ws.Put("a", 70, []byte("e"))
	got := run1(t, d, 100, "wput w a 85 x", "wput w a 86 x", "wput w a 71 x", "wput w a 70 x",
		"wget w a 85", "wget w a 86", "wget w a 70", "wget w a 71")
	check(t, "at T=100", got, "false", "true", "false", "false", `"c" true`, `"x" true`, `"" false`, `"" false`)
	if dc := ws.Dropped(); dc != (sdktest.DropCounts{Late: 2, Expired: 1}) {
		t.Errorf("dropped = %+v, want 2 late (85, 71) and 1 expired (70)", dc)
	}
	// Deletes apply to closed windows; a delete of an expired window is dropped and counted.
	got = run1(t, d, 100, "wdel w a 85", "wget w a 85", "wdel w a 70", "wput w a 85 -")
	check(t, "deletes", got, `"" false`, "true")
	if dc := ws.Dropped(); dc != (sdktest.DropCounts{Late: 2, Expired: 2}) {
		t.Errorf("dropped = %+v, want the delete of 70 counted as expired", dc)
	}
	if all := ws.All(); len(all) != 1 || all[0] != (sdktest.WindowValue{Key: "a", Start: 86, End: 96, Value: "x"}) {
		t.Errorf("windows = %+v, want a@86 only (70 is expired, invisible)", all)
	}
	// A record with an earlier timestamp does not move stream time back.
	check(t, "late record", run1(t, d, 50, "stime", "wput w a 86 y"), "100", "true")
}

// TestWindowStoreBeforeStreamTime checks that nothing is closed or expired before the stream
// time is known: window_put from statehost_init-like calls with no record taken yet.
func TestWindowStoreBeforeStreamTime(t *testing.T) {
	newTimedDriver(t)
	h := hostcall.Current
	w := h.StoreOpen([]byte("w"))
	if code := h.WindowPut(w, []byte("a"), -1<<40, []byte("x")); code != abi.CodeOK {
		t.Errorf("window_put before any record = %d, want 0", code)
	}
	var tb [8]byte
	if h.StreamTime(tb[:]) != abi.CodeOK || int64(binary.LittleEndian.Uint64(tb[:])) != abi.NoTime {
		t.Errorf("stream_time before any record = %d", int64(binary.LittleEndian.Uint64(tb[:])))
	}
	if h.StreamTime(tb[:7]) != abi.CodeOutOfBounds {
		t.Error("stream_time into 7 bytes did not fail")
	}
}

// TestSessionBoundaries checks closed and expired sessions at their exact boundaries: at
// stream time T, a session is closed when end + grace < T and expired when end <= T -
// retention.
func TestSessionBoundaries(t *testing.T) {
	d := newTimedDriver(t)
	ss := d.SessionStore("ss")
	ss.Put("a", 50, 60, []byte("e"))
	ss.Put("a", 10, 94, []byte("c"))
	// T = 100, grace 5, retention 40: end 95 is open (100 < 100 is false), 94 closed; end 60
	// == 100 - 40 is expired, 61 is not.
	got := run1(t, d, 100, "sput ss a 90 95 x", "sput ss a 90 94 x", "sput ss a 61 61 x", "sput ss a 60 60 x",
		"sget ss a 90 95", "sget ss a 10 94", "sget ss a 50 60", "sput ss a 10 94 -", "sget ss a 10 94")
	check(t, "at T=100", got, "true", "false", "false", "false", `"x" true`, `"c" true`, `"" false`, "true", `"" false`)
	if dc := ss.Dropped(); dc != (sdktest.DropCounts{Late: 2, Expired: 1}) {
		t.Errorf("dropped = %+v, want 2 late (ends 94, 61) and 1 expired (end 60)", dc)
	}
	if all := ss.All(); len(all) != 1 || all[0] != (sdktest.SessionValue{Key: "a", Start: 90, End: 95, Value: "x"}) {
		t.Errorf("sessions = %+v", all)
	}
	if err := d.Process(at(100, "sput ss a 95 90 x")); err == nil || !strings.Contains(err.Error(), "bad argument") {
		t.Errorf("a session with start > end: %v", err)
	}
}

// TestFetchOrder checks the iterators' ranges (inclusive) and orders: window_fetch by
// start, session_find by end then start; expired entries are left out; values larger than
// the SDK's first buffer come through.
func TestFetchOrder(t *testing.T) {
	d := newTimedDriver(t)
	ws, ss := d.WindowStore("w"), d.SessionStore("ss")
	for _, start := range []int64{90, 80, 100, 70, 110, 75} {
		ws.Put("a", start, []byte(strconv.FormatInt(start, 10)))
	}
	ws.Put("b", 85, []byte("big"))
	ws.Put("b", 95, []byte(strings.Repeat("v", 10000)))
	ss.Put("a", 40, 80, []byte("1"))
	ss.Put("a", 70, 75, []byte("2"))
	ss.Put("a", 72, 75, []byte("3"))
	ss.Put("a", 59, 60, []byte("expired"))
	ss.Put("a", 90, 95, []byte("4"))
	ss.Put("b", 61, 61, []byte(strings.Repeat("v", 10000)))
	got := run1(t, d, 100, "wfetch w a 75 100", "wfetch w a 0 200", "wfetch w b 0 200", "wfetch w c 0 200",
		"wfetchall w 85 95", "sfind ss a 0 90", "sfind ss a 76 89", "sfindall ss 0 75")
	check(t, "iterators", got,
		"a@75-85=75,a@80-90=80,a@90-100=90,a@100-110=100",
		"a@75-85=75,a@80-90=80,a@90-100=90,a@100-110=100,a@110-120=110", // 70 is expired
		"b@85-95=big,b@95-105=big",
		"",
		"a@90-100=90,b@85-95=big,b@95-105=big",
		"a@70-75=2,a@72-75=3,a@40-80=1,a@90-95=4", // 59-60 is expired
		"a@40-80=1",
		"a@70-75=2,a@72-75=3,b@61-61=big")
}

// TestStoreTypes checks that the functions of one store type refuse the others
// (CodeWrongStoreType), that store_info describes each, and that the SDK names the type.
func TestStoreTypes(t *testing.T) {
	d := newTimedDriver(t)
	h := hostcall.Current
	kv, w, ss := h.StoreOpen([]byte("s")), h.StoreOpen([]byte("w")), h.StoreOpen([]byte("ss"))
	buf := make([]byte, abi.StoreInfoSize)
	for _, c := range []struct {
		name string
		code int32
	}{
		{"state_get on a window store", h.StateGet(w, []byte("k"), buf)},
		{"state_put on a session store", h.StatePut(ss, []byte("k"), buf)},
		{"state_range on a window store", h.StateRange(w, nil, nil)},
		{"window_put on a key-value store", h.WindowPut(kv, []byte("k"), 0, buf)},
		{"window_get on a session store", h.WindowGet(ss, []byte("k"), 0, buf)},
		{"window_fetch_all on a session store", h.WindowFetchAll(ss, 0, 1)},
		{"session_put on a window store", h.SessionPut(w, []byte("k"), 0, 1, buf)},
		{"session_find on a key-value store", h.SessionFind(kv, []byte("k"), 0, 1)},
		{"session_find_all on a window store", h.SessionFindAll(w, 0, 1)},
	} {
		if c.code != abi.CodeWrongStoreType {
			t.Errorf("%s = %d, want CodeWrongStoreType", c.name, c.code)
		}
	}
	if code := h.WindowPut(99, []byte("k"), 0, buf); code != abi.CodeBadHandle {
		t.Errorf("window_put on an unknown handle = %d", code)
	}
	if code := h.WindowPut(w, nil, 0, buf); code != abi.CodeBadArgument {
		t.Errorf("window_put with a null key = %d", code)
	}
	if code := h.StoreInfo(w, buf[:abi.StoreInfoSize-1]); code != abi.CodeBufferTooSmall || h.BufferNeeded() != abi.StoreInfoSize {
		t.Errorf("store_info into a short buffer = %d, needed %d", code, h.BufferNeeded())
	}
	want := map[int32]abi.StoreInfo{
		kv: {Type: abi.StoreKeyValue},
		w:  {Type: abi.StoreWindow, WindowSize: 10, Advance: 10, Grace: 5, Retention: 30},
		ss: {Type: abi.StoreSession, InactivityGap: 10, Grace: 5, Retention: 40},
	}
	for handle, w := range want {
		if n := h.StoreInfo(handle, buf); n != abi.StoreInfoSize {
			t.Fatalf("store_info = %d", n)
		}
		if got, _ := abi.ReadStoreInfo(buf); got != w {
			t.Errorf("store_info(%d) = %+v, want %+v", handle, got, w)
		}
	}
	got := run1(t, d, 1, "open window w", "open session ss", "open window s", "open session w", "open window nope")
	check(t, "SDK opens", got,
		"<nil> {Type:1 WindowSize:10 Advance:10 Grace:5 Retention:30 InactivityGap:0}",
		"<nil> {Type:2 WindowSize:0 Advance:0 Grace:5 Retention:40 InactivityGap:10}",
		`pluginsdk: store "s": open: wrong store type (code -13): it is a key-value store, not a window store {Type:0 WindowSize:0 Advance:0 Grace:0 Retention:0 InactivityGap:0}`,
		`pluginsdk: store "w": open: wrong store type (code -13): it is a window store, not a session store {Type:0 WindowSize:0 Advance:0 Grace:0 Retention:0 InactivityGap:0}`,
		`pluginsdk: store "nope": open: unknown store (code -5) {Type:0 WindowSize:0 Advance:0 Grace:0 Retention:0 InactivityGap:0}`)
	if err := d.Process(at(1, "wput s k 0 v")); err == nil || !strings.Contains(err.Error(), `store "s": open: wrong store type`) {
		t.Errorf("window put on a key-value store: %v", err)
	}
	if err := d.Process(sdktest.KV("k", "put a=1").At(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := sdktest.New(sdktest.Config{Stores: []string{"s"}, WindowStores: map[string]abi.StoreInfo{"s": sdktest.TumblingWindows(time.Second, 0)}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a name declared twice: %v", err)
	}
	bad := sdktest.HoppingWindows(time.Second, 2*time.Second, 0)
	if _, err := sdktest.New(sdktest.Config{Stores: []string{"s"}, WindowStores: map[string]abi.StoreInfo{"w": bad}}); err == nil || !strings.Contains(err.Error(), "advance") {
		t.Errorf("advance > size: %v", err)
	}
	short := sdktest.Sessions(time.Second, time.Second)
	short.Retention = 1999
	if _, err := sdktest.New(sdktest.Config{Stores: []string{"s"}, SessionStores: map[string]abi.StoreInfo{"x": short}}); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("retention < gap + grace: %v", err)
	}
}

// TestWindowsFor checks the SDK's window assignment against the store's configuration.
func TestWindowsFor(t *testing.T) {
	hop := sdktest.HoppingWindows(10*time.Millisecond, 5*time.Millisecond, 0)
	d, err := sdktest.New(sdktest.Config{Stores: []string{"s"}, Outputs: []string{"out"},
		WindowStores: map[string]abi.StoreInfo{"w": sdktest.TumblingWindows(10*time.Millisecond, 0), "h": hop}})
	if err != nil {
		t.Fatal(err)
	}
	got := run1(t, d, 0, "wfor w 0", "wfor w 9", "wfor w 10", "wfor w -1", "wfor w -10", "wfor w -11",
		"wfor h 0", "wfor h 4", "wfor h 5", "wfor h -1", "wfor h -5", "wfor h 12")
	check(t, "WindowsFor", got, "[0]", "[0]", "[10]", "[-10]", "[-10]", "[-20]",
		"[-5 0]", "[-5 0]", "[0 5]", "[-10 -5]", "[-10 -5]", "[5 10]")
}

// TestMerge checks SessionStore.Merge: records within the gap merge, a record bridging two
// sessions merges all three, a larger gap starts a session, and a late record changes
// nothing but is counted.
func TestMerge(t *testing.T) {
	d := newTimedDriver(t)
	ss := d.SessionStore("ss")
	got := run1(t, d, 100, "merge ss a 100 1", "merge ss a 110 1", "merge ss a 121 1", "merge ss b 100 5",
		"merge ss a 115 1", "merge ss a 105 1")
	check(t, "merges", got, "[100,100] 1 true", "[100,110] 2 true", "[121,121] 1 true", "[100,100] 5 true",
		"[100,121] 4 true", "[100,121] 5 true")
	want := []sdktest.SessionValue{{Key: "a", Start: 100, End: 121, Value: "5"}, {Key: "b", Start: 100, End: 100, Value: "5"}}
	if all := ss.All(); !slices.Equal(all, want) {
		t.Errorf("sessions = %+v, want %+v", all, want)
	}
	// T = 140: a record at 125 is late (125 + 5 < 140): it would extend a's session [100,121],
	// which is closed; one at 137 starts an open session, which one at 136 joins (136 + 5 >=
	// 140). b's session expired (100 <= 140 - 40).
	got = run1(t, d, 140, "merge ss a 125 1", "merge ss a 137 1", "merge ss a 136 1")
	check(t, "late merges", got, "[125,125]  false", "[137,137] 1 true", "[136,137] 2 true")
	want = []sdktest.SessionValue{{Key: "a", Start: 100, End: 121, Value: "5"}, {Key: "a", Start: 136, End: 137, Value: "2"}}
	if all := ss.All(); !slices.Equal(all, want) {
		t.Errorf("sessions = %+v, want %+v", all, want)
	}
	if dc := ss.Dropped(); dc != (sdktest.DropCounts{Late: 1}) {
		t.Errorf("dropped = %+v, want the late record counted", dc)
	}
	ss.Put("c", 300, 300, []byte("x"))
	if err := d.Process(at(300, "merge ss c 305 1")); err == nil || !strings.Contains(err.Error(), `store "ss": merge: strconv.ParseInt`) {
		t.Errorf("a failing merge: %v", err)
	}
	if v, ok := ss.Get("c", 300, 300); !ok || string(v) != "x" {
		t.Errorf("a failing merge changed the store: %q %v", v, ok)
	}
}

// TestStreamTimePunctuation checks when stream-time punctuations fire: after the first
// batch, then after a batch that brings stream time to the previous punctuation's time plus
// the interval (1s), once however far it jumped.
func TestStreamTimePunctuation(t *testing.T) {
	d := newTimedDriver(t)
	var seen []string
	setPunctuate(t, func(ctx pluginsdk.PunctuationContext) error {
		seen = append(seen, fmt.Sprintf("%d/%d", ctx.Time(), ctx.StreamTime()))
		if err := ctx.Emit([]byte("p"), []byte(strconv.FormatInt(ctx.Time(), 10))); err != nil {
			return err
		}
		_, err := ctx.WindowStore("w").Put([]byte("p"), ctx.Time(), []byte("1"))
		return err
	})
	for _, ts := range []int64{5000, 5999, 4000, 6000, 6500, 9500, 10499, 10500} {
		if err := d.Process(sdktest.KV("k", "").At(ts)); err != nil {
			t.Fatal(err)
		}
	}
	check(t, "stream-time punctuations", seen, "5000/5000", "6000/6000", "9500/9500", "10500/10500")
	var stream []int64
	for _, p := range d.Punctuations() {
		if p.Kind == abi.ScheduleStreamTime {
			stream = append(stream, p.Time)
		}
	}
	if !slices.Equal(stream, []int64{5000, 6000, 9500, 10500}) {
		t.Errorf("Punctuations = %+v", d.Punctuations())
	}
	em := d.Emitted()
	if len(em) != 4 || em[1].Timestamp.UnixMilli() != 6000 || string(em[1].Value) != "6000" {
		t.Errorf("emitted in punctuations = %+v", em)
	}
	if _, ok := d.WindowStore("w").Get("p", 10500); !ok {
		t.Error("a punctuation's window put is missing")
	}
	setPunctuate(t, func(ctx pluginsdk.PunctuationContext) error { return errors.New("punct failed") })
	if err := d.Process(sdktest.KV("k", "").At(20000)); err == nil || !strings.Contains(err.Error(), "stream-time punctuation (schedule 0) at 20000") ||
		!strings.Contains(err.Error(), "punct failed") {
		t.Errorf("failing punctuation: %v", err)
	}
}

// TestWallClockPunctuation checks when wall-clock punctuations fire: one interval after
// they were scheduled, then when the clock reaches the previous punctuation plus the
// interval, once per advance; and that a punctuation has no current record.
func TestWallClockPunctuation(t *testing.T) {
	d := newTimedDriver(t)
	var seen []int64
	setPunctuate(t, func(ctx pluginsdk.PunctuationContext) error {
		if ctx.StreamTime() == abi.NoTime {
			seen = append(seen, ctx.Time())
		}
		return ctx.Emit(nil, []byte("wall"))
	})
	for _, dt := range []time.Duration{999 * time.Millisecond, time.Millisecond, 5 * time.Second, 999 * time.Millisecond, time.Millisecond} {
		if err := d.AdvanceWallClock(dt); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(seen, []int64{1000, 6000, 7000}) {
		t.Errorf("wall-clock punctuations at %v, want [1000 6000 7000]", seen)
	}
	if got := d.WallClock().UnixMilli(); got != 7000 {
		t.Errorf("clock = %d", got)
	}
	h := hostcall.Current
	buf := make([]byte, 1024)
	setPunctuate(t, func(ctx pluginsdk.PunctuationContext) error {
		if n := h.RecordNext(buf); n != abi.CodeNoRecord {
			return fmt.Errorf("record_next in a punctuation = %d", n)
		}
		if n := h.RecordHeaders(buf); n != abi.CodeNoRecord {
			return fmt.Errorf("record_headers in a punctuation = %d", n)
		}
		ctx.Log(pluginsdk.Info, "punctuated")
		return nil
	})
	if err := d.AdvanceWallClock(time.Second); err != nil {
		t.Fatal(err)
	}
	if logs := d.Logs(); len(logs) == 0 || logs[len(logs)-1].Offset != -1 {
		t.Errorf("logs = %+v, want an entry without offset", logs)
	}
	if h.Schedule(2, 1) != abi.CodeBadArgument || h.Schedule(abi.ScheduleStreamTime, 0) != abi.CodeBadArgument {
		t.Error("schedule accepted an unknown kind or a zero interval")
	}
	for range abi.MaxSchedules - 2 {
		if id := h.Schedule(abi.ScheduleWallClock, 1); id < 0 {
			t.Fatalf("schedule = %d", id)
		}
	}
	if id := h.Schedule(abi.ScheduleWallClock, 1); id != abi.CodeLimit {
		t.Errorf("schedule past MaxSchedules = %d", id)
	}
}
