package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/sdktest"
)

func newDriver(t *testing.T, windows abi.StoreInfo) *sdktest.Driver {
	t.Helper()
	windows.Retention = time.Hour.Milliseconds()
	d, err := sdktest.New(sdktest.Config{Outputs: []string{"window-counts"},
		WindowStores: map[string]abi.StoreInfo{Store: windows}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// word returns a record of the word at time ms.
func word(w string, ms int64) sdktest.Record { return sdktest.KV(w, "x").At(ms) }

func process(t *testing.T, d *sdktest.Driver, recs ...sdktest.Record) {
	t.Helper()
	if err := d.Process(recs...); err != nil {
		t.Fatal(err)
	}
}

// emitted returns the records emitted since the last call as "key=value@timestamp".
func emitted(d *sdktest.Driver) []string {
	var out []string
	for _, e := range d.TakeEmitted() {
		out = append(out, fmt.Sprintf("%s=%s@%d", e.Key, e.Value, e.Timestamp.UnixMilli()))
	}
	return out
}

func windows(d *sdktest.Driver) []string {
	var out []string
	for _, w := range d.WindowStore(Store).All() {
		out = append(out, fmt.Sprintf("%s@%d=%s", w.Key, w.Start, w.Value))
	}
	return out
}

func check(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestTumbling checks the assignment to tumbling windows, grace, and that each window's
// final count is emitted once, after it closes and not before.
func TestTumbling(t *testing.T) {
	d := newDriver(t, sdktest.TumblingWindows(10*time.Second, 2*time.Second))
	process(t, d, word("a", 1000), word("b", 5000), word("a", 9999), word("a", 10000), word("", 3000),
		sdktest.Record{Value: []byte("x")}.At(3000)) // null key: skipped
	check(t, "windows", windows(d), "@0=1", "a@0=2", "a@10000=1", "b@0=1")
	check(t, "emitted before any window closed", emitted(d))
	if logs := d.Logs(); len(logs) != 1 || !strings.Contains(logs[0].Message, "null key") {
		t.Errorf("logs = %+v, want one warning about the null key", logs)
	}

	// Stream time 11999: window 0 closes at 0 + 10000 + 2000 = 12000; a late record within
	// the grace period still counts.
	process(t, d, word("x", 11999))
	process(t, d, word("a", 500))
	check(t, "emitted while window 0 is open", emitted(d))
	check(t, "windows after a record within grace", windows(d), "@0=1", "a@0=3", "a@10000=1", "b@0=1", "x@10000=1")

	// Stream time 13000: the punctuation (every second) emits window 0 and deletes it.
	process(t, d, word("y", 13000))
	check(t, "emitted once window 0 closed", emitted(d),
		"=0,10000,1@13000", "a=0,10000,3@13000", "b=0,10000,1@13000")
	check(t, "windows after the emission", windows(d), "a@10000=1", "x@10000=1", "y@10000=1")

	// A record for window 0 after its grace is dropped, and the store counts it.
	process(t, d, word("a", 600), word("a", 14000))
	if got := d.WindowStore(Store).Dropped(); got.Late != 1 || got.Expired != 0 {
		t.Errorf("dropped = %+v, want 1 late", got)
	}
	check(t, "emitted after a late record", emitted(d))

	// Later records close window 10000; window 0 is not emitted again.
	process(t, d, word("z", 30000))
	check(t, "emitted at 30000", emitted(d), "a=10000,20000,2@30000", "x=10000,20000,1@30000", "y=10000,20000,1@30000")
	process(t, d, word("a", 45000), word("b", 500), word("a", 15000))
	check(t, "emitted at 45000", emitted(d), "z=30000,40000,1@45000")
	check(t, "windows at the end", windows(d), "a@40000=1")
	if got := d.WindowStore(Store).Dropped(); got.Late != 3 {
		t.Errorf("dropped = %+v, want 3 late", got)
	}
}

// TestHopping checks the assignment to hopping windows (advance = size/2: each record in two
// windows, negative times included) and their emission.
func TestHopping(t *testing.T) {
	d := newDriver(t, sdktest.HoppingWindows(10*time.Second, 5*time.Second, 0))
	process(t, d, word("b", -1), word("a", 7000), word("a", 12000))
	// The punctuation ran after the batch, at stream time 12000: windows with start +
	// 10000 <= 12000 are closed.
	check(t, "emitted at 12000", emitted(d), "b=-10000,0,1@12000", "b=-5000,5000,1@12000", "a=0,10000,1@12000")
	check(t, "windows", windows(d), "a@5000=2", "a@10000=1")
	process(t, d, word("a", 14999))
	check(t, "emitted at 14999", emitted(d))
	check(t, "windows", windows(d), "a@5000=3", "a@10000=2")
	process(t, d, word("b", 16000), word("b", -1)) // the second is late for both its windows
	check(t, "emitted at 16000", emitted(d), "a=5000,15000,3@16000")
	check(t, "windows", windows(d), "a@10000=2", "b@10000=1", "b@15000=1")
	if got := d.WindowStore(Store).Dropped(); got.Late != 2 {
		t.Errorf("dropped = %+v, want 2 late", got)
	}
}

func TestNeedsWindowStore(t *testing.T) {
	_, err := sdktest.New(sdktest.Config{Stores: []string{Store}, Outputs: []string{"o"}})
	if err == nil || !strings.Contains(err.Error(), `store "windows": open: wrong store type`) {
		t.Fatalf("New with a key-value store %q: %v", Store, err)
	}
	_, err = sdktest.New(sdktest.Config{Outputs: []string{"o"}})
	if err == nil || !strings.Contains(err.Error(), `store "windows": open: unknown store`) {
		t.Fatalf("New without the store: %v", err)
	}
}
