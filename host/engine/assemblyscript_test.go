package engine

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/astest"
	"github.com/statehost/statehost/store"
)

// The AssemblyScript guests: plugins/count_as and plugins/windowcount_as, written with the
// SDK of pluginsdk/assemblyscript, and the SDK's test guest. They are built (npm ci, then asc)
// on first use; without Node.js their tests skip, saying what to install.
var asGuests = map[string]string{
	"count_as":       "plugins/count_as",
	"windowcount_as": "plugins/windowcount_as",
	"asprobe":        "pluginsdk/assemblyscript", // its asconfig.json builds test/probe.ts
}

// asGuest builds the AssemblyScript guest name and makes guestPaths know it.
func asGuest(t *testing.T, name string) string {
	t.Helper()
	path := astest.Build(t, filepath.Join(moduleRoot, asGuests[name]), filepath.Dir(cacheDir))
	guestPaths[name] = path
	return name
}

// TestAssemblyScriptModules checks that the AssemblyScript builds are reactors that the host
// takes: they pass its module validation, export _initialize (where the SDK's registration
// runs) and have neither a start section nor a _start.
func TestAssemblyScriptModules(t *testing.T) {
	e, _ := testEngine(t, Config{})
	for name := range asGuests {
		m := compile(t, e, asGuest(t, name))
		exports := m.compiled.ExportedFunctions()
		if _, ok := exports["_start"]; ok {
			t.Errorf("%s exports _start: a command, not a reactor", name)
		}
		if !m.hasInitialize || !m.hasInit || !m.hasPunctuate || m.perTask {
			t.Errorf("%s: _initialize %v, statehost_init %v, statehost_punctuate %v, per task %v; want the first three",
				name, m.hasInitialize, m.hasInit, m.hasPunctuate, m.perTask)
		}
	}
}

// TestCountInAssemblyScript runs the same records through count (Go) and count_as
// (AssemblyScript): they emit the same records, with the same timestamps, and leave the same
// store.
func TestCountInAssemblyScript(t *testing.T) {
	e, _ := testEngine(t, Config{})
	asGuest(t, "count_as")
	ctx := context.Background()
	input := []Record{
		kv([]byte("a"), []byte("1")), kv([]byte("b"), []byte("1")), kv([]byte("a"), []byte("x")),
		kv([]byte(""), []byte("1")), kv([]byte("a"), nil), kv([]byte("a"), []byte{}), kv(nil, []byte("1")),
		kv([]byte(strings.Repeat("k", 5000)), []byte("1")), kv([]byte("b"), []byte("1")), kv([]byte("é\x00\xff"), []byte("1")),
	}
	for i := range input {
		input[i].Offset = int64(i)
		input[i].Timestamp = time.UnixMilli(1000 + int64(i))
	}
	results := map[string]*rig{}
	for _, guest := range []string{"count", "count_as"} {
		r := newRig(t, "counts")
		in := instantiate(t, e, guest, r.task(guest, "out"))
		// Two batches: the second reads what the first stored.
		for _, batch := range [][]Record{input[:4], input[4:]} {
			if err := in.ProcessBatch(ctx, batch); err != nil {
				t.Fatalf("%s: %v", guest, err)
			}
		}
		results[guest] = r
	}
	goOut, asOut := results["count"].emitted, results["count_as"].emitted
	if !slices.Equal(goOut.strings(), asOut.strings()) {
		t.Fatalf("count emitted\n%.300q\ncount_as emitted\n%.300q", goOut.strings(), asOut.strings())
	}
	if len(goOut.recs) != 9 || goOut.strings()[2] != "out:a=2" || goOut.strings()[4] != "out:a=<nil>" {
		t.Fatalf("count emitted %.300q", goOut.strings())
	}
	for i, r := range asOut.recs {
		if g := goOut.recs[i]; (r.Key == nil) != (g.Key == nil) || (r.Value == nil) != (g.Value == nil) || !r.Timestamp.Equal(g.Timestamp) {
			t.Errorf("record %d: count_as emitted key nil %v, value nil %v at %v; count %v, %v at %v",
				i, r.Key == nil, r.Value == nil, r.Timestamp, g.Key == nil, g.Value == nil, g.Timestamp)
		}
	}
	if got, want := dump(t, results["count_as"].stores["counts"]), dump(t, results["count"].stores["counts"]); !maps.Equal(got, want) {
		t.Fatalf("count_as stored %v, count %v", got, want)
	}
}

// TestCountASStoredGarbage checks that count_as fails a record whose stored count is not a
// number, with an error that says so, as count does.
func TestCountASStoredGarbage(t *testing.T) {
	e, _ := testEngine(t, Config{})
	asGuest(t, "count_as")
	r := newRig(t, "counts")
	if err := r.stores["counts"].Put([]byte("w"), []byte("12x")); err != nil {
		t.Fatal(err)
	}
	in := instantiate(t, e, "count_as", r.task("count_as", "out"))
	err := in.ProcessBatch(context.Background(), []Record{{Topic: "in", Offset: 7, Key: []byte("w"), Value: []byte("1")}})
	ge := guestError(t, err, ErrTrap)
	if ge.Offset != 7 || !strings.Contains(ge.Detail, `stored count "12x" is not a decimal number`) {
		t.Fatalf("error %v: want offset 7 and the stored count named", err)
	}
}

// TestWindowCountInAssemblyScript runs the same records and punctuations through windowcount
// (Go) and windowcount_as: hopping windows, windows closed by stream time and emitted once
// from a stream-time punctuation, late records dropped. Both emit the same records with the
// same timestamps, drop the same writes and leave the same windows.
func TestWindowCountInAssemblyScript(t *testing.T) {
	e, _ := testEngine(t, Config{})
	asGuest(t, "windowcount_as")
	ctx := context.Background()
	batches := [][]Record{
		{timed(0, "a", 1000), timed(1, "b", 6000), timed(2, "a", 9000)},
		{timed(3, "b", 13000), timed(4, "a", 2000), timed(5, "", 13500)},
		{timed(6, "c", 14000), timed(7, "a", 14000), {Topic: "in", Offset: 8, Timestamp: time.UnixMilli(14500)}},
		{timed(9, "b", 31000), timed(10, "zz", 31000)},
	}
	type result struct {
		emitted []string
		dropped int64
		windows []string
	}
	results := map[string]result{}
	for _, guest := range []string{"windowcount", "windowcount_as"} {
		r, task := windowRig(t)
		in := instantiate(t, e, guest, task)
		for _, b := range batches {
			if err := in.ProcessBatch(ctx, b); err != nil {
				t.Fatalf("%s: %v", guest, err)
			}
			if _, err := in.Punctuate(ctx); err != nil {
				t.Fatalf("%s: punctuate: %v", guest, err)
			}
		}
		var res result
		for _, rec := range r.emitted.recs {
			res.emitted = append(res.emitted, fmt.Sprintf("%s=%s@%d", show(rec.Key), show(rec.Value), rec.Timestamp.UnixMilli()))
		}
		res.dropped, _, _ = r.st.DroppedWrites()
		res.windows = windowDump(t, task.Windows["windows"])
		results[guest] = res
	}
	g, a := results["windowcount"], results["windowcount_as"]
	if !slices.Equal(g.emitted, a.emitted) || g.dropped != a.dropped || !slices.Equal(g.windows, a.windows) {
		t.Fatalf("windowcount emitted %q, dropped %d, kept %q\nwindowcount_as emitted %q, dropped %d, kept %q",
			g.emitted, g.dropped, g.windows, a.emitted, a.dropped, a.windows)
	}
	if len(g.emitted) < 5 || g.dropped == 0 || len(g.windows) == 0 {
		t.Fatalf("the input does not exercise windowcount: emitted %q, dropped %d, kept %q", g.emitted, g.dropped, g.windows)
	}
}

// windowDump lists every window of w as "key@start=value".
func windowDump(t *testing.T, w store.WindowStore) []string {
	t.Helper()
	it, err := w.FetchAll(-1<<62, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.Next() {
		out = append(out, fmt.Sprintf("%s@%d=%s", it.Key(), it.Start(), it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
