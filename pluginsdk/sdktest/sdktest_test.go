package sdktest_test

import (
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

// The SDK allows one processor per binary: this one runs the command in each record's value
// (and those of runTimed in windows_test.go), and its punctuations run onPunctuate.
func init() {
	pluginsdk.Register(run, pluginsdk.WithStores("s"),
		pluginsdk.WithPunctuation(pluginsdk.StreamTimePunctuation, time.Second, punctuation),
		pluginsdk.WithPunctuation(pluginsdk.WallClockPunctuation, time.Second, punctuation))
}

func run(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	s := ctx.Store("s")
	verb, arg, _ := strings.Cut(string(rec.Value), " ")
	switch verb {
	case "put": // put key=value ...; "key=" stores an empty value, "key" deletes
		for _, kv := range strings.Fields(arg) {
			k, v, ok := strings.Cut(kv, "=")
			var value []byte
			if ok {
				value = []byte(v)
			}
			if err := s.Put([]byte(k), value); err != nil {
				return err
			}
		}
	case "get": // emits key -> value or null
		v, found, err := s.Get([]byte(arg))
		if err != nil {
			return err
		}
		if !found {
			v = nil
		}
		return ctx.Emit([]byte(arg), v)
	case "del":
		return s.Delete([]byte(arg))
	case "prefix", "range":
		var it *pluginsdk.Iterator
		if verb == "prefix" {
			it = s.Prefix([]byte(arg))
		} else {
			lo, hi, _ := strings.Cut(arg, "..")
			it = s.Range(bound(lo), bound(hi))
		}
		defer it.Close()
		var keys []string
		for it.Next() {
			keys = append(keys, string(it.Key())+"="+string(it.Value()))
		}
		if err := it.Err(); err != nil {
			return err
		}
		return ctx.Emit([]byte(verb), []byte(strings.Join(keys, ",")))
	case "meta":
		hs, err := ctx.Headers()
		if err != nil {
			return err
		}
		return ctx.Emit([]byte("meta"), fmt.Appendf(nil, "%s/%d/%d/%d key=%q null=%v headers=%d",
			rec.Topic, rec.Partition, rec.Offset, rec.Timestamp.UnixMilli(), rec.Key, rec.IsNull(), len(hs)))
	case "nulls":
		if err := ctx.Emit(nil, nil); err != nil {
			return err
		}
		return ctx.Emit([]byte{}, []byte{})
	case "to":
		return ctx.Send(pluginsdk.Message{Output: arg, Key: []byte("k"), Value: []byte("v"),
			Headers: []pluginsdk.Header{{Key: "h", Value: nil}}})
	case "log":
		ctx.Logf(pluginsdk.Warn, "warned %s", arg)
	case "other":
		return ctx.Store("missing").Put([]byte("k"), []byte("v"))
	case "leak":
		for range 17 {
			it := s.Prefix(nil)
			if err := it.Err(); err != nil {
				return err
			}
		}
	case "fail":
		return errors.New("failed: " + arg)
	default:
		return runTimed(ctx, verb, strings.Fields(arg))
	case "emitsize": // emits a value of n bytes and n empty headers
		n, _ := strconv.Atoi(arg)
		hs := make([]pluginsdk.Header, min(n, 2000))
		if err := ctx.Send(pluginsdk.Message{Key: []byte("k"), Value: make([]byte, n)}); err != nil {
			return fmt.Errorf("value: %w", err)
		}
		if err := ctx.Send(pluginsdk.Message{Key: []byte("k"), Headers: hs}); err != nil {
			return fmt.Errorf("headers: %w", err)
		}
	}
	return nil
}

func bound(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func newDriver(t *testing.T) *sdktest.Driver {
	t.Helper()
	d, err := sdktest.New(sdktest.Config{Stores: []string{"s"}, Outputs: []string{"out", "side"}, Partition: 4})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func emitted(d *sdktest.Driver) []string {
	var out []string
	for _, e := range d.TakeEmitted() {
		out = append(out, fmt.Sprintf("%s:%s=%s", e.Topic, show(e.Key), show(e.Value)))
	}
	return out
}

func show(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	return string(b)
}

func cmds(c ...string) []sdktest.Record {
	out := make([]sdktest.Record, len(c))
	for i, v := range c {
		out[i] = sdktest.KV("k", v)
	}
	return out
}

func TestStoreOperations(t *testing.T) {
	d := newDriver(t)
	big := strings.Repeat("v", 10000) // larger than the SDK's first buffers
	err := d.Process(cmds("put a=1 b= c=3 ab=4 big="+big, "get a", "get b", "get nope", "get big",
		"del c", "put ab", "prefix a", "range a..c", "range b..", "prefix ")...)
	if err != nil {
		t.Fatal(err)
	}
	got := emitted(d)
	want := []string{"out:a=1", "out:b=", "out:nope=<nil>", "out:big=" + big,
		"out:prefix=a=1", "out:range=a=1,b=,big=" + big, "out:range=b=,big=" + big, "out:prefix=a=1,b=,big=" + big}
	if !slices.Equal(got, want) {
		t.Fatalf("emitted\n%.200q\nwant\n%.200q", got, want)
	}
	if v, ok := d.Store("s").Get("b"); !ok || v == nil || len(v) != 0 {
		t.Errorf("b = %q, %v: want an empty value", v, ok)
	}
	if d.Store("s").Len() != 3 {
		t.Errorf("store = %v", d.Store("s").All())
	}
}

func TestRecordAndEmit(t *testing.T) {
	d := newDriver(t)
	rec := sdktest.Record{Topic: "t", Offset: 7, Timestamp: time.UnixMilli(99), Key: nil, Value: []byte("meta"),
		Headers: []sdktest.Header{{Key: "a", Value: []byte("1")}, {Key: "b"}}}
	if err := d.Process(rec, sdktest.KV("", "nulls"), sdktest.KV("x", "to side")); err != nil {
		t.Fatal(err)
	}
	all := d.Emitted()
	got := emitted(d)
	want := []string{`out:meta=t/4/7/99 key="" null=false headers=2`, "out:<nil>=<nil>", "out:=", "side:k=v"}
	if !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if all[2].Key == nil || all[2].Value == nil {
		t.Errorf("empty key or value arrived as null")
	}
	if h := all[3].Headers; len(h) != 1 || h[0].Key != "h" || h[0].Value != nil {
		t.Errorf("headers = %#v", h)
	}
	if all[0].Timestamp.UnixMilli() != 99 {
		t.Errorf("timestamp = %v", all[0].Timestamp)
	}
}

func TestErrors(t *testing.T) {
	d := newDriver(t)
	err := d.Process(cmds("put a=1", "fail now", "put b=2")...)
	if err == nil || !strings.Contains(err.Error(), "offset 1") || !strings.Contains(err.Error(), "failed: now") {
		t.Errorf("failing processor: %v", err)
	}
	if err := d.Process(cmds("other")...); err == nil || !strings.Contains(err.Error(), `store "missing": open: unknown store`) {
		t.Errorf("undeclared store: %v", err)
	}
	if err := d.Process(cmds("to nowhere")...); err == nil || !strings.Contains(err.Error(), "unknown output") {
		t.Errorf("unknown output: %v", err)
	}
	if err := d.Process(cmds("leak")...); err == nil || !strings.Contains(err.Error(), "limit reached") {
		t.Errorf("17 open iterators: %v", err)
	}
	if err := d.Process(cmds("log x")...); err != nil {
		t.Fatal(err)
	}
	logs := d.Logs()
	if l := logs[len(logs)-1]; l.Message != "warned x" || l.Level != int32(pluginsdk.Warn) || l.Offset < 0 {
		t.Errorf("log = %+v", l)
	}
	if _, err := sdktest.New(sdktest.Config{Stores: []string{"other"}}); err == nil || !strings.Contains(err.Error(), `"s"`) {
		t.Errorf("New without the declared store: %v, want an error naming it", err)
	}
}

// TestEmitLimits checks that the in-memory host refuses emits past abi.MaxEmitBytes and
// abi.MaxEmitHeaders as the real host does, so a plugin's unit tests see it.
func TestEmitLimits(t *testing.T) {
	d := newDriver(t)
	if err := d.Process(cmds(fmt.Sprintf("emitsize %d", abi.MaxEmitHeaders))...); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	err := d.Process(cmds(fmt.Sprintf("emitsize %d", abi.MaxEmitBytes))...) // with the key: one byte over
	if err == nil || !strings.Contains(err.Error(), "value: pluginsdk: emit: limit reached") {
		t.Errorf("value over the limit: %v", err)
	}
	err = d.Process(cmds(fmt.Sprintf("emitsize %d", abi.MaxEmitHeaders+1))...)
	if err == nil || !strings.Contains(err.Error(), "headers: pluginsdk: emit: limit reached") {
		t.Errorf("headers over the limit: %v", err)
	}
}

// TestIteratorHandles checks that the in-memory host, like the real one, refuses the
// handle of a closed iterator after its slot is reused.
func TestIteratorHandles(t *testing.T) {
	newDriver(t)
	h := hostcall.Current
	s := h.StoreOpen([]byte("s"))
	first := h.StatePrefix(s, []byte{})
	if first < 0 || h.IterClose(first) != abi.CodeOK {
		t.Fatalf("open and close: %d", first)
	}
	second := h.StatePrefix(s, []byte{})
	if second < 0 || second == first {
		t.Fatalf("second handle %d, first %d: want a new non-negative handle", second, first)
	}
	buf := make([]byte, 64)
	if n := h.IterNext(first, buf); n != abi.CodeBadHandle {
		t.Errorf("iter_next on the closed handle = %d, want CodeBadHandle", n)
	}
	if n := h.IterClose(first); n != abi.CodeBadHandle {
		t.Errorf("iter_close on the closed handle = %d, want CodeBadHandle", n)
	}
	if n := h.IterNext(second, buf); n != 0 {
		t.Errorf("iter_next on the open handle = %d, want 0 (empty store)", n)
	}
}
