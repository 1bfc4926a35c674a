package engine

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
)

// TestBadPointers has a C guest call every host function with out-of-bounds pointers,
// wrapping lengths, negative lengths and bad handles: each must answer its code, never
// panic or trap, and the instance must stay usable.
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
	}
	for name, code := range want {
		if got, ok := codes[name]; !ok {
			t.Errorf("%s: not reported", name)
		} else if got != strconv.Itoa(int(code)) {
			t.Errorf("%s = %s, want %d (%s)", name, got, code, abi.CodeText(code))
		}
	}
	if len(codes) != len(want) {
		t.Errorf("probe reported %d results, want %d", len(codes), len(want))
	}
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
