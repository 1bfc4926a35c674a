package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/pluginsdk/sdktest"
)

func newDriver(t *testing.T) *sdktest.Driver {
	t.Helper()
	d, err := sdktest.New(sdktest.Config{Stores: []string{"counts"}, Outputs: []string{"counts-out"}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func emitted(d *sdktest.Driver) []string {
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

func TestCount(t *testing.T) {
	d := newDriver(t)
	err := d.Process(sdktest.KV("a", "1"), sdktest.KV("b", "1"), sdktest.KV("a", "anything"),
		sdktest.Tombstone("b"), sdktest.Tombstone("never"), sdktest.KV("b", "1"), sdktest.KV("", "1"),
		sdktest.Record{Value: []byte("1")}) // null key: skipped
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a=1", "b=1", "a=2", "b=<nil>", "never=<nil>", "b=1", "=1"}
	if got := emitted(d); !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if got := d.Store("counts").All(); !maps.Equal(got, map[string]string{"a": "2", "b": "1", "": "1"}) {
		t.Fatalf("counts = %v", got)
	}
	if logs := d.Logs(); len(logs) != 1 || !strings.Contains(logs[0].Message, "null key") {
		t.Errorf("logs = %+v, want one warning about the null key", logs)
	}
}

func TestCountContinuesFromStore(t *testing.T) {
	d := newDriver(t)
	d.Store("counts").Put("w", []byte("41"))
	if err := d.Process(sdktest.KV("w", "1")); err != nil {
		t.Fatal(err)
	}
	if got := emitted(d); !slices.Equal(got, []string{"w=42"}) {
		t.Fatalf("emitted %q", got)
	}
	d.Store("counts").Put("bad", []byte("x1"))
	if err := d.Process(sdktest.KV("bad", "1")); err == nil || !strings.Contains(err.Error(), "not a decimal number") {
		t.Fatalf("corrupt count: %v", err)
	}
}

func TestCountNeedsStore(t *testing.T) {
	if _, err := sdktest.New(sdktest.Config{Outputs: []string{"o"}}); err == nil || !strings.Contains(err.Error(), `"counts"`) {
		t.Fatalf("New without the counts store: %v", err)
	}
}
