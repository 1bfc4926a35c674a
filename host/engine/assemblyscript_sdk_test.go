package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// asProbe runs one command of the SDK's AssemblyScript test guest (pluginsdk/assemblyscript/
// test/probe.ts) on a fresh instance of probeRig with the outputs "out" and "second", as a
// record of key "k" at ts, and returns the rig and the batch's error.
func asProbe(t *testing.T, e *Engine, cmd []byte, ts int64, headers ...Header) (*rig, *Instance, error) {
	t.Helper()
	r, task := probeRig(t)
	task.Outputs = []string{"out", "second"}
	in := instantiate(t, e, asGuest(t, "asprobe"), task)
	rec := Record{Topic: "in", Partition: 3, Offset: 42, Timestamp: time.UnixMilli(ts), Key: []byte("k"), Value: cmd, Headers: headers}
	return r, in, in.ProcessBatch(context.Background(), []Record{rec})
}

// TestAssemblyScriptSDK has the SDK's test guest use every part of the SDK against the real
// engine and stores, and checks what it saw: key-value get, put, delete, range, prefix and
// their iterators; window and session stores and their iterators; store descriptions; stream
// time; the record and its headers; emit to each output with headers, null keys and
// tombstones; log and trace; Math.random.
func TestAssemblyScriptSDK(t *testing.T) {
	e, logs := testEngine(t, Config{})
	for _, tc := range []struct {
		cmd  string
		ts   int64
		want map[string]string // emitted: key -> value, of "out" and "second"
	}{
		{"kv", 1500, map[string]string{"big": "ok", "get-a": "1", "get-c": "0", "has-gone": "no",
			"range": "a=1,ab=2", "range-open": "a=1", "prefix": "a=1,ab=2", "all": "5"}},
		{"window", 1500, map[string]string{"windows-for": "0", "hopping": "5000,10000", "info": "1,10000,10000",
			"window-get": "v1,absent", "fetch": "k@0-10000=v1,k@10000-20000=v2", "fetch-all-count": "3",
			"fetch-after-delete": "k@0-10000=v1", "closed": "closed"}},
		{"session", 1000, map[string]string{"session-get": "s1", "find": "u@1000-1200=s1,u@1400-1500=s2",
			"find-all": "3", "find-after-remove": "u@1400-1500=s2", "gap": "100"}},
		{"time", 1500, map[string]string{"stream-time": "1500,ok", "record": "in/3/42/1500/k"}},
		{"log", 1500, map[string]string{"code": "limit reached"}},
		{"random", 1500, map[string]string{"random": "ok"}},
	} {
		r, _, err := asProbe(t, e, []byte(tc.cmd), tc.ts)
		if err != nil {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		if got := r.emitted.values(); !maps.Equal(got, tc.want) {
			t.Errorf("%s emitted %q, want %q", tc.cmd, got, tc.want)
		}
	}
	r, _, err := asProbe(t, e, []byte("nullkey"), 1500)
	if got, want := r.emitted.strings(), []string{"out:<nil>=no key", "second:k=é"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("nullkey emitted %q (error %v), want %q", got, err, want)
	}
	for _, want := range []string{"probe: warning from a record", "trace: probe trace 1.5, 2.5"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the guest's log lacks %q:\n%s", want, logs)
		}
	}
}

// TestAssemblyScriptSDKEmit checks the records the SDK emits: headers read from the record
// and written with emitTo, a tombstone, and the timestamps of a record and a punctuation.
func TestAssemblyScriptSDKEmit(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r, _, err := asProbe(t, e, []byte("headers"), 1500, Header{Key: "h1", Value: []byte("v1")}, Header{Key: "h2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.emitted.recs) != 1 {
		t.Fatalf("emitted %q, want one record", r.emitted.strings())
	}
	out := r.emitted.recs[0]
	if got := r.emitted.strings()[0]; got != "second:k=headers:2:2" {
		t.Errorf("emitted %s, want second:k=headers:2:2", got)
	}
	want := []Header{{"seen", []byte("h1=v1;h2=<null>;")}, {"null", nil}, {"bytes", []byte{1, 2}}}
	if len(out.Headers) != len(want) {
		t.Fatalf("headers %q, want %q", out.Headers, want)
	}
	for i, h := range out.Headers {
		if h.Key != want[i].Key || string(h.Value) != string(want[i].Value) || (h.Value == nil) != (want[i].Value == nil) {
			t.Errorf("header %d = %q, want %q", i, h, want[i])
		}
	}

	r, in, err := asProbe(t, e, nil, 1500) // a tombstone: the guest emits one for its key
	if err != nil {
		t.Fatal(err)
	}
	if got := r.emitted.strings(); len(got) != 1 || got[0] != "out:k=<nil>" || r.emitted.recs[0].Timestamp.UnixMilli() != 1500 {
		t.Fatalf("emitted %q, want a tombstone for k at 1500", got)
	}
	// The stream-time punctuation (every second) is due at once, the wall-clock one (every
	// millisecond) one interval after the guest scheduled it.
	time.Sleep(5 * time.Millisecond)
	if n, err := in.Punctuate(context.Background()); err != nil || n != 2 {
		t.Fatalf("Punctuate ran %d punctuations, error %v; want 2", n, err)
	}
	got := r.emitted.values()
	if got["stream-tick"] != "0@1500 st=1500" || got["wall-tick"] != "1" {
		t.Errorf("punctuations emitted %q, want stream-tick 0@1500 st=1500 and wall-tick 1", got)
	}
	for _, rec := range r.emitted.recs[1:] {
		if string(rec.Key) == "stream-tick" && rec.Timestamp.UnixMilli() != 1500 {
			t.Errorf("stream-time punctuation emitted at %d, want its time 1500", rec.Timestamp.UnixMilli())
		}
	}
}

// TestAssemblyScriptSDKErrors checks that a guest that throws, or uses a store the processor
// does not have, fails its record with a *GuestError that says what the guest said and where.
func TestAssemblyScriptSDKErrors(t *testing.T) {
	e, _ := testEngine(t, Config{})
	for cmd, want := range map[string][]string{
		"throw":   {"probe failed on purpose", "test/probe.ts:"},
		"unknown": {`store "nope": open: unknown store (code -5)`},
		"bogus":   {"probe: unknown command bogus"},
	} {
		_, _, err := asProbe(t, e, []byte(cmd), 1500)
		ge := guestError(t, err, ErrTrap)
		for _, w := range want {
			if ge.Offset != 42 || !strings.Contains(ge.Detail, w) {
				t.Errorf("%s: error %v: want offset 42 and %q", cmd, err, w)
			}
		}
	}
}

// TestAssemblyScriptSDKMigrate has the SDK's test guest declare version 3 of its store "s"
// and migrate old entries over two calls: rewritten, re-keyed and dropped into the store's
// new contents, which the guest reads meanwhile; an entry that fails names the migration and
// the entry.
func TestAssemblyScriptSDKMigrate(t *testing.T) {
	e, _ := testEngine(t, Config{})
	mod := compile(t, e, asGuest(t, "asprobe"))
	if !mod.DeclaresStoreVersions() || !mod.CanMigrate() {
		t.Fatalf("DeclaresStoreVersions = %v, CanMigrate = %v", mod.DeclaresStoreVersions(), mod.CanMigrate())
	}
	r, task := probeRig(t)
	task.Outputs = []string{"out", "second"}
	in := instantiate(t, e, "asprobe", task)
	ctx := context.Background()
	versions, err := in.StoreVersions(ctx)
	if err != nil || versions["s"] != 3 {
		t.Fatalf("StoreVersions = %v, %v; want s at 3", versions, err)
	}
	if err := in.Migrate(ctx, "s", 1, entries("a=1", "drop=x", "old:k=5")); err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(ctx, "s", 2, entries("z=26")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "v3:1:1", "new:k": "v3:1:5", "z": "v3:2:26", "new:seen": "a;old:k;z;"}
	if got := dump(t, r.stores["s"]); !maps.Equal(got, want) {
		t.Fatalf("new contents = %v, want %v", got, want)
	}
	err = in.Migrate(ctx, "s", 1, entries("b=2", "f=fail"))
	ge := guestError(t, err, ErrTrap)
	if !strings.Contains(ge.Detail, `migrate store "s" from version 1 to 3: entry "f": cannot migrate this one`) {
		t.Fatalf("error %v: Detail %q", err, ge.Detail)
	}
}
