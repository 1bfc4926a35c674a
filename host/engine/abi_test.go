package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
)

// TestBadPointers has a C guest call every host function with out-of-bounds pointers,
// wrapping lengths, negative lengths and bad handles: each must answer its code, never
// panic or trap, and the instance must stay usable. Regions whose end wraps past 2^32 to a
// small address are refused; regions that end exactly at the end of memory are accepted.
func TestBadPointers(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "s")
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	if err := in.ProcessBatch(context.Background(), recs("oob")); err != nil {
		t.Fatal(err)
	}
	codes := r.emitted.values()
	want := map[string]int32{
		"get_key_oob": abi.CodeOutOfBounds, "get_key_wraps": abi.CodeOutOfBounds, "get_buf_oob": abi.CodeOutOfBounds,
		"get_buf_neg": abi.CodeBadArgument, "get_key_neg": abi.CodeBadArgument, "get_null_key": abi.CodeBadArgument,
		"get_missing": abi.CodeNotFound, "get_small": abi.CodeBufferTooSmall, "get_small_needed": 5, "get_ok": 5,
		"get_bad_handle": abi.CodeBadHandle, "get_neg_handle": abi.CodeBadHandle,
		"put_val_huge": abi.CodeOutOfBounds, "put_val_oob": abi.CodeOutOfBounds, "put_key_neg": abi.CodeBadArgument,
		"put_val_neg": abi.CodeBadArgument, "delete_oob": abi.CodeOutOfBounds, "range_oob": abi.CodeOutOfBounds,
		"prefix_oob": abi.CodeOutOfBounds, "prefix_null": abi.CodeBadArgument,
		"iter_next_bad": abi.CodeBadHandle, "iter_close_bad": abi.CodeBadHandle,
		"record_next_oob": abi.CodeOutOfBounds, "record_headers_oob": abi.CodeOutOfBounds,
		"emit_key_oob": abi.CodeOutOfBounds, "emit_val_oob": abi.CodeOutOfBounds, "emit_hdr_oob": abi.CodeOutOfBounds,
		"emit_hdr_malformed": abi.CodeBadArgument, "emit_bad_output": abi.CodeBadHandle, "emit_neg_output": abi.CodeBadHandle,
		"log_bad_level": abi.CodeBadArgument, "log_oob": abi.CodeOutOfBounds, "set_error_oob": abi.CodeOutOfBounds,
		"store_open_empty": abi.CodeBadArgument, "store_open_long": abi.CodeBadArgument,
		"store_open_oob": abi.CodeOutOfBounds, "store_open_unknown": abi.CodeUnknownStore,
		"output_open_unknown": abi.CodeUnknownOutput, "output_open_first": 0,
		// 0xFFFFFFF0 + 0x20 wraps to 0x10, 0xFFFFFFFF + 1 to 0: both out of bounds.
		"get_key_wraps_small": abi.CodeOutOfBounds, "get_buf_wraps_small": abi.CodeOutOfBounds,
		"put_val_wraps_small": abi.CodeOutOfBounds, "log_wraps_to_zero": abi.CodeOutOfBounds,
		"emit_hdr_wraps_small": abi.CodeOutOfBounds,
		// At the end of memory: (size, 0) and (size-n, n) are valid, (size, 1) is not.
		"get_key_at_end_empty": abi.CodeNotFound, "get_buf_at_end_empty": abi.CodeBufferTooSmall,
		"get_buf_last_5": 5, "get_buf_last_5_written": 1, "get_buf_last_5_plus_1": abi.CodeOutOfBounds,
		"log_last_byte": 0, "log_at_end_1": abi.CodeOutOfBounds, "put_key_at_end_1": abi.CodeOutOfBounds,
	}
	checkCodes(t, codes, want)
	// The instance is still alive, and the bad calls changed nothing.
	if err := in.ProcessBatch(context.Background(), recs("put")); err != nil {
		t.Fatalf("instance unusable after bad calls: %v", err)
	}
	if got := dump(t, r.stores["s"])["k"]; got != "value" {
		t.Errorf("k = %q after bad puts, want value", got)
	}
}

// TestScansFromC checks range and prefix scans, null-as-delete, empty values and the
// iterator limit, through a C guest whose iterator buffer starts too small.
func TestScansFromC(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "s")
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	ctx := context.Background()
	if err := in.ProcessBatch(ctx, recs("put", "prefix a", "range", "prefix zz", "iters", "iters")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"out:a1=x", "out:a2=", // prefix a: the empty value stays empty
		"out:a1=x", "out:a2=", "out:b1=y", // range [a, c); prefix zz: nothing
		"out:iters_opened=16", "out:iters_refused=-11", // the limit
		// Iterators left open are closed at the end of the call, not per record: the
		// second "iters" of the batch finds every slot taken.
		"out:iters_opened=0", "out:iters_refused=-11",
	}
	got := r.emitted.strings()
	if !slices.Equal(got, want) {
		t.Fatalf("emitted\n%q\nwant\n%q", got, want)
	}
	if _, ok := dump(t, r.stores["s"])["gone"]; ok {
		t.Errorf("state_put with a null value did not delete")
	}
	// A new call starts with every iterator closed.
	r.emitted.recs = nil
	if err := in.ProcessBatch(ctx, recs("iters")); err != nil {
		t.Fatal(err)
	}
	if got := r.emitted.strings(); !slices.Equal(got, []string{"out:iters_opened=16", "out:iters_refused=-11"}) {
		t.Fatalf("next batch: %q", got)
	}
}

// TestRecordAccess checks record metadata, headers (with a null header value) and null
// versus empty keys and values in emit, from C.
func TestRecordAccess(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t)
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	batch := []Record{
		{Topic: "topic-a", Partition: 7, Offset: 42, Timestamp: time.UnixMilli(1700000000123), Key: nil, Value: []byte("meta"),
			Headers: []Header{{Key: "h1", Value: []byte("v1")}, {Key: "h2"}}},
		{Topic: "topic-a", Partition: 7, Offset: 43, Timestamp: time.UnixMilli(5), Key: []byte{}, Value: []byte("headers"),
			Headers: []Header{{Key: "h1", Value: []byte("v1")}, {Key: "h2"}, {Key: "", Value: []byte{}}}},
		{Topic: "t", Offset: 44, Key: []byte("key"), Value: []byte("nulls")},
	}
	if err := in.ProcessBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	got := r.emitted.strings()
	want := []string{
		"out:meta=topic=topic-a partition=7 offset=42 ts=1700000000123 key=-1 value=4 headers=2/22", // (8+2+2) + (8+2),
		"out:h1=v1", "out:h2=<nil>", "out:=",
		"out:<nil>=<nil>", "out:=", "out:h=v",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("emitted\n%q\nwant\n%q", got, want)
	}
	recsOut := r.emitted.recs
	if recsOut[3].Key == nil || recsOut[3].Value == nil || recsOut[5].Key == nil || recsOut[5].Value == nil {
		t.Errorf("empty key or value arrived as null")
	}
	if h := recsOut[6].Headers; len(h) != 2 || h[0].Key != "a" || h[0].Value != nil || h[1].Key != "b" || h[1].Value == nil || len(h[1].Value) != 0 {
		t.Errorf("emitted headers = %#v, want a=<nil>, b=(empty)", h)
	}
	if !recsOut[0].Timestamp.Equal(time.UnixMilli(1700000000123)) {
		t.Errorf("timestamp of an emitted record = %v, want the input's", recsOut[0].Timestamp)
	}
}

// TestGoSDK exercises the Go SDK in wasm: buffers larger than the SDK's defaults, headers,
// emitting by output name, logging with processor, partition and offset.
func TestGoSDK(t *testing.T) {
	e, logs := testEngine(t, Config{})
	r := newRig(t, "s")
	task := r.task("goprobe", "first", "second")
	task.Partition = 3
	in := instantiate(t, e, "goprobe", task)
	batch := recs("big 100000", "headers", "to second", "log")
	batch[1].Headers = []Header{{Key: "x", Value: []byte("1")}, {Key: "y"}}
	if err := in.ProcessBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	got := r.emitted.strings()
	want := []string{"first:key=100000", "first:headers=2", "second:to=second"}
	if !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if h := r.emitted.recs[1].Headers; len(h) != 2 || h[0].Key != "x" || string(h[0].Value) != "1" || h[1].Value != nil {
		t.Errorf("headers passed through = %+v", h)
	}
	line := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "hello from goprobe") {
			line = l
		}
	}
	for _, w := range []string{"[INFO]", "guest:", "processor=goprobe", "partition=3", "offset=103"} {
		if !strings.Contains(line, w) {
			t.Errorf("log line %q lacks %q", line, w)
		}
	}
	if err := in.ProcessBatch(context.Background(), recs("to nowhere")); err == nil || !strings.Contains(err.Error(), "unknown output") {
		t.Errorf("EmitTo an undeclared output: %v, want unknown output", err)
	}
}

// TestSandbox checks that a guest sees no files, no environment and no arguments, and that
// its stdout reaches the log.
func TestSandbox(t *testing.T) {
	e, logs := testEngine(t, Config{})
	r := newRig(t)
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	if err := in.ProcessBatch(context.Background(), recs("sandbox")); err != nil {
		t.Fatal(err)
	}
	want := []string{"out:fopen=refused", "out:getenv=unset", "out:argc=0"}
	if got := r.emitted.strings(); !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if !strings.Contains(logs.String(), "[DEBUG] guest: hello on stdout: partition=0 processor=probe stream=stdout") {
		t.Errorf("guest stdout not in the log:\n%s", logs)
	}
}

// TestEmitLimits checks abi.MaxEmitBytes and abi.MaxEmitHeaders from C: an emit past either
// is refused with CodeLimit before the host copies anything (a 50 MB header region of
// empty entries, 6,250,000 headers, once made the host allocate over a GB), and emits
// exactly at the limits go through whole.
func TestEmitLimits(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t)
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	if err := in.ProcessBatch(context.Background(), recs("limits")); err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	var passed []OutputRecord
	for _, rec := range r.emitted.recs {
		if strings.HasPrefix(string(rec.Key), "emit_") || string(rec.Key) == "calloc" {
			codes[string(rec.Key)] = string(rec.Value)
		} else {
			passed = append(passed, rec)
		}
	}
	want := map[string]int32{
		"emit_hdr_50mb": abi.CodeLimit, "emit_hdr_count_over": abi.CodeLimit, "emit_hdr_count_max": 0,
		"emit_value_over": abi.CodeLimit, "emit_key_over": abi.CodeLimit, "emit_value_max": 0,
		"emit_null_key_value_max": 0, "emit_all_max": 0, "emit_all_over": abi.CodeLimit,
	}
	for name, code := range want {
		if got := codes[name]; got != strconv.Itoa(int(code)) {
			t.Errorf("%s = %q, want %d (%s)", name, got, code, abi.CodeText(code))
		}
	}
	if len(codes) != len(want) {
		t.Errorf("probe reported %v, want %d results", codes, len(want))
	}
	// What went through, in order: 1024 headers; a value of MaxEmitBytes-1; a null key and
	// a value of MaxEmitBytes; a value of MaxEmitBytes-9 and one header.
	type shape struct{ key, value, headers int }
	var got []shape
	for _, rec := range passed {
		got = append(got, shape{int(abi.LenOrNull(rec.Key)), int(abi.LenOrNull(rec.Value)), len(rec.Headers)})
	}
	wantShapes := []shape{{1, 1, abi.MaxEmitHeaders}, {1, abi.MaxEmitBytes - 1, 0}, {-1, abi.MaxEmitBytes, 0}, {1, abi.MaxEmitBytes - 9, 1}}
	if !slices.Equal(got, wantShapes) {
		t.Errorf("emitted (key, value, headers) = %v, want %v", got, wantShapes)
	}
}

// TestCopyHeadersAllocs checks that the headers of an emit cost the host three
// allocations whatever their number (the []Header, one string of keys, one []byte of
// values), and that the copies are right: null and empty values, empty keys.
func TestCopyHeadersAllocs(t *testing.T) {
	var enc []byte
	for i := range 100 {
		var v []byte
		switch i % 3 {
		case 0:
			v = fmt.Appendf(nil, "value%d", i)
		case 1:
			v = []byte{}
		}
		enc = abi.AppendEntry(enc, fmt.Appendf(nil, "h%d", i), v)
	}
	enc = abi.AppendEntry(enc, nil, []byte("empty key"))
	hs, code := copyHeaders(enc)
	if code != abi.CodeOK || len(hs) != 101 {
		t.Fatalf("copyHeaders = %d headers, code %d", len(hs), code)
	}
	for i, h := range hs[:100] {
		want := fmt.Sprintf("h%d", i)
		switch {
		case h.Key != want:
			t.Fatalf("header %d key %q, want %q", i, h.Key, want)
		case i%3 == 0 && string(h.Value) != fmt.Sprintf("value%d", i):
			t.Fatalf("header %d value %q", i, h.Value)
		case i%3 == 1 && (h.Value == nil || len(h.Value) != 0):
			t.Fatalf("header %d value %#v, want empty", i, h.Value)
		case i%3 == 2 && h.Value != nil:
			t.Fatalf("header %d value %#v, want null", i, h.Value)
		}
	}
	if hs[100].Key != "" || string(hs[100].Value) != "empty key" {
		t.Fatalf("last header = %+v", hs[100])
	}
	// Values do not overlap: appending to one does not change the next.
	_ = append(hs[0].Value, 'X')
	if string(hs[3].Value) != "value3" {
		t.Fatalf("header values share capacity: %q", hs[3].Value)
	}
	if n := testing.AllocsPerRun(20, func() { hs, _ = copyHeaders(enc) }); n > 3 {
		t.Errorf("copyHeaders of 101 headers: %v allocations, want at most 3", n)
	}
	tooMany := make([]byte, (abi.MaxEmitHeaders+1)*abi.EntryHeaderSize)
	if n := testing.AllocsPerRun(5, func() { _, code = copyHeaders(tooMany) }); code != abi.CodeLimit || n != 0 {
		t.Errorf("copyHeaders of %d headers: code %d after %v allocations, want CodeLimit and none", abi.MaxEmitHeaders+1, code, n)
	}
}

// TestIteratorHandles checks that the handle of a closed iterator stays invalid when its
// slot is reused, within a call and across calls.
func TestIteratorHandles(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "s")
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	ctx := context.Background()
	if err := in.ProcessBatch(ctx, recs("put", "stale", "keep")); err != nil {
		t.Fatal(err)
	}
	// An iterator left open by one batch is closed by the host at its end; the next batch
	// opens one in the same slot, then uses the old handle.
	if err := in.ProcessBatch(ctx, recs("keep")); err != nil {
		t.Fatal(err)
	}
	codes := r.emitted.values()
	want := map[string]int32{
		"stale_first_ok": 1, "stale_first_close": 0, "stale_second_ok": 1, "stale_differ": 1,
		"stale_next": abi.CodeBadHandle, "stale_close": abi.CodeBadHandle,
		"stale_second_next": 0, "stale_second_close": 0, "stale_second_again": abi.CodeBadHandle,
		"kept_next": abi.CodeBadHandle,
	}
	for name, code := range want {
		if got := codes[name]; got != strconv.Itoa(int(code)) {
			t.Errorf("%s = %q, want %d (%s)", name, got, code, abi.CodeText(code))
		}
	}
}

// TestBatchComplete checks when the host accepts a batch: once the guest has taken every
// record, whether or not it made the final record_next that returns 0; a guest that returns
// success earlier breaks the protocol.
func TestBatchComplete(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	r := newRig(t, "s")
	in := instantiate(t, e, "probe", r.task("probe", "out"))
	// "skip" returns success at once: as the last record, every record has been taken.
	if err := in.ProcessBatch(ctx, recs("put", "skip")); err != nil {
		t.Fatalf("success after taking every record, without the final record_next: %v", err)
	}
	if got := dump(t, r.stores["s"])["a1"]; got != "x" {
		t.Errorf("a1 = %q, want x", got)
	}
	err := in.ProcessBatch(ctx, recs("put", "skip", "put"))
	if ge := guestError(t, err, ErrProtocol); ge.Offset != 101 || !strings.Contains(err.Error(), "after taking 2 of 3 records") {
		t.Errorf("success after 2 of 3 records: %v", err)
	}
}
