// Package counttest is what the unit tests of the counting plugins share (count, countjson):
// a driver of their store and output, and the records that every one of them must count and
// emit alike, whatever form it stores its counts in.
package counttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/pluginsdk/sdktest"
)

// NewDriver returns a driver of the registered counting processor, with the store "counts"
// and an output.
func NewDriver(t *testing.T) *sdktest.Driver {
	t.Helper()
	d, err := sdktest.New(sdktest.Config{Stores: []string{"counts"}, Outputs: []string{"counts-out"}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Emitted returns what d emitted since the last call as "key=value" ("<nil>" for null).
func Emitted(d *sdktest.Driver) []string {
	var out []string
	for _, e := range d.TakeEmitted() {
		v := "<nil>"
		if e.Value != nil {
			v = string(e.Value)
		}
		out = append(out, fmt.Sprintf("%s=%s", e.Key, v))
	}
	return out
}

// CheckCounts processes the records every counting processor counts alike through d (a new
// driver), and checks what it emitted and logged. d's store then holds the counts of "a" (2),
// "b" (1) and "" (1), in the processor's form.
func CheckCounts(t *testing.T, d *sdktest.Driver) {
	t.Helper()
	err := d.Process(sdktest.KV("a", "1"), sdktest.KV("b", "1"), sdktest.KV("a", "anything"),
		sdktest.Tombstone("b"), sdktest.Tombstone("never"), sdktest.KV("b", "1"), sdktest.KV("", "1"),
		sdktest.Record{Value: []byte("1")}) // null key: skipped
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a=1", "b=1", "a=2", "b=<nil>", "never=<nil>", "b=1", "=1"}
	if got := Emitted(d); !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if logs := d.Logs(); len(logs) != 1 || !strings.Contains(logs[0].Message, "null key") {
		t.Errorf("logs = %+v, want one warning about the null key", logs)
	}
}
