package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/plugins/internal/counttest"
	"github.com/statehost/statehost/pluginsdk/sdktest"
)

func TestCount(t *testing.T) {
	d := counttest.NewDriver(t)
	counttest.CheckCounts(t, d)
	if got := d.Store("counts").All(); !maps.Equal(got, map[string]string{"a": "2", "b": "1", "": "1"}) {
		t.Fatalf("counts = %v", got)
	}
}

func TestCountContinuesFromStore(t *testing.T) {
	d := counttest.NewDriver(t)
	d.Store("counts").Put("w", []byte("41"))
	if err := d.Process(sdktest.KV("w", "1")); err != nil {
		t.Fatal(err)
	}
	if got := counttest.Emitted(d); !slices.Equal(got, []string{"w=42"}) {
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
